// @brief ChannelsLastRuns (Note [Pooling exact division] in pool_family.h, "Channels-last runs"): channels-last
// avg with stride-1 columns. A thread takes kOpw channels of kCpx adjacent output pixels of one row; it loads each
// of the KH x (kCpx + KW - 1) input pixels once (a vector, unpacked once) and adds it to the outputs whose window
// holds it: per output the additions run in ATen's order (rows outer, columns inner), as column j reaches output
// p at window column j - p. Pixels outside the image read +0 (one test per input pixel, not per cell).
//
// Compiled by NVRTC after the generated head of pool_codegen.cpp (index_t, storage_t, to_float, to_storage; the
// signature's typed constants in namespace pool, pool_constants; pool_common.cuh, whose load_vec, avg_divisor,
// div_rn_n and store_vec it calls) and these constants of its own (namespace pool, Note [Device constants]):
//   int kOpw                 channels a thread (one 16-byte vector)
//   int kCpx                 adjacent output pixels a thread
//   int kGroups              channel vectors a pixel (C / kOpw)
//   int kRuns                runs of kCpx pixels a row (ceil(OW / kCpx))

extern "C" __global__ void __launch_bounds__(pool::kBlock)
cudal1_pool(const storage_t* __restrict__ in, storage_t* __restrict__ out, long long* __restrict__ idx) {
  using namespace pool;
  const index_t t = (index_t)blockIdx.x * kBlock + threadIdx.x;
  if (t >= kThreads) return;
  const int c0 = (int)(t % kGroups) * kOpw;
  const index_t run = t / kGroups;  // run of kCpx pixels: (n, oh, ow0)
  const int ow0 = (int)(run % kRuns) * kCpx;
  const int oh = (int)((run / kRuns) % kOh);
  const index_t n = run / ((index_t)kRuns * kOh);
  const storage_t* __restrict__ x = in + n * kSn + c0 * kSc;
  storage_t* __restrict__ y = out + ((n * kOh + oh) * kOw + ow0) * kC + c0;
  const int hs = oh * kDh - kPh, ws0 = ow0 - kPw;  // the column stride is 1
  float acc[kCpx][kOpw];
#pragma unroll
  for (int p = 0; p < kCpx; ++p)
#pragma unroll
    for (int e = 0; e < kOpw; ++e) acc[p][e] = 0.f;
  // Cells outside the image read +0, which adds nothing (Note [Pooling exact division], "zero fill").
#pragma unroll
  for (int i = 0; i < kKh; ++i) {
    const bool rok = (unsigned)(hs + i) < (unsigned)kH;
#pragma unroll
    for (int j = 0; j < kCpx + kKw - 1; ++j) {
      float v[kOpw];
      load_vec<kOpw>(x + (index_t)(hs + i) * kSh + (index_t)(ws0 + j) * kSw, v,
                     rok && (unsigned)(ws0 + j) < (unsigned)kW);
#pragma unroll
      for (int p = 0; p < kCpx; ++p)
        if (j - p >= 0 && j - p < kKw) {
#pragma unroll
          for (int e = 0; e < kOpw; ++e) acc[p][e] += v[e];
        }
    }
  }
#pragma unroll
  for (int p = 0; p < kCpx; ++p) {
    if (ow0 + p >= kOw) break;
    const int ws = ws0 + p;
    if (kConstDiv) {
      div_rn_n<kOpw>(acc[p], acc[p], (float)kConstDiv, 1.f / (float)kConstDiv);
    } else if (hs >= 0 && hs + kKh <= kH && ws >= 0 && ws + kKw <= kW) {
      div_rn_n<kOpw>(acc[p], acc[p], (float)kInnerDiv, 1.f / (float)kInnerDiv);
    } else {
      bool empty;
      const int div = avg_divisor(hs, ws, &empty);
#pragma unroll
      for (int e = 0; e < kOpw; ++e) acc[p][e] = empty ? 0.f : acc[p][e] / div;
    }
    store_vec<kOpw>(y + p * kC, acc[p]);
  }
}
