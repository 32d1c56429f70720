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
