"""Which passes exist: every module of `laya_opt.passes`, the `laya_opt.passes` entry points, explicit plugins.

Built-ins are discovered, not listed: a new module in passes/ exposing `PASS` is registered. Nothing is
imported because a YAML file names it, except modules listed under `plugins:`.
"""
from __future__ import annotations

import difflib
import importlib
import importlib.metadata
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Iterable, Mapping

from laya_opt.util.errors import InputError, PassError
from laya_opt.passes.contract import PassSpec

ENTRY_POINT_GROUP = "laya_opt.passes"


class UnknownPass(InputError, LookupError):
    """A pass name nobody registered."""

    def __str__(self) -> str:  # LookupError would quote the message like a KeyError
        return self.args[0]


@dataclass(frozen=True)
class Registry:
    """Pass name -> spec, and where each spec came from (module path or entry point)."""

    passes: Mapping[str, PassSpec]
    sources: Mapping[str, str]

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(sorted(self.passes))

    def get(self, name: str) -> PassSpec:
        if name not in self.passes:
            raise UnknownPass(f"unknown pass {name!r}; {did_you_mean(name, self.names)}known passes: "
                              f"{', '.join(self.names) or '(none registered)'}")
        return self.passes[name]

    def for_config(self, config: Any) -> PassSpec:
        """The one pass whose config type `config` is (torchao style: one config type, one transform)."""
        for spec in self.passes.values():
            if type(config) is spec.config_type:
                return spec
        raise UnknownPass(f"no registered pass takes a {type(config).__name__} config")


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """`did you mean 'x'? ` for the closest known name (difflib's similarity ratio >= 0.6), or nothing."""
    close = difflib.get_close_matches(str(name), list(known), n=1)
    return f"did you mean {close[0]!r}? " if close else ""


def specs_of_module(module: ModuleType, source: str) -> list[PassSpec]:
    """A pass module exposes `PASS` (one spec) or `PASSES` (several)."""
    specs = ([module.PASS] if hasattr(module, "PASS") else []) + list(getattr(module, "PASSES", ()))
    if not specs:
        raise InputError(f"{source}: module {module.__name__!r} defines neither PASS nor PASSES")
    for spec in specs:
        if not isinstance(spec, PassSpec):
            raise InputError(f"{source}: {module.__name__!r} exposes {spec!r}, which is not a PassSpec")
    return specs


def entry_point_specs() -> list[tuple[PassSpec, str]]:
    found = []
    for entry in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        source = f"entry point {entry.name} = {entry.value}"
        try:
            loaded = entry.load()
        except Exception as exc:
            raise PassError(f"{source}: loading it raised {type(exc).__name__}: {exc}") from exc
        specs = specs_of_module(loaded, source) if isinstance(loaded, ModuleType) else [loaded]
        for spec in specs:
            if not isinstance(spec, PassSpec):
                raise InputError(f"{source} does not point at a PassSpec or a pass module, got {spec!r}")
            found.append((spec, source))
    return found


def import_plugin(module_name: str, path: str = "plugins") -> ModuleType:
    if not isinstance(module_name, str) or not module_name.replace(".", "").replace("_", "").isalnum():
        raise InputError(f"{path}: {module_name!r} is not a dotted module path")
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name and module_name.startswith(exc.name):
            raise InputError(f"{path}: plugin module {module_name!r} not found") from None
        failure = exc
    except Exception as exc:  # the plugin's own code failed: like a pass raising, named
        failure = exc
    raise PassError(f"{path}: importing plugin {module_name!r} raised {type(failure).__name__}: {failure}") from failure


def build_registry(plugins: Iterable[str] = (), extra: Iterable[PassSpec] = (),
                   include_entry_points: bool = True) -> Registry:
    """Built-ins, then entry points, then plugin modules, then `extra` specs (for tests and notebooks).

    Two sources registering the same name is an error naming both: a silent override would make the
    YAML mean different things on different machines.
    """
    from laya_opt import passes as builtin

    passes: dict[str, PassSpec] = {}
    sources: dict[str, str] = {}

    def add(spec: PassSpec, source: str) -> None:
        if spec.name in passes and passes[spec.name] is not spec:
            raise InputError(f"pass {spec.name!r} is registered twice: by {sources[spec.name]} and by {source}")
        passes[spec.name], sources[spec.name] = spec, source

    for module in builtin.pass_modules():
        for spec in specs_of_module(module, module.__name__):
            add(spec, module.__name__)
    if include_entry_points:
        for spec, source in entry_point_specs():
            add(spec, source)
    for index, module_name in enumerate(plugins):
        where = f"plugins[{index}]"
        for spec in specs_of_module(import_plugin(module_name, where), where):
            add(spec, f"plugin {module_name}")
    for spec in extra:
        add(spec, "extra")
    return Registry(passes=dict(passes), sources=dict(sources))


def get_pass(name: str) -> PassSpec:
    """The spec registered under `name`; unknown names fail with the list of known ones."""
    return build_registry().get(name)
