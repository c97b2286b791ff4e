// @brief ColumnLookback (Note [Scans], "Reaching the memory floor"; reassociated): one launch over tiles of
// 32 x kVec columns x kChunk rows (kWarps warps of kRows rows each). Each tile publishes its column totals as
// 64-bit status words in ws (zeroed before the launch; (1 << 32) | float bits once published) and sums those of
// the chunks before it. Follows scan_common.cuh and its constants:
//   int kRows                        rows a thread holds
//   index_t kChunk, kGroups, kChunks rows of a tile (kWarps x kRows); column groups; chunks along the dimension

extern "C" __global__ void __launch_bounds__(scan::kBlock)
cudal1_scan(const storage_t* __restrict__ in, storage_t* __restrict__ out, float* __restrict__ ws, int phase) {
  using namespace scan;
  // Tile (chunk c, column group g) is blockIdx.x = c * kGroups + g, so a chunk's predecessors have lower block
  // indices and were dispatched first (the same assumption as CUB's single-pass scans): every tile publishes its
  // column totals before it waits, and waits only on lower chunks, so some waited-on tile is always running or done.
  __shared__ float tot[kWarps][32 * kVec], part[kWarps][32 * kVec];
  volatile unsigned long long* st = reinterpret_cast<volatile unsigned long long*>(ws);
  const int tx = threadIdx.x & 31, ty = threadIdx.x >> 5;
  const index_t c = blockIdx.x / kGroups, g = blockIdx.x % kGroups;
  const index_t col = (g * 32 + tx) * kVec;
  const bool live = col < kLines;
  const index_t o = live ? col / kInner : 0, i = live ? col % kInner : 0;
  const storage_t* x = in + in_base(o, i);
  storage_t* y = out + o * kN * kInner + i;
  const index_t lo = c * kChunk + (index_t)ty * kRows;
  float v[kRows][kVec];
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    const index_t k = lo + r;
    if (live && k < kN) {
      if constexpr (kVec > 1) {
        const vec_t t = *reinterpret_cast<const vec_t*>(x + k * kSd);
#pragma unroll
        for (int e = 0; e < kVec; ++e) v[r][e] = to_float(t.v[e]);
      } else {
        v[r][0] = to_float(x[k * kSd]);
      }
    } else {
#pragma unroll
      for (int e = 0; e < kVec; ++e) v[r][e] = ident();
    }
  }
#pragma unroll
  for (int r = 1; r < kRows; ++r)
#pragma unroll
    for (int e = 0; e < kVec; ++e) v[r][e] = OP(v[r - 1][e], v[r][e]);
#pragma unroll
  for (int e = 0; e < kVec; ++e) tot[ty][tx * kVec + e] = v[kRows - 1][e];
  __syncthreads();
  if (ty == 0 && live && c + 1 < kChunks) {  // publish this chunk's column totals
#pragma unroll
    for (int e = 0; e < kVec; ++e) {
      float a = ident();
      for (int w = 0; w < kWarps; ++w) a = OP(a, tot[w][tx * kVec + e]);
      st[c * kLines + col + e] = (1ull << 32) | __float_as_uint(a);
    }
  }
  // Warp w sums the totals of chunks w, w + kWarps, ... below c (a fixed order: the result does not depend on
  // timing).
  float pre[kVec];
#pragma unroll
  for (int e = 0; e < kVec; ++e) pre[e] = ident();
  if (live)
    for (index_t p = ty; p < c; p += kWarps) {
#pragma unroll
      for (int e = 0; e < kVec; ++e) {
        unsigned long long w = st[p * kLines + col + e];
        while ((w >> 32) == 0) {
#if __CUDA_ARCH__ >= 700
          __nanosleep(64);
#endif
          w = st[p * kLines + col + e];
        }
        pre[e] = OP(pre[e], __uint_as_float((unsigned)w));
      }
    }
#pragma unroll
  for (int e = 0; e < kVec; ++e) part[ty][tx * kVec + e] = pre[e];
  __syncthreads();
  // Exclusive prefix of this thread's rows: earlier chunks (warp partials in order), then earlier warps' rows.
#pragma unroll
  for (int e = 0; e < kVec; ++e) {
    float a = ident();
    for (int w = 0; w < kWarps; ++w) a = OP(a, part[w][tx * kVec + e]);
    for (int w = 0; w < ty; ++w) a = OP(a, tot[w][tx * kVec + e]);
    pre[e] = a;
  }
  if (!live) return;
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    const index_t k = lo + r;
    if (k >= kN) break;
    if constexpr (kVec > 1) {
      vec_t t;
#pragma unroll
      for (int e = 0; e < kVec; ++e) t.v[e] = to_storage(OP(pre[e], v[r][e]));
      *reinterpret_cast<vec_t*>(y + k * kInner) = t;
    } else {
      y[k * kInner] = to_storage(OP(pre[0], v[r][0]));
    }
  }
}
