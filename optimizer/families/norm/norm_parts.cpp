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
                                             const vec_t (&c)[PER], stat_t* __restrict__ mean_out,
                                             stat_t* __restrict__ rstd_out, float* red) {
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
  // The row's last part to arrive merges its triples once (merge_row) and raises the row's flag.
  const index_t row = t / NPARTS;
  if (arrive_last(arrived + row, (unsigned)NPARTS)) {
    const Welford st = merge_row(ws, row, NPARTS, red);
    if (threadIdx.x == 0) {
      const float mean = st.mean, rstd = rsqrtf(st.m2 / (float)COLS + EPS);
      float* rs = ws + TOTAL * 3 + 2 * ROWS + 1 + 2 * row;
      rs[0] = mean;
      rs[1] = rstd;
      mean_out[row] = to_stat(mean);
      rstd_out[row] = to_stat(rstd);
    }
    flag_raise(arrived + ROWS + row);
  }
}
/// Spins (thread 0) until ticket t's row has its statistics (the flag its last part raised), then reads them.
__device__ __forceinline__ void part_stats(const float* ws, const unsigned* arrived, index_t t, float* mean_u,
                                           float* rstd_u) {
  flag_wait(arrived + ROWS + t / NPARTS);
  const float* rs = ws + TOTAL * 3 + 2 * ROWS + 1 + 2 * (t / NPARTS);
  *mean_u = used_stat(__ldcg(rs));
  *rstd_u = used_stat(__ldcg(rs + 1));
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
  unsigned* const arrived = reinterpret_cast<unsigned*>(ws + TOTAL * 3);  // then the flags, the ticket
  unsigned* const tickets = arrived + 2 * ROWS;
  float mean_u, rstd_u;
  vec_t c[PER];
#if AHEAD
  vec_t d[PER];
  index_t t = ticket_share(ticket_ask(tickets));
  if (t < TOTAL) {
    part_load(x, t, c);
    part_publish(ws, arrived, t, c, mean_out, rstd_out, red);
  }
  unsigned asked = ticket_ask(tickets);
  while (t < TOTAL) {  // uniform over the block
    const index_t n = ticket_share(asked);
    if (n < TOTAL) {
      part_load(x, n, d);
      part_publish(ws, arrived, n, d, mean_out, rstd_out, red);
    }
    part_stats(ws, arrived, t, &mean_u, &rstd_u);
    asked = ticket_ask(tickets);  // after the wait: a part is never held unpublished across one
    part_write(w, b, y, t, c, mean_u, rstd_u);
    t = n;
#pragma unroll
    for (int u = 0; u < PER; ++u) c[u] = d[u];
  }
#else
  for (index_t t = ticket_share(ticket_ask(tickets)); t < TOTAL; t = ticket_share(ticket_ask(tickets))) {
    part_load(x, t, c);
    part_publish(ws, arrived, t, c, mean_out, rstd_out, red);
    part_stats(ws, arrived, t, &mean_u, &rstd_u);
    part_write(w, b, y, t, c, mean_u, rstd_u);
  }
#endif
}
)";
}

}  // namespace cudal1::optimizer::norm
