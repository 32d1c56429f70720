"""Fused encoder-layer ops: one `mx.fast.cuda_kernel` launch each on MLX's CUDA backend, plain MLX elsewhere.

Why: on the H200 the MLX forward is host-bound at small batch (each MLX op costs ~5-6 us of dispatch, a
cuBLASLt matmul 15-22 us) and MLX's LayerNorm and RoPE kernels are slow on [~100, 1024] tensors
(docs/PEERS.md, kernel profile). Each op here does the work of two to five MLX ops in one launch.

Every op has two paths: `cuda_kernel`, when the default device is the GPU of a CUDA build of MLX, and
`mlx_fallback`, the exact MLX ops of laya_opt/model.py in the same order (so bit-identical to the model
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
# A kernel's header goes before MLX's `namespace mlx::core::cu {`; its body is the inside of the
# __global__ function MLX generates (inputs `const T* name`, outputs `T* name`, template constants
# declared first; `name_shape` / `name_ndim` are passed because the bodies mention them).

_COMMON = r"""
template <typename T, int N>
struct alignas(sizeof(T) * N) Vec {
  T v[N];
};

template <int N, typename T>
__device__ inline bool aligned(const T* p) {
  return reinterpret_cast<uintptr_t>(p) % (sizeof(T) * N) == 0;
}

// N elements from p; one vector load when the chunk is whole and aligned, else the first `valid`
// elements one by one and zeros after them (a ragged row end).
template <int N, typename T>
__device__ inline Vec<T, N> load_chunk(const T* p, int valid, bool vec) {
  Vec<T, N> r;
  if (vec && valid >= N) {
    r = *reinterpret_cast<const Vec<T, N>*>(p);
  } else {
#pragma unroll
    for (int i = 0; i < N; ++i) {
      r.v[i] = i < valid ? p[i] : static_cast<T>(0.0f);
    }
  }
  return r;
}

template <int N, typename T>
__device__ inline void store_chunk(T* p, const Vec<T, N>& r, int valid, bool vec) {
  if (vec && valid >= N) {
    *reinterpret_cast<Vec<T, N>*>(p) = r;
  } else {
#pragma unroll
    for (int i = 0; i < N; ++i) {
      if (i < valid) p[i] = r.v[i];
    }
  }
}
"""

_NORM = r"""
namespace cg = cooperative_groups;

// Block-wide float sum, broadcast to every thread: warp reduce, then a reduce of the warp sums,
// the same cooperative-groups calls as MLX's BlockBroadcastReduce, so sums round the same way.
__device__ inline float block_sum(float v, float* scratch) {
  auto block = cg::this_thread_block();
  auto warp = cg::tiled_partition<32>(block);
  float s = cg::reduce(warp, v, cg::plus<float>());
  if (warp.thread_rank() == 0) scratch[warp.meta_group_rank()] = s;
  block.sync();
  s = warp.thread_rank() < warp.meta_group_size() ? scratch[warp.thread_rank()] : 0.0f;
  return cg::reduce(warp, s, cg::plus<float>());
}

// One block per row of D elements; thread t owns chunks (r * BLOCK + t) * NR .. + NR, as in MLX's
// layer_norm kernel. The (optionally summed) row stays in registers between the passes. `present`:
// bit 0 weight, bit 1 bias.
template <typename T, int BLOCK, int NR, int ITERS, bool ADD>
__device__ void norm_row(const T* x, const T* res, const T* w, const T* b, T* total, T* out, int D, float eps,
                         int present) {
  const bool has_w = present & 1, has_b = present & 2;
  __shared__ float scratch[2][BLOCK / 32];  // separate slots: no barrier needed between the two sums
  const size_t base = static_cast<size_t>(blockIdx.x) * D;
  x += base;
  out += base;
  if constexpr (ADD) {
    res += base;
    total += base;
  }
  const bool vec = aligned<NR>(x) && aligned<NR>(out) && (!ADD || (aligned<NR>(res) && aligned<NR>(total))) &&
                   (!has_w || aligned<NR>(w)) && (!has_b || aligned<NR>(b));
  float vals[ITERS][NR];
  float sum = 0.0f;
#pragma unroll
  for (int r = 0; r < ITERS; ++r) {
    const int e = (r * BLOCK + static_cast<int>(threadIdx.x)) * NR;
    auto xv = load_chunk<NR>(x + e, D - e, vec);
    if constexpr (ADD) {
      auto rv = load_chunk<NR>(res + e, D - e, vec);
#pragma unroll
      for (int i = 0; i < NR; ++i) xv.v[i] = xv.v[i] + rv.v[i];  // rounded to T, like MLX's add
      store_chunk<NR>(total + e, xv, D - e, vec);
    }
#pragma unroll
    for (int i = 0; i < NR; ++i) {
      vals[r][i] = static_cast<float>(xv.v[i]);
      sum += vals[r][i];
    }
  }
  const float mean = block_sum(sum, scratch[0]) / static_cast<float>(D);
  float var = 0.0f;
#pragma unroll
  for (int r = 0; r < ITERS; ++r) {
    const int e = (r * BLOCK + static_cast<int>(threadIdx.x)) * NR;
#pragma unroll
    for (int i = 0; i < NR; ++i) {
      if (e + i < D) {
        float t = vals[r][i] - mean;
        var += t * t;
      }
    }
  }
  const float inv = rsqrtf(block_sum(var, scratch[1]) / static_cast<float>(D) + eps);
#pragma unroll
  for (int r = 0; r < ITERS; ++r) {
    const int e = (r * BLOCK + static_cast<int>(threadIdx.x)) * NR;
    Vec<T, NR> wv, bv, o;
#pragma unroll
    for (int i = 0; i < NR; ++i) {
      wv.v[i] = static_cast<T>(1.0f);  // MLX passes weight 1 and bias 0 when they are absent
      bv.v[i] = static_cast<T>(0.0f);
    }
    if (has_w) wv = load_chunk<NR>(w + e, D - e, vec);
    if (has_b) bv = load_chunk<NR>(b + e, D - e, vec);
#pragma unroll
    for (int i = 0; i < NR; ++i) {
      float n = (vals[r][i] - mean) * inv;
      o.v[i] = wv.v[i] * static_cast<T>(n) + bv.v[i];  // affine step in T, as MLX does
    }
    store_chunk<NR>(out + e, o, D - e, vec);
  }
}
"""

_ROPE = r"""
// x1 = p[0], x2 = p[HALF] rotated by (c, s) in float32, rounded once (rope.cu's forward formula).
template <typename T, int HALF>
__device__ inline void rotate_pair(const T* p, T* o, float c, float s) {
  float x1 = static_cast<float>(p[0]);
  float x2 = static_cast<float>(p[HALF]);
  o[0] = static_cast<T>(x1 * c - x2 * s);
  o[HALF] = static_cast<T>(x1 * s + x2 * c);
}

// Thread (row, head group, m): rows are b * L + l of qkv [B, L, 3, H, HD]; it rotates pair
// (m, m + HD/2) of q and k and copies it for v, for HPT heads, into [B, H, L, HD] outputs.
// The angle depends on (l, m) only, so HPT heads share one sincos. H is a runtime value (H % HPT == 0).
template <typename T, int HD, int HPT>
__device__ void qkv_rope(const T* qkv, T* q, T* k, T* v, int H, int length, int rows, float log2_base) {
  constexpr int HALF = HD / 2;
  const int groups = H / HPT;
  const long long tid = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (tid >= static_cast<long long>(rows) * groups * HALF) return;
  const int m = static_cast<int>(tid % HALF);
  const int group = static_cast<int>((tid / HALF) % groups);
  const int row = static_cast<int>(tid / (HALF * groups));
  const int l = row % length;
  const int b = row / length;
  // Same float32 steps as mlx/backend/cuda/rope.cu: d = m / (HD/2), inv_freq = exp2(-d * log2(base)),
  // theta = position * inv_freq (scale 1, offset 0), then precise cosf / sinf.
  const float d = static_cast<float>(m) / static_cast<float>(HALF);
  const float inv_freq = exp2f(-d * log2_base);
  const float theta = static_cast<float>(l) * inv_freq;
  const float c = cosf(theta);
  const float s = sinf(theta);
#pragma unroll
  for (int j = 0; j < HPT; ++j) {
    const int h = group * HPT + j;
    const T* src = qkv + static_cast<size_t>(row) * (3 * H * HD) + h * HD + m;
    const size_t dst = ((static_cast<size_t>(b) * H + h) * length + l) * HD + m;
    rotate_pair<T, HALF>(src, q + dst, c, s);
    rotate_pair<T, HALF>(src + H * HD, k + dst, c, s);
    v[dst] = src[2 * H * HD];
    v[dst + HALF] = src[2 * H * HD + HALF];
  }
}
"""

_GEGLU = r"""
// gelu(a) * g with exact erf, in float32 and rounded once; the operation order of mlx.nn.gelu.
__device__ inline float geglu_value(float a, float g) {
  return ((a * (1.0f + erff(a / 1.41421356237309504880f))) / 2.0f) * g;
}

// Thread t: outputs t * VEC .. + VEC of [rows, I] from y [rows, 2I] (gelu input | gate); I % VEC == 0.
template <typename T, int VEC>
__device__ void geglu(const T* y, T* out, long long rows, int I) {
  const long long e = (static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x) * VEC;
  if (e >= rows * I) return;
  const long long row = e / I;
  const int col = static_cast<int>(e % I);
  const T* a = y + row * (2 * I) + col;
  T* o = out + e;
  const bool vec = aligned<VEC>(a) && aligned<VEC>(a + I) && aligned<VEC>(o);
  auto av = load_chunk<VEC>(a, VEC, vec);
  auto gv = load_chunk<VEC>(a + I, VEC, vec);
  Vec<T, VEC> r;
#pragma unroll
  for (int i = 0; i < VEC; ++i) {
    r.v[i] = static_cast<T>(geglu_value(static_cast<float>(av.v[i]), static_cast<float>(gv.v[i])));
  }
  store_chunk<VEC>(o, r, VEC, vec);
}
"""

_GEMM = r"""
// <ptx> Inline-PTX wrappers for the GEMM (kept together so a host emulation can swap this block).
__device__ inline void cp_async16(void* dst, const void* src, bool valid) {  // zero-fills when !valid
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(src), "r"(valid ? 16 : 0));
}
__device__ inline void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>  // "memory": no shared-memory read may be hoisted above the wait
__device__ inline void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory"); }
__device__ inline void mma_16816(float* c, const unsigned* a, const unsigned* b, __half) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
               "{%0,%1,%2,%3};\n"
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
__device__ inline void mma_16816(float* c, const unsigned* a, const unsigned* b, __nv_bfloat16) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
               "{%0,%1,%2,%3};\n"
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
// </ptx>

// 8 elements (16 bytes) of row `row` of a [rows, K] matrix at column k into shared memory; rows past the
// end read as zeros. Asynchronous (cp.async) when the matrix is 16-byte aligned, else plain loads.
template <typename T>
__device__ inline void load_chunk8(T* dst, const T* src, int row, int rows, int K, int k, bool async) {
  const bool valid = row < rows;
  const T* p = src + static_cast<size_t>(valid ? row : 0) * K + k;  // a mapped address even when !valid
  if (async) {
    cp_async16(dst, p, valid);
  } else {
#pragma unroll
    for (int i = 0; i < 8; ++i) dst[i] = valid ? p[i] : static_cast<T>(0.0f);
  }
}

__device__ inline unsigned word(const void* p) { return *reinterpret_cast<const unsigned*>(p); }

// C [M, N] = A [M, K] . W [N, K]^T (+ bias [N] if present & 1) (+ R [M, N] if present & 2) on tensor
// cores, fp32 accumulation.
// Block tile BM x 64 (BM = 32 or 64), K steps of 32 through a STAGES-deep cp.async ring; 4 warps, each
// 32 rows x WN columns = 2 x NI mma tiles of 16 x 8. K % 32 == 0 (the host checks). Fragment layouts
// are PTX's for mma.m16n8k16 (row.col): A pairs run along k in a row, B pairs along k in a W row.
template <typename T, int BM, int STAGES>
__device__ void gemm_tn(const T* A, const T* W, const T* bias, const T* R, T* C, int M, int N, int K, int present) {
  constexpr int BN = 64, BK = 32, PITCH = BK + 8;  // 80-byte rows: the 32 lanes' fragment reads hit 32 banks
  constexpr int WARPS_N = 4 / (BM / 32), WN = BN / WARPS_N, NI = WN / 8;
  alignas(16) __shared__ T sA[STAGES][BM * PITCH];
  alignas(16) __shared__ T sW[STAGES][BN * PITCH];
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int g = lane / 4, t = lane % 4;  // PTX's groupID and threadID_in_group
  const int wm = (warp / WARPS_N) * 32, wn = (warp % WARPS_N) * WN;
  const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
  const bool async = aligned<8>(A) && aligned<8>(W);
  const int ktiles = K / BK;

  auto load_stage = [&](int slot, int kt) {
    for (int c = tid; c < BM * 4; c += 128)
      load_chunk8(&sA[slot][(c / 4) * PITCH + (c % 4) * 8], A, m0 + c / 4, M, K, kt * BK + (c % 4) * 8, async);
    for (int c = tid; c < BN * 4; c += 128)
      load_chunk8(&sW[slot][(c / 4) * PITCH + (c % 4) * 8], W, n0 + c / 4, N, K, kt * BK + (c % 4) * 8, async);
  };

  float acc[2][NI][4] = {};
#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < ktiles) load_stage(s, s);
    cp_async_commit();  // one group per stage, empty ones included, so the wait count below holds
  }
  for (int kt = 0; kt < ktiles; ++kt) {
    cp_async_wait<STAGES - 2>();  // stage kt has landed (for this thread) ...
    __syncthreads();              // ... for every thread, and stage kt - 1 is no longer being read
    if (kt + STAGES - 1 < ktiles) load_stage((kt + STAGES - 1) % STAGES, kt + STAGES - 1);
    cp_async_commit();
    const T* a_s = sA[kt % STAGES];
    const T* w_s = sW[kt % STAGES];
#pragma unroll
    for (int kk = 0; kk < BK; kk += 16) {
      unsigned a[2][4], b[NI][2];
#pragma unroll
      for (int mi = 0; mi < 2; ++mi) {
        const T* p = a_s + (wm + mi * 16 + g) * PITCH + kk + t * 2;
        a[mi][0] = word(p);
        a[mi][1] = word(p + 8 * PITCH);
        a[mi][2] = word(p + 8);
        a[mi][3] = word(p + 8 * PITCH + 8);
      }
#pragma unroll
      for (int ni = 0; ni < NI; ++ni) {
        const T* q = w_s + (wn + ni * 8 + g) * PITCH + kk + t * 2;
        b[ni][0] = word(q);
        b[ni][1] = word(q + 8);
      }
#pragma unroll
      for (int mi = 0; mi < 2; ++mi)
#pragma unroll
        for (int ni = 0; ni < NI; ++ni) mma_16816(acc[mi][ni], a[mi], b[ni], T{});
    }
  }
  // Epilogue: accumulator c[h * 2 + j] is row g + 8h, column t * 2 + j of its 16 x 8 tile. Like
  // addmm then `residual + out`: bias added in fp32, rounded to T once, then the residual add in T.
#pragma unroll
  for (int mi = 0; mi < 2; ++mi)
#pragma unroll
    for (int ni = 0; ni < NI; ++ni)
#pragma unroll
      for (int h = 0; h < 2; ++h)
#pragma unroll
        for (int j = 0; j < 2; ++j) {
          const int r = m0 + wm + mi * 16 + g + h * 8, c = n0 + wn + ni * 8 + t * 2 + j;
          if (r < M && c < N) {
            float v = acc[mi][ni][h * 2 + j];
            if (present & 1) v += static_cast<float>(bias[c]);
            T o = static_cast<T>(v);
            if (present & 2) o = R[static_cast<size_t>(r) * N + c] + o;
            C[static_cast<size_t>(r) * N + c] = o;
          }
        }
}
"""


def _header(*parts: str, include: str = "") -> str:
    """A kernel's header: only the helpers it uses, since MLX rebuilds and hashes the whole source
    string on every call (so a shorter header is cheaper to dispatch, and to compile)."""
    return include + "\nnamespace laya {\n" + "".join(parts) + "\n}  // namespace laya\n"


_NORM_HEADER = _header(_COMMON, _NORM, include="\n#include <cooperative_groups/reduce.h>\n")
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
                 "                           qkv_shape[0] * qkv_shape[1], log2_base[0]);", _header(_ROPE)),
    "geglu": (("y",), ("out",),
              "long long rows = 1;\n"
              "for (int i = 0; i < y_ndim - 1; ++i) rows *= y_shape[i];\n"
              "laya::geglu<T, VEC>(y, out, rows, y_shape[y_ndim - 1] / 2);", _header(_COMMON, _GEGLU)),
    "linear": (("x", "weight", "bias", "residual", "present"), ("out",),
               "long long rows = 1;\n"
               "for (int i = 0; i < x_ndim - 1; ++i) rows *= x_shape[i];\n"
               "laya::gemm_tn<T, BM, STAGES>(x, weight, bias, residual, out, static_cast<int>(rows), weight_shape[0],\n"
               "                             x_shape[x_ndim - 1], present[0]);", _header(_COMMON, _GEMM)),
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
# What laya_opt/model.py computes (with mlx.nn.Linear / LayerNorm), op for op; the split and GeGLU are
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
