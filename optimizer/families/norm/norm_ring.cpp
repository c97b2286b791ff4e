/// @brief Mode 5 of the normalisation family: steps of whole rows dealt over a persistent cooperative grid, each
/// block's part kept in a shared-memory ring that loads steps ahead (Note [Norm ring]): sizing and device code.
#include <algorithm>

#include "codegen_common.h"
#include "norm_family.h"

namespace cudal1::optimizer::norm {
namespace {

// Dynamic shared memory a block of one block per SM may take, less 512 bytes for the kernel's static arrays
// (red[96]): sm_90 227 KB per block (228 KB per SM, 1 KB reserved), sm_80 163 KB (164 KB per SM).
int64_t ring_smem_budget(int sm) {
  if (sm >= 90) return 227 * 1024 - 512;
  if (sm == 80) return 163 * 1024 - 512;
  return 0;
}

}  // namespace

int64_t ring_rows_per_step(const NormShape& s, const NormKnobs& k) {
  const int64_t row_bytes = s.cols * elem_size(s.dtype);
  const int64_t fit = (int64_t{k.step_mb} << 20) / row_bytes;
  return std::max<int64_t>(1, std::min(fit, s.rows));
}

int64_t ring_steps(const NormShape& s, const NormKnobs& k) {
  const int64_t rps = ring_rows_per_step(s, k);
  return (s.rows + rps - 1) / rps;
}

int ring_reference_blocks(int sm) {
  if (sm >= 90) return 132;  // H100 SXM / H200
  if (sm == 80) return 108;  // A100
  return 0;
}

int64_t ring_part_vectors(const NormShape& s, const NormKnobs& k, int64_t blocks) {
  const int64_t nv = s.cols / k.vec;
  return (nv + blocks - 1) / blocks;
}

int64_t ring_smem_bytes(const NormShape& s, const NormKnobs& k, int64_t blocks) {
  return int64_t{k.ring} * ring_rows_per_step(s, k) * ring_part_vectors(s, k, blocks) * k.vec * elem_size(s.dtype);
}

bool ring_fits(const NormShape& s, const NormKnobs& k) {
  const int64_t blocks = ring_reference_blocks(s.sm);
  if (blocks == 0 || k.vec * elem_size(s.dtype) < 4) return false;  // 2-byte vectors: no cp.async
  return ring_part_vectors(s, k, blocks) >= k.block && ring_smem_bytes(s, k, blocks) <= ring_smem_budget(s.sm);
}

const char* ring_source() {
  return R"(extern __shared__ __align__(16) unsigned char ring_smem[];
/// Rows in step s: [s * RPS, min(ROWS, (s + 1) * RPS)).
__device__ __forceinline__ index_t step_rows(index_t s) { return ROWS - s * RPS < RPS ? ROWS - s * RPS : RPS; }
/// Ring slot of step s: RPS rows of `ch` vectors (row i of the step at i * ch).
__device__ __forceinline__ vec_t* ring_slot(index_t s, index_t ch) {
  return reinterpret_cast<vec_t*>(ring_smem) + (s % RING) * RPS * ch;
}
/// Starts copying this block's part [j0, j1) of every row of step s into s's slot; one commit group, empty
/// past the last step so that the group count stays uniform. Thread t copies the vectors j0 + t + i * BLOCK
/// and is the only one to read them back: no block barrier orders the copies.
__device__ __forceinline__ void ring_fetch(const storage_t* __restrict__ x, index_t s, index_t j0, index_t j1,
                                           index_t ch) {
  if (s < NS) {
    vec_t* const slot = ring_slot(s, ch);
    const index_t n = step_rows(s);
    for (index_t i = 0; i < n; ++i) {
      const vec_t* __restrict__ xr = reinterpret_cast<const vec_t*>(x + (s * RPS + i) * COLS);
      for (index_t j = j0 + threadIdx.x; j < j1; j += BLOCK) copy_in(slot + i * ch + (j - j0), xr + j);
    }
  }
  copy_commit();
}
/// The whole grid walks the steps together; block b holds vectors [b * ch, (b + 1) * ch) of every row of a
/// step (ch = ceil(NV / gridDim.x); the last blocks may hold fewer or none, and still publish and arrive).
/// Step s: fetch step s + RING - 1 into the slot step s - 1 freed, wait for s's copies, per-row Welford over
/// the part (vector order, as mode 2), the block triple of each row to the workspace at (row * grid + b),
/// arrive on s's counter, wait for every block, merge each row's grid triples (merge_row: identical in every
/// block), normalise the part from shared memory.
__device__ __forceinline__ void ring_rows(const storage_t* __restrict__ x, const storage_t* __restrict__ w,
                                          const storage_t* __restrict__ b, storage_t* __restrict__ y,
                                          stat_t* __restrict__ mean_out, stat_t* __restrict__ rstd_out,
                                          float* __restrict__ ws, float* red) {
  const index_t parts = gridDim.x, ch = (NV + parts - 1) / parts;
  const index_t j0 = (index_t)blockIdx.x * ch, j1 = j0 + ch < NV ? j0 + ch : NV;  // j1 <= j0: an empty part
  unsigned* const arrived = reinterpret_cast<unsigned*>(ws + ROWS * parts * 3);
  float wv[VEC], bv[VEC];
#pragma unroll 1
  for (int s = 0; s < RING - 1; ++s) ring_fetch(x, s, j0, j1, ch);
  for (index_t s = 0; s < NS; ++s) {
    ring_fetch(x, s + RING - 1, j0, j1, ch);
    copy_wait<RING - 1>();  // groups 0..s (this thread's copies of steps up to s) have landed
    const vec_t* const slot = ring_slot(s, ch);
    const index_t r0 = s * RPS, n = step_rows(s);
    for (index_t i = 0; i < n; ++i) {
      Welford acc{0.f, 0.f, 0.f};
      for (index_t j = j0 + threadIdx.x; j < j1; j += BLOCK) acc = wf_combine(acc, wf_vector(slot[i * ch + (j - j0)]));
      acc = row_welford(acc, red);
      publish(ws, (r0 + i) * parts + blockIdx.x, acc);
    }
    group_arrive(arrived, s);
    group_wait(arrived, s);
    for (index_t i = 0; i < n; ++i) {
      const index_t row = r0 + i;
      float mean_u, rstd_u;
      merged_stats(ws, row, parts, blockIdx.x == 0, mean_out, rstd_out, red, &mean_u, &rstd_u);
      vec_t* __restrict__ yr = reinterpret_cast<vec_t*>(y + row * COLS);
      for (index_t j = j0 + threadIdx.x; j < j1; j += BLOCK) {
        affine(w, b, row, j, wv, bv);
        yr[j] = normalise(slot[i * ch + (j - j0)], mean_u, rstd_u, wv, bv);
      }
    }
    __syncthreads();  // the slot is read before the next step's fetch refills it
  }
}
)";
}

}  // namespace cudal1::optimizer::norm
