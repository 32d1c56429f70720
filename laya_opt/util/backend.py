"""Which MLX backend is installed, read without importing mlx.core.

On Linux the `mlx` wheel holds only the Python bindings: its backend, libmlx.so, comes from one of
mlx-cpu, mlx-cuda-12 or mlx-cuda-13, which laya-opt's `cpu`, `cuda12` and `cuda13` extras pull in
(through mlx's extras of the same names). A plain `pip install laya-opt` has none, and mlx.core would
fail later with "libmlx.so: cannot open shared object file"; `import laya_opt` stops first with an
error that names the extras. macOS needs nothing: plain mlx runs on Metal.
"""
from __future__ import annotations

import importlib.util
import sys
from importlib import metadata
from pathlib import Path
from typing import Callable

# The distributions that supply libmlx.so on Linux (mlx-cuda: the CUDA wheel's name before mlx 0.30).
BACKENDS = ("mlx-cpu", "mlx-cuda-12", "mlx-cuda-13", "mlx-cuda")
INSTALL_HINT = ('pip install "laya-opt[cpu]" (CPU), "laya-opt[cuda13]" or "laya-opt[cuda12]" (NVIDIA GPUs, '
                'CUDA 13 or 12); from a checkout: pip install -e ".[cpu]"')


class MissingBackendError(ImportError):
    """MLX has no backend library on this Linux machine (laya-opt was installed without cpu/cuda12/cuda13)."""


def package_version(name: str) -> str | None:
    """The installed distribution's version, or None (read from metadata: nothing is imported)."""
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def installed_backends(version: Callable[[str], str | None] = package_version) -> dict[str, str]:
    """Backend distribution -> version, for those installed (normally one)."""
    return {name: found for name in BACKENDS if (found := version(name)) is not None}


def mlx_library_dirs() -> list[Path]:
    """mlx/lib under each location of the mlx package (found, not imported)."""
    spec = importlib.util.find_spec("mlx")
    if spec is None:
        return []
    return [Path(location) / "lib" for location in (spec.submodule_search_locations or [])]


def backend_problem(system: str = sys.platform, backends: dict[str, str] | None = None,
                    library_dirs: list[Path] | None = None, mlx_version: str | None | bool = True) -> str | None:
    """Why MLX cannot run here, or None. Arguments default to this environment; tests pass simulated ones."""
    if not system.startswith("linux"):
        return None
    mlx_version = package_version("mlx") if mlx_version is True else mlx_version
    library_dirs = mlx_library_dirs() if library_dirs is None else library_dirs
    if mlx_version is None and not library_dirs:  # neither installed nor importable
        return f"mlx is not installed. Install laya-opt with a backend: {INSTALL_HINT}"
    backends = installed_backends() if backends is None else backends
    # A backend wheel or a libmlx.so (mlx built from source puts it there) means mlx.core can load.
    if backends or any((folder / "libmlx.so").exists() for folder in library_dirs):
        return None
    return (f"mlx {mlx_version or '(no version)'} is installed without a backend (on Linux plain mlx has no "
            f"libmlx.so). Install laya-opt with one: {INSTALL_HINT}")


def several_backends(backends: dict[str, str]) -> str | None:
    """A problem line when more than one backend wheel is installed: they overwrite each other's libmlx.so."""
    if len(backends) < 2:
        return None
    names = " and ".join(f"{name} {version}" for name, version in backends.items())
    return (f"{names} are all installed: each installs mlx/lib/libmlx.so over the other's. Fix: a fresh venv "
            f"with one of the extras cpu, cuda12, cuda13")


def require_backend() -> None:
    """Raise MissingBackendError when MLX has no backend here. Uncaught (a script, the laya-opt command), it
    prints as one `error:` line instead of a traceback through the import machinery."""
    problem = backend_problem()
    if problem is None:
        return
    previous = sys.excepthook

    def one_line(kind, error, traceback):
        if isinstance(error, MissingBackendError):
            print(f"error: {error}", file=sys.stderr)
        else:
            previous(kind, error, traceback)

    sys.excepthook = one_line
    raise MissingBackendError(problem)
