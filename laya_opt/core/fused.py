"""Fused encoder-layer ops: one `mx.fast.cuda_kernel` launch each on MLX's CUDA backend, plain MLX elsewhere.

Why: on the H200 the MLX forward is host-bound at small batch (each MLX op costs ~5-6 us of dispatch, a
cuBLASLt matmul 15-22 us) and MLX's LayerNorm and RoPE kernels are slow on [~100, 1024] tensors
(docs/kernels.md, the H200 kernel profile). Each op here does the work of two to five MLX ops in one launch.

Every op has two paths: `cuda_kernel`, when the default device is the GPU of a CUDA build of MLX, and
`mlx_fallback`, the exact MLX ops of laya_opt/core/model.py in the same order (so bit-identical to the model
on the CPU). `implementation(op)` says which one runs and `fallback_reason(op)` why. A CUDA-device call
still takes the fallback for inputs its kernel does not handle (mixed or integer dtypes, empty or odd
shapes, float32 or M > 512 rows for `linear`).

Numerics follow MLX's own CUDA kernels where that buys parity: the LayerNorm kernel uses MLX's block
size, per-thread read order and cooperative-groups reductions (mlx/backend/cuda/layer_norm.cu), so its
float32 statistics should match MLX's bit for bit, and applies weight and bias in the input dtype as MLX
does; RoPE computes inv_freq = exp2f(-(m / (hd/2)) * log2f(base)), theta = l * inv_freq, cosf/sinf in
float32 as mlx/backend/cuda/rope.cu; GEGLU evaluates mlx.nn.gelu's expression in float32, rounded once.
"""
from __future__ import annotations

import functools
import math
import os
import struct

import mlx.core as mx

from laya_opt.core.cuda_sources import SOURCES
from laya_opt.core.model import geglu as model_geglu, split_heads_rope

OPS = ("add_layer_norm", "layer_norm", "qkv_rope", "geglu", "linear")
FLOAT_DTYPES = (mx.float16, mx.bfloat16, mx.float32)
MAX_NORM_ITERS = 8  # row chunks a thread keeps in registers: D <= 8 * 1024 * (16 / itemsize)
LINEAR_MAX_ROWS = 512  # above this cuBLAS's tiles win on the GPU by more than its dispatch costs

# ----------------------------------------------------------------------------- which path runs


@functools.cache
def _backend_reason() -> str | None:
    """Why this process cannot use the CUDA kernels at all (None when it can); probed once."""
    if os.environ.get("LAYA_FUSED_FALLBACK") == "1":
        return "disabled by LAYA_FUSED_FALLBACK=1"
    if not hasattr(mx.fast, "cuda_kernel"):
        return "this MLX build has no mx.fast.cuda_kernel"
    if not (hasattr(mx, "cuda") and mx.cuda.is_available()):
        return "MLX was not built with the CUDA backend (CPU or Metal build)"
    return None


def fallback_reason(op: str) -> str | None:
    """One line saying why `op` takes the MLX fallback on the current default device, or None."""
    if op not in OPS:
        raise KeyError(f"unknown fused op {op!r}; known: {', '.join(OPS)}")
    reason = _backend_reason()
    if reason is None and mx.default_device().type != mx.DeviceType.gpu:
        reason = "the default device is the CPU"
    return reason


def implementation(op: str) -> str:
    """'cuda_kernel' or 'mlx_fallback' for `op` on the current default device."""
    return "mlx_fallback" if fallback_reason(op) else "cuda_kernel"


def _cuda_ok(op: str, first: mx.array, *others: mx.array | None, dtypes=FLOAT_DTYPES) -> bool:
    """The kernels take one float dtype for every operand, and a non-empty first operand."""
    return (fallback_reason(op) is None and first.dtype in dtypes and first.size > 0
            and all(a is None or a.dtype == first.dtype for a in others))


# ----------------------------------------------------------------------------- CUDA sources
# The device helpers live in laya_opt/core/cuda/*.cu (read once by `cuda_sources`). A kernel's header goes
# before MLX's `namespace mlx::core::cu {`; its body (below) is the inside of the __global__ function MLX
# generates (inputs `const T* name`, outputs `T* name`, template constants declared first; `name_shape` /
# `name_ndim` are passed because the bodies mention them).


def _header(*files: str, include: str = "") -> str:
    """A kernel's header: only the helper files it uses, since MLX rebuilds and hashes the whole source
    string on every call (so a shorter header is cheaper to dispatch, and to compile)."""
    body = "".join("\n" + SOURCES[name] for name in files)
    return include + "\nnamespace laya {\n" + body + "\n}  // namespace laya\n"


_NORM_HEADER = _header("common", "layer_norm", include="\n#include <cooperative_groups/reduce.h>\n")
# op -> (input names, output names, body, header)
KERNELS = {
    "add_layer_norm": (("x", "residual", "weight", "bias", "present"), ("total", "normed"),
                       "laya::norm_row<T, BLOCK, NR, ITERS, true>(x, residual, weight, bias, total, normed,\n"
                       "    x_shape[x_ndim - 1], __int_as_float(EPS_BITS), present[0]);", _NORM_HEADER),
    "layer_norm": (("x", "weight", "bias", "present"), ("normed",),
                   "laya::norm_row<T, BLOCK, NR, ITERS, false>(x, nullptr, weight, bias, nullptr, normed,\n"
                   "    x_shape[x_ndim - 1], __int_as_float(EPS_BITS), present[0]);", _NORM_HEADER),
    "qkv_rope": (("qkv", "log2_base"), ("q", "k", "v"),
                 "laya::qkv_rope<T, HD, HPT>(qkv, q, k, v, qkv_shape[2] / (3 * HD), qkv_shape[1],\n"
                 "                           qkv_shape[0] * qkv_shape[1], log2_base[0]);", _header("rope")),
    "geglu": (("y",), ("out",),
              "long long rows = 1;\n"
              "for (int i = 0; i < y_ndim - 1; ++i) rows *= y_shape[i];\n"
              "laya::geglu<T, VEC>(y, out, rows, y_shape[y_ndim - 1] / 2);", _header("common", "geglu")),
    "linear": (("x", "weight", "bias", "residual", "present"), ("out",),
               "long long rows = 1;\n"
               "for (int i = 0; i < x_ndim - 1; ++i) rows *= x_shape[i];\n"
               "laya::gemm_tn<T, BM, STAGES>(x, weight, bias, residual, out, static_cast<int>(rows), weight_shape[0],\n"
               "                             x_shape[x_ndim - 1], present[0]);", _header("common", "gemm")),
}


@functools.cache
def _kernel(op: str):
    """The `mx.fast.cuda_kernel` object of `op`, built once; MLX compiles one module per template."""
    inputs, outputs, body, header = KERNELS[op]
    return mx.fast.cuda_kernel(name=f"laya_{op}", input_names=list(inputs), output_names=list(outputs),
                               source=body, header=header, ensure_row_contiguous=True)


@functools.cache
def _placeholder(dtype: mx.Dtype) -> mx.array:
    """Stands in for an absent operand (the kernel never reads it): one array per dtype, not per call.
    Built from data, not by an op, so that one first made while mx.compile traces is no graph node."""
    return mx.array([0], dtype=dtype)


@functools.cache
def _scalar(value, dtype) -> mx.array:
    """A scalar input, made once per value rather than once per call."""
    return mx.array(value, dtype=dtype)


def _present(*operands) -> mx.array:
    """Bit i set when optional operand i is given: a runtime flag, so that presence is no template
    argument and the variants share one compiled kernel."""
    return _scalar(sum(1 << i for i, a in enumerate(operands) if a is not None), mx.int32)


def float_bits(value: float) -> int:
    """The float32 bit pattern as an int (floats cannot be template arguments); >= 0 for value >= 0."""
    return struct.unpack("<i", struct.pack("<f", value))[0]


# ----------------------------------------------------------------------------- launch plans
# Each returns (template, grid, threadgroup); the grid counts threads, as mx.fast.cuda_kernel expects.
# What varies between calls (rows, D, heads, I, M, N, K, the RoPE base, which optional operands are given)
# is read at run time, so one compiled kernel serves every layer and both models: MLX compiles each
# template instance with NVRTC at first use, which takes seconds (it parses MLX's device headers).


def _norm_shape(dim: int, dtype: mx.Dtype) -> tuple[int, int, int]:
    """(block, reads, iters) as MLX's layer_norm: 16-byte reads (N_READS), dispatch_block_dim's block."""
    reads = 16 // dtype.size
    block = 32
    while block < -(-dim // reads) and block < 1024:
        block *= 2
    return block, reads, -(-dim // (block * reads))


def norm_launch(rows: int, dim: int, dtype: mx.Dtype, eps: float):
    block, reads, iters = _norm_shape(dim, dtype)
    template = [("T", dtype), ("BLOCK", block), ("NR", reads), ("ITERS", iters),
                ("EPS_BITS", float_bits(float(eps) + 0.0))]  # + 0.0: -0 -> +0; one eps per model
    return template, (rows * block, 1, 1), (block, 1, 1)


def rope_log2_base(base: float) -> float:
    """log2 of the float32 base rounded to float32, as rope.cu's host-side std::log2(float)."""
    as_f32 = struct.unpack("<f", struct.pack("<f", base))[0]
    return struct.unpack("<f", struct.pack("<f", math.log2(as_f32)))[0]


def rope_launch(rows: int, heads: int, head_dim: int, dtype: mx.Dtype):
    per_thread = next(n for n in (4, 2, 1) if heads % n == 0)  # heads sharing one sincos
    threads = rows * (heads // per_thread) * (head_dim // 2)
    return [("T", dtype), ("HD", head_dim), ("HPT", per_thread)], (threads, 1, 1), (256, 1, 1)


def geglu_launch(rows: int, inner: int, dtype: mx.Dtype):
    vec = next(n for n in (8, 4, 2, 1) if n * dtype.size <= 16 and inner % n == 0)
    return [("T", dtype), ("VEC", vec)], (rows * inner // vec, 1, 1), (256, 1, 1)


def linear_launch(rows: int, out_features: int, dtype: mx.Dtype):
    bm = 32 if rows <= 128 else 64  # more blocks for short inputs, which are weight-bandwidth-bound
    template = [("T", dtype), ("BM", bm), ("STAGES", 3)]
    return template, (-(-out_features // 64) * 128, -(-rows // bm), 1), (128, 1, 1)


# ----------------------------------------------------------------------------- reference (fallback) ops
# What laya_opt/core/model.py computes (with mlx.nn.Linear / LayerNorm), op for op; the split and GeGLU are
# the model's own functions.


def add_layer_norm_reference(x, residual, weight, bias, eps):
    total = x + residual
    return total, mx.fast.layer_norm(total, weight, bias, eps)


def layer_norm_reference(x, weight, bias, eps):
    return mx.fast.layer_norm(x, weight, bias, eps)


qkv_rope_reference = split_heads_rope   # the model's own ops: one home for each
geglu_reference = model_geglu


def linear_reference(x, weight, bias=None, residual=None):
    out = mx.addmm(bias, x, weight.T) if bias is not None else x @ weight.T
    return out if residual is None else residual + out


# ----------------------------------------------------------------------------- CUDA ops
# Callable directly on a CUDA device (the GPU check does). `init_value` pre-fills the outputs, which lets
# a check prove that every element gets written.


def add_layer_norm_cuda(x, residual, weight, bias, eps, init_value=None):
    dim = x.shape[-1]
    template, grid, group = norm_launch(x.size // dim, dim, x.dtype, eps)
    operands = [a if a is not None else _placeholder(x.dtype) for a in (x, residual, weight, bias)]
    operands.append(_present(weight, bias))
    total, normed = _kernel("add_layer_norm")(
        inputs=operands, output_shapes=[x.shape, x.shape], output_dtypes=[x.dtype, x.dtype],
        grid=grid, threadgroup=group, template=template, init_value=init_value)
    return total, normed


def layer_norm_cuda(x, weight, bias, eps, init_value=None):
    dim = x.shape[-1]
    template, grid, group = norm_launch(x.size // dim, dim, x.dtype, eps)
    operands = [a if a is not None else _placeholder(x.dtype) for a in (x, weight, bias)]
    operands.append(_present(weight, bias))
    return _kernel("layer_norm")(inputs=operands, output_shapes=[x.shape], output_dtypes=[x.dtype], grid=grid,
                                 threadgroup=group, template=template, init_value=init_value)[0]


def qkv_rope_cuda(qkv, heads, head_dim, base, init_value=None):
    batch, length, _ = qkv.shape
    template, grid, group = rope_launch(batch * length, heads, head_dim, qkv.dtype)
    q, k, v = _kernel("qkv_rope")(
        inputs=[qkv, _scalar(rope_log2_base(base), mx.float32)], output_shapes=[(batch, heads, length, head_dim)] * 3,
        output_dtypes=[qkv.dtype] * 3, grid=grid, threadgroup=group, template=template, init_value=init_value)
    return q, k, v


def geglu_cuda(y, init_value=None):
    inner = y.shape[-1] // 2
    template, grid, group = geglu_launch(y.size // (2 * inner), inner, y.dtype)
    return _kernel("geglu")(inputs=[y], output_shapes=[(*y.shape[:-1], inner)], output_dtypes=[y.dtype],
                            grid=grid, threadgroup=group, template=template, init_value=init_value)[0]


def linear_cuda(x, weight, bias=None, residual=None, init_value=None):
    out_features = weight.shape[0]
    template, grid, group = linear_launch(x.size // x.shape[-1], out_features, x.dtype)
    operands = [a if a is not None else _placeholder(x.dtype) for a in (x, weight, bias, residual)]
    operands.append(_present(bias, residual))
    return _kernel("linear")(inputs=operands, output_shapes=[(*x.shape[:-1], out_features)],
                             output_dtypes=[x.dtype], grid=grid, threadgroup=group, template=template,
                             init_value=init_value)[0]


# ----------------------------------------------------------------------------- public ops


def _norm_ok(op, x, weight, bias, eps, *more) -> bool:
    return (x.ndim >= 1 and eps >= 0 and _cuda_ok(op, x, weight, bias, *more)
            and all(a is None or a.shape == (x.shape[-1],) for a in (weight, bias))
            and _norm_shape(x.shape[-1], x.dtype)[2] <= MAX_NORM_ITERS)


def add_layer_norm(x, residual, weight=None, bias=None, eps=1e-5):
    """(x + residual, LayerNorm(x + residual)) in one launch; the sum is rounded to x.dtype first."""
    if x.shape == residual.shape and _norm_ok("add_layer_norm", x, weight, bias, eps, residual):
        return add_layer_norm_cuda(x, residual, weight, bias, eps)
    return add_layer_norm_reference(x, residual, weight, bias, eps)


def layer_norm(x, weight=None, bias=None, eps=1e-5):
    """mx.fast.layer_norm over the last axis in one launch (float32 statistics, output in x.dtype)."""
    if _norm_ok("layer_norm", x, weight, bias, eps):
        return layer_norm_cuda(x, weight, bias, eps)
    return layer_norm_reference(x, weight, bias, eps)


def qkv_rope(qkv, heads, head_dim, base):
    """Wqkv output [B, L, 3*H*hd] -> row-contiguous q, k, v [B, H, L, hd], RoPE (NeoX layout) on q and k."""
    if (qkv.ndim == 3 and head_dim % 2 == 0 and qkv.shape[-1] == 3 * heads * head_dim
            and _cuda_ok("qkv_rope", qkv)):
        return qkv_rope_cuda(qkv, heads, head_dim, base)
    return qkv_rope_reference(qkv, heads, head_dim, base)


def geglu(y):
    """y [..., 2I] -> gelu(y[..., :I]) * y[..., I:] (exact erf), float32 math rounded once."""
    if y.ndim >= 1 and y.shape[-1] % 2 == 0 and _cuda_ok("geglu", y):
        return geglu_cuda(y)
    return geglu_reference(y)


def linear(x, weight, bias=None, residual=None):
    """x @ weight.T (+ bias) (+ residual), weight [N, K] as nn.Linear stores it; tensor-core kernel for
    float16/bfloat16 inputs of at most LINEAR_MAX_ROWS rows with K % 32 == 0, MLX's matmul otherwise."""
    rows = x.size // x.shape[-1] if x.ndim and x.shape[-1] else 0
    if (x.ndim >= 1 and weight.ndim == 2 and weight.shape[1] == x.shape[-1] and x.shape[-1] % 32 == 0
            and 0 < rows <= LINEAR_MAX_ROWS and (bias is None or bias.shape == (weight.shape[0],))
            and (residual is None or residual.shape == (*x.shape[:-1], weight.shape[0]))
            and _cuda_ok("linear", x, weight, bias, residual, dtypes=(mx.float16, mx.bfloat16))):
        return linear_cuda(x, weight, bias, residual)
    return linear_reference(x, weight, bias, residual)
