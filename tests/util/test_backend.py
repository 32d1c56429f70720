"""Plain `pip install laya-opt` on Linux has no MLX backend: importing laya_opt or running laya-opt stops with
one error line naming the extras. Simulated with an interpreter that sees only the standard library, the
checkout and a site folder laid out as pip lays out the plain mlx wheel."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from laya_opt.util.backend import INSTALL_HINT, backend_problem, installed_backends

ROOT = Path(__file__).resolve().parents[2]


def test_linux_needs_a_backend_wheel_or_libmlx(tmp_path):
    empty = [tmp_path / "mlx" / "lib"]
    problem = backend_problem("linux", backends={}, library_dirs=empty, mlx_version="0.32.4")
    assert problem == ("mlx 0.32.4 is installed without a backend (on Linux plain mlx has no libmlx.so). "
                       f"Install laya-opt with one: {INSTALL_HINT}")
    for extra in ('"laya-opt[cpu]"', '"laya-opt[cuda13]"', '"laya-opt[cuda12]"'):
        assert extra in problem
    assert backend_problem("linux", {"mlx-cpu": "0.32.4"}, empty, "0.32.4") is None
    assert backend_problem("linux", {"mlx-cuda-13": "0.32.4"}, empty, "0.32.4") is None
    empty[0].mkdir(parents=True)
    (empty[0] / "libmlx.so").write_bytes(b"")  # mlx built from source: no backend wheel, its own libmlx.so
    assert backend_problem("linux", {}, empty, "0.32.4") is None
    assert backend_problem("linux", {}, [], None).startswith("mlx is not installed.")
    assert backend_problem("darwin", {}, [], "0.32.4") is None  # plain mlx is Metal


def test_installed_backends_reads_the_distributions():
    versions = {"mlx-cpu": "0.32.4", "numpy": "2.0"}
    assert installed_backends(versions.get) == {"mlx-cpu": "0.32.4"}


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="only Linux's mlx wheel comes without a backend")
def test_this_environment_has_a_backend():
    assert backend_problem() is None


def plain_mlx_site(tmp_path, libmlx: bool = False) -> Path:
    """A site folder as `pip install mlx` (no extra) leaves it on Linux: mlx/ without lib/libmlx.so."""
    site = tmp_path / "site"
    (site / "mlx" / "lib").mkdir(parents=True)
    (site / "mlx" / "__main__.py").write_text("")
    info = site / "mlx-0.32.4.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: mlx\nVersion: 0.32.4\n")
    if libmlx:
        (site / "mlx" / "lib" / "libmlx.so").write_bytes(b"")
    return site


def isolated(site: Path, code: str) -> subprocess.CompletedProcess:
    # -S: no site-packages (so no mlx-cpu, no mkl); -E: no PYTHON* variables. Only the stdlib, the fake site and
    # the checkout's laya_opt are importable.
    prelude = f"import sys; sys.path[1:1] = [{str(site)!r}, {str(ROOT)!r}]\n"
    return subprocess.run([sys.executable, "-S", "-E", "-c", prelude + code], capture_output=True, text=True,
                          cwd=site, timeout=60)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="only Linux's mlx wheel comes without a backend")
def test_importing_laya_opt_without_a_backend_prints_one_error(tmp_path):
    done = isolated(plain_mlx_site(tmp_path), "import laya_opt")
    assert done.returncode == 1
    assert done.stderr.splitlines() == ["error: mlx 0.32.4 is installed without a backend (on Linux plain mlx has "
                                        f"no libmlx.so). Install laya-opt with one: {INSTALL_HINT}"]
    # caught, it is an ImportError (MissingBackendError) like any other failed import
    done = isolated(plain_mlx_site(tmp_path / "b"),
                    "try:\n    import laya_opt\nexcept ImportError as e:\n    print(type(e).__name__)")
    assert (done.returncode, done.stdout) == (0, "MissingBackendError\n")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="only Linux's mlx wheel comes without a backend")
def test_the_laya_opt_command_without_a_backend_prints_one_error(tmp_path):
    # what pip's console script for `laya-opt = laya_opt.cli:main` does
    done = isolated(plain_mlx_site(tmp_path), "sys.argv = ['laya-opt', 'doctor']\n"
                                              "from laya_opt.cli import main\nsys.exit(main())")
    assert done.returncode == 1 and done.stdout == ""
    (line,) = done.stderr.splitlines()
    assert line.startswith("error: mlx 0.32.4 is installed without a backend") and '"laya-opt[cpu]"' in line


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="only Linux's mlx wheel comes without a backend")
def test_with_libmlx_present_the_check_lets_the_import_through(tmp_path):
    done = isolated(plain_mlx_site(tmp_path, libmlx=True), "import laya_opt.util.backend as b; import laya_opt;"
                    "print(b.backend_problem())")
    assert (done.returncode, done.stdout) == (0, "None\n"), done.stderr
