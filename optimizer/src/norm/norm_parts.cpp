/// @brief Mode 6 of the normalisation family: parts of rows dealt by ticket over a persistent cooperative grid,
/// each kept in registers between its statistics and its output (Note [Norm parts]): sizing and device code.
#include <algorithm>

#include "norm_family.h"

namespace cudal1::optimizer::norm {

int parts_min_blocks(int block, bool ahead) { return ahead || block > 256 ? 2 : 4; }

int64_t parts_per_row(const NormShape& s, const NormKnobs& k) {
  const int64_t nv = s.cols / k.vec, pv = int64_t{k.block} * k.per;
  return (nv + pv - 1) / pv;
}

bool parts_fit(const NormShape& s, const NormKnobs& k) {
  const int64_t reference = ring_reference_blocks(s.sm) * int64_t{parts_min_blocks(k.block, k.ahead)};
  const int64_t parts = parts_per_row(s, k);
  // Two sets of registers with `ahead`: 8 vectors at 512 threads would not fit 64 registers a thread.
  const bool regs_ok = !k.ahead || k.block * k.per <= 2048;
  return reference > 0 && (k.block == 256 || k.block == 512) && (k.per == 4 || k.per == 8) && regs_ok && parts >= 2 &&
         parts <= reference && s.rows * parts < (int64_t{1} << 31);
}

const char* parts_source() {
  return R"(#define TOTAL (ROWS * NPARTS)
/// The next ticket, the same in every thread of the block (tickets go out in order over the grid).
__device__ __forceinline__ index_t take_ticket(unsigned* tickets) {
  __shared__ unsigned ticket_s;
  __syncthreads();  // every thread has read the previous ticket
  if (threadIdx.x == 0) ticket_s = atomicAdd(tickets, 1u);
  __syncthreads();
  return ticket_s;
}
/// Thread i's first vector of ticket t's part (part t % NPARTS of row t / NPARTS); its vectors are
/// j0 + u * BLOCK for u < PER, those below NV only.
__device__ __forceinline__ index_t part_j0(index_t t) { return (t % NPARTS) * (BLOCK * PER) + threadIdx.x; }
/// Issues every load of ticket t's part at once.
__device__ __forceinline__ void part_load(const storage_t* __restrict__ x, index_t t, vec_t (&c)[PER]) {
  const vec_t* __restrict__ xr = reinterpret_cast<const vec_t*>(x + (t / NPARTS) * COLS);
  const index_t j0 = part_j0(t);
#pragma unroll
  for (int u = 0; u < PER; ++u)
    if (j0 + u * BLOCK < NV) c[u] = xr[j0 + u * BLOCK];
}
/// The part's statistics: each thread's exact two-pass mean and squared deviations of its own elements (no
/// division per element), merged over the block (Chan), published at row * NPARTS + part, and the arrival on
/// the row's counter.
__device__ __forceinline__ void part_publish(float* __restrict__ ws, unsigned* arrived, index_t t,
                                             const vec_t (&c)[PER], float* red) {
  const index_t j0 = part_j0(t);
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
  publish(ws, t, acc);
  group_arrive(arrived, t / NPARTS);
}
/// Spins (thread 0) until all NPARTS parts of `row` arrived, then merges the row's triples in the same order in
/// every block (merged_stats: bit-identical statistics); ticket t's block of part 0 stores mean and rstd.
__device__ __forceinline__ void part_stats(const float* ws, const unsigned* arrived, index_t t,
                                           stat_t* __restrict__ mean_out, stat_t* __restrict__ rstd_out,
                                           float* red, float* mean_u, float* rstd_u) {
  const index_t row = t / NPARTS;
  if (threadIdx.x == 0) {
    while (*reinterpret_cast<const volatile unsigned*>(arrived + row) < (unsigned)NPARTS) __nanosleep(32);
    __threadfence();
  }
  __syncthreads();
  merged_stats(ws, row, NPARTS, t % NPARTS == 0, mean_out, rstd_out, red, mean_u, rstd_u);
}
/// Ticket t's part of the output, from registers.
__device__ __forceinline__ void part_write(const storage_t* __restrict__ w, const storage_t* __restrict__ b,
                                           storage_t* __restrict__ y, index_t t, const vec_t (&c)[PER],
                                           float mean_u, float rstd_u) {
  const index_t row = t / NPARTS, j0 = part_j0(t);
  vec_t* __restrict__ yr = reinterpret_cast<vec_t*>(y + row * COLS);
  float wv[VEC], bv[VEC];
#pragma unroll
  for (int u = 0; u < PER; ++u)
    if (j0 + u * BLOCK < NV) {
      affine(w, b, row, j0 + u * BLOCK, wv, bv);
      yr[j0 + u * BLOCK] = normalise(c[u], mean_u, rstd_u, wv, bv);
    }
}
/// Note [Norm parts]. Without AHEAD a block loads, publishes, waits on and writes one part at a time. With
/// AHEAD it holds two: it loads and publishes its next part before it waits on the current part's row (which
/// its mates published an iteration ago), then writes the current part; a part is published as soon as it is
/// loaded, never after a wait, so no row waits on another.
__device__ __forceinline__ void parts_rows(const storage_t* __restrict__ x, const storage_t* __restrict__ w,
                                           const storage_t* __restrict__ b, storage_t* __restrict__ y,
                                           stat_t* __restrict__ mean_out, stat_t* __restrict__ rstd_out,
                                           float* __restrict__ ws, float* red) {
  unsigned* const arrived = reinterpret_cast<unsigned*>(ws + TOTAL * 3);
  unsigned* const tickets = arrived + ROWS;
  float mean_u, rstd_u;
  vec_t c[PER];
#if AHEAD
  vec_t d[PER];
  index_t t = take_ticket(tickets);
  if (t < TOTAL) {
    part_load(x, t, c);
    part_publish(ws, arrived, t, c, red);
  }
  while (t < TOTAL) {  // uniform over the block
    const index_t n = take_ticket(tickets);
    if (n < TOTAL) {
      part_load(x, n, d);
      part_publish(ws, arrived, n, d, red);
    }
    part_stats(ws, arrived, t, mean_out, rstd_out, red, &mean_u, &rstd_u);
    part_write(w, b, y, t, c, mean_u, rstd_u);
    t = n;
#pragma unroll
    for (int u = 0; u < PER; ++u) c[u] = d[u];
  }
#else
  for (index_t t = take_ticket(tickets); t < TOTAL; t = take_ticket(tickets)) {
    part_load(x, t, c);
    part_publish(ws, arrived, t, c, red);
    part_stats(ws, arrived, t, mean_out, rstd_out, red, &mean_u, &rstd_u);
    part_write(w, b, y, t, c, mean_u, rstd_u);
  }
#endif
}
)";
}

}  // namespace cudal1::optimizer::norm
