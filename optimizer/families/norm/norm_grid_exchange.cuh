// @brief Device code of the techniques whose blocks exchange a row's partial statistics through the workspace
// (RowGroups, RingSteps, TicketParts, HeldGrid; Notes [Norm groups], [Norm ring], [Norm parts], [Norm held]):
// publishing a block's triple, arriving on and waiting for a counter, merging a row's triples. Follows
// norm_common.cuh.

namespace rownorm {

/// Thread 0 writes the block's triple (row_welford gave every thread the same) to the workspace at i x 3.
__device__ __forceinline__ void publish(float* ws, index_t i, const Welford& acc) {
  if (threadIdx.x == 0) {
    float* p = ws + i * 3;
    p[0] = acc.n;
    p[1] = acc.mean;
    p[2] = acc.m2;
  }
}

/// Thread 0 (which wrote this block's triples) publishes them and arrives on counter g.
__device__ __forceinline__ void group_arrive(unsigned* arrived, index_t g) {
  if (threadIdx.x == 0) {
    __threadfence();
    atomicAdd(arrived + g, 1u);
  }
}

/// Returns when every block of the grid has arrived on counter g (all blocks are resident: the launch is
/// cooperative).
__device__ __forceinline__ void group_wait(const unsigned* arrived, index_t g) {
  if (threadIdx.x == 0) {
    while (*reinterpret_cast<const volatile unsigned*>(arrived + g) < gridDim.x) __nanosleep(64);
    __threadfence();
  }
  __syncthreads();
}

/// The statistics of row `row` from its `parts` triples in the workspace (written by other blocks:
/// ld.global.cg, not L1), merged in the same order and tree in every block: bit-identical everywhere.
__device__ __forceinline__ Welford merge_row(const float* ws, index_t row, index_t parts, float* red) {
  Welford acc{0.f, 0.f, 0.f};
  for (index_t t = threadIdx.x; t < parts; t += kBlock) {
    const float* p = ws + (row * parts + t) * 3;
    acc = wf_combine(acc, Welford{__ldcg(p), __ldcg(p + 1), __ldcg(p + 2)});
  }
  return row_welford(acc, red);
}

/// Merges row `row`'s `parts` triples (merge_row), stores mean and rstd where `writer` (one block a row), and
/// returns the values the output is computed from in *mean_u and *rstd_u.
__device__ __forceinline__ void merged_stats(const float* ws, index_t row, index_t parts, bool writer,
                                             stat_t* __restrict__ mean_out, stat_t* __restrict__ rstd_out,
                                             float* red, float* mean_u, float* rstd_u) {
  const Welford acc = merge_row(ws, row, parts, red);
  const float mean = acc.mean, rstd = rsqrtf(acc.m2 / (float)kCols + eps());
  if (writer && threadIdx.x == 0) {
    mean_out[row] = to_stat(mean);
    rstd_out[row] = to_stat(rstd);
  }
  *mean_u = used_stat(mean);
  *rstd_u = used_stat(rstd);
}

}  // namespace rownorm
