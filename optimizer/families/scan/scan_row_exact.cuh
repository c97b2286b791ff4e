// @brief RowExact (Note [Scans]; exact where s.row_exact): ATen's innermost scan with Tx = 16, a warp per row:
// tiles of 32, the carry combined into the tile's first element, then a Sklansky scan by shuffles; every combine
// rounded to the dtype as at::Half / at::BFloat16 arithmetic does. Follows scan_common.cuh (kVec is 1).

extern "C" __global__ void __launch_bounds__(scan::kBlock)
cudal1_scan(const storage_t* __restrict__ in, storage_t* __restrict__ out, float* __restrict__ ws, int phase) {
  using namespace scan;
  const int lane = threadIdx.x & 31;
  const index_t row = (index_t)blockIdx.x * (kBlock / 32) + threadIdx.x / 32;
  if (row >= kOuter) return;
  const storage_t* x = in + in_base(row, 0);
  storage_t* y = out + row * kN;
  // Four tiles are loaded ahead of their (serial) scans so that the loads overlap the carry chain; tiles past
  // the row only carry the carry along and write nothing.
  float carry = ident();
  for (index_t base = 0; base < kN; base += 32 * 4) {
    float t[4];
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      const index_t j = base + q * 32 + lane;
      t[q] = j < kN ? to_float(x[j * kSd]) : ident();
    }
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      float v = t[q];
      if (lane == 0) v = rnd(OP(v, carry));
#pragma unroll
      for (int s = 1; s < 32; s <<= 1) {
        const float u = __shfl_sync(kFull, v, (lane & ~(2 * s - 1)) | (s - 1));
        if (lane & s) v = rnd(OP(v, u));
      }
      const index_t j = base + q * 32 + lane;
      if (j < kN) y[j] = to_storage(v);
      carry = __shfl_sync(kFull, v, 31);
    }
  }
}
