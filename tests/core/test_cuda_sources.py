"""The fused kernels' CUDA sources are package data (laya_opt/core/cuda/*.cu), read once and composed into headers."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from laya_opt.core import cuda_sources, fused

ROOT = Path(__file__).resolve().parents[2]
FOLDER = ROOT / "laya_opt" / "core" / "cuda"


def test_every_cu_file_is_loaded_and_reaches_a_kernel_header():
    assert sorted(path.stem for path in FOLDER.glob("*.cu")) == sorted(cuda_sources.FILES)
    headers = [header for _, _, _, header in fused.KERNELS.values()]
    for name in cuda_sources.FILES:
        text = (FOLDER / f"{name}.cu").read_text()
        assert cuda_sources.SOURCES[name] == text
        assert any(text in header for header in headers), name


def test_a_header_is_its_files_in_order_inside_the_laya_namespace():
    header = fused.KERNELS["linear"][3]
    sources = cuda_sources.SOURCES
    assert header == "\nnamespace laya {\n\n" + sources["common"] + "\n" + sources["gemm"] + "\n}  // namespace laya\n"
    assert fused.KERNELS["add_layer_norm"][3].startswith("\n#include <cooperative_groups/reduce.h>\n\nnamespace laya {")
    # gemm only where the GEMM is: each header carries just what its kernel calls (MLX hashes it per call)
    assert [op for op, (_, _, _, text) in fused.KERNELS.items() if "gemm_tn" in text] == ["linear"]


def test_the_sources_are_declared_package_data():
    pyproject = (ROOT / "pyproject.toml").read_text()
    # the folder is a package of its own (no setuptools warning) whose data are the sources
    assert re.search(r'^"laya_opt.core.cuda" = \["\*\.cu"\]', pyproject, re.MULTILINE)
    assert '"laya_opt.core.cuda"' in pyproject.split("[tool.setuptools.package-dir]")[0]


def test_a_missing_source_file_names_itself():
    with pytest.raises(FileNotFoundError, match=r"laya_opt/core/cuda/no_such_kernel\.cu is missing: .*package data"):
        cuda_sources.read_source("no_such_kernel")


def test_the_python_module_no_longer_carries_cuda_text():
    text = (ROOT / "laya_opt" / "core" / "fused.py").read_text()
    assert not re.search(r"__device__|template <|asm volatile|#pragma", text)
