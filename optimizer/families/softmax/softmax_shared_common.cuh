// @brief What SharedTiles and PairTiles share (softmax_family.h, Note [Softmax shared tiles]; sm_90+): the two
// merges of the two-pass tiles over warps and cluster ranks (Notes [Softmax fast exp], [Softmax cluster merge]) and
// the cp.async copy of a block's shared rows (Note [Softmax async tiles]).
// Follows softmax_column_common.cuh, codegen_common's cluster_primitives_source (Note [Clusters]) and
// async_copy_source (Note [Async copies]), and the tile's constants (namespace softmax, Note [Device constants]):
//   int kCluster                         blocks a tile (1: no cluster)
//   int kResident                        blocks an SM holds at this shared memory: __launch_bounds__' minimum
//   int kUnroll                          rows a warp has in flight when the shared rows go through registers
//   int kKeep                            rows (PairTiles: words of two rows) a thread keeps in registers
//   bool kAsync                          the shared rows copied by cp.async
//   bool kPair                           Note [Softmax pair tiles]
//   int kN, kBlockRows                   rows, rows a block of a cluster
//   int kKeptRows, kSharedRows           the block's first rows, kept in registers; the rest, in shared memory
//   index_t kInnerVectors, kTiles        vectors along inner, tiles along inner
//   index_t kOuterStride, kNStride       input strides of outer and n, in vectors
// (bound to the column variables N, NB, NK, NS, IV, TILES, OSV, NSV: Note [Softmax column constants] in
// softmax_columns_codegen.cpp).

namespace softmax {

enum : int { kWarps = kBlock / 32 };
/// Values a lane holds in a merge: its kVec columns, or with kPair the 2 x kVec of its pair.
enum : int { kLaneValues = kPair ? 2 * kVec : kVec };

/// The two merges of the two passes, as combines for two_pass_merge: `combine(a, b)` folds the next warp's or
/// rank's value into a; `first(own, r0)` is where the cluster fold starts from rank 0's value. The maximum folds
/// rank 0 into the block's own (which is among the ranks': fmaxf(m, m) = m); the sum starts from rank 0 alone.
struct MaxCombine {
  static __device__ __forceinline__ float combine(float a, float b) { return fmaxf(a, b); }  // NaN skipped
  static __device__ __forceinline__ float first(float own, float r0) { return fmaxf(own, r0); }
};
struct SumCombine {
  static __device__ __forceinline__ float combine(float a, float b) { return a + b; }
  static __device__ __forceinline__ float first(float own, float r0) { return r0; }
};

/// A lane's values are kLaneValues slots of the block's kVec x 32: value e of lane `lane` in slot(e, lane) (with
/// kPair, lanes l and l + 16 hold the same columns and values, and lanes below 16 store them).
__device__ __forceinline__ int slot(int e, int lane) {
  if constexpr (kPair)
    return kLaneValues * (lane % 16) + e;
  else
    return e * 32 + lane;
}

/// Each lane's values v merged over the block's kWarps warps in warp order through red ([kWarps][kVec x 32] in
/// shared memory), then (kCluster > 1) published by warp 0 in pub ([kVec x 32]) and merged over the cluster's
/// blocks in rank order through distributed shared memory: every thread of the cluster ends with the same values.
/// Note [Softmax cluster merge]: only warp 0 reads the ranks' values (every rank's load issued before the first
/// combine) and hands the result to its block through `bc`; only warp 0's arrival releases (it wrote pub).
/// `bc` is the other merge's pub: the maximum's result goes through pub of the sum, which warp 0 writes only
/// after the sum's block barrier (every warp has read the maximum by then) and other blocks read only after the
/// sum's cluster barrier; the sum's result goes through pub of the maximum, which no block reads after the
/// sum's cluster barrier.
template <class Op>
__device__ __forceinline__ void two_pass_merge(float* v, float* red, float* pub, float* bc, int w, int lane) {
  if (kPair ? lane < 16 : true)  // the lanes that store a slot
#pragma unroll
    for (int e = 0; e < kLaneValues; ++e) red[w * kVec * 32 + slot(e, lane)] = v[e];
  __syncthreads();
#pragma unroll
  for (int e = 0; e < kLaneValues; ++e) {
    v[e] = red[slot(e, lane)];
    for (int i = 1; i < kWarps; ++i) v[e] = Op::combine(v[e], red[i * kVec * 32 + slot(e, lane)]);
  }
  if constexpr (kCluster > 1) {
    if (w == 0) {
      if (kPair ? lane < 16 : true)
#pragma unroll
        for (int e = 0; e < kLaneValues; ++e) pub[slot(e, lane)] = v[e];
      cluster_arrive();
    } else {
      cluster_arrive_relaxed();
    }
    cluster_wait();
    if (w == 0) {
#pragma unroll
      for (int e = 0; e < kLaneValues; ++e) {
        float rv[kCluster];
#pragma unroll
        for (unsigned r = 0; r < kCluster; ++r) rv[r] = load_remote(pub + slot(e, lane), r);
        v[e] = Op::first(v[e], rv[0]);
#pragma unroll
        for (unsigned r = 1; r < kCluster; ++r) v[e] = Op::combine(v[e], rv[r]);
        if (kPair ? lane < 16 : true) bc[slot(e, lane)] = v[e];
      }
    }
    __syncthreads();
#pragma unroll
    for (int e = 0; e < kLaneValues; ++e) v[e] = bc[slot(e, lane)];
  }
}

/// Note [Softmax async tiles]: the block's shared rows n0 + kKeptRows .. n1 - 1 of tile tile_i of outer index o
/// (whole tiles, 16-byte aligned) copied to `dst` in 16-byte chunks with cp.async, every chunk in flight at once
/// and no registers held; one commit group.
__device__ __forceinline__ void copy_shared_rows(const storage_t* __restrict__ in, index_t o, index_t tile_i,
                                                 int n0, int n1, void* dst) {
  constexpr int kRowChunks = 32 * (int)sizeof(vec_t) / 16;  // chunks a row
  const char* src = reinterpret_cast<const char*>(reinterpret_cast<const vec_t*>(in) + o * kOuterStride + tile_i * 32);
  const unsigned sdst = (unsigned)__cvta_generic_to_shared(dst);
  const int chunks = max(0, n1 - n0 - kKeptRows) * kRowChunks;
  for (int q = threadIdx.x; q < chunks; q += kBlock) {
    const int r = q / kRowChunks, c = q % kRowChunks;
    cp_async<16>(sdst + (unsigned)q * 16u,
                 src + (index_t)(n0 + kKeptRows + r) * kNStride * (index_t)sizeof(vec_t) + c * 16);
  }
  cp_async_commit();
}

}  // namespace softmax
