"""The BLAS preload: which library is chosen (a fake wheel and system layout), the env overrides, a library
that does not load, and this environment's real choice."""
from __future__ import annotations

import os
import platform
import subprocess
import sys
from importlib import metadata

import pytest

from laya_opt.util import blas

RECORD = """mkl-2026.2.1.dist-info/METADATA,,
../../../lib/libmkl_core.so.3,,
../../../lib/libmkl_rt.so.3,,
../../../lib/libmkl_rt.so.3.dbg,,
"""


@pytest.fixture
def layout(tmp_path):
    """A venv with MKL's wheel installed as pip lays it out (the libraries in <venv>/lib, outside site-packages)
    and a system OpenBLAS; returns (distribution lookup, wheel library, system library)."""
    site = tmp_path / "venv" / "lib" / "python3.11" / "site-packages"
    info = site / "mkl-2026.2.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: mkl\nVersion: 2026.2.1\n")
    (info / "RECORD").write_text(RECORD)
    for name in ("libmkl_core.so.3", "libmkl_rt.so.3", "libmkl_rt.so.3.dbg"):
        (tmp_path / "venv" / "lib" / name).write_bytes(b"")
    system = tmp_path / "usr" / "libopenblas.so.0"
    system.parent.mkdir()
    system.write_bytes(b"")
    dists = {"mkl": metadata.PathDistribution(info)}
    return dists.get, str(tmp_path / "venv" / "lib" / "libmkl_rt.so.3"), str(system)


def run_preload(lookup, system, environ=None, fail=(), platform_="linux", modules=None):
    loaded = []

    def load(path):
        if path in fail:
            raise OSError(f"{path}: cannot open shared object file")
        loaded.append(path)

    result = blas.preload(environ or {}, modules or {}, platform_, lookup, [system], load)
    return result, loaded


def test_the_wheel_library_is_found_through_its_distribution_and_preferred(layout):
    lookup, wheel, system = layout
    assert blas.candidates({}, lookup, [system]) == [blas.Candidate(wheel, "wheel mkl 2026.2.1"),
                                                     blas.Candidate(system, "system")]
    result, loaded = run_preload(lookup, system)
    assert loaded == [wheel] and result.loaded == blas.Candidate(wheel, "wheel mkl 2026.2.1") and not result.failures


def test_without_the_wheel_the_system_library_is_loaded(layout):
    _, _, system = layout
    result, loaded = run_preload(lambda name: None, system)
    assert loaded == [system] and result.loaded.source == "system"


def test_a_wheel_library_listed_but_missing_on_disk_is_not_a_candidate(layout):
    lookup, wheel, system = layout
    os.remove(wheel)
    assert [c.source for c in blas.candidates({}, lookup, [system])] == ["system"]


def test_a_library_that_does_not_load_is_reported_and_the_next_one_taken(layout):
    lookup, wheel, system = layout
    result, loaded = run_preload(lookup, system, fail=(wheel,))
    assert loaded == [system] and result.loaded.source == "system"
    assert result.failures == ((blas.Candidate(wheel, "wheel mkl 2026.2.1"),
                                f"{wheel}: cannot open shared object file"),)
    result, loaded = run_preload(lookup, system, fail=(wheel, system))
    assert result.loaded is None and len(result.failures) == 2


def test_laya_opt_blas_is_the_only_candidate_when_set(layout, tmp_path):
    lookup, wheel, system = layout
    chosen = str(tmp_path / "libmine.so")
    result, loaded = run_preload(lookup, system, environ={"LAYA_OPT_BLAS": chosen})
    assert loaded == [chosen] and result.loaded == blas.Candidate(chosen, "LAYA_OPT_BLAS")
    # an explicit choice that fails never falls back to another library
    result, loaded = run_preload(lookup, system, environ={"LAYA_OPT_BLAS": chosen}, fail=(chosen,))
    assert loaded == [] and result.loaded is None and result.failures[0][0].source == "LAYA_OPT_BLAS"


@pytest.mark.parametrize("environ, platform_, modules, why", [
    ({"LAYA_OPT_NO_BLAS_PRELOAD": "1"}, "linux", {}, "LAYA_OPT_NO_BLAS_PRELOAD is set"),
    ({}, "darwin", {}, "not Linux"),
    ({}, "linux", {"mlx.core": object()}, "mlx.core was imported before laya_opt")])
def test_nothing_is_loaded_when_opted_out_on_macos_or_after_mlx(layout, environ, platform_, modules, why):
    lookup, _, system = layout
    result, loaded = run_preload(lookup, system, environ, platform_=platform_, modules=modules)
    assert loaded == [] and result == blas.Preload(None, skipped=why)


def test_a_file_that_is_not_a_library_fails_to_load_with_the_loaders_reason(tmp_path):
    bogus = tmp_path / "libopenblas.so.0"
    bogus.write_text("not an ELF file")
    result = blas.preload({"LAYA_OPT_BLAS": str(bogus)}, {}, "linux", lambda name: None, [])
    assert result.loaded is None
    ((candidate, error),) = result.failures
    assert candidate.path == str(bogus) and str(bogus) in error


WHEEL_HERE = sys.platform.startswith("linux") and platform.machine() == "x86_64"


@pytest.mark.skipif(not WHEEL_HERE, reason="MKL's wheel is the cpu extra's BLAS on x86-64 Linux only")
def test_this_environment_preloads_the_wheels_blas():
    """The `cpu` extra installs mkl; laya_opt loads its libmkl_rt, found through the distribution, whatever
    the system has (Debian's OpenBLAS may be installed too)."""
    if os.environ.get("LAYA_OPT_NO_BLAS_PRELOAD") or os.environ.get("LAYA_OPT_BLAS"):
        pytest.skip("the preload is overridden in this environment")
    dist = metadata.distribution("mkl")
    assert blas.PRELOAD.loaded.source == f"wheel mkl {dist.version}", blas.PRELOAD
    (library,) = [file for file in dist.files if blas.WHEELS[0][1].search(file.name)]
    assert os.path.samefile(blas.LOADED, dist.locate_file(library))


@pytest.mark.skipif(not WHEEL_HERE, reason="MKL's wheel is the cpu extra's BLAS on x86-64 Linux only")
def test_the_env_overrides_reach_a_fresh_process():
    code = "import laya_opt.util.blas as b; print(b.PRELOAD.loaded and b.PRELOAD.loaded.source, b.PRELOAD.skipped)"
    env = {key: value for key, value in os.environ.items() if not key.startswith("LAYA_OPT_")}
    off = subprocess.run([sys.executable, "-c", code], env={**env, "LAYA_OPT_NO_BLAS_PRELOAD": "1"},
                         capture_output=True, text=True, check=True)
    assert off.stdout.split(None, 1) == ["None", "LAYA_OPT_NO_BLAS_PRELOAD is set\n"]
    chosen = subprocess.run([sys.executable, "-c", code], env={**env, "LAYA_OPT_BLAS": blas.wheel_libraries()[0].path},
                            capture_output=True, text=True, check=True)
    assert chosen.stdout.split() == ["LAYA_OPT_BLAS", "None"]
