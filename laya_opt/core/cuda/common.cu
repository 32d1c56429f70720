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
