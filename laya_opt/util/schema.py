"""The one validator: plain data (YAML, JSON, keyword arguments) -> frozen dataclasses, by annotation.

Pass configs, experiment files, gates and benchmark settings are all frozen dataclasses; `parse`
checks a mapping against one field by field and names the key path of the first problem
(`passes[1].config.group_size: expected an integer, got '64'`). Supported annotations: bool, int,
float (numeric strings too, since PyYAML reads `1e-4` as one), str, Any, None, Literal[...],
Optional/Union, tuple[T, ...], Mapping[str, T], nested dataclasses, and any class with a
`from_value(value, path)` classmethod (e.g. a gate written as text). Field metadata adds ranges:
`field(metadata={"min": 1})`, `"gt"` (strictly above), `"max"`, `"choices"`, `"nonempty"`. The dataclass's own
`__post_init__` checks combinations; its ValueError is reported under the dataclass's path.
`@checked` applies the same checks when a dataclass is built directly in Python.
"""
from __future__ import annotations

import dataclasses
import math
import types
import typing
from collections.abc import Mapping
from typing import Any

from laya_opt.util.errors import SchemaError


def type_name(value: Any) -> str:
    return {dict: "mapping", list: "list", tuple: "list", str: "string", bool: "boolean", int: "integer",
            float: "number", type(None): "null"}.get(type(value), type(value).__name__)


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _number(value: Any, path: str) -> float:
    if isinstance(value, bool):
        raise SchemaError(f"{path}: expected a number, got {value!r}")
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            raise SchemaError(f"{path}: expected a number, got {value!r}") from None
    if not isinstance(value, (int, float)):
        raise SchemaError(f"{path}: expected a number, got {type_name(value)} {value!r}")
    if not math.isfinite(value):
        raise SchemaError(f"{path}: expected a finite number, got {value!r}")
    return float(value)


def _scalar(value: Any, annotation: type, path: str) -> Any:
    if annotation is bool:
        if not isinstance(value, bool):
            raise SchemaError(f"{path}: expected true/false, got {value!r}")
        return value
    if annotation is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise SchemaError(f"{path}: expected an integer, got {type_name(value)} {value!r}")
        return value
    if annotation is float:
        return _number(value, path)
    if annotation is str:
        if not isinstance(value, str):
            raise SchemaError(f"{path}: expected a string, got {type_name(value)} {value!r}")
        return value
    raise TypeError(f"{path}: unsupported annotation {annotation!r}")


def convert(value: Any, annotation: Any, path: str) -> Any:
    """`value` checked (and normalised: lists become tuples) against one annotation."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if annotation is Any:
        return value
    if annotation is type(None):
        if value is not None:
            raise SchemaError(f"{path}: expected null, got {value!r}")
        return None
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        options = [option for option in args if option is not type(None)]
        if len(options) == 1:  # Optional[T]: T's own message, with its full key path
            return convert(value, options[0], path)
        problems = []
        for option in options:
            try:
                return convert(value, option, path)
            except SchemaError as exc:
                problems.append(str(exc).removeprefix(f"{path}: "))
        raise SchemaError(f"{path}: " + (problems[0] if len(problems) == 1 else " / ".join(problems)))
    if origin is typing.Literal:
        if not any(value == option and type(value) is type(option) for option in args):
            raise SchemaError(f"{path}: {value!r} is not one of {', '.join(map(str, args))}")
        return value
    if origin in (tuple, list):
        if not isinstance(value, (list, tuple)):
            raise SchemaError(f"{path}: expected a list, got {type_name(value)}")
        item_type = args[0] if args else Any
        return tuple(convert(item, item_type, f"{path}[{index}]") for index, item in enumerate(value))
    if origin in (dict, Mapping) or annotation in (dict, Mapping):
        if not isinstance(value, Mapping):
            raise SchemaError(f"{path}: expected a mapping, got {type_name(value)}")
        value_type = args[1] if len(args) == 2 else Any
        out = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise SchemaError(f"{path}: keys must be strings, got {key!r}")
            out[key] = convert(item, value_type, _join(path, key))
        return out
    if isinstance(annotation, type) and hasattr(annotation, "from_value"):
        return value if isinstance(value, annotation) else annotation.from_value(value, path)
    if dataclasses.is_dataclass(annotation):
        return parse(annotation, value, path)
    return _scalar(value, annotation, path)


def _check_metadata(value: Any, meta: Mapping, path: str) -> None:
    if value is None:
        return
    if "choices" in meta and value not in meta["choices"]:
        raise SchemaError(f"{path}: {value!r} is not one of {', '.join(map(str, meta['choices']))}")
    if "min" in meta and value < meta["min"]:
        raise SchemaError(f"{path}: must be >= {meta['min']}, got {value!r}")
    if "gt" in meta and not value > meta["gt"]:
        raise SchemaError(f"{path}: must be > {meta['gt']}, got {value!r}")
    if "max" in meta and value > meta["max"]:
        raise SchemaError(f"{path}: must be <= {meta['max']}, got {value!r}")
    if meta.get("nonempty") and not value:
        raise SchemaError(f"{path}: must not be empty")


def parse(cls: type, values: Any, path: str = "") -> Any:
    """Build the frozen dataclass `cls` from a mapping; unknown keys, missing keys and bad values name the path."""
    where = path or "(top level)"
    if isinstance(values, cls):
        return values
    if not isinstance(values, Mapping):
        raise SchemaError(f"{where}: expected a mapping, got {type_name(values)}")
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
    unknown = sorted(str(key) for key in values if key not in fields)
    if unknown:
        raise SchemaError(f"{where}: unknown key(s) {', '.join(unknown)}; known: {', '.join(fields)}")
    checked = {}
    for name, spec in fields.items():
        key_path = _join(path, name)
        if name not in values:
            if spec.default is dataclasses.MISSING and spec.default_factory is dataclasses.MISSING:
                raise SchemaError(f"{key_path}: missing")
            continue
        checked[name] = convert(values[name], hints[name], key_path)
        _check_metadata(checked[name], spec.metadata, key_path)
    try:
        return cls(**checked)
    except SchemaError:
        raise
    except (TypeError, ValueError) as exc:
        raise SchemaError(f"{where}: {exc}") from None


def checked(cls: type) -> type:
    """Class decorator (put it under @dataclass): construction in Python is checked like `parse` checks YAML.

    `CompileBucketsConfig(multiple=0)` then fails as `multiple: must be >= 1`; lists become tuples.
    """
    own = cls.__dict__.get("__post_init__")

    def __post_init__(self):
        hints = typing.get_type_hints(type(self))
        for spec in dataclasses.fields(self):
            value = convert(getattr(self, spec.name), hints[spec.name], spec.name)
            _check_metadata(value, spec.metadata, spec.name)
            object.__setattr__(self, spec.name, value)
        if own is not None:
            own(self)

    cls.__post_init__ = __post_init__
    return cls


def to_plain(value: Any) -> Any:
    """Dataclasses and tuples back to mappings and lists (what `parse` reads; for manifests and reports)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, (list, tuple)):
        return [to_plain(item) for item in value]
    if isinstance(value, Mapping):
        return {key: to_plain(item) for key, item in value.items()}
    return value


def non_default(config: Any) -> dict:
    """The fields of a dataclass instance that differ from their defaults, in field order."""
    out = {}
    for spec in dataclasses.fields(config):
        value = getattr(config, spec.name)
        default = spec.default if spec.default_factory is dataclasses.MISSING else spec.default_factory()
        if spec.default is dataclasses.MISSING and spec.default_factory is dataclasses.MISSING or value != default:
            out[spec.name] = to_plain(value)
    return out
