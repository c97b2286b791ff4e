// @brief RowWarp (Note [Scans]; reassociated): a warp per row, kVec elements a lane scanned serially, then a warp
// scan, the carry taken across the row's chunks of 32 x kVec. Follows scan_common.cuh and scan_row_helpers.cuh.

extern "C" __global__ void __launch_bounds__(scan::kBlock)
cudal1_scan(const storage_t* __restrict__ in, storage_t* __restrict__ out, float* __restrict__ ws, int phase) {
  using namespace scan;
  const int lane = threadIdx.x & 31;
  const index_t row = (index_t)blockIdx.x * (kBlock / 32) + threadIdx.x / 32;
  if (row >= kOuter) return;  // whole warps leave together
  const storage_t* x = in + in_base(row, 0);
  storage_t* y = out + row * kN;
  float carry = ident();
  for (index_t base = 0; base < kN; base += 32 * kVec) {
    const index_t j = base + (index_t)lane * kVec;
    float v[kVec];
    load_row(x, j, kN, v);
    const float incl = warp_scan(thread_scan(v), lane);
    float excl = __shfl_up_sync(kFull, incl, 1);
    if (lane == 0) excl = ident();
    const float pre = OP(carry, excl);
#pragma unroll
    for (int e = 0; e < kVec; ++e) v[e] = OP(pre, v[e]);
    store_row(y, j, kN, v);
    carry = OP(carry, __shfl_sync(kFull, incl, 31));
  }
}
