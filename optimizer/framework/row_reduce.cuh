// @brief fp32 reductions over the threads of a row, a warp or a block, the result the same in every one of them
// (codegen_common.h: row_reduce_source).
//
// Compiled by NVRTC after these typed constants at namespace scope (enumerators: Note [Device constants]), which
// row_reduce_source writes before this file:
//   int kRowReduceThreads         the threads that reduce a row: 32 (a warp) or kRowReduceBlock (the block)
//   int kRowReduceBlock           the threads of the block that reduce (the whole block, or the consumer threads
//                                 of a kernel that also has others)
//   bool kRowReduceNamedBarrier   those threads meet at named barrier 1 (over kRowReduceBlock threads), not at
//                                 __syncthreads(): the reducing threads are not the whole block

/// -inf as fp32.
__device__ __forceinline__ float neg_inf() { return __int_as_float(0xff800000u); }

/// The barrier of the threads that reduce a row across warps.
__device__ __forceinline__ void row_barrier() {
  if constexpr (kRowReduceNamedBarrier)
    asm volatile("bar.sync 1, %0;" ::"n"(static_cast<int>(kRowReduceBlock)) : "memory");  // "n" takes no enumerator
  else
    __syncthreads();
}
__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
/// The maximum (kMax; fmaxf: NaN is skipped) or the sum over the row's threads; across warps through `red` (32
/// floats of shared memory) between two row_barrier()s.
template <bool kMax>
__device__ __forceinline__ float row_fold(float v, float* red) {
  if constexpr (kMax)
    v = warp_max(v);
  else
    v = warp_sum(v);
  if constexpr (kRowReduceThreads == 32) {
    return v;
  } else {
    const int w = threadIdx.x / 32, l = threadIdx.x % 32;
    if (l == 0) red[w] = v;
    row_barrier();
    if constexpr (kMax)
      v = warp_max(l < kRowReduceBlock / 32 ? red[l] : neg_inf());
    else
      v = warp_sum(l < kRowReduceBlock / 32 ? red[l] : 0.f);
    row_barrier();
    return v;
  }
}
__device__ __forceinline__ float row_max(float v, float* red) { return row_fold<true>(v, red); }
__device__ __forceinline__ float row_sum(float v, float* red) { return row_fold<false>(v, red); }
