// @brief ChannelsLastVectors and ChannelsLastTiles (Note [Pooling], Note [Pooling channels-last tiles] in
// pool_family.h): channels-last max and avg, kOpw adjacent channels of one output pixel a thread, one (vector)
// load a window cell. ChannelsLastVectors takes pixels in the output's order, channel groups fastest;
// ChannelsLastTiles (kPixelTiles) gives a block kSlices channel groups of kTileH x kTileW output pixels, so that
// the overlapping windows of the block's pixels meet in L1. The window loop is the same.
//
// Compiled by NVRTC after the generated head of pool_codegen.cpp (index_t, storage_t, to_float, to_storage; the
// signature's typed constants in namespace pool, pool_constants; pool_common.cuh, whose first_in, avg_divisor,
// div_rn_n, load_vec, store_vec and ivec_t it uses) and these constants of its own (namespace pool, Note [Device
// constants]):
//   int kOpw                 channels a thread
//   bool kLoadVec            a pixel's kOpw channels are one vector load (the layout allows kOpw > 1)
//   int kGroups              channel groups a pixel (C / kOpw)
//   bool kPixelTiles         ChannelsLastTiles; the constants below are its geometry (PixelTile), 1 without
//   int kSlices              channel groups a block (a power of two dividing kGroups, at most 128 bytes)
//   int kTileW, kTileH       output pixels of a block's tile along a row (knob px) and down the image
//   int kTilesW, kTilesH     tiles along a row (ceil(OW / kTileW)) and down the image (ceil(OH / kTileH))

extern "C" __global__ void __launch_bounds__(pool::kBlock)
cudal1_pool(const storage_t* __restrict__ in, storage_t* __restrict__ out, long long* __restrict__ idx) {
  using namespace pool;
  int c0, ow, oh;
  index_t pix;
  const storage_t* __restrict__ x;
  if constexpr (kPixelTiles) {
    // Block: kSlices channel groups (one 128-byte slice of a pixel where C allows) x kTileH x kTileW output
    // pixels (Note [Pooling channels-last tiles]).
    const int bw = (int)(blockIdx.x % kTilesW), bh = (int)((blockIdx.x / kTilesW) % kTilesH);
    const index_t r1 = blockIdx.x / (kTilesW * kTilesH);
    c0 = (int)((r1 % (kGroups / kSlices)) * kSlices + threadIdx.x % kSlices) * kOpw;
    const index_t n = r1 / (kGroups / kSlices);
    ow = bw * kTileW + (int)(threadIdx.x / kSlices) % kTileW, oh = bh * kTileH + (int)(threadIdx.x / kSlices) / kTileW;
    if (oh >= kOh || ow >= kOw) return;
    pix = (n * kOh + oh) * kOw + ow;
    x = in + n * kSn + c0 * kSc;
  } else {
    const index_t t = (index_t)blockIdx.x * kBlock + threadIdx.x;
    if (t >= kThreads) return;
    c0 = (int)(t % kGroups) * kOpw;
    pix = t / kGroups;
    ow = (int)(pix % kOw);
    oh = (int)((pix / kOw) % kOh);
    x = in + (pix / (kOw * kOh)) * kSn + c0 * kSc;
  }
  const int hs = oh * kDh - kPh, ws = ow * kDw - kPw;
  float acc[kOpw];
  if constexpr (kAvgPool && kLoadVec) {
    // avg, a window wholly in the image (Note [Pooling exact division]): no in-image tests, the interior divisor.
    if (ws >= 0 && hs >= 0 && hs + kKh <= kH && ws + kKw <= kW) {
#pragma unroll
      for (int e = 0; e < kOpw; ++e) acc[e] = 0.f;
#pragma unroll WU
      for (int ij = 0; ij < kKh * kKw; ++ij) {
        float v[kOpw];
        load_vec<kOpw>(x + (index_t)(hs + ij / kKw) * kSh + (index_t)(ws + ij % kKw) * kSw, v);
#pragma unroll
        for (int e = 0; e < kOpw; ++e) acc[e] += v[e];
      }
      div_rn_n<kOpw>(acc, acc, (float)kInnerDiv, 1.f / (float)kInnerDiv);
      store_vec<kOpw>(out + pix * kC + c0, acc);
      return;
    }
  }
  int mi[kOpw];  // with indices: the winners' flat in-plane indices
#pragma unroll
  for (int e = 0; e < kOpw; ++e) {
    acc[e] = kMaxPool ? neg_inf() : 0.f;
    if constexpr (kIndices) mi[e] = kChannelsLast ? 0 : first_in(hs, kDlh) * kW + first_in(ws, kDlw);
  }
#pragma unroll WU
  for (int ij = 0; ij < kKh * kKw; ++ij) {
    const int hh = hs + (ij / kKw) * kDlh, ww = ws + (ij % kKw) * kDlw;
    if ((unsigned)hh < (unsigned)kH && (unsigned)ww < (unsigned)kW) {
      const storage_t* __restrict__ e0 = x + (index_t)hh * kSh + (index_t)ww * kSw;
      float v[kOpw];
      if constexpr (kLoadVec) {
        load_vec<kOpw>(e0, v);
      } else {
#pragma unroll
        for (int e = 0; e < kOpw; ++e) v[e] = to_float(e0[e * kSc]);
      }
#pragma unroll
      for (int e = 0; e < kOpw; ++e) {
        if constexpr (kMaxPool) {
          if (v[e] > acc[e] || v[e] != v[e]) {
            acc[e] = v[e];
            if constexpr (kIndices) mi[e] = hh * kW + ww;
          }
        } else {
          acc[e] += v[e];
        }
      }
    }
  }
  if constexpr (kAvgPool) {
    if (kConstDiv) {
      div_rn_n<kOpw>(acc, acc, (float)kConstDiv, 1.f / (float)kConstDiv);
    } else {
      bool empty;
      const int div = avg_divisor(hs, ws, &empty);
#pragma unroll
      for (int e = 0; e < kOpw; ++e) acc[e] = empty ? 0.f : acc[e] / div;
    }
  }
  const index_t o = pix * kC + c0;
  store_vec<kOpw>(out + o, acc);
  if constexpr (kIndices) {
    ivec_t<kOpw> oi;
#pragma unroll
    for (int e = 0; e < kOpw; ++e) oi.v[e] = mi[e];
    *reinterpret_cast<ivec_t<kOpw>*>(idx + o) = oi;
  }
}
