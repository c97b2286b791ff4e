// @brief TicketParts (Note [Norm parts], sm_80 and sm_90+): parts of kBlock x kThreadVectors vectors of a row
// dealt by ticket over a persistent cooperative grid, each kept in registers between its statistics and its
// output. Follows norm_common.cuh, norm_grid_exchange.cuh, codegen_common's ticket code and its own constants
// (namespace rownorm, Note [Device constants]):
//   index_t kParts, kTickets         parts a row (the last may be shorter), parts of all rows (kRows x kParts)
//   int kThreadVectors               vectors of a part each thread holds
//   bool kAhead                      a block holds two parts: it loads its next one before it waits
// The workspace holds kTickets triples, a counter and a flag a row and the ticket counter (zeroed), then each
// row's mean and rstd.

namespace rownorm {

/// Thread i's first vector of ticket t's part (part t % kParts of row t / kParts); its vectors are
/// j0 + u * kBlock for u < kThreadVectors, those below kVectors only.
__device__ __forceinline__ index_t part_j0(index_t t) { return (t % kParts) * (kBlock * kThreadVectors) + threadIdx.x; }

/// Issues every load of ticket t's part at once.
__device__ __forceinline__ void part_load(const storage_t* __restrict__ x, index_t t, vec_t (&c)[kThreadVectors]) {
  const vec_t* __restrict__ xr = reinterpret_cast<const vec_t*>(x + (t / kParts) * kCols);
  const index_t j0 = part_j0(t);
#pragma unroll
  for (int u = 0; u < kThreadVectors; ++u)
    if (j0 + u * kBlock < kVectors) c[u] = xr[j0 + u * kBlock];
}

/// The part's statistics: each thread's exact two-pass mean and squared deviations of its own elements (no
/// division per element), merged over the block (Chan), published at row * kParts + part, and the arrival on
/// the row's counter.
__device__ __forceinline__ void part_publish(float* __restrict__ ws, unsigned* arrived, index_t t,
                                             const vec_t (&c)[kThreadVectors], stat_t* __restrict__ mean_out,
                                             stat_t* __restrict__ rstd_out, float* red) {
  const index_t j0 = part_j0(t);
  float sum = 0.f;
  int held = 0;
#pragma unroll
  for (int u = 0; u < kThreadVectors; ++u)
    if (j0 + u * kBlock < kVectors) {
      ++held;
#pragma unroll
      for (int e = 0; e < kVec; ++e) sum += to_float(c[u].v[e]);
    }
  Welford acc{0.f, 0.f, 0.f};
  if (held > 0) {
    const float n = (float)(held * kVec), m = sum / n;
    float q = 0.f;
#pragma unroll
    for (int u = 0; u < kThreadVectors; ++u)
      if (j0 + u * kBlock < kVectors) {
#pragma unroll
        for (int e = 0; e < kVec; ++e) {
          const float d = to_float(c[u].v[e]) - m;
          q = fmaf(d, d, q);
        }
      }
    acc = Welford{n, m, q};
  }
  acc = row_welford(acc, red);
  publish(ws, t, acc);
  // The row's last part to arrive merges its triples once (merge_row) and raises the row's flag.
  const index_t row = t / kParts;
  if (arrive_last(arrived + row, (unsigned)kParts)) {
    const Welford st = merge_row(ws, row, kParts, red);
    if (threadIdx.x == 0) {
      const float mean = st.mean, rstd = rsqrtf(st.m2 / (float)kCols + eps());
      float* rs = ws + kTickets * 3 + 2 * kRows + 1 + 2 * row;
      rs[0] = mean;
      rs[1] = rstd;
      mean_out[row] = to_stat(mean);
      rstd_out[row] = to_stat(rstd);
    }
    flag_raise(arrived + kRows + row);
  }
}

/// Spins (thread 0) until ticket t's row has its statistics (the flag its last part raised), then reads them.
__device__ __forceinline__ void part_stats(const float* ws, const unsigned* arrived, index_t t, float* mean_u,
                                           float* rstd_u) {
  flag_wait(arrived + kRows + t / kParts);
  const float* rs = ws + kTickets * 3 + 2 * kRows + 1 + 2 * (t / kParts);
  *mean_u = used_stat(__ldcg(rs));
  *rstd_u = used_stat(__ldcg(rs + 1));
}

/// Ticket t's part of the output, from registers.
__device__ __forceinline__ void part_write(const storage_t* __restrict__ w, const storage_t* __restrict__ b,
                                           storage_t* __restrict__ y, index_t t, const vec_t (&c)[kThreadVectors],
                                           float mean_u, float rstd_u) {
  const index_t row = t / kParts, j0 = part_j0(t);
  vec_t* __restrict__ yr = reinterpret_cast<vec_t*>(y + row * kCols);
  float wv[kVec], bv[kVec];
#pragma unroll
  for (int u = 0; u < kThreadVectors; ++u)
    if (j0 + u * kBlock < kVectors) {
      affine(w, b, row, j0 + u * kBlock, wv, bv);
      yr[j0 + u * kBlock] = normalise(c[u], mean_u, rstd_u, wv, bv);
    }
}

/// Note [Norm parts]. Without kAhead a block loads, publishes, waits on and writes one part at a time. With
/// kAhead it holds two: it loads and publishes its next part before it waits on the current part's row (which
/// its mates published an iteration ago), then writes the current part; a part is published as soon as it is
/// loaded, never after a wait, so no row waits on another.
__device__ __forceinline__ void rows(const storage_t* __restrict__ x, const storage_t* __restrict__ w,
                                     const storage_t* __restrict__ b, storage_t* __restrict__ y,
                                     stat_t* __restrict__ mean_out, stat_t* __restrict__ rstd_out,
                                     float* __restrict__ ws, int phase, float* red) {
  unsigned* const arrived = reinterpret_cast<unsigned*>(ws + kTickets * 3);  // then the flags, the ticket
  unsigned* const tickets = arrived + 2 * kRows;
  float mean_u, rstd_u;
  vec_t c[kThreadVectors];
  if constexpr (kAhead) {
    vec_t d[kThreadVectors];
    index_t t = ticket_share(ticket_ask(tickets));
    if (t < kTickets) {
      part_load(x, t, c);
      part_publish(ws, arrived, t, c, mean_out, rstd_out, red);
    }
    unsigned asked = ticket_ask(tickets);
    while (t < kTickets) {  // uniform over the block
      const index_t n = ticket_share(asked);
      if (n < kTickets) {
        part_load(x, n, d);
        part_publish(ws, arrived, n, d, mean_out, rstd_out, red);
      }
      part_stats(ws, arrived, t, &mean_u, &rstd_u);
      asked = ticket_ask(tickets);  // after the wait: a part is never held unpublished across one
      part_write(w, b, y, t, c, mean_u, rstd_u);
      t = n;
#pragma unroll
      for (int u = 0; u < kThreadVectors; ++u) c[u] = d[u];
    }
  } else {
    for (index_t t = ticket_share(ticket_ask(tickets)); t < kTickets; t = ticket_share(ticket_ask(tickets))) {
      part_load(x, t, c);
      part_publish(ws, arrived, t, c, mean_out, rstd_out, red);
      part_stats(ws, arrived, t, &mean_u, &rstd_u);
      part_write(w, b, y, t, c, mean_u, rstd_u);
    }
  }
}

}  // namespace rownorm
