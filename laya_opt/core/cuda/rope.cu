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
