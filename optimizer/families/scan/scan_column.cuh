// @brief Column and ColumnSplit (Note [Scans]): a thread per kVec adjacent lines (columns), walking the scanned
// dimension serially, each combine rounded to the dtype as ATen's serial scan does (exact where s.column_exact).
// ColumnSplit splits the dimension in kSplits chunks of chunk_of(kSplits) (blockIdx.y) and launches twice:
// phase 0 writes each chunk's column totals to ws[chunk * kLines + line], phase 1 starts each chunk from the totals
// before it. Follows scan_common.cuh and a constant:
//   int kSplits   chunks of the dimension: 1 for Column

extern "C" __global__ void __launch_bounds__(scan::kBlock)
cudal1_scan(const storage_t* __restrict__ in, storage_t* __restrict__ out, float* __restrict__ ws, int phase) {
  using namespace scan;
  constexpr bool split = kSplits > 1;
  constexpr index_t chunk = chunk_of(kSplits);
  const index_t col = ((index_t)blockIdx.x * kBlock + threadIdx.x) * kVec;
  if (col >= kLines) return;
  const index_t o = col / kInner, i = col % kInner;
  const storage_t* x = in + in_base(o, i);
  storage_t* y = out + o * kN * kInner + i;
  float acc[kVec];
#pragma unroll
  for (int e = 0; e < kVec; ++e) acc[e] = ident();
  // One chunk: c == 0 and [lo, hi) the whole dimension.
  const index_t c = split ? blockIdx.y : 0;
  const index_t lo = c * chunk, hi = lo + chunk < kN ? lo + chunk : kN;
  if constexpr (split) {
    if (phase == 1) {
      for (index_t p = 0; p < c; ++p) {
#pragma unroll
        for (int e = 0; e < kVec; ++e) acc[e] = OP(acc[e], ws[p * kLines + col + e]);
      }
    }
  }
#pragma unroll 4
  for (index_t k = lo; k < hi; ++k) {
    float v[kVec];
    if constexpr (kVec > 1) {
      const vec_t t = *reinterpret_cast<const vec_t*>(x + k * kSd);
#pragma unroll
      for (int e = 0; e < kVec; ++e) v[e] = to_float(t.v[e]);
    } else {
      v[0] = to_float(x[k * kSd]);
    }
#pragma unroll
    for (int e = 0; e < kVec; ++e) acc[e] = rnd(OP(acc[e], v[e]));  // ATen: acc = op(acc, x) in the dtype
    if (split && phase == 0) continue;  // totals only
    if constexpr (kVec > 1) {
      vec_t r;
#pragma unroll
      for (int e = 0; e < kVec; ++e) r.v[e] = to_storage(acc[e]);
      *reinterpret_cast<vec_t*>(y + k * kInner) = r;
    } else {
      y[k * kInner] = to_storage(acc[0]);
    }
  }
  if constexpr (split) {
    if (phase == 0) {
#pragma unroll
      for (int e = 0; e < kVec; ++e) ws[c * kLines + col + e] = acc[e];
    }
  }
}
