"""What a settings dataclass says about itself: types in words, defaults, enforced ranges, docstring meanings."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Mapping, Optional

import pytest

from laya_opt.util.settings_doc import annotation_text, attribute_docs, describe_settings


@dataclass(frozen=True)
class Example:
    """Settings of an example.

    Attributes:
        size: how many
            things, at least one
        mode (str): how
    Returns nothing: this line is after the section.
    """
    name: str
    size: int = field(default=4, metadata={"min": 1, "max": 9})
    mode: Literal["a", "b"] = "a"
    tags: tuple[str, ...] = field(default=("x",), metadata={"nonempty": True})
    extra: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Undocumented:
    value: float = 0.5


@pytest.mark.parametrize("annotation, text", [
    (int, "int"), (tuple[int, ...], "list of int"), (Literal["x", "y"], "one of x, y"),
    (Optional[int], "int or null"), (Mapping[str, float], "mapping of str to float"), (Any, "any"),
    (int | str, "int or str"),
])
def test_annotations_in_words(annotation, text):
    assert annotation_text(annotation) == text


def test_attributes_section_with_continuations_and_typed_entries():
    assert attribute_docs(Example) == {"size": "how many things, at least one", "mode": "how"}


def test_a_class_without_a_section_documents_nothing():
    # dataclass writes a signature docstring when there is none: it holds no Attributes section.
    assert attribute_docs(Undocumented) == {}
    (value,) = describe_settings(Undocumented)
    assert (value.name, value.type, value.default, value.description) == ("value", "float", 0.5, "")


def test_every_field_with_its_default_range_and_meaning():
    settings = {setting.name: setting for setting in describe_settings(Example)}
    assert list(settings) == ["name", "size", "mode", "tags", "extra"]
    assert settings["name"].required and settings["name"].default is None
    assert (settings["size"].default, settings["size"].constraints) == (4, ">= 1, <= 9")
    assert settings["mode"].type == "one of a, b" and settings["mode"].description == "how"
    assert (settings["tags"].default, settings["tags"].constraints) == (["x"], "non-empty")
    assert settings["extra"].default == {} and settings["extra"].to_json()["required"] is False
