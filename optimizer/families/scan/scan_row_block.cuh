// @brief RowBlock and RowSplit (Note [Scans]; reassociated): a block per row, or kSplits blocks per row, each a
// chunk of chunk_of(kSplits) elements; block-wide scans of kBlock x kVec elements a step, the carry taken across
// steps. RowSplit launches twice: phase 0 writes each chunk's total to ws[row * kSplits + chunk], phase 1 starts
// each chunk from the totals before it. Follows scan_common.cuh, scan_row_helpers.cuh and a constant:
//   int kSplits   chunks per row: 1 for RowBlock

extern "C" __global__ void __launch_bounds__(scan::kBlock)
cudal1_scan(const storage_t* __restrict__ in, storage_t* __restrict__ out, float* __restrict__ ws, int phase) {
  using namespace scan;
  constexpr bool split = kSplits > 1;
  constexpr index_t chunk = chunk_of(kSplits);
  __shared__ float wtot[32];
  // One chunk: c == 0 and [lo, hi) the whole row.
  const index_t row = blockIdx.x / kSplits;
  const index_t c = blockIdx.x % kSplits;
  const index_t lo = c * chunk, hi = lo + chunk < kN ? lo + chunk : kN;
  const storage_t* x = in + in_base(row, 0);
  storage_t* y = out + row * kN;
  float carry = ident();
  if constexpr (split) {
    if (phase == 1)
      for (index_t p = 0; p < c; ++p) carry = OP(carry, ws[row * kSplits + p]);
  }
  for (index_t base = lo; base < hi; base += kBlock * kVec) {
    const index_t j = base + (index_t)threadIdx.x * kVec;
    float v[kVec];
    load_row(x, j, hi, v);
    const float pre = block_step(thread_scan(v), carry, wtot);
    if (split && phase == 0) continue;  // totals only
#pragma unroll
    for (int e = 0; e < kVec; ++e) v[e] = OP(pre, v[e]);
    store_row(y, j, hi, v);
  }
  if constexpr (split) {
    if (phase == 0 && threadIdx.x == 0) ws[row * kSplits + c] = carry;
  }
}
