/// @brief Channels-last pooling kernels (Note [Pooling]): OPW channels of one output pixel per thread, optionally
/// in 2-d pixel tiles (Note [Pooling channels-last tiles]); and ChannelsLastRuns, for avg with stride-1 columns,
/// runs of CPX pixels (Note [Pooling exact division]), whose device code is pool_channels_last_runs.cuh.
#include <ostream>
#include <sstream>

#include "codegen_common.h"
#include "pool_cuda.h"
#include "pool_family.h"

namespace cudal1::optimizer::pool {

int64_t ChannelsLastRuns::threads(const PoolShape& s) const {
  return s.n * s.oh * ((s.ow + cpx - 1) / cpx) * (s.c / opw);
}

void ChannelsLastRuns::source(std::ostream& o, const PoolShape& s) const {
  o << "namespace pool {\n";
  constant(o, "int", "kOpw", opw);
  constant(o, "int", "kCpx", cpx);
  constant(o, "int", "kGroups", s.c / opw);
  constant(o, "int", "kRuns", (s.ow + cpx - 1) / cpx);
  o << "}  // namespace pool\n" << device_sources::kPoolChannelsLastRuns;
}

std::optional<ChannelsLastRuns> channels_last_runs(const PoolKnobs& k) {
  if (k.cpx <= 1 || k.walk) return std::nullopt;
  return ChannelsLastRuns{k.block, k.opw, k.cpx};
}

/// Channels-last output: OPW adjacent channels of one output pixel per thread, one (vector) load per window
/// element.
std::string channels_last_kernel_source(const PoolShape& s, const PoolKnobs& kn) {
  std::ostringstream k;
  k << "#define LOAD_VEC " << (kn.opw > 1 && kn.opw <= s.max_vec) << "\n#define CG (C / OPW)\n#define PX " << kn.px
    << "\n";
  if (kn.px) {
    const PixelTile g = pixel_tile(s, kn);
    k << "#define SG " << g.sg << "\n#define PY " << g.py << "\n#define BTW ((OW + PX - 1) / PX)\n"
      << "#define BTH ((OH + PY - 1) / PY)\n";
  }
  k << R"(extern "C" __global__ void __launch_bounds__(BLOCK)
cudal1_pool(const storage_t* __restrict__ in, storage_t* __restrict__ out, long long* __restrict__ idx) {
#if PX
  // Block: SG channel groups (one 128-byte slice of a pixel where C allows) x PY x PX output pixels, so the
  // overlapping windows of the block's pixels meet in L1 (Note [Pooling channels-last tiles]).
  const int bw = (int)(blockIdx.x % BTW), bh = (int)((blockIdx.x / BTW) % BTH);
  const index_t r1 = blockIdx.x / (BTW * BTH);
  const int c0 = (int)((r1 % (CG / SG)) * SG + threadIdx.x % SG) * OPW;
  const index_t n = r1 / (CG / SG);
  const int ow = bw * PX + (int)(threadIdx.x / SG) % PX, oh = bh * PY + (int)(threadIdx.x / SG) / PX;
  if (oh >= OH || ow >= OW) return;
  const index_t pix = (n * OH + oh) * OW + ow;
  const storage_t* __restrict__ x = in + n * SN + c0 * SC;
#else
  const index_t t = (index_t)blockIdx.x * BLOCK + threadIdx.x;
  if (t >= THREADS) return;
  const int c0 = (int)(t % CG) * OPW;
  const index_t pix = t / CG;
  const int ow = (int)(pix % OW);
  const int oh = (int)((pix / OW) % OH);
  const storage_t* __restrict__ x = in + (pix / (OW * OH)) * SN + c0 * SC;
#endif
  const int hs = oh * DH - PH, ws = ow * DW - PW;
  float acc[OPW];
#if KIND == 1 && LOAD_VEC
  // avg, a window wholly in the image (Note [Pooling exact division]): no in-image tests, the interior divisor.
  if (hs >= 0 && ws >= 0 && hs + KH <= H && ws + KW <= W) {
#pragma unroll
    for (int e = 0; e < OPW; ++e) acc[e] = 0.f;
#pragma unroll WU
    for (int ij = 0; ij < KH * KW; ++ij) {
      float v[OPW];
      load_vec<OPW>(x + (index_t)(hs + ij / KW) * SH + (index_t)(ws + ij % KW) * SW, v);
#pragma unroll
      for (int e = 0; e < OPW; ++e) acc[e] += v[e];
    }
    div_rn_n<OPW>(acc, acc, (float)INNER_DIV, 1.f / (float)INNER_DIV);
    store_vec<OPW>(out + pix * C + c0, acc);
    return;
  }
#endif
#if INDICES
  int mi[OPW];
#endif
#pragma unroll
  for (int e = 0; e < OPW; ++e) {
    acc[e] = KIND == 0 ? NEG_INF : 0.f;
#if INDICES
    mi[e] = CL_INIT_ZERO ? 0 : first_in(hs, DLH) * W + first_in(ws, DLW);
#endif
  }
#pragma unroll WU
  for (int ij = 0; ij < KH * KW; ++ij) {
    const int hh = hs + (ij / KW) * DLH, ww = ws + (ij % KW) * DLW;
    if ((unsigned)hh < (unsigned)H && (unsigned)ww < (unsigned)W) {
      const storage_t* __restrict__ e0 = x + (index_t)hh * SH + (index_t)ww * SW;
      float v[OPW];
#if LOAD_VEC
      load_vec<OPW>(e0, v);
#else
#pragma unroll
      for (int e = 0; e < OPW; ++e) v[e] = to_float(e0[e * SC]);
#endif
#pragma unroll
      for (int e = 0; e < OPW; ++e) {
#if KIND == 0
        if (v[e] > acc[e] || v[e] != v[e]) {
          acc[e] = v[e];
#if INDICES
          mi[e] = hh * W + ww;
#endif
        }
#else
        acc[e] += v[e];
#endif
      }
    }
  }
#if KIND == 1
  if (CONST_DIV) {
    div_rn_n<OPW>(acc, acc, (float)CONST_DIV, 1.f / (float)CONST_DIV);
  } else {
    bool empty;
    const int div = avg_divisor(hs, ws, &empty);
#pragma unroll
    for (int e = 0; e < OPW; ++e) acc[e] = empty ? 0.f : acc[e] / div;
  }
#endif
  const index_t o = pix * C + c0;
  store_vec<OPW>(out + o, acc);
#if INDICES
  ivec_t oi;
#pragma unroll
  for (int e = 0; e < OPW; ++e) oi.v[e] = mi[e];
  *reinterpret_cast<ivec_t*>(idx + o) = oi;
#endif
}
)";
  return k.str();
}

}  // namespace cudal1::optimizer::pool
