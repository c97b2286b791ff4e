// @brief RegisterTiles (Note [Pooling] in pool_family.h): NCHW max, avg and adaptive avg, a tile of kOph x kOpw
// outputs of one plane a thread. Tiled max/avg read each input cell of the tile's patch once into registers
// (kPatch), straight from global memory.
//
// Compiled by NVRTC after the generated head of pool_codegen.cpp (index_t, storage_t, to_float, to_storage; the
// signature's typed constants in namespace pool, pool_constants; pool_common.cuh, whose max_window, avg_window,
// store_vec and ivec_t it uses) and these constants of its own (namespace pool, Note [Device constants]):
//   int kOpw, kOph           outputs a thread along a row, output rows a thread
//   int kTilesW, kTilesH     tiles a plane's row (ceil(OW / kOpw)), tile rows a plane (ceil(OH / kOph))
//   bool kPatch              max/avg with more than one output a thread: windows read the patch
//   int kPatchRows           input rows of a tile's patch ((kOph - 1) DH + (KH - 1) DLH + 1)
//   int kPatchCols           input columns of a tile's patch ((kOpw - 1) DW + (KW - 1) DLW + 1)
//   bool kStoreVec           each tile row stored as one vector (kOpw > 1 dividing OW)

extern "C" __global__ void __launch_bounds__(pool::kBlock)
cudal1_pool(const storage_t* __restrict__ in, storage_t* __restrict__ out, long long* __restrict__ idx) {
  using namespace pool;
  const index_t t = (index_t)blockIdx.x * kBlock + threadIdx.x;
  if (t >= kThreads) return;
  const int tw = (int)(t % kTilesW);
  const index_t r1 = t / kTilesW;
  const int th = (int)(r1 % kTilesH);
  const index_t plane = r1 / kTilesH;
  const storage_t* __restrict__ x = in + (plane / kC) * kSn + (plane % kC) * kSc;
  const int oh0 = th * kOph, ow0 = tw * kOpw;
  float res[kOph][kOpw];
  int ri[kOph][kOpw];  // with indices: the winners' flat in-plane indices
  bool rok[kPatchRows], cok[kPatchCols];
  float p[kPatchRows][kPatchCols];  // cells no window reads are dead after unrolling
  if constexpr (kPatch) {
    const int h0 = oh0 * kDh - kPh, w0 = ow0 * kDw - kPw;
#pragma unroll
    for (int r = 0; r < kPatchRows; ++r) rok[r] = (unsigned)(h0 + r) < (unsigned)kH;
#pragma unroll
    for (int c = 0; c < kPatchCols; ++c) cok[c] = (unsigned)(w0 + c) < (unsigned)kW;
#pragma unroll
    for (int r = 0; r < kPatchRows; ++r)
#pragma unroll
      for (int c = 0; c < kPatchCols; ++c)
        p[r][c] = (rok[r] && cok[c]) ? to_float(x[(index_t)(h0 + r) * kSh + (index_t)(w0 + c) * kSw]) : 0.f;
  }
#pragma unroll
  for (int a = 0; a < kOph; ++a)
#pragma unroll
    for (int b = 0; b < kOpw; ++b) {
      if constexpr (kAdaptivePool) {
        const int oh = oh0 + a, ow = ow0 + b;
        const int ih0 = (oh * kH) / kOh, ih1 = ((oh + 1) * kH + kOh - 1) / kOh;
        const int iw0 = (ow * kW) / kOw, iw1 = ((ow + 1) * kW + kOw - 1) / kOw;
        float sum = 0.f;
        for (int hh = ih0; hh < ih1; ++hh)
          for (int ww = iw0; ww < iw1; ++ww) sum += to_float(x[(index_t)hh * kSh + (index_t)ww * kSw]);
        res[a][b] = sum / (ih1 - ih0) / (iw1 - iw0);
      } else {
        const int hs = (oh0 + a) * kDh - kPh, ws = (ow0 + b) * kDw - kPw;
        auto get = [&](int i, int j) {
          if constexpr (kPatch)
            return p[a * kDh + i * kDlh][b * kDw + j * kDlw];
          else
            return to_float(x[(index_t)(hs + i * kDlh) * kSh + (index_t)(ws + j * kDlw) * kSw]);
        };
        auto ok = [&](int i, int j) {
          if constexpr (kPatch)
            return rok[a * kDh + i * kDlh] && cok[b * kDw + j * kDlw];
          else
            return (unsigned)(hs + i * kDlh) < (unsigned)kH && (unsigned)(ws + j * kDlw) < (unsigned)kW;
        };
        if constexpr (kMaxPool)
          max_window(hs, ws, get, ok, res[a][b], kIndices ? &ri[a][b] : nullptr);
        else
          res[a][b] = avg_window<kPatch>(hs, ws, get, ok);  // patch cells outside the image hold +0
      }
    }
  storage_t* __restrict__ y = out + plane * (index_t)(kOh * kOw);
  long long* __restrict__ yi = idx + plane * (index_t)(kOh * kOw);
#pragma unroll
  for (int a = 0; a < kOph; ++a) {
    const int oh = oh0 + a;
    if (oh >= kOh) break;
    if constexpr (kStoreVec) {
      store_vec<kOpw>(y + oh * kOw + ow0, res[a]);
      if constexpr (kIndices) {
        ivec_t<kOpw> oi;
#pragma unroll
        for (int b = 0; b < kOpw; ++b) oi.v[b] = ri[a][b];
        *reinterpret_cast<ivec_t<kOpw>*>(yi + oh * kOw + ow0) = oi;
      }
    } else {
#pragma unroll
      for (int b = 0; b < kOpw; ++b) {
        if (ow0 + b >= kOw) break;
        y[oh * kOw + ow0 + b] = to_storage(res[a][b]);
        if constexpr (kIndices) yi[oh * kOw + ow0 + b] = ri[a][b];
      }
    }
  }
}
