"""The pass contract: what every model-transform pass declares and how it is applied.

A pass is a module in `passes/` exposing `PASS = PassSpec(...)`: a frozen config dataclass, an
`apply(runtime, config) -> Runtime` that never mutates its input, whether it is exact, which runtime
parts it replaces, and a one-line description. Ordering rules derive from `replaces`/`captures`:
a pass that captures a part (compile captures model + kernels) must come after every pass that
replaces one of those parts.
"""
from __future__ import annotations

import dataclasses
import types
import typing
from dataclasses import dataclass
from typing import Any, Callable, Mapping

RUNTIME_PARTS = frozenset({"model", "kernels", "forward", "planner", "preparer"})


@dataclass(frozen=True)
class PassSpec:
    name: str
    config_type: type
    apply: Callable[[Any, Any], Any]   # (Runtime, config) -> Runtime
    exact: bool
    description: str
    replaces: frozenset[str]           # runtime parts this pass swaps
    captures: frozenset[str] = frozenset()  # parts frozen into what it builds (e.g. a compiled graph)

    def __post_init__(self):
        for part in self.replaces | self.captures:
            if part not in RUNTIME_PARTS:
                raise ValueError(f"pass {self.name}: unknown runtime part {part!r}; known: {sorted(RUNTIME_PARTS)}")
        if not dataclasses.is_dataclass(self.config_type) or not self.config_type.__dataclass_params__.frozen:
            raise TypeError(f"pass {self.name}: config_type must be a frozen dataclass")

    def make_config(self, values: Mapping[str, Any] | None = None, path: str = "") -> Any:
        return config_from_mapping(self.config_type, values or {}, path or self.name)


def _check_value(value: Any, annotation: Any, path: str) -> Any:
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if annotation is Any:
        return value
    if origin in (typing.Union, types.UnionType):
        errors = []
        for option in args:
            try:
                return _check_value(value, option, path)
            except ValueError as exc:
                errors.append(str(exc))
        raise ValueError(f"{path}: {value!r} does not match {annotation}")
    if annotation is type(None):
        if value is not None:
            raise ValueError(f"{path}: expected null, got {value!r}")
        return None
    if origin is typing.Literal:
        if value not in args:
            raise ValueError(f"{path}: {value!r} is not one of {list(args)}")
        return value
    if origin in (tuple, list):
        if not isinstance(value, (list, tuple)):
            raise ValueError(f"{path}: expected a list, got {type(value).__name__}")
        item_type = args[0] if args else Any
        return tuple(_check_value(item, item_type, f"{path}[{i}]") for i, item in enumerate(value))
    if annotation is bool:
        if not isinstance(value, bool):
            raise ValueError(f"{path}: expected true/false, got {value!r}")
        return value
    if annotation is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"{path}: expected an integer, got {value!r}")
        return value
    if annotation is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(f"{path}: expected a number, got {value!r}")
        return float(value)
    if annotation is str:
        if not isinstance(value, str):
            raise ValueError(f"{path}: expected a string, got {value!r}")
        return value
    raise TypeError(f"{path}: unsupported config annotation {annotation!r}")


def config_from_mapping(config_type: type, values: Mapping[str, Any], path: str) -> Any:
    """Build a frozen config dataclass from YAML values: unknown keys and wrong types name the key path.

    Field types come from annotations (int, float, bool, str, Literal[...], tuple[T, ...], Optional);
    the dataclass's own `__post_init__` checks values (ranges, combinations).
    """
    if not isinstance(values, Mapping):
        raise ValueError(f"{path}: expected a mapping of settings, got {type(values).__name__}")
    hints = typing.get_type_hints(config_type)
    fields = {f.name: f for f in dataclasses.fields(config_type)}
    unknown = sorted(set(values) - set(fields))
    if unknown:
        raise ValueError(f"{path}: unknown key(s) {', '.join(unknown)}; known: {', '.join(fields)}")
    checked = {name: _check_value(value, hints[name], f"{path}.{name}") for name, value in values.items()}
    try:
        return config_type(**checked)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{path}: {exc}") from None


def config_to_dict(config: Any) -> dict:
    return {f.name: (list(v) if isinstance(v := getattr(config, f.name), tuple) else v)
            for f in dataclasses.fields(config)}


def check_order(specs: list[PassSpec]) -> None:
    """Refuse a plan where a pass replaces a part that an earlier pass captured (e.g. weights after compile)."""
    captured: dict[str, str] = {}
    for spec in specs:
        for part in spec.replaces:
            if part in captured:
                raise ValueError(f"pass {spec.name!r} replaces the {part} that {captured[part]!r} captured earlier; "
                                 f"move {captured[part]!r} after {spec.name!r}")
        for part in spec.captures:
            captured.setdefault(part, spec.name)
