"""`laya-opt doctor` and what it reads: the BLAS behind MLX (both cases simulated, and this machine's), memory,
packages."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from click.testing import CliRunner

from laya_opt.util import blas as _blas
from laya_opt.util import system
from laya_opt.cli import main
from laya_opt.util.system import OPENBLAS_FIX, classify_blas, declared_packages, mapped_libraries, system_memory

SITE = "/venv/lib/python3.11/site-packages"
BUNDLED = f"{SITE}/mlx_cpu.libs/libblas-bd8a282c.so.3.10.0"
OPENBLAS = "/usr/lib/x86_64-linux-gnu/openblas-pthread/libopenblas.so.0"
NUMPY_OPENBLAS = f"{SITE}/numpy.libs/libscipy_openblas64_-56d6093b.so"


def maps(*paths: str) -> str:
    """/proc/self/maps lines mapping each library (two segments each, as the loader does)."""
    lines = []
    for number, path in enumerate(paths):
        for segment, mode in enumerate(("r--p", "r-xp")):
            start = 0x7F0000000000 + (number * 2 + segment) * 0x10000
            lines.append(f"{start:x}-{start + 0x10000:x} {mode} 00000000 08:01 {1000 + number} {path}")
    return "\n".join(["55d0c0000000-55d0c0001000 r--p 00000000 08:01 1 /usr/bin/python3.11", *lines,
                      "7ffd00000000-7ffd00021000 rw-p 00000000 00:00 0 [stack]"]) + "\n"


@pytest.fixture
def no_openblas_installed(monkeypatch):
    monkeypatch.delenv("LAYA_OPT_NO_BLAS_PRELOAD", raising=False)
    monkeypatch.setattr(_blas, "CANDIDATES", ("/nonexistent/libopenblas.so.0",))


def test_mapped_libraries_lists_each_shared_object_once():
    assert mapped_libraries(maps(BUNDLED, OPENBLAS)) == [BUNDLED, OPENBLAS]  # not the binary, not [stack]


def test_the_bundled_reference_blas_is_detected_and_the_fix_printed(no_openblas_installed):
    # numpy's own OpenBLAS (prefixed symbols) is mapped too, and must not be taken for MLX's
    info = classify_blas(maps(NUMPY_OPENBLAS, BUNDLED), cblas_owner=None, preloaded=None, system="linux")
    assert (info.kind, info.slow, info.library) == ("reference", True, BUNDLED)
    assert OPENBLAS_FIX in info.fix and "bundled with mlx" in info.name


def test_openblas_owning_cblas_sgemm_is_detected(no_openblas_installed):
    info = classify_blas(maps(BUNDLED, OPENBLAS), cblas_owner=OPENBLAS, preloaded=OPENBLAS, system="linux")
    assert (info.kind, info.slow, info.library, info.fix) == ("openblas", False, OPENBLAS, None)
    assert "preloaded by laya_opt" in info.evidence
    # Debian's alternatives link: libblas.so.3 inside the openblas folder is OpenBLAS
    debian = "/usr/lib/x86_64-linux-gnu/openblas-pthread/libblas.so.3"
    assert classify_blas(maps(debian), debian, None, "linux").kind == "openblas"


def test_a_preloaded_reference_blas_is_still_slow(no_openblas_installed):
    netlib = "/usr/lib/x86_64-linux-gnu/blas/libblas.so.3"
    info = classify_blas(maps(netlib, BUNDLED), netlib, None, "linux")
    assert info.kind == "reference" and info.slow and OPENBLAS_FIX in info.fix


def test_the_fix_names_the_opt_out_when_it_is_set(monkeypatch):
    monkeypatch.setenv("LAYA_OPT_NO_BLAS_PRELOAD", "1")
    info = classify_blas(maps(BUNDLED), None, None, "linux")
    assert "unset LAYA_OPT_NO_BLAS_PRELOAD" in info.fix


def test_macos_uses_accelerate():
    assert classify_blas("", None, None, "darwin").kind == "accelerate"


def test_this_process_blas_matches_what_laya_opt_loaded():
    import mlx.core  # noqa: F401

    info = system.detect_blas()
    if _blas.LOADED:
        assert (info.kind, info.slow) == ("openblas", False), info
        assert os.path.realpath(info.library) == os.path.realpath(_blas.LOADED)
    else:
        assert info.kind != "openblas", info


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the bundled reference BLAS is the Linux wheel's")
def test_doctor_without_the_preload_reports_the_bundled_blas_and_exits_1():
    env = {**os.environ, "LAYA_OPT_NO_BLAS_PRELOAD": "1"}
    done = subprocess.run([sys.executable, "-m", "laya_opt.cli", "doctor", "--json"], capture_output=True, text=True,
                          env=env, timeout=120)
    report = json.loads(done.stdout)
    assert report["blas"]["kind"] == "reference" and report["blas"]["slow"], report["blas"]
    assert done.returncode == 1 and any("LAYA_OPT_NO_BLAS_PRELOAD" in p for p in report["problems"])


def test_doctor_reports_versions_backend_memory_packages_and_peers():
    result = CliRunner().invoke(main, ["doctor", "--json"])
    report = json.loads(result.output)
    assert report["mlx"] and report["backend"] in ("cpu", "metal", "cuda") and report["device"]
    assert report["memory"]["total_bytes"] > 0
    assert set(report["packages"]["dev"]) == {"pytest", "pytest-xdist", "hypothesis", "matplotlib", "optuna", "ray"} \
        and report["packages"]["dev"]["pytest"]
    assert set(report["packages"]["plots"]) == {"matplotlib"}
    assert "laya" in report["peers"]
    assert result.exit_code == (1 if report["problems"] else 0)
    text = CliRunner().invoke(main, ["doctor"])
    assert "backend " + report["backend"] in text.output and "blas" in text.output and "peers" in text.output


def test_memory_is_read_from_meminfo():
    memory = system_memory("MemTotal:       16384 kB\nMemFree:  1 kB\nMemAvailable:    8192 kB\n")
    assert memory == {"total_bytes": 16384 * 1024, "available_bytes": 8192 * 1024}


def test_declared_packages_groups_requirements_by_extra():
    groups = declared_packages()
    assert {"mlx", "numpy", "click"} <= set(groups["required"]) and all(groups["required"].values())
    assert declared_packages("no-such-distribution-xyz") == {}
