"""The layout, checked on what the code imports: no cycles, a model/runtime core free of fidelity and passes,
and passes that import only the core (the wheel test checks the installed import names)."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SOURCES = {"laya_opt": ROOT / "laya_opt", "laya_opt.passes": ROOT / "passes", "laya_opt.fidelity": ROOT / "fidelity"}
# The core: what passes may build on. Orchestration (pipeline, experiment, runner, report, cli, registry) is not.
CORE = {"laya_opt", "laya_opt._blas", "laya_opt.errors", "laya_opt.schema", "laya_opt.resources", "laya_opt.config",
        "laya_opt.tokens", "laya_opt.prompt", "laya_opt.batching", "laya_opt.model", "laya_opt.decode",
        "laya_opt.runtime", "laya_opt.checkpoint", "laya_opt.quant", "laya_opt.synth", "laya_opt.passes_api",
        "laya_opt.fused", "laya_opt.jsonio", "laya_opt.tensorfile", "laya_opt.staging"}


def module_files() -> dict[str, Path]:
    files = {}
    for package, directory in SOURCES.items():
        for path in sorted(directory.glob("*.py")):
            files[package if path.stem == "__init__" else f"{package}.{path.stem}"] = path
    return files


MODULES = module_files()


def imported(name: str, path: Path) -> set[str]:
    """Every laya_opt module this file imports, at any depth of the file (function-level imports too)."""
    package = name if path.stem == "__init__" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[:len(parts) - node.level + 1] + ([base] if base else []))
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base for alias in node.names]
        else:
            continue
        found |= {target for target in targets if target in MODULES and target != name}
    return found


GRAPH = {name: imported(name, path) for name, path in MODULES.items()}


def reachable(start: str) -> set[str]:
    seen, stack = set(), [start]
    while stack:
        for target in GRAPH[stack.pop()]:
            if target not in seen:
                seen.add(target)
                stack.append(target)
    return seen


def test_there_are_no_import_cycles():
    cycles = sorted(name for name in GRAPH if name in reachable(name))
    assert cycles == [], f"modules on an import cycle: {cycles}"


@pytest.mark.parametrize("name", ["laya_opt.model", "laya_opt.runtime"])
def test_model_and_runtime_import_nothing_from_fidelity_or_passes(name):
    assert not {m for m in reachable(name) if m.startswith(("laya_opt.fidelity", "laya_opt.passes"))}


def test_passes_import_only_the_core():
    for name in (m for m in MODULES if m.startswith("laya_opt.passes.")):
        outside = {m for m in GRAPH[name] if m not in CORE and not m.startswith("laya_opt.passes._")}
        assert outside == set(), f"{name} imports {sorted(outside)}"


def test_the_graph_sees_real_edges():
    assert "laya_opt.passes_api" in GRAPH["laya_opt.passes.compile_buckets"]
    assert "laya_opt.fidelity.checker" in GRAPH["laya_opt.pipeline"]
