// @brief AdaptiveStaging (Note [Pooling adaptive staging] in pool_adaptive.cpp): adaptive avg with uniform windows
// over a dense NCHW input. A block stages the contiguous inputs of its output rows in shared memory with 16-byte
// loads, then each thread sums windows from there in ATen's order.
//
// Compiled by NVRTC after the generated head of pool_codegen.cpp (index_t, storage_t, to_float, to_storage; the
// signature's typed constants in namespace pool, pool_constants; pool_common.cuh) and these constants of its own
// (namespace pool, Note [Device constants]):
//   int kWinH, kWinW         a window's rows and columns (H / OH, W / OW)
//   int kRowElems            input elements of one output row (kWinH x W)
//   int kBlockRows           output rows a block (a multiple of the rows that make whole 16-byte vectors)
//   int kVecElems            elements of a 16-byte vector
//   int kChunk               input elements a block stages (kBlockRows x kRowElems)
//   int kLoads               16-byte loads a thread issues (ceil(kChunk / kVecElems / kBlock))
//   index_t kOutRows         (plane, output row) pairs of the output
//   index_t kTotal           input elements

extern "C" __global__ void __launch_bounds__(pool::kBlock)
cudal1_pool(const storage_t* __restrict__ in, storage_t* __restrict__ out, long long* __restrict__ idx) {
  using namespace pool;
  // Block b: output rows [b * kBlockRows, b * kBlockRows + kBlockRows) of the flat (plane, output row) order,
  // whose inputs are the contiguous kChunk elements from b * kBlockRows * kRowElems (a multiple of kVecElems:
  // 16-byte aligned with the tensor).
  __shared__ __align__(16) storage_t tile[kChunk];
  const index_t r0 = (index_t)blockIdx.x * kBlockRows;
  const storage_t* __restrict__ x = in + r0 * kRowElems;
  const index_t left = kTotal - r0 * kRowElems;  // elements from x to the tensor's end
  struct __align__(16) v16_t { unsigned u[4]; };
  // Every load first (predicated, in flight together), then the shared-memory stores; a vector past the
  // tensor's end (the last block, where kTotal is not a multiple of kVecElems) is copied element by element.
  v16_t buf[kLoads];
#pragma unroll
  for (int k = 0; k < kLoads; ++k) {
    const int v = k * kBlock + threadIdx.x;
    if (v < kChunk / kVecElems && (index_t)v * kVecElems + kVecElems <= left)
      buf[k] = *reinterpret_cast<const v16_t*>(x + (index_t)v * kVecElems);
  }
#pragma unroll
  for (int k = 0; k < kLoads; ++k) {
    const int v = k * kBlock + threadIdx.x;
    if (v >= kChunk / kVecElems) break;
    const index_t e = (index_t)v * kVecElems;
    if (e + kVecElems <= left) {
      *reinterpret_cast<v16_t*>(tile + v * kVecElems) = buf[k];
    } else {
#pragma unroll
      for (int j = 0; j < kVecElems; ++j)
        if (e + j < left) tile[v * kVecElems + j] = x[e + j];
    }
  }
  __syncthreads();
  // Output o of the block: row o / kOw, column o % kOw; the output is dense, so consecutive threads store
  // consecutive elements. ATen's sum (rows outer, columns inner, from +0) and its two divisions.
  storage_t* __restrict__ y = out + r0 * kOw;
  const int outs = (int)min((index_t)kBlockRows, kOutRows - r0) * kOw;
  for (int o = threadIdx.x; o < outs; o += kBlock) {
    const storage_t* __restrict__ p = tile + (o / kOw) * kRowElems + (o % kOw) * kWinW;
    float sum = 0.f;
#pragma unroll
    for (int i = 0; i < kWinH; ++i)
#pragma unroll
      for (int j = 0; j < kWinW; ++j) sum += to_float(p[i * kW + j]);
    y[o] = to_storage(sum / kWinH / kWinW);
  }
}
