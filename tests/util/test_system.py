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
from laya_opt.cli.doctor import report_lines
from laya_opt.util.backend import several_backends
from laya_opt.util.system import (OPENBLAS_FIX, WHEEL_FIX, classify_blas, declared_packages, mapped_libraries,
                                  system_memory)

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


MKL = "/venv/lib/libmkl_rt.so.3"
FROM_WHEEL = _blas.Preload(_blas.Candidate(MKL, "wheel mkl 2026.2.1"))
NOTHING_FOUND = _blas.Preload(None)


def test_mapped_libraries_lists_each_shared_object_once():
    assert mapped_libraries(maps(BUNDLED, OPENBLAS)) == [BUNDLED, OPENBLAS]  # not the binary, not [stack]


def test_the_bundled_reference_blas_is_detected_and_the_fix_printed():
    # numpy's own OpenBLAS (prefixed symbols) is mapped too, and must not be taken for MLX's
    info = classify_blas(maps(NUMPY_OPENBLAS, BUNDLED), cblas_owner=None, preload=NOTHING_FOUND, system="linux",
                         machine="x86_64")
    assert (info.kind, info.slow, info.library, info.source) == ("reference", True, BUNDLED, "mlx's wheel")
    assert WHEEL_FIX in info.fix and "bundled with mlx" in info.name
    # no BLAS wheel for aarch64: the system's OpenBLAS is the fix there
    arm = classify_blas(maps(BUNDLED), None, NOTHING_FOUND, "linux", machine="aarch64")
    assert OPENBLAS_FIX in arm.fix and "aarch64" in arm.fix


def test_the_wheel_blas_owning_cblas_sgemm_is_reported_with_its_source():
    info = classify_blas(maps(BUNDLED, MKL), cblas_owner=MKL, preload=FROM_WHEEL, system="linux")
    assert (info.kind, info.name, info.slow, info.library, info.fix) == ("mkl", "Intel MKL", False, MKL, None)
    assert info.source == "wheel mkl 2026.2.1" and "preloaded by laya_opt: wheel mkl 2026.2.1" in info.evidence


def test_openblas_owning_cblas_sgemm_is_detected():
    preload = _blas.Preload(_blas.Candidate(OPENBLAS, "system"))
    info = classify_blas(maps(BUNDLED, OPENBLAS), cblas_owner=OPENBLAS, preload=preload, system="linux")
    assert (info.kind, info.slow, info.library, info.fix, info.source) == ("openblas", False, OPENBLAS, None, "system")
    assert "preloaded by laya_opt: system" in info.evidence
    # Debian's alternatives link: libblas.so.3 inside the openblas folder is OpenBLAS; not preloaded: no source
    debian = "/usr/lib/x86_64-linux-gnu/openblas-pthread/libblas.so.3"
    assert classify_blas(maps(debian), debian, None, "linux").kind == "openblas"
    assert classify_blas(maps(debian), debian, FROM_WHEEL, "linux").source is None


def test_a_preloaded_reference_blas_is_still_slow():
    netlib = "/usr/lib/x86_64-linux-gnu/blas/libblas.so.3"
    info = classify_blas(maps(netlib, BUNDLED), netlib, NOTHING_FOUND, "linux", machine="x86_64")
    assert info.kind == "reference" and info.slow and WHEEL_FIX in info.fix


def test_the_fix_names_the_opt_out_a_late_import_or_the_library_that_did_not_load():
    opted_out = _blas.Preload(None, skipped="LAYA_OPT_NO_BLAS_PRELOAD is set")
    assert "unset LAYA_OPT_NO_BLAS_PRELOAD" in classify_blas(maps(BUNDLED), None, opted_out, "linux").fix
    late = _blas.Preload(None, skipped="mlx.core was imported before laya_opt")
    assert "import laya_opt before mlx.core" in classify_blas(maps(BUNDLED), None, late, "linux").fix
    failed = _blas.Preload(None, ((_blas.Candidate(MKL, "wheel mkl 2026.2.1"), "libiomp5.so: cannot open"),))
    fix = classify_blas(maps(BUNDLED), None, failed, "linux").fix
    assert fix == f"{MKL} (wheel mkl 2026.2.1) did not load: libiomp5.so: cannot open"


def test_macos_uses_accelerate():
    assert classify_blas("", None, None, "darwin").kind == "accelerate"


def test_this_process_blas_matches_what_laya_opt_loaded():
    import mlx.core  # noqa: F401

    info = system.detect_blas()
    if _blas.LOADED:
        assert info.kind in ("openblas", "mkl") and not info.slow, info
        assert os.path.realpath(info.library) == os.path.realpath(_blas.LOADED)
        assert info.source == _blas.PRELOAD.loaded.source
    else:
        assert info.kind not in ("openblas", "mkl"), info


def test_doctor_prints_where_the_blas_came_from_and_what_did_not_load():
    report = {"laya-opt": "0.2.0", "python": "3.11.7", "platform": "Linux", "mlx": "0.32.4", "backend": "cpu",
              "device": "Device(cpu, 0)", "device_info": {}, "mlx_backends": {"mlx-cpu": "0.32.4"},
              "blas": {"name": "Intel MKL", "slow": False, "library": MKL, "source": "wheel mkl 2026.2.1",
                       "evidence": f"cblas_sgemm resolves to {MKL}"},
              "blas_preload": {"loaded": MKL, "source": "wheel mkl 2026.2.1", "skipped": None,
                               "failures": [{"path": "/x/libbad.so", "source": "LAYA_OPT_BLAS",
                                             "error": "invalid ELF header"}]},
              "memory": {"total_bytes": 2 ** 30, "available_bytes": None}, "packages": {}, "peers": {},
              "switches": {}, "problems": []}
    lines = report_lines(report)
    assert f"blas       Intel MKL: {MKL}, from wheel mkl 2026.2.1" in lines
    assert "           not loaded: /x/libbad.so (LAYA_OPT_BLAS): invalid ELF header" in lines
    assert lines[1].endswith("; backend wheel mlx-cpu 0.32.4") and lines[-1] == "no problems found"
    assert "switches   none (MLX's and laya-opt's defaults)" in lines
    set_ = report_lines({**report, "switches": {"MLX_CUDA_SDPA_CACHE_SIZE": "4096", "MLX_USE_CUDA_GRAPHS": "0"}})
    assert "switches   MLX_CUDA_SDPA_CACHE_SIZE=4096, MLX_USE_CUDA_GRAPHS=0" in set_


def test_the_switches_are_the_mlx_and_laya_variables_in_effect(monkeypatch):
    from laya_opt.util.system import environment_switches

    for name in [name for name in os.environ if name.startswith(("MLX_", "LAYA_"))]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("MLX_USE_CUDA_GRAPHS", "0")
    monkeypatch.setenv("LAYA_CUDA_AMP", "fp16")
    monkeypatch.setenv("MLXNOT_A_SWITCH", "1")
    assert environment_switches() == {"LAYA_CUDA_AMP": "fp16", "MLX_USE_CUDA_GRAPHS": "0"}
    assert environment_switches(("MLX_",)) == {"MLX_USE_CUDA_GRAPHS": "0"}
    report = json.loads(CliRunner().invoke(main, ["doctor", "--json"]).output)
    assert report["switches"] == {"LAYA_CUDA_AMP": "fp16", "MLX_USE_CUDA_GRAPHS": "0"}


def test_two_backend_wheels_are_a_problem():
    assert several_backends({"mlx-cpu": "0.32.4"}) is None
    problem = several_backends({"mlx-cpu": "0.32.4", "mlx-cuda-13": "0.32.4"})
    assert "mlx-cpu 0.32.4 and mlx-cuda-13 0.32.4" in problem and "fresh venv" in problem


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
    assert set(report["blas_preload"]) == {"loaded", "source", "skipped", "failures"}
    if sys.platform.startswith("linux"):  # this environment was installed with one backend extra
        assert len(report["mlx_backends"]) == 1, report["mlx_backends"]
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
