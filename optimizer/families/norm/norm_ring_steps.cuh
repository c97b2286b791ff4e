// @brief RingSteps (Note [Norm ring], sm_80 and sm_90+): steps of kRowsPerStep whole rows over a persistent
// cooperative grid, each block's part of a step kept in a ring of kRing shared-memory slots that loads the next
// steps while one is reduced. Follows norm_common.cuh, norm_grid_exchange.cuh, codegen_common's async copies and
// its own constants (namespace rownorm, Note [Device constants]):
//   index_t kRowsPerStep, kSteps     rows a step (the last may be short), steps
//   int kRing                        slots of the ring (kRing - 1 steps loading ahead)
// The workspace holds kRows x gridDim.x triples, then a zeroed arrival counter a step.

extern __shared__ __align__(16) unsigned char ring_smem[];

namespace rownorm {

/// Rows in step s: [s * kRowsPerStep, min(kRows, (s + 1) * kRowsPerStep)).
__device__ __forceinline__ index_t step_rows(index_t s) {
  return kRows - s * kRowsPerStep < kRowsPerStep ? kRows - s * kRowsPerStep : kRowsPerStep;
}

/// Ring slot of step s: kRowsPerStep rows of `ch` vectors (row i of the step at i * ch).
__device__ __forceinline__ vec_t* ring_slot(index_t s, index_t ch) {
  return reinterpret_cast<vec_t*>(ring_smem) + (s % kRing) * kRowsPerStep * ch;
}

/// Starts copying this block's part [j0, j1) of every row of step s into s's slot; one commit group, empty
/// past the last step so that the group count stays uniform. Thread t copies the vectors j0 + t + i * kBlock
/// and is the only one to read them back: no block barrier orders the copies.
__device__ __forceinline__ void ring_fetch(const storage_t* __restrict__ x, index_t s, index_t j0, index_t j1,
                                           index_t ch) {
  if (s < kSteps) {
    vec_t* const slot = ring_slot(s, ch);
    const index_t n = step_rows(s);
    for (index_t i = 0; i < n; ++i) {
      const vec_t* __restrict__ xr = reinterpret_cast<const vec_t*>(x + (s * kRowsPerStep + i) * kCols);
      for (index_t j = j0 + threadIdx.x; j < j1; j += kBlock) copy_in(slot + i * ch + (j - j0), xr + j);
    }
  }
  copy_commit();
}

/// The whole grid walks the steps together; block b holds vectors [b * ch, (b + 1) * ch) of every row of a
/// step (ch = ceil(kVectors / gridDim.x); the last blocks may hold fewer or none, and still publish and
/// arrive). Step s: fetch step s + kRing - 1 into the slot step s - 1 freed, wait for s's copies, per-row
/// Welford over the part (vector order, as SplitRow), the block triple of each row to the workspace at
/// (row * grid + b), arrive on s's counter, wait for every block, merge each row's grid triples (merge_row:
/// identical in every block), normalise the part from shared memory.
__device__ __forceinline__ void rows(const storage_t* __restrict__ x, const storage_t* __restrict__ w,
                                     const storage_t* __restrict__ b, storage_t* __restrict__ y,
                                     stat_t* __restrict__ mean_out, stat_t* __restrict__ rstd_out,
                                     float* __restrict__ ws, int phase, float* red) {
  const index_t parts = gridDim.x, ch = (kVectors + parts - 1) / parts;
  const index_t j0 = (index_t)blockIdx.x * ch, j1 = j0 + ch < kVectors ? j0 + ch : kVectors;  // j1 <= j0: empty
  unsigned* const arrived = reinterpret_cast<unsigned*>(ws + kRows * parts * 3);
  float wv[kVec], bv[kVec];
#pragma unroll 1
  for (int s = 0; s < kRing - 1; ++s) ring_fetch(x, s, j0, j1, ch);
  for (index_t s = 0; s < kSteps; ++s) {
    ring_fetch(x, s + kRing - 1, j0, j1, ch);
    copy_wait<kRing - 1>();  // groups 0..s (this thread's copies of steps up to s) have landed
    const vec_t* const slot = ring_slot(s, ch);
    const index_t r0 = s * kRowsPerStep, n = step_rows(s);
    for (index_t i = 0; i < n; ++i) {
      Welford acc{0.f, 0.f, 0.f};
      for (index_t j = j0 + threadIdx.x; j < j1; j += kBlock) acc = wf_combine(acc, wf_vector(slot[i * ch + (j - j0)]));
      acc = row_welford(acc, red);
      publish(ws, (r0 + i) * parts + blockIdx.x, acc);
    }
    group_arrive(arrived, s);
    group_wait(arrived, s);
    for (index_t i = 0; i < n; ++i) {
      const index_t row = r0 + i;
      float mean_u, rstd_u;
      merged_stats(ws, row, parts, blockIdx.x == 0, mean_out, rstd_out, red, &mean_u, &rstd_u);
      vec_t* __restrict__ yr = reinterpret_cast<vec_t*>(y + row * kCols);
      for (index_t j = j0 + threadIdx.x; j < j1; j += kBlock) {
        affine(w, b, row, j, wv, bv);
        yr[j] = normalise(slot[i * ch + (j - j0)], mean_u, rstd_u, wv, bv);
      }
    }
    __syncthreads();  // the slot is read before the next step's fetch refills it
  }
}

}  // namespace rownorm
