// @brief RowPerBlock (Note [Reductions]): a block per output, its threads striding over the row's vectors. Follows
// reduce_combine.cuh and a constant:
//   index_t kVectors   vectors of a row: kLength / kVec

extern "C" __global__ void __launch_bounds__(reduce::kBlock, reduce::kMinBlocks)
cudal1_reduce(const storage_t* __restrict__ x, out_t* __restrict__ y, long long* __restrict__ yi,
              reduce::acc_t* __restrict__ ws, int phase) {
  using namespace reduce;
  __shared__ acc_t red[32];
  const index_t o = blockIdx.x;
  acc_t a = block_combine(row_range(x, o, 0, kVectors, threadIdx.x, kBlock), red);
  if (threadIdx.x == 0) acc_store(a, y, yi, o);
}
