"""The layout, checked on what the code imports: every folder is one floor, and a module imports only its own
floor or a lower one (`docs/architecture.md`). Modules are found through the package-dir mapping of
pyproject.toml, so `passes/` and `fidelity/` count as the floors they install as."""
from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    tomllib = pytest.importorskip("tomli")

ROOT = Path(__file__).resolve().parents[1]
# util < core < {passes, suites} < {fidelity, timing} < runs < cli < the face (laya_opt/__init__.py)
FLOORS = {"util": 0, "checkpoints": 0, "core": 1, "passes": 2, "suites": 2, "fidelity": 3, "timing": 3, "runs": 4,
          "cli": 5, "": 6}


def package_dirs() -> dict[str, Path]:
    """Installed package name -> source folder, as pyproject.toml maps them."""
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    mapping = setuptools["package-dir"]
    dirs = {}
    for package in setuptools["packages"]:
        mapped = max((name for name in mapping if package == name or package.startswith(name + ".")), key=len)
        dirs[package] = ROOT / mapping[mapped] / Path(*package[len(mapped):].split(".")[1:])
    return dirs


def module_files() -> dict[str, Path]:
    files = {}
    for package, directory in package_dirs().items():
        for path in sorted(directory.glob("*.py")):
            files[package if path.stem == "__init__" else f"{package}.{path.stem}"] = path
    return files


MODULES = module_files()


def floor(module: str) -> str:
    """laya_opt.core.model -> core; laya_opt (the face) -> ''."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def imported(name: str, source: str, is_package: bool = False) -> set[str]:
    """Every laya_opt module this source imports, at any depth (function-level imports too)."""
    package = name if is_package else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(source)):
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


GRAPH = {name: imported(name, path.read_text(encoding="utf-8"), path.stem == "__init__")
         for name, path in MODULES.items()}


def layer_violations(graph: dict[str, set[str]]) -> list[str]:
    """Edges from a floor to a higher floor or to a sibling of the same height."""
    bad = []
    for source, targets in graph.items():
        for target in targets:
            low, high = floor(target), floor(source)
            if low != high and FLOORS[low] >= FLOORS[high]:
                bad.append(f"{source} ({high or 'face'}) imports {target} ({low or 'face'})")
    return sorted(bad)


def reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    seen, stack = set(), [start]
    while stack:
        for target in graph[stack.pop()]:
            if target not in seen:
                seen.add(target)
                stack.append(target)
    return seen


def test_every_module_lives_on_a_known_floor():
    assert {floor(name) for name in MODULES} <= set(FLOORS), sorted({floor(name) for name in MODULES} - set(FLOORS))


def test_no_module_imports_a_higher_floor():
    assert layer_violations(GRAPH) == []


def test_there_is_no_folder_circle():
    folders = {}
    for source, targets in GRAPH.items():
        folders.setdefault(floor(source), set()).update(floor(t) for t in targets if floor(t) != floor(source))
    for name in folders:
        folders.setdefault(name, set())
    for targets in list(folders.values()):
        for target in targets:
            folders.setdefault(target, set())
    assert [name for name in folders if name in reachable(folders, name)] == []


def test_there_are_no_import_cycles():
    cycles = sorted(name for name in GRAPH if name in reachable(GRAPH, name))
    assert cycles == [], f"modules on an import cycle: {cycles}"


def test_a_planted_upward_import_is_caught():
    planted = dict(GRAPH)
    planted["laya_opt.core.planted"] = imported("laya_opt.core.planted", "def f():\n"
                                                "    from laya_opt.runs.runner import run_experiment\n")
    assert layer_violations(planted) == ["laya_opt.core.planted (core) imports laya_opt.runs.runner (runs)"]
    sibling = {"laya_opt.fidelity.checker": {"laya_opt.timing.bench"}}
    assert layer_violations(sibling) == ["laya_opt.fidelity.checker (fidelity) imports laya_opt.timing.bench (timing)"]


def test_the_mapping_finds_the_mapped_folders():
    assert MODULES["laya_opt.passes.compile_buckets"] == ROOT / "passes" / "compile_buckets.py"
    assert MODULES["laya_opt.fidelity.checker"] == ROOT / "fidelity" / "checker.py"
    assert MODULES["laya_opt.suites.synthetic.generator"] == ROOT / "laya_opt" / "suites" / "synthetic" / "generator.py"


def test_the_graph_sees_real_edges():
    assert "laya_opt.passes.contract" in GRAPH["laya_opt.passes.compile_buckets"]
    assert "laya_opt.fidelity.checker" in GRAPH["laya_opt.runs.pipeline"]
