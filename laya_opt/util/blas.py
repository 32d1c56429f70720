"""Use the system OpenBLAS for MLX's CPU matmuls on Linux, when it is installed.

The Linux `mlx[cpu]` wheel bundles the reference BLAS, which makes fp32 matmul ~50x slower.
Loading Debian's OpenBLAS with RTLD_GLOBAL before `mlx.core` is imported makes the dynamic
linker resolve MLX's BLAS symbols to it (the same effect as LD_PRELOAD, without an env var).
Set LAYA_OPT_NO_BLAS_PRELOAD=1 to opt out; set LAYA_OPT_BLAS=/path/libopenblas.so.0 to choose.
"""
from __future__ import annotations

import ctypes
import os
import sys

CANDIDATES = (
    "/usr/lib/x86_64-linux-gnu/openblas-pthread/libopenblas.so.0",
    "/usr/lib/aarch64-linux-gnu/openblas-pthread/libopenblas.so.0",
    "/usr/lib64/libopenblas.so.0",
)


def preload_openblas() -> str | None:
    """Return the library loaded, or None (not Linux, opted out, mlx already imported, none found)."""
    if not sys.platform.startswith("linux") or os.environ.get("LAYA_OPT_NO_BLAS_PRELOAD") or "mlx.core" in sys.modules:
        return None
    chosen = os.environ.get("LAYA_OPT_BLAS")
    for path in ((chosen,) if chosen else CANDIDATES):
        if os.path.exists(path):
            try:
                ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
            except OSError:
                continue
            return path
    return None


LOADED = preload_openblas()
