"""The CUDA sources of the fused kernels, read once from package data (laya_opt/core/cuda/*.cu).

Each file holds device helpers that `laya_opt.core.fused` concatenates into a kernel's header, inside
`namespace laya`; MLX compiles that text with NVRTC (`mx.fast.cuda_kernel`), so the files are never
compiled on their own. MLX rebuilds and hashes a kernel's whole source string on every call: the files
are therefore read here once, at import, and the headers built from them once.
"""
from __future__ import annotations

from importlib import resources

FOLDER = "cuda"
FILES = ("common", "layer_norm", "rope", "geglu", "gemm")  # <name>.cu


def read_source(name: str) -> str:
    """The text of cuda/<name>.cu; a missing file is a broken install, said so."""
    path = resources.files("laya_opt.core") / FOLDER / f"{name}.cu"
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise FileNotFoundError(f"laya_opt/core/{FOLDER}/{name}.cu is missing: the package was installed without "
                                "its CUDA sources (package data in pyproject.toml)") from None


SOURCES = {name: read_source(name) for name in FILES}
