// @brief What the techniques' kernels share after the accumulator (Note [Reductions] in reduce_family.h): combines
// over a warp and a block, a row range's pushes, and the merge of split partials with the columns' second pass.
// Follows reduce_common.cuh and the accumulator's file (acc_t, acc_init, acc_combine, acc_push, acc_shfl, acc_ldcg,
// acc_store).

namespace reduce {

__device__ __forceinline__ acc_t warp_combine(acc_t a) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) a = acc_combine(a, acc_shfl(a, o));
  return a;
}

/// Combines over the whole block through `red` (32 acc_t of shared memory); the result is valid in thread 0.
__device__ __forceinline__ acc_t block_combine(acc_t a, acc_t* red) {
  a = warp_combine(a);
  if constexpr (kBlock > 32) {
    const int w = threadIdx.x / 32, l = threadIdx.x % 32;
    __syncthreads();
    if (l == 0) red[w] = a;
    __syncthreads();
    a = warp_combine(l < kBlock / 32 ? red[l] : acc_init());
  }
  return a;
}

/// Reduces vectors j0 + lane, j0 + lane + step, ... < j1 of output o's row (the row techniques): kVec-element
/// vectors of its one stride-1 reduced run, or single elements through red_off.
__device__ __forceinline__ acc_t row_range(const storage_t* __restrict__ x, index_t o, index_t j0, index_t j1,
                                           int lane, int step) {
  acc_t a = acc_init();
  const index_t base = kept_off(o);
  if constexpr (kVec > 1) {
    const vec_t* __restrict__ xv = reinterpret_cast<const vec_t*>(x + base);  // one stride-1 reduced run
#pragma unroll 4
    for (index_t j = j0 + lane; j < j1; j += step) {
      const vec_t t = xv[j];
#pragma unroll
      for (int e = 0; e < kVec; ++e) acc_push(a, to_float(t.v[e]), (long long)j * kVec + e);
    }
  } else {
#pragma unroll 4
    for (index_t j = j0 + lane; j < j1; j += step) acc_push(a, to_float(x[base + red_off(j)]), j);
  }
  return a;
}

/// Output o's kSplits chunk partials ws[p * kOutputs + o] merged in increasing p (the one definition of the merge,
/// shared by the second pass and the last block of a one-launch tile, so both forms give the same bits).
/// ld.global.cg: partials written by other blocks of the same launch are not in this SM's L1.
__device__ __forceinline__ acc_t merge_partials(const acc_t* ws, index_t o) {
  acc_t a = acc_init();
  for (index_t p = 0; p < kSplits; ++p) a = acc_combine(a, acc_ldcg(ws + p * kOutputs + o));
  return a;
}

/// Phase 1 of the split column techniques: output o (a thread each) merges its kSplits chunk partials.
__device__ __forceinline__ void column_second_pass(const acc_t* __restrict__ ws, out_t* __restrict__ y,
                                                   long long* __restrict__ yi) {
  const index_t o = (index_t)blockIdx.x * kBlock + threadIdx.x;
  if (o >= kOutputs) return;
  acc_store(merge_partials(ws, o), y, yi, o);
}

}  // namespace reduce
