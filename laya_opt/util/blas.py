"""Give MLX's CPU matmuls a fast BLAS on Linux: load one with RTLD_GLOBAL before `mlx.core` is imported.

The Linux `mlx[cpu]` wheel bundles the reference BLAS, which makes fp32 matmul over 10x slower. A library
loaded with RTLD_GLOBAL before mlx.core is searched first when the dynamic linker binds MLX's
`cblas_sgemm` (the effect of LD_PRELOAD, without an env var). The first candidate that loads wins:

1. LAYA_OPT_BLAS=/path/libX.so, when set (and nothing else: an explicit choice never falls back);
2. a BLAS wheel of this environment: MKL's libmkl_rt (the `cpu` extra installs `mkl` on x86-64 Linux),
   found through the installed distribution's file list. It comes first because it is what this
   environment was installed with: the same BLAS on every machine, whatever the system has;
3. the system's OpenBLAS (Debian's libopenblas0-pthread), for installs without the wheel (aarch64).

LAYA_OPT_NO_BLAS_PRELOAD=1 loads nothing. Threads: MKL_NUM_THREADS (MKL) and OPENBLAS_NUM_THREADS.
Wheels not used: cmeel-openblas and ngsolve-openblas need the system's libgfortran.so.5, and
cmeel-openblas is built for AVX-512 CPUs only; scipy-openblas32/64 prefix their symbols.
"""
from __future__ import annotations

import ctypes
import os
import re
import sys
from dataclasses import dataclass, field
from importlib import metadata
from typing import Callable

# (distribution, its library's file name): wheels whose library exports the unprefixed cblas_sgemm.
WHEELS = (("mkl", re.compile(r"libmkl_rt\.so\.\d+$")),)
CANDIDATES = (
    "/usr/lib/x86_64-linux-gnu/openblas-pthread/libopenblas.so.0",
    "/usr/lib/aarch64-linux-gnu/openblas-pthread/libopenblas.so.0",
    "/usr/lib64/libopenblas.so.0",
)


@dataclass(frozen=True)
class Candidate:
    path: str
    source: str          # "LAYA_OPT_BLAS", "wheel mkl 2026.2.1" or "system"


@dataclass(frozen=True)
class Preload:
    loaded: Candidate | None
    failures: tuple[tuple[Candidate, str], ...] = field(default=())   # (candidate, why it did not load)
    skipped: str | None = None    # why nothing was tried: not Linux, opted out, mlx.core already imported


def _distribution(name: str):
    try:
        return metadata.distribution(name)
    except metadata.PackageNotFoundError:
        return None


def wheel_libraries(distribution: Callable[[str], object] = _distribution) -> list[Candidate]:
    """The BLAS libraries installed by wheels, located through each distribution's file list (RECORD)."""
    found = []
    for name, library in WHEELS:
        dist = distribution(name)
        for file in (dist.files or []) if dist is not None else []:
            if library.search(file.name):
                path = os.path.normpath(str(dist.locate_file(file)))  # mkl's lie outside site-packages: ../../../lib
                if os.path.exists(path):
                    found.append(Candidate(path, f"wheel {name} {dist.version}"))
    return found


def candidates(environ=os.environ, distribution: Callable[[str], object] = _distribution,
               system_paths=None) -> list[Candidate]:
    """What to try, in order (see the module's docstring)."""
    chosen = environ.get("LAYA_OPT_BLAS")
    if chosen:
        return [Candidate(chosen, "LAYA_OPT_BLAS")]
    system = [Candidate(path, "system") for path in (CANDIDATES if system_paths is None else system_paths)
              if os.path.exists(path)]
    return wheel_libraries(distribution) + system


def _load(path: str) -> None:
    ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)


def preload(environ=os.environ, modules=sys.modules, platform: str = sys.platform,
            distribution: Callable[[str], object] = _distribution, system_paths=None,
            load: Callable[[str], None] = _load) -> Preload:
    """Load the first candidate that loads; say what failed and why."""
    if not platform.startswith("linux"):
        return Preload(None, skipped="not Linux")
    if environ.get("LAYA_OPT_NO_BLAS_PRELOAD"):
        return Preload(None, skipped="LAYA_OPT_NO_BLAS_PRELOAD is set")
    if "mlx.core" in modules:
        return Preload(None, skipped="mlx.core was imported before laya_opt")
    failures = []
    for candidate in candidates(environ, distribution, system_paths):
        try:
            load(candidate.path)
        except OSError as exc:  # e.g. a missing dependency of the library, or not a library at all
            failures.append((candidate, str(exc)))
            continue
        return Preload(candidate, tuple(failures))
    return Preload(None, tuple(failures))


PRELOAD = preload()
LOADED = PRELOAD.loaded.path if PRELOAD.loaded else None
