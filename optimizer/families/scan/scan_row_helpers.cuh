// @brief Loads, stores and scans of the reassociated row techniques RowWarp, RowBlock and RowSplit (Note [Scans]):
// kVec elements a thread, fp32 combines. Follows scan_common.cuh.

namespace scan {

/// The thread's kVec elements j, j + 1, ... of row x (the identity at and past `lim`).
__device__ __forceinline__ void load_row(const storage_t* x, index_t j, index_t lim, float* v) {
  if constexpr (kVec > 1) {
    if (j < lim) {
      const vec_t t = *reinterpret_cast<const vec_t*>(x + j);
#pragma unroll
      for (int e = 0; e < kVec; ++e) v[e] = to_float(t.v[e]);
    } else {
#pragma unroll
      for (int e = 0; e < kVec; ++e) v[e] = ident();
    }
  } else {
    v[0] = j < lim ? to_float(x[j * kSd]) : ident();
  }
}

/// Stores the thread's kVec elements at j of the output row y (nothing at and past `lim`).
__device__ __forceinline__ void store_row(storage_t* y, index_t j, index_t lim, const float* v) {
  if (j >= lim) return;
  if constexpr (kVec > 1) {
    vec_t t;
#pragma unroll
    for (int e = 0; e < kVec; ++e) t.v[e] = to_storage(v[e]);
    *reinterpret_cast<vec_t*>(y + j) = t;
  } else {
    y[j] = to_storage(v[0]);
  }
}

/// Inclusive scan of the thread's kVec elements in place; returns their total.
__device__ __forceinline__ float thread_scan(float* v) {
#pragma unroll
  for (int e = 1; e < kVec; ++e) v[e] = OP(v[e - 1], v[e]);
  return v[kVec - 1];
}

/// Inclusive scan over the warp's lanes.
__device__ __forceinline__ float warp_scan(float t, int lane) {
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const float u = __shfl_up_sync(kFull, t, o);
    if (lane >= o) t = OP(u, t);
  }
  return t;
}

/// Block-wide step: the prefix of everything before this thread's elements (carry included); carry advances
/// by the block's total. Every thread of the block must call it.
__device__ __forceinline__ float block_step(float t, float& carry, float* wtot) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const float incl = warp_scan(t, lane);
  if (lane == 31) wtot[warp] = incl;
  __syncthreads();
  if (warp == 0) {
    float w = lane < kWarps ? wtot[lane] : ident();
    w = warp_scan(w, lane);
    if (lane < kWarps) wtot[lane] = w;
  }
  __syncthreads();
  float excl = __shfl_up_sync(kFull, incl, 1);
  if (lane == 0) excl = ident();
  const float pre = OP(carry, OP(warp == 0 ? ident() : wtot[warp - 1], excl));
  carry = OP(carry, wtot[kWarps - 1]);
  __syncthreads();
  return pre;
}

}  // namespace scan
