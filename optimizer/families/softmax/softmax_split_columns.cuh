// @brief SplitColumns (softmax_family.h, Note [Softmax columns]): each thread owns kVec adjacent inner positions of
// one outer index and a 1 / kSplit share of the kN elements of those columns: their maxima, then their sums of
// exp(x - max), each combined over the kSplit threads of a column, then ATen's column epilogue. With kCache a
// thread keeps its kPer vectors in registers between the passes (one read), else each pass reads them again.
// Follows softmax_column_common.cuh and its own constants (namespace softmax, Note [Device constants]):
//   int kSplit                           threads a column (1, or a power of two dividing kBlock)
//   bool kCache                          registers between the passes
//   int kN                               elements a column
//   index_t kInnerVectors, kColumns      vectors along inner, column vectors in all
//   index_t kOuterStride, kNStride       input strides of outer and n, in vectors
//   int kPer                             vectors a thread keeps (kCache; else 1)
// (bound to the column variables N, IV, COLS, OSV, NSV, PER: Note [Softmax column constants] in
// softmax_columns_codegen.cpp).

namespace softmax {

enum : int { kColumnsPerBlock = kBlock / kSplit };
/// Partials a column leaves in shared memory: one a warp where a warp spans several threads of a column.
enum : int { kGroups = kColumnsPerBlock >= 32 ? kSplit : kBlock / 32 };

/// Combines the kSplit partials of each column (threads t with equal t % kColumnsPerBlock): warp shuffles over the
/// lanes of a column inside a warp, then kGroups partials a column through shared memory `red`, folded in order.
__device__ __forceinline__ void col_combine(float* v, float* red, bool is_max) {
  const int col = threadIdx.x % kColumnsPerBlock;
  int g;
  bool writer;
  if constexpr (kColumnsPerBlock < 32) {
#pragma unroll
    for (int o = 16; o >= kColumnsPerBlock; o >>= 1)
#pragma unroll
      for (int e = 0; e < kVec; ++e) {
        const float w = __shfl_xor_sync(0xffffffffu, v[e], o);
        v[e] = is_max ? fmaxf(v[e], w) : v[e] + w;
      }
    g = threadIdx.x / 32;
    writer = threadIdx.x % 32 < kColumnsPerBlock;
  } else {
    g = threadIdx.x / kColumnsPerBlock;
    writer = true;
  }
  __syncthreads();  // earlier readers of red are done
  if (writer)
#pragma unroll
    for (int e = 0; e < kVec; ++e) red[(e * kGroups + g) * kColumnsPerBlock + col] = v[e];
  __syncthreads();
#pragma unroll
  for (int e = 0; e < kVec; ++e) {
    float a = is_max ? neg_inf() : 0.f;
    for (int i = 0; i < kGroups; ++i) {
      const float w = red[(e * kGroups + i) * kColumnsPerBlock + col];
      a = is_max ? fmaxf(a, w) : a + w;
    }
    v[e] = a;
  }
}

}  // namespace softmax

extern "C" __global__ void __launch_bounds__(softmax::kBlock)
cudal1_softmax(const storage_t* __restrict__ in, storage_t* __restrict__ out) {
  using namespace softmax;
  __shared__ float red[kSplit > 1 ? kBlock * kVec : 1];  // the combines' partials (kSplit > 1)
  const int part = threadIdx.x / kColumnsPerBlock;  // this thread's share of n: part, part + kSplit, ...
  const index_t cv = (index_t)blockIdx.x * kColumnsPerBlock + threadIdx.x % kColumnsPerBlock;
  const bool live = cv < kColumns;  // dead threads still take part in the combines
  const index_t o = live ? cv / kInnerVectors : 0, iv = live ? cv % kInnerVectors : 0;
  const vec_t* __restrict__ x = reinterpret_cast<const vec_t*>(in) + o * kOuterStride + iv;
  vec_t* __restrict__ y = reinterpret_cast<vec_t*>(out) + o * (kN * kInnerVectors) + iv;
  float m[kVec], s[kVec];
#pragma unroll
  for (int e = 0; e < kVec; ++e) { m[e] = neg_inf(); s[e] = 0.f; }
  vec_t cached[kPer];  // the thread's vectors (kCache)
  if constexpr (kCache) {
#pragma unroll
    for (int i = 0; i < kPer; ++i)
      if (live && part + i * kSplit < kN) cached[i] = x[(part + i * kSplit) * kNStride];
  }
  // Each pass walks this thread's share of the column (rows part, part + kSplit, ...): from registers with kCache,
  // else read again (Note [Softmax column walks]).
  if constexpr (kCache) {
#pragma unroll
    for (int i = 0; i < kPer; ++i) {
      const int j = part + i * kSplit;
      if (live && j < kN) {
        const vec_t t = cached[i];
#pragma unroll
        for (int e = 0; e < kVec; ++e) m[e] = fmaxf(m[e], to_float(t.v[e]));
      }
    }
  } else {
    for (int j = part; live && j < kN; j += kSplit) {
      const vec_t t = x[j * kNStride];
#pragma unroll
      for (int e = 0; e < kVec; ++e) m[e] = fmaxf(m[e], to_float(t.v[e]));
    }
  }
  if constexpr (kSplit > 1) col_combine(m, red, true);
  if constexpr (kCache) {
#pragma unroll
    for (int i = 0; i < kPer; ++i) {
      const int j = part + i * kSplit;
      if (live && j < kN) {
        const vec_t t = cached[i];
#pragma unroll
        for (int e = 0; e < kVec; ++e) s[e] += expf(to_float(t.v[e]) - m[e]);
      }
    }
  } else {
    for (int j = part; live && j < kN; j += kSplit) {
      const vec_t t = x[j * kNStride];
#pragma unroll
      for (int e = 0; e < kVec; ++e) s[e] += expf(to_float(t.v[e]) - m[e]);
    }
  }
  if constexpr (kSplit > 1) col_combine(s, red, false);
  float c[kVec];
#pragma unroll
  for (int e = 0; e < kVec; ++e) c[e] = epilogue_constant(s[e]);
  if constexpr (kCache) {
#pragma unroll
    for (int i = 0; i < kPer; ++i) {
      const int j = part + i * kSplit;
      if (live && j < kN) {
        const vec_t t = cached[i];
        vec_t r;
#pragma unroll
        for (int e = 0; e < kVec; ++e) r.v[e] = to_storage(column_epilogue(to_float(t.v[e]), m[e], s[e], c[e]));
        y[j * kInnerVectors] = r;
      }
    }
  } else {
    for (int j = part; live && j < kN; j += kSplit) {
      const vec_t t = x[j * kNStride];
      vec_t r;
#pragma unroll
      for (int e = 0; e < kVec; ++e) r.v[e] = to_storage(column_epilogue(to_float(t.v[e]), m[e], s[e], c[e]));
      y[j * kInnerVectors] = r;
    }
  }
}
