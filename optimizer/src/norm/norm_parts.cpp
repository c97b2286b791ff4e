/// @brief Mode 6 of the normalisation family: parts of rows dealt by ticket over a persistent cooperative grid,
/// each kept in registers between its statistics and its output (Note [Norm parts]): sizing and device code.
#include <algorithm>

#include "norm_family.h"

namespace cudal1::optimizer::norm {

int parts_min_blocks(int block) { return block <= 256 ? 4 : 2; }

int64_t parts_per_row(const NormShape& s, const NormKnobs& k) {
  const int64_t nv = s.cols / k.vec, pv = int64_t{k.block} * k.per;
  return (nv + pv - 1) / pv;
}

bool parts_fit(const NormShape& s, const NormKnobs& k) {
  const int64_t reference = ring_reference_blocks(s.sm) * int64_t{parts_min_blocks(k.block)};
  const int64_t parts = parts_per_row(s, k);
  return reference > 0 && (k.block == 256 || k.block == 512) && (k.per == 4 || k.per == 8) && parts >= 2 &&
         parts <= reference && s.rows * parts < (int64_t{1} << 31);
}

const char* parts_source() {
  return R"(/// Spins (thread 0) until `target` parts arrived on *count, then makes their triples visible to the block.
__device__ __forceinline__ void parts_wait(const unsigned* count, unsigned target) {
  if (threadIdx.x == 0) {
    while (*reinterpret_cast<const volatile unsigned*>(count) < target) __nanosleep(32);
    __threadfence();
  }
  __syncthreads();
}
/// Every block takes tickets in order (thread 0's atomicAdd); ticket t is part t % P of row t / P. Thread i
/// holds the part's vectors j0 + i + u * BLOCK (u < PER) in registers: loads all issued at once, the exact
/// two-pass mean and squared deviations of its own elements (no division per element), the block's Chan
/// merge, the part's triple to the workspace at row * P + part, arrival on the row's counter, a wait for the
/// row's other parts (their holders are resident: the launch is cooperative and the grid >= P, and tickets go
/// out in order, so every part of the oldest unfinished row has a running holder or a free block to take it),
/// the row's P triples merged in the same order in every block (merge_row: bit-identical statistics), the
/// output from registers.
__device__ __forceinline__ void parts_rows(const storage_t* __restrict__ x, const storage_t* __restrict__ w,
                                           const storage_t* __restrict__ b, storage_t* __restrict__ y,
                                           stat_t* __restrict__ mean_out, stat_t* __restrict__ rstd_out,
                                           float* __restrict__ ws, float* red) {
  __shared__ unsigned ticket_s;
  unsigned* const arrived = reinterpret_cast<unsigned*>(ws + ROWS * NPARTS * 3);
  unsigned* const tickets = arrived + ROWS;
  float wv[VEC], bv[VEC];
  for (;;) {
    if (threadIdx.x == 0) ticket_s = atomicAdd(tickets, 1u);
    __syncthreads();
    const index_t t = ticket_s;  // every thread reads it before the next barrier (row_welford's)
    if (t >= ROWS * NPARTS) break;    // uniform over the block
    const index_t row = t / NPARTS, part = t % NPARTS;
    const vec_t* __restrict__ xr = reinterpret_cast<const vec_t*>(x + row * COLS);
    const index_t j0 = part * (BLOCK * PER) + threadIdx.x;
    vec_t c[PER];
#pragma unroll
    for (int u = 0; u < PER; ++u)
      if (j0 + u * BLOCK < NV) c[u] = xr[j0 + u * BLOCK];
    float sum = 0.f;
    int held = 0;
#pragma unroll
    for (int u = 0; u < PER; ++u)
      if (j0 + u * BLOCK < NV) {
        ++held;
#pragma unroll
        for (int e = 0; e < VEC; ++e) sum += to_float(c[u].v[e]);
      }
    Welford acc{0.f, 0.f, 0.f};
    if (held > 0) {
      const float n = (float)(held * VEC), m = sum / n;
      float q = 0.f;
#pragma unroll
      for (int u = 0; u < PER; ++u)
        if (j0 + u * BLOCK < NV) {
#pragma unroll
          for (int e = 0; e < VEC; ++e) {
            const float d = to_float(c[u].v[e]) - m;
            q = fmaf(d, d, q);
          }
        }
      acc = Welford{n, m, q};
    }
    acc = row_welford(acc, red);
    publish(ws, row * NPARTS + part, acc);
    group_arrive(arrived, row);
    parts_wait(arrived + row, (unsigned)NPARTS);
    float mean_u, rstd_u;
    merged_stats(ws, row, NPARTS, part == 0, mean_out, rstd_out, red, &mean_u, &rstd_u);
    vec_t* __restrict__ yr = reinterpret_cast<vec_t*>(y + row * COLS);
#pragma unroll
    for (int u = 0; u < PER; ++u)
      if (j0 + u * BLOCK < NV) {
        affine(w, b, row, j0 + u * BLOCK, wv, bv);
        yr[j0 + u * BLOCK] = normalise(c[u], mean_u, rstd_u, wv, bv);
      }
  }
}
)";
}

}  // namespace cudal1::optimizer::norm
