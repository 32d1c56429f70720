"""What a settings dataclass (a pass config, say) tells a user about itself: per field, type, default, range, meaning.

The meaning comes from the class docstring's Google-style `Attributes:` section, one entry per field::

    @dataclass(frozen=True)
    class PrefixCacheConfig:
        \"\"\"Settings of prefix_cache.

        Attributes:
            capacity: prefixes kept; the least recently used goes first
        \"\"\"
        capacity: int = field(default=128, metadata={"min": 1})

Types and defaults come from the annotations and the fields, ranges from the metadata `laya_opt.util.schema`
checks (`min`, `gt`, `max`, `choices`, `nonempty`), so what is shown is what is enforced.
"""
from __future__ import annotations

import dataclasses
import inspect
import re
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from laya_opt.util.schema import to_plain

ATTRIBUTES_HEADING = "Attributes:"
_ENTRY = re.compile(r"^(\w+)(?:\s*\([^)]*\))?:\s*(.*)$")   # `name: text` or `name (type): text`


@dataclass(frozen=True)
class SettingDoc:
    name: str
    type: str                 # e.g. "int", "list of int", "one of selected_q, split_projection"
    required: bool            # no default: the setting must be given
    default: Any              # plain data (lists, not tuples); None when required
    constraints: str          # what the validator enforces beyond the type: ">= 1", "non-empty", or ""
    description: str          # from the docstring; "" when the class documents nothing for it

    def to_json(self) -> dict:
        return dataclasses.asdict(self)


def annotation_text(annotation: Any) -> str:
    """A type annotation in words a YAML writer reads: `tuple[int, ...]` -> `list of int`."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if annotation is Any:
        return "any"
    if annotation is type(None):
        return "null"
    if origin is typing.Literal:
        return "one of " + ", ".join(str(option) for option in args)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(annotation_text(option) for option in args)
    if origin in (tuple, list):
        return "list of " + annotation_text(args[0] if args else Any)
    if origin in (dict, Mapping) or annotation in (dict, Mapping):
        return "mapping of str to " + annotation_text(args[1] if len(args) == 2 else Any)
    return getattr(annotation, "__name__", str(annotation))


def attribute_docs(cls: type) -> dict[str, str]:
    """Field name -> description from the docstring's `Attributes:` section (continuation lines joined)."""
    lines = inspect.cleandoc(cls.__dict__.get("__doc__") or "").splitlines()
    if ATTRIBUTES_HEADING not in [line.strip() for line in lines]:
        return {}
    start = [line.strip() for line in lines].index(ATTRIBUTES_HEADING) + 1
    docs: dict[str, str] = {}
    entry_indent, current = None, None
    for line in lines[start:]:
        if not line.strip():
            continue
        indent = len(line) - len(line.lstrip())
        if entry_indent is None:
            entry_indent = indent
        if indent < entry_indent:        # the section ended
            break
        match = _ENTRY.match(line.strip())
        if indent == entry_indent and match:
            current = match.group(1)
            docs[current] = match.group(2).strip()
        elif current is not None:
            docs[current] = f"{docs[current]} {line.strip()}".strip()
    return docs


def _constraints(metadata: Mapping) -> str:
    parts = [f"{symbol} {metadata[key]}" for key, symbol in (("min", ">="), ("gt", ">"), ("max", "<="))
             if key in metadata]
    if "choices" in metadata:
        parts.append("one of " + ", ".join(map(str, metadata["choices"])))
    if metadata.get("nonempty"):
        parts.append("non-empty")
    return ", ".join(parts)


def describe_settings(cls: type) -> tuple[SettingDoc, ...]:
    """Every init field of the dataclass `cls`, in order."""
    hints = typing.get_type_hints(cls)
    docs = attribute_docs(cls)
    settings = []
    for spec in dataclasses.fields(cls):
        if not spec.init:
            continue
        required = spec.default is dataclasses.MISSING and spec.default_factory is dataclasses.MISSING
        default = None if required else to_plain(spec.default if spec.default_factory is dataclasses.MISSING
                                                 else spec.default_factory())
        settings.append(SettingDoc(name=spec.name, type=annotation_text(hints[spec.name]), required=required,
                                   default=default, constraints=_constraints(spec.metadata),
                                   description=docs.get(spec.name, "")))
    return tuple(settings)
