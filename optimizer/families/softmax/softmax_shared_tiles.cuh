// @brief SharedTiles (softmax_family.h, Note [Softmax shared tiles]; sm_90+): a block holds its tile (32 x kVec
// adjacent inner columns) for its kBlockRows rows of n, its first kKeptRows in registers and the rest in dynamic
// shared memory, read once (by cp.async with kAsync, else kUnroll rows at a time through registers); it folds
// the maximum and then on chip the sum of exp(x - max) (two passes, Note [Softmax fast exp]), merges each over its
// warps and the cluster's blocks in order, then writes ATen's column epilogue from chip.
// Follows softmax_shared_common.cuh, whose constants it reads.

namespace softmax {

// The write phase and the second pass walk this warp's rows of the tile (Note [Softmax column
// walks]): from registers (rows n0 + w + i kWarps, i < kKeep) and from shared memory (the rest, row j at
// j - n0 - kKeptRows).

/// The write phase: this warp's rows of the tile through ATen's epilogue.
__device__ __forceinline__ void write_rows(const vec_t* kept, const vec_t* tile, vec_t* __restrict__ y,
                                           const float* m, const float* s, int n0, int n1, int w, int lane,
                                           bool live) {
  float c[kVec];
#pragma unroll
  for (int e = 0; e < kVec; ++e) c[e] = epilogue_constant(s[e]);
#pragma unroll
  for (int i = 0; i < kKeep; ++i) {
    const int j = n0 + w + i * kWarps;
    if (live && j < n1) {
      const vec_t t = kept[i];
      vec_t r;
#pragma unroll
      for (int e = 0; e < kVec; ++e) r.v[e] = to_storage(column_epilogue(to_float(t.v[e]), m[e], s[e], c[e]));
      y[j * kInnerVectors] = r;
    }
  }
  for (int j = n0 + kKeptRows + w; live && j < n1; j += kWarps) {
    const vec_t t = tile[(j - n0 - kKeptRows) * 32 + lane];
    vec_t r;
#pragma unroll
    for (int e = 0; e < kVec; ++e) r.v[e] = to_storage(column_epilogue(to_float(t.v[e]), m[e], s[e], c[e]));
    y[j * kInnerVectors] = r;
  }
}

/// The second pass (Note [Softmax fast exp]): this thread's sum of exp(x - m), rows in order.
__device__ __forceinline__ void sum_rows(const vec_t* kept, const vec_t* tile, const float* m, float* s, int n0,
                                         int n1, int w, int lane, bool live) {
#pragma unroll
  for (int i = 0; i < kKeep; ++i) {
    const int j = n0 + w + i * kWarps;
    if (live && j < n1) {
      const vec_t t = kept[i];
#pragma unroll
      for (int e = 0; e < kVec; ++e) s[e] += exp_sub(to_float(t.v[e]), m[e]);
    }
  }
  for (int j = n0 + kKeptRows + w; live && j < n1; j += kWarps) {
    const vec_t t = tile[(j - n0 - kKeptRows) * 32 + lane];
#pragma unroll
    for (int e = 0; e < kVec; ++e) s[e] += exp_sub(to_float(t.v[e]), m[e]);
  }
}

/// Folds element v into its column's maximum m (NaN skipped; the sum comes in the second pass).
__device__ __forceinline__ void fold(float& m, float v) { m = fmaxf(m, v); }

}  // namespace softmax

extern "C" __global__ void __launch_bounds__(softmax::kBlock, softmax::kResident)
cudal1_softmax(const storage_t* __restrict__ in, storage_t* __restrict__ out) {
  using namespace softmax;
  // Dynamic shared memory: the block's kSharedRows rows x 32 vectors, the warp merge, the block's published pairs.
  extern __shared__ __align__(16) unsigned char smem[];
  vec_t* tile = reinterpret_cast<vec_t*>(smem);
  float* red_m = reinterpret_cast<float*>(smem + (size_t)kSharedRows * 32 * sizeof(vec_t));
  float* red_s = red_m + kWarps * kVec * 32;
  // The published values: two_pass_merge takes them (it reads them where kCluster > 1).
  float* pub_m = red_s + kWarps * kVec * 32;
  float* pub_s = pub_m + kVec * 32;
  const int lane = threadIdx.x % 32, w = threadIdx.x / 32;
  unsigned rank = 0;
  if constexpr (kCluster > 1) rank = cluster_rank();  // blockIdx.x % kCluster: the cluster is 1-d along x
  const index_t cl = (index_t)blockIdx.x / kCluster, tile_i = cl % kTiles, o = cl / kTiles;
  const index_t iv = tile_i * 32 + lane;
  const bool live = iv < kInnerVectors;  // dead lanes still take part in the merges
  const int n0 = min(kN, (int)rank * kBlockRows), n1 = min(kN, n0 + kBlockRows);
  const vec_t* __restrict__ x = reinterpret_cast<const vec_t*>(in) + o * kOuterStride + (live ? iv : 0);
  vec_t* __restrict__ y = reinterpret_cast<vec_t*>(out) + o * ((index_t)kN * kInnerVectors) + (live ? iv : 0);
  float m[kVec], s[kVec];
#pragma unroll
  for (int e = 0; e < kVec; ++e) { m[e] = neg_inf(); s[e] = 0.f; }
  // Read once: the kept rows first (all in flight), then the shared rows; each row is folded in order along n.
  vec_t kept[kKeep > 0 ? kKeep : 1];
#pragma unroll
  for (int i = 0; i < kKeep; ++i) {
    const int j = n0 + w + i * kWarps;
    if (live && j < n1) kept[i] = x[j * kNStride];
  }
  if constexpr (kAsync) copy_shared_rows(in, o, tile_i, n0, n1, tile);  // folded below
#pragma unroll
  for (int i = 0; i < kKeep; ++i) {
    const int j = n0 + w + i * kWarps;
    if (live && j < n1)
#pragma unroll
      for (int e = 0; e < kVec; ++e) fold(m[e], to_float(kept[i].v[e]));
  }
  if constexpr (kAsync) {
    cp_async_wait_all();
    __syncthreads();  // every thread's chunks have landed
    for (int j = n0 + kKeptRows + w; live && j < n1; j += kWarps) {
      const vec_t t = tile[(j - n0 - kKeptRows) * 32 + lane];
#pragma unroll
      for (int e = 0; e < kVec; ++e) fold(m[e], to_float(t.v[e]));
    }
  } else {
    for (int j0 = n0 + kKeptRows + w; j0 < n1; j0 += kUnroll * kWarps) {
      vec_t tu[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int j = j0 + u * kWarps;
        if (live && j < n1) tu[u] = x[j * kNStride];
      }
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int j = j0 + u * kWarps;
        if (live && j < n1) {
          tile[(j - n0 - kKeptRows) * 32 + lane] = tu[u];
#pragma unroll
          for (int e = 0; e < kVec; ++e) fold(m[e], to_float(tu[u].v[e]));
        }
      }
    }
  }
  // The maximum over the kWarps warps and then over the cluster (fmaxf: any order gives the same value), then the
  // sum of exp(x - m) over this thread's rows, the warps in warp order, the cluster in rank order.
  two_pass_merge<MaxCombine>(m, red_m, pub_m, pub_s, w, lane);
  sum_rows(kept, tile, m, s, n0, n1, w, lane, live);
  two_pass_merge<SumCombine>(s, red_s, pub_s, pub_m, w, lane);
  if constexpr (kCluster > 1) cluster_arrive_relaxed();  // remote reads done (used); it waits before it exits
#pragma unroll
  for (int e = 0; e < kVec; ++e)
    if (m[e] == neg_inf()) s[e] = qnan();  // every element -Inf or NaN: the two-pass sum is NaN too
  write_rows(kept, tile, y, m, s, n0, n1, w, lane, live);
  if constexpr (kCluster > 1) cluster_wait();  // no block leaves while another may still read its values
}
