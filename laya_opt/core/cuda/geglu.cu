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
