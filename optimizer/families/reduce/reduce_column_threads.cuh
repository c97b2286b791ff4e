// @brief ColumnThreads (Note [Reductions]): thread (tx, ty) owns outputs c * kVec ... c * kVec + kVec - 1 (kept
// dims contiguous: one vector load a row) and reduces r = r0 + ty, r0 + ty + kThreadsPerColumn, ... of chunk
// blockIdx.y; the kThreadsPerColumn partials of a column meet in shared memory; with kSplits > 1 the chunks meet in
// phase 1 (ws[kSplits][kOutputs], column_second_pass). Follows reduce_combine.cuh and its constants:
//   int kThreadsPerColumn    threads that share a column vector (ty)
//   int kColumnsPerBlock     column vectors a block: kBlock / kThreadsPerColumn (tx)
//   index_t kChunk           reduced elements a chunk (the last may be shorter)

extern "C" __global__ void __launch_bounds__(reduce::kBlock, reduce::kMinBlocks)
cudal1_reduce(const storage_t* __restrict__ x, out_t* __restrict__ y, long long* __restrict__ yi,
              reduce::acc_t* __restrict__ ws, int phase) {
  using namespace reduce;
  if (phase == 1) return column_second_pass(ws, y, yi);
  const int tx = threadIdx.x % kColumnsPerBlock, ty = threadIdx.x / kColumnsPerBlock;
  const index_t c = (index_t)blockIdx.x * kColumnsPerBlock + tx;
  const bool live = c < kOutputs / kVec;
  const index_t r0 = (index_t)blockIdx.y * kChunk, r1 = r0 + kChunk < kLength ? r0 + kChunk : kLength;
  acc_t a[kVec];
#pragma unroll
  for (int e = 0; e < kVec; ++e) a[e] = acc_init();
  if (live) {
    const index_t base = kept_off(c * kVec);
#pragma unroll 4
    for (index_t r = r0 + ty; r < r1; r += kThreadsPerColumn) {
      const vec_t t = *reinterpret_cast<const vec_t*>(x + base + red_off(r));
#pragma unroll
      for (int e = 0; e < kVec; ++e) acc_push(a[e], to_float(t.v[e]), r);
    }
  }
  if constexpr (kThreadsPerColumn > 1) {
    __shared__ acc_t part[kBlock * kVec];
#pragma unroll
    for (int e = 0; e < kVec; ++e) part[threadIdx.x * kVec + e] = a[e];
    __syncthreads();
    if (ty == 0) {
      for (int k = 1; k < kThreadsPerColumn; ++k) {
#pragma unroll
        for (int e = 0; e < kVec; ++e) a[e] = acc_combine(a[e], part[(k * kColumnsPerBlock + tx) * kVec + e]);
      }
    }
  }
  if (ty == 0 && live) {
#pragma unroll
    for (int e = 0; e < kVec; ++e) {
      const index_t o = c * kVec + e;
      if (kSplits == 1) acc_store(a[e], y, yi, o);
      else ws[(index_t)blockIdx.y * kOutputs + o] = a[e];
    }
  }
}
