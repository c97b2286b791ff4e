// @brief RowGroups (Note [Norm groups]): SplitRow's parts in one cooperative launch over groups of
// kRowsPerGroup whole rows, so that a group's second read hits L2. Follows norm_common.cuh,
// norm_grid_exchange.cuh and its own constants (namespace rownorm, Note [Device constants]):
//   index_t kSplits, kChunkVectors   parts a row, vectors a part
//   index_t kRowsPerGroup, kGroupCount   rows a group (the last group may be short), groups
//   int kLead                        groups read ahead of the one normalised: 0, or 1 (`ahead`)
// The workspace holds kRows x kSplits triples, then a zeroed arrival counter a group.

namespace rownorm {

/// Calls f(j, xr[j]) for this thread's vectors j of [j0, j1), in order, four loads in flight.
template <typename F>
__device__ __forceinline__ void for_vectors(const vec_t* __restrict__ xr, index_t j0, index_t j1, F&& f) {
  index_t j = j0 + threadIdx.x;
  for (; j + 3 * kBlock < j1; j += 4 * kBlock) {
    vec_t t[4];
#pragma unroll
    for (int u = 0; u < 4; ++u) t[u] = xr[j + u * kBlock];
#pragma unroll
    for (int u = 0; u < 4; ++u) f(j + u * kBlock, t[u]);
  }
  for (; j < j1; j += kBlock) f(j, xr[j]);
}

/// Row group g, first read: this block's parts' triples to the workspace, then its arrival on g's counter.
__device__ __forceinline__ void group_stats(const storage_t* __restrict__ x, float* __restrict__ ws,
                                            unsigned* __restrict__ arrived, index_t g, float* red) {
  for (index_t i = blockIdx.x; i < kRowsPerGroup * kSplits; i += gridDim.x) {
    const index_t row = g * kRowsPerGroup + i / kSplits, part = i % kSplits;
    if (row >= kRows) break;  // the last group may be short; uniform over the block
    const index_t j0 = part * kChunkVectors, j1 = j0 + kChunkVectors < kVectors ? j0 + kChunkVectors : kVectors;
    Welford acc{0.f, 0.f, 0.f};
    for_vectors(reinterpret_cast<const vec_t*>(x + row * kCols), j0, j1,
                [&](index_t, const vec_t& t) { acc = wf_combine(acc, wf_vector(t)); });
    acc = row_welford(acc, red);
    publish(ws, row * kSplits + part, acc);
  }
  group_arrive(arrived, g);
}

/// Row group g, second read (from L2): merge each part's row triples (same order in every block), normalise.
__device__ __forceinline__ void group_normalise(const storage_t* __restrict__ x, const storage_t* __restrict__ w,
                                                const storage_t* __restrict__ b, storage_t* __restrict__ y,
                                                stat_t* __restrict__ mean_out, stat_t* __restrict__ rstd_out,
                                                const float* ws, index_t g, float* red) {
  float wv[kVec], bv[kVec];
  for (index_t i = blockIdx.x; i < kRowsPerGroup * kSplits; i += gridDim.x) {
    const index_t row = g * kRowsPerGroup + i / kSplits, part = i % kSplits;
    if (row >= kRows) break;
    float mean_u, rstd_u;
    merged_stats(ws, row, kSplits, part == 0, mean_out, rstd_out, red, &mean_u, &rstd_u);
    const vec_t* __restrict__ xr = reinterpret_cast<const vec_t*>(x + row * kCols);
    vec_t* __restrict__ yr = reinterpret_cast<vec_t*>(y + row * kCols);
    const index_t j0 = part * kChunkVectors, j1 = j0 + kChunkVectors < kVectors ? j0 + kChunkVectors : kVectors;
    for_vectors(xr, j0, j1, [&](index_t j, const vec_t& t) {
      affine(w, b, row, j, wv, bv);
      yr[j] = normalise(t, mean_u, rstd_u, wv, bv);
    });
  }
}

__device__ __forceinline__ void rows(const storage_t* __restrict__ x, const storage_t* __restrict__ w,
                                     const storage_t* __restrict__ b, storage_t* __restrict__ y,
                                     stat_t* __restrict__ mean_out, stat_t* __restrict__ rstd_out,
                                     float* __restrict__ ws, int phase, float* red) {
  unsigned* const arrived = reinterpret_cast<unsigned*>(ws + kRows * kSplits * 3);
  for (index_t g = 0; g < kGroupCount + kLead; ++g) {
    if (g < kGroupCount) group_stats(x, ws, arrived, g, red);
    if (g >= kLead) {
      group_wait(arrived, g - kLead);
      group_normalise(x, w, b, y, mean_out, rstd_out, ws, g - kLead, red);
    }
  }
}

}  // namespace rownorm
