"""laya-opt: composable, fidelity-gated optimization passes for the Laya decision model on MLX."""
from . import _blas  # noqa: F401  (must run before mlx.core is imported; see _blas.py)

__version__ = "0.1.0"
