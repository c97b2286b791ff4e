// @brief RegisterTiles and SharedTiles (Note [Pooling], Note [Pooling smem] in pool_family.h): NCHW max, avg and
// adaptive avg, a tile of kOph x kOpw outputs of one plane a thread. Tiled max/avg read each input cell of the
// tile's patch once into registers (kPatch): SharedTiles from the block's input rectangle, which its threads first
// stage in shared memory (kStaged), RegisterTiles straight from global memory; the window loops are the same.
//
// Compiled by NVRTC after the generated head of pool_codegen.cpp (index_t, storage_t, to_float, to_storage; the
// signature's typed constants in namespace pool, pool_constants; pool_common.cuh, whose max_window, avg_window,
// store_vec and ivec_t it uses) and these constants of its own (namespace pool, Note [Device constants]):
//   int kOpw, kOph           outputs a thread along a row, output rows a thread
//   int kTilesW, kTilesH     tiles a plane's row (ceil(OW / kOpw)), tile rows a plane (ceil(OH / kOph))
//   bool kPatch              max/avg with more than one output a thread, or staged: windows read the patch
//   int kPatchRows           input rows of a tile's patch ((kOph - 1) DH + (KH - 1) DLH + 1)
//   int kPatchCols           input columns of a tile's patch ((kOpw - 1) DW + (KW - 1) DLW + 1)
//   bool kStoreVec           each tile row stored as one vector (kOpw > 1 dividing OW)
//   bool kStaged             SharedTiles; the constants below are its geometry (SmemTile), 1 for RegisterTiles
//   int kBx, kBy             threads of a block along a row and down the plane (kBx x kBy = kBlock)
//   int kBlockTilesW         blocks a plane's row (ceil(kTilesW / kBx))
//   int kBlockTilesH         block rows a plane (ceil(kTilesH / kBy))
//   int kTileRows, kTileCols the block's input rectangle
//   int kPitch               floats a row of it takes in shared memory (>= kTileCols, a multiple of kVec)
//   int kVec                 floats of one shared-memory patch read
//   int kPatchVecs           kVec-float reads a patch row (ceil(kPatchCols / kVec))

namespace pool {

struct __align__(kVec * sizeof(float)) svec_t { float v[kVec]; };

}  // namespace pool

extern "C" __global__ void __launch_bounds__(pool::kBlock)
cudal1_pool(const storage_t* __restrict__ in, storage_t* __restrict__ out, long long* __restrict__ idx) {
  using namespace pool;
  __shared__ __align__(16) float tile[kStaged ? kTileRows * kPitch : 1];
  index_t plane;
  const storage_t* __restrict__ x;
  int oh0, ow0, ty, tx;
  if constexpr (kStaged) {
    // Block (bh, bw) of a plane: kBy x kBx threads, kOph x kOpw outputs each. Every thread helps stage the
    // block's input rectangle (kTileRows x kTileCols of the image, from (h0, w0); padding and the pitch's spare
    // columns hold 0), then reads its patch from shared memory in kVec-float vectors. No thread returns before
    // the barrier.
    plane = blockIdx.x / (kBlockTilesH * kBlockTilesW);
    const int bh = (int)((blockIdx.x / kBlockTilesW) % kBlockTilesH), bw = (int)(blockIdx.x % kBlockTilesW);
    x = in + (plane / kC) * kSn + (plane % kC) * kSc;
    {
      const int h0 = bh * (kBy * kOph * kDh) - kPh, w0 = bw * (kBx * kOpw * kDw) - kPw;
      for (int i = threadIdx.x; i < kTileRows * kPitch; i += kBlock) {
        const int hh = h0 + i / kPitch, c = i % kPitch, ww = w0 + c;
        tile[i] = c < kTileCols && (unsigned)hh < (unsigned)kH && (unsigned)ww < (unsigned)kW
                      ? to_float(x[(index_t)hh * kSh + (index_t)ww * kSw]) : 0.f;
      }
    }
    __syncthreads();
    ty = threadIdx.x / kBx, tx = threadIdx.x % kBx;
    oh0 = (bh * kBy + ty) * kOph, ow0 = (bw * kBx + tx) * kOpw;
    if (oh0 >= kOh || ow0 >= kOw) return;
  } else {
    const index_t t = (index_t)blockIdx.x * kBlock + threadIdx.x;
    if (t >= kThreads) return;
    const int tw = (int)(t % kTilesW);
    const index_t r1 = t / kTilesW;
    const int th = (int)(r1 % kTilesH);
    plane = r1 / kTilesH;
    x = in + (plane / kC) * kSn + (plane % kC) * kSc;
    oh0 = th * kOph, ow0 = tw * kOpw;
  }
  float res[kOph][kOpw];
  int ri[kOph][kOpw];  // with indices: the winners' flat in-plane indices
  bool rok[kPatchRows], cok[kPatchCols];
  float p[kPatchRows][kStaged ? kPatchVecs * kVec : kPatchCols];  // cells no window reads are dead after unrolling
  if constexpr (kPatch) {
    const int h0 = oh0 * kDh - kPh, w0 = ow0 * kDw - kPw;
#pragma unroll
    for (int r = 0; r < kPatchRows; ++r) rok[r] = (unsigned)(h0 + r) < (unsigned)kH;
#pragma unroll
    for (int c = 0; c < kPatchCols; ++c) cok[c] = (unsigned)(w0 + c) < (unsigned)kW;
    if constexpr (kStaged) {
      // Patch row r of this thread starts at tile row ty*kOph*DH + r, column tx*kOpw*DW (a multiple of kVec, as
      // is kPitch).
      const float* __restrict__ tp = tile + ty * (kOph * kDh) * kPitch + tx * (kOpw * kDw);
#pragma unroll
      for (int r = 0; r < kPatchRows; ++r)
#pragma unroll
        for (int q = 0; q < kPatchVecs; ++q) {
          const svec_t v = *reinterpret_cast<const svec_t*>(tp + r * kPitch + q * kVec);
#pragma unroll
          for (int e = 0; e < kVec; ++e) p[r][q * kVec + e] = v.v[e];
        }
    } else {
#pragma unroll
      for (int r = 0; r < kPatchRows; ++r)
#pragma unroll
        for (int c = 0; c < kPatchCols; ++c)
          p[r][c] = (rok[r] && cok[c]) ? to_float(x[(index_t)(h0 + r) * kSh + (index_t)(w0 + c) * kSw]) : 0.f;
    }
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
