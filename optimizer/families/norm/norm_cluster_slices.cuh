// @brief ClusterSlices (Note [Norm clusters], sm_90+): a row over one thread-block cluster of kCluster blocks,
// each keeping its slice on chip (registers, then dynamic shared memory filled by copy_in) from the statistics
// to the output. Follows norm_common.cuh, codegen_common's async copies and cluster primitives, and its own
// constants (namespace rownorm, Note [Device constants]):
//   int kCluster                     blocks a cluster (a row)
//   index_t kSliceVectors            vectors of a row each block holds (the last blocks may hold fewer or none)
//   int kThreadVectors               vectors of a slice each thread holds
//   int kRegisterVectors             the first of them, kept in registers; the rest sit in shared memory
//   int kHalf                        the copies before this vector form the first commit group

extern __shared__ __align__(16) unsigned char slice_smem[];

namespace rownorm {

/// This thread's vector i of the slice [j0, j1) is j0 + threadIdx.x + i * kBlock; vectors 0..kRegisterVectors-1
/// stay in c, the others in shared memory at (i - kRegisterVectors) * kBlock + threadIdx.x: a thread only reads
/// back what it copied, so no block barrier orders the copies. Returns the thread's Welford triple (in vector
/// order, as SplitRow).
__device__ __forceinline__ Welford slice_in(const vec_t* __restrict__ xr, index_t j0, index_t j1, vec_t* c,
                                            vec_t* sm) {
  const index_t base = j0 + threadIdx.x;
  // Two copy groups: the first half's statistics overlap the second half's arrival.
#pragma unroll 4
  for (int i = kRegisterVectors; i < kThreadVectors; ++i) {
    const index_t j = base + (index_t)i * kBlock;
    if (j < j1) copy_in(sm + (i - kRegisterVectors) * kBlock + threadIdx.x, xr + j);
    if (i == kHalf - 1) copy_commit();
  }
  copy_commit();
#pragma unroll
  for (int i = 0; i < kRegisterVectors; ++i) {
    const index_t j = base + (index_t)i * kBlock;
    if (j < j1) c[i] = xr[j];
  }
  Welford acc{0.f, 0.f, 0.f};
#pragma unroll
  for (int i = 0; i < kRegisterVectors; ++i)
    if (base + (index_t)i * kBlock < j1) acc = wf_combine(acc, wf_vector(c[i]));
  copy_wait<1>();  // the first group (vectors kRegisterVectors..kHalf-1) has landed
#pragma unroll 4
  for (int i = kRegisterVectors; i < kThreadVectors; ++i) {
    if (i == kHalf) copy_wait<0>();
    if (base + (index_t)i * kBlock < j1)
      acc = wf_combine(acc, wf_vector(sm[(i - kRegisterVectors) * kBlock + threadIdx.x]));
  }
  return acc;
}

/// Normalises this thread's vectors of the slice (kept by slice_in) into row `row` of y.
__device__ __forceinline__ void slice_out(const storage_t* __restrict__ w, const storage_t* __restrict__ b,
                                          vec_t* __restrict__ yr, index_t row, index_t j0, index_t j1,
                                          const vec_t* c, const vec_t* sm, float mean, float rstd) {
  float wv[kVec], bv[kVec];
  const index_t base = j0 + threadIdx.x;
#pragma unroll
  for (int i = 0; i < kRegisterVectors; ++i) {
    const index_t j = base + (index_t)i * kBlock;
    if (j < j1) {
      affine(w, b, row, j, wv, bv);
      yr[j] = normalise(c[i], mean, rstd, wv, bv);
    }
  }
#pragma unroll 4
  for (int i = kRegisterVectors; i < kThreadVectors; ++i) {
    const index_t j = base + (index_t)i * kBlock;
    if (j < j1) {
      affine(w, b, row, j, wv, bv);
      yr[j] = normalise(sm[(i - kRegisterVectors) * kBlock + threadIdx.x], mean, rstd, wv, bv);
    }
  }
}

/// Rows of the cluster blockIdx.x / kCluster, kCluster blocks each holding one slice: block statistics,
/// published in this block's shared memory (two slots, alternating by row: one cluster barrier a row suffices,
/// since a slot is rewritten only after every block has passed the next row's barrier, i.e. finished reading
/// it); after the barrier every warp merges the kCluster triples in rank order through distributed shared
/// memory (the same inputs and the same shuffle tree in every warp of every block: identical statistics), then
/// normalises its slice.
__device__ __forceinline__ void rows(const storage_t* __restrict__ x, const storage_t* __restrict__ w,
                                     const storage_t* __restrict__ b, storage_t* __restrict__ y,
                                     stat_t* __restrict__ mean_out, stat_t* __restrict__ rstd_out,
                                     float* __restrict__ ws, int phase, float* red) {
  __shared__ float pub[2][3];
  vec_t* const sm = reinterpret_cast<vec_t*>(slice_smem);
  vec_t c[kRegisterVectors > 0 ? kRegisterVectors : 1];
  const unsigned rank = cluster_rank();
  // j1 < j0: an empty slice
  const index_t j0 = (index_t)rank * kSliceVectors, j1 = j0 + kSliceVectors < kVectors ? j0 + kSliceVectors : kVectors;
  const index_t clusters = gridDim.x / kCluster;
  int slot = 0;
  for (index_t row = blockIdx.x / kCluster; row < kRows; row += clusters, slot ^= 1) {
    Welford acc = slice_in(reinterpret_cast<const vec_t*>(x + row * kCols), j0, j1, c, sm);
    acc = row_welford(acc, red);
    if (threadIdx.x == 0) {
      pub[slot][0] = acc.n;
      pub[slot][1] = acc.mean;
      pub[slot][2] = acc.m2;
    }
    cluster_sync();
    const unsigned l = threadIdx.x % 32;
    Welford t{0.f, 0.f, 0.f};
    if (l < kCluster)
      t = Welford{load_remote(&pub[slot][0], l), load_remote(&pub[slot][1], l), load_remote(&pub[slot][2], l)};
    t = warp_welford(t);
    const float mean = t.mean, rstd = rsqrtf(t.m2 / (float)kCols + eps());
    if (rank == 0 && threadIdx.x == 0) {
      mean_out[row] = to_stat(mean);
      rstd_out[row] = to_stat(rstd);
    }
    slice_out(w, b, reinterpret_cast<vec_t*>(y + row * kCols), row, j0, j1, c, sm, used_stat(mean),
              used_stat(rstd));
  }
  cluster_sync();  // no block leaves while another may still read its published triples
}

}  // namespace rownorm
