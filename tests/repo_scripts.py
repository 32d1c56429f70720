"""Load a script of the repository (tools/, benchmarks/) as a module, for the tests of its `main`."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def load_script(relative: str):
    """The module at REPO/relative, registered in sys.modules under its stem (dataclasses look it up there)."""
    path = REPO / relative
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module
