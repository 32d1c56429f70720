"""Which passes exist: the built-in modules, the `laya_opt.passes` entry points, and explicit YAML plugins.

Nothing is imported because a YAML file names it, except modules listed under `plugins:`; a pass name
in YAML only selects among passes that are already registered.
"""
from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
from dataclasses import dataclass
from types import ModuleType
from typing import Iterable, Mapping

from .passes_api import PassSpec

BUILTIN_MODULES = (
    "passes.compile_buckets",
    "passes.length_sorted_batching",
    "passes.head_prune_final",
    "passes.local_window_attention",
    "passes.quantize_encoder",
)
ENTRY_POINT_GROUP = "laya_opt.passes"


class UnknownPass(LookupError):
    """A pass name nobody registered (LookupError, not KeyError, so the message prints unquoted)."""


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
            known = ", ".join(self.names) or "(none registered)"
            raise UnknownPass(f"unknown pass {name!r}; known passes: {known}")
        return self.passes[name]


def _module_exists(module_name: str) -> bool:
    # Only a missing module (or missing parent package) is tolerated; errors inside an existing one propagate.
    try:
        return importlib.util.find_spec(module_name) is not None
    except ModuleNotFoundError as exc:
        if exc.name and module_name.startswith(exc.name):
            return False
        raise


def specs_of_module(module: ModuleType, source: str) -> list[PassSpec]:
    """A pass module exposes `PASS` (one spec) or `PASSES` (several)."""
    specs = []
    if hasattr(module, "PASS"):
        specs.append(module.PASS)
    specs.extend(getattr(module, "PASSES", ()))
    if not specs:
        raise ValueError(f"{source}: module {module.__name__!r} defines neither PASS nor PASSES")
    for spec in specs:
        if not isinstance(spec, PassSpec):
            raise TypeError(f"{source}: {module.__name__!r} exposes {spec!r}, which is not a PassSpec")
    return specs


def builtin_modules() -> list[ModuleType]:
    """Import the built-in pass modules that exist; one that exists but fails to import raises."""
    return [importlib.import_module(name) for name in BUILTIN_MODULES if _module_exists(name)]


def entry_point_specs() -> list[tuple[PassSpec, str]]:
    found = []
    for entry in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        source = f"entry point {entry.name} = {entry.value}"
        loaded = entry.load()
        specs = specs_of_module(loaded, source) if isinstance(loaded, ModuleType) else [loaded]
        for spec in specs:
            if not isinstance(spec, PassSpec):
                raise TypeError(f"{source} does not point at a PassSpec or a pass module, got {spec!r}")
            found.append((spec, source))
    return found


def import_plugin(module_name: str, path: str = "plugins") -> ModuleType:
    if not isinstance(module_name, str) or not module_name.replace(".", "").replace("_", "").isalnum():
        raise ValueError(f"{path}: {module_name!r} is not a dotted module path")
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name and module_name.startswith(exc.name):
            raise ValueError(f"{path}: plugin module {module_name!r} not found") from None
        raise


def build_registry(plugins: Iterable[str] = (), extra: Iterable[PassSpec] = (),
                   include_entry_points: bool = True) -> Registry:
    """Built-ins, then entry points, then YAML plugin modules, then `extra` specs (for tests and notebooks).

    Two sources registering the same name is an error naming both: a silent override would make the
    YAML mean different things on different machines.
    """
    passes: dict[str, PassSpec] = {}
    sources: dict[str, str] = {}

    def add(spec: PassSpec, source: str) -> None:
        if spec.name in passes and passes[spec.name] is not spec:
            raise ValueError(f"pass {spec.name!r} is registered twice: by {sources[spec.name]} and by {source}")
        passes[spec.name], sources[spec.name] = spec, source

    for module in builtin_modules():
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


def get_pass(name: str, registry: Registry | None = None) -> PassSpec:
    """The spec registered under `name`; unknown names fail with the list of known ones."""
    return (registry or build_registry()).get(name)
