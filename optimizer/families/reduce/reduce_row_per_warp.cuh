// @brief RowPerWarp (Note [Reductions]): a warp per output, its lanes striding over the row's vectors. Follows
// reduce_combine.cuh and a constant:
//   index_t kVectors   vectors of a row: kLength / kVec

extern "C" __global__ void __launch_bounds__(reduce::kBlock, reduce::kMinBlocks)
cudal1_reduce(const storage_t* __restrict__ x, out_t* __restrict__ y, long long* __restrict__ yi,
              reduce::acc_t* __restrict__ ws, int phase) {
  using namespace reduce;
  const int lane = threadIdx.x % 32;
  const index_t o = (index_t)blockIdx.x * (kBlock / 32) + threadIdx.x / 32;
  acc_t a = acc_init();
  if (o < kOutputs) a = row_range(x, o, 0, kVectors, lane, 32);
  a = warp_combine(a);
  if (o < kOutputs && lane == 0) acc_store(a, y, yi, o);
}
