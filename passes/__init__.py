"""Built-in passes (installed as `laya_opt.passes`): one module per pass, each exposing `PASS`.

Modules are discovered, so adding a pass means adding one file here; names starting with `_` are
private helpers, and `contract` (the pass contract) and `registry` (discovery) are the framework itself.
Every pass's config class is also reachable by name, and the name follows one rule: the pass name in
CamelCase + "Config" (`head_prune_final` -> `HeadPruneFinalConfig`)::

    import laya_opt as lo
    lo.apply(runtime, lo.passes.CompileBucketsConfig(multiple=16))

The names used before the rule (`HeadPruneConfig`, ...) still work here as aliases.
"""
from __future__ import annotations

import importlib
import pkgutil
from types import ModuleType

FRAMEWORK = ("contract", "registry")  # modules of this package that are not passes
# Config class names from before the naming rule -> the pass whose config they name (kept: public API).
OLD_CONFIG_NAMES = {"HeadPruneConfig": "head_prune_final", "LengthSortedConfig": "length_sorted_batching",
                    "LocalWindowConfig": "local_window_attention"}


def pass_modules() -> list[ModuleType]:
    """Every public module of this package, imported, in name order."""
    return [importlib.import_module(f"{__name__}.{info.name}")
            for info in sorted(pkgutil.iter_modules(__path__), key=lambda info: info.name)
            if not info.name.startswith("_") and info.name not in FRAMEWORK]


def config_class_name(pass_name: str) -> str:
    """The config class name a pass name implies: `head_prune_final` -> `HeadPruneFinalConfig`."""
    return "".join(word.capitalize() for word in pass_name.split("_")) + "Config"


def config_types() -> dict[str, type]:
    """Config class name -> class, over every built-in pass, the old names (OLD_CONFIG_NAMES) included."""
    by_pass = {module.PASS.name: module.PASS.config_type for module in pass_modules()}
    types = {config_type.__name__: config_type for config_type in by_pass.values()}
    return {**types, **{old: by_pass[name] for old, name in OLD_CONFIG_NAMES.items() if name in by_pass}}


def __getattr__(name: str):
    types = config_types() if not name.startswith("_") else {}
    if name in types:
        return types[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}; pass configs: {', '.join(sorted(types))}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(config_types()))
