// @brief SplitRow (Note [Reductions]): each row in kSplits chunks of kChunk vectors, in two launches. Phase 0: block
// blk reduces chunk blk % kSplits of row blk / kSplits into ws[blk]; phase 1: block o merges row o's chunks in
// that order. Follows reduce_combine.cuh and its constants:
//   index_t kVectors   vectors of a row: kLength / kVec
//   index_t kChunk     vectors of a chunk (the last may be shorter)

extern "C" __global__ void __launch_bounds__(reduce::kBlock, reduce::kMinBlocks)
cudal1_reduce(const storage_t* __restrict__ x, out_t* __restrict__ y, long long* __restrict__ yi,
              reduce::acc_t* __restrict__ ws, int phase) {
  using namespace reduce;
  __shared__ acc_t red[32];
  if (phase == 0) {
    const index_t blk = blockIdx.x, o = blk / kSplits, j0 = (blk % kSplits) * kChunk,
                  j1 = j0 + kChunk < kVectors ? j0 + kChunk : kVectors;
    const acc_t a = block_combine(row_range(x, o, j0, j1, threadIdx.x, kBlock), red);
    if (threadIdx.x == 0) ws[blk] = a;
    return;
  }
  const index_t o = blockIdx.x;
  acc_t a = acc_init();
  for (index_t t = threadIdx.x; t < kSplits; t += kBlock) a = acc_combine(a, ws[o * kSplits + t]);
  a = block_combine(a, red);
  if (threadIdx.x == 0) acc_store(a, y, yi, o);
}
