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
