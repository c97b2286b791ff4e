// @brief SplitRow (Note [Norm rows]): a row split over kSplits blocks of kChunkVectors vectors each (the last
// may be shorter), in two launches: phase 0 writes each chunk's Welford triple to the workspace at
// (row x kSplits + part) x 3, phase 1 merges the row's triples and normalises the chunk, reading x again. Follows
// norm_common.cuh and its own constants (namespace rownorm, Note [Device constants]):
//   index_t kSplits, kChunkVectors   chunks a row, vectors a chunk
//   bool kReverse                    phase 1 walks the blocks last-first (the chunks still in L2 first)

namespace rownorm {

__device__ __forceinline__ void rows(const storage_t* __restrict__ x, const storage_t* __restrict__ w,
                                     const storage_t* __restrict__ b, storage_t* __restrict__ y,
                                     stat_t* __restrict__ mean_out, stat_t* __restrict__ rstd_out,
                                     float* __restrict__ ws, int phase, float* red) {
  float wv[kVec], bv[kVec];
  const index_t blk = (kReverse && phase == 1) ? (index_t)gridDim.x - 1 - blockIdx.x : (index_t)blockIdx.x;
  const index_t row = blk / kSplits, part = blk % kSplits;
  const index_t j0 = part * kChunkVectors, j1 = j0 + kChunkVectors < kVectors ? j0 + kChunkVectors : kVectors;
  const vec_t* __restrict__ xr = reinterpret_cast<const vec_t*>(x + row * kCols);
  if (phase == 0) {
    Welford acc{0.f, 0.f, 0.f};
    for (index_t j = j0 + threadIdx.x; j < j1; j += kBlock) acc = wf_combine(acc, wf_vector(xr[j]));
    acc = row_welford(acc, red);
    if (threadIdx.x == 0) {
      ws[blk * 3] = acc.n;
      ws[blk * 3 + 1] = acc.mean;
      ws[blk * 3 + 2] = acc.m2;
    }
    return;
  }
  Welford acc{0.f, 0.f, 0.f};
  for (index_t t = threadIdx.x; t < kSplits; t += kBlock) {
    const float* p = ws + (row * kSplits + t) * 3;
    acc = wf_combine(acc, Welford{p[0], p[1], p[2]});
  }
  acc = row_welford(acc, red);
  const float mean = acc.mean, rstd = rsqrtf(acc.m2 / (float)kCols + eps());
  if (part == 0 && threadIdx.x == 0) {
    mean_out[row] = to_stat(mean);
    rstd_out[row] = to_stat(rstd);
  }
  vec_t* __restrict__ yr = reinterpret_cast<vec_t*>(y + row * kCols);
  const float mean_u = used_stat(mean), rstd_u = used_stat(rstd);
  for (index_t j = j0 + threadIdx.x; j < j1; j += kBlock) {
    affine(w, b, row, j, wv, bv);
    yr[j] = normalise(xr[j], mean_u, rstd_u, wv, bv);
  }
}

}  // namespace rownorm
