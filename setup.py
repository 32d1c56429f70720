"""Dependencies are chosen at build time for one reason: MLX's Linux backends are alternative packages.

mlx-cpu and mlx-cuda-* both install mlx/lib/libmlx.so, so an extra cannot add CUDA on top of the CPU
default without a clash. `LAYA_OPT_MLX` picks the Linux backend when laya-opt is installed:
    pip install -e ".[dev]"                        # cpu, the default
    LAYA_OPT_MLX=cuda13 pip install -e ".[dev]"    # NVIDIA GPUs, CUDA 13 (cuda12 for CUDA 12)
macOS always uses mlx with Metal.
"""
import os

from setuptools import setup

BACKENDS = ("cpu", "cuda12", "cuda13")


def requirements(environ=os.environ) -> list[str]:
    backend = environ.get("LAYA_OPT_MLX", "cpu")
    if backend not in BACKENDS:
        raise SystemExit(f"LAYA_OPT_MLX={backend!r}: choose one of {', '.join(BACKENDS)}")
    return [f"mlx[{backend}]>=0.30; sys_platform == 'linux'", "mlx>=0.30; sys_platform == 'darwin'",
            "tokenizers>=0.20", "numpy>=1.26", "safetensors>=0.4", "click>=8.1", "rich>=13", "PyYAML>=6"]


if __name__ == "__main__":  # setuptools runs this file as __main__; tests import requirements()
    setup(install_requires=requirements())
