/// @brief Channels-last avg_pool2d walking down the image (knob walk, Note [Pooling channels-last walk]): a thread
/// takes OPW channels of CPX adjacent output columns and walks WALK output rows, loading each input row of its
/// columns once.
#include <algorithm>
#include <sstream>

#include "codegen_common.h"
#include "pool_family.h"

namespace cudal1::optimizer::pool {
namespace {

/// The kernel after its macros (CPX, WALK, RC, NSEG, OWR, WPV, MINB): see Note [Pooling channels-last walk].
constexpr const char* kWalk = R"(// The OPW channels of one pixel as raw 32-bit words (16-bit pairs stay packed until use).
struct __align__(OPW * sizeof(storage_t)) wv_t { unsigned x[WPV]; };
__device__ __forceinline__ void unpack_words(const wv_t& w, float* v) {
#pragma unroll
  for (int e = 0; e < WPV; ++e) {
#if STORAGE_BITS == 16
    unpack2(w.x[e], v[2 * e], v[2 * e + 1]);
#else
    v[e] = __uint_as_float(w.x[e]);
#endif
  }
}
extern "C" __global__ void __launch_bounds__(BLOCK, MINB)
cudal1_pool(const storage_t* __restrict__ in, storage_t* __restrict__ out, long long* __restrict__ idx) {
  // 32-bit decomposition: THREADS < 2^31 (the planner declines larger outputs).
  const unsigned t = blockIdx.x * BLOCK + threadIdx.x;
  if (t >= (unsigned)THREADS) return;
  const int c0 = (int)(t % CG) * OPW;
  const unsigned run = t / CG;
  const int ow0 = (int)(run % OWR) * CPX;
  const int oh0 = (int)((run / OWR) % NSEG) * WALK;
  const int n = (int)(run / (OWR * NSEG));
  const int hs0 = oh0 - PH, ws0 = ow0 - PW;  // DH and DW are 1
  // One 64-bit base each; loads and stores are at whole rows and pixels from it (compile-time pixel offsets;
  // rows and columns outside the image are never read through it).
  const storage_t* __restrict__ x = in + ((index_t)n * SN + (index_t)c0 * SC + (index_t)hs0 * SH + (index_t)ws0 * SW);
  storage_t* __restrict__ y = out + ((((index_t)n * OH + oh0) * OW + ow0) * C + c0);
  bool cok[RC];
#pragma unroll
  for (int j = 0; j < RC; ++j) cok[j] = (unsigned)(ws0 + j) < (unsigned)W;
  // Per output column: the window lies within the image's columns (the interior divisor applies if its rows do).
  bool cin[CPX];
#pragma unroll
  for (int p = 0; p < CPX; ++p) cin[p] = ws0 + p >= 0 && ws0 + p + KW <= W;
  const bool call = ws0 >= 0 && ws0 + RC <= W;  // every column of the run's windows in the image
  // The walk's output rows (the image's last walk may have fewer than WALK) and the input rows they read.
  const int nout = min(WALK, OH - oh0), rows = nout + KH - 1;
  // Row i of the walk (input row hs0 + i): words of its RC pixels, +0 outside the image or past the walk.
  auto load_row = [&](int i, wv_t* r) {
    const bool rok = i < rows && (unsigned)(hs0 + i) < (unsigned)H;
    if (rok && call) {
#pragma unroll
      for (int j = 0; j < RC; ++j) r[j] = *reinterpret_cast<const wv_t*>(x + ((index_t)i * SH + (index_t)j * SW));
    } else {
#pragma unroll
      for (int j = 0; j < RC; ++j) {
        wv_t w = {};
        if (rok && cok[j]) w = *reinterpret_cast<const wv_t*>(x + ((index_t)i * SH + (index_t)j * SW));
        r[j] = w;
      }
    }
  };
  // acc[o % KH]: output row oh0 + o, which input rows o .. o + KH - 1 of the walk reach. A slot is set from +0
  // by its output's first row and stored after its last.
  float acc[KH][CPX][OPW];
#pragma unroll
  for (int a = 0; a < KH; ++a)
#pragma unroll
    for (int p = 0; p < CPX; ++p)
#pragma unroll
      for (int e = 0; e < OPW; ++e) acc[a][p][e] = 0.f;
  // Input row i, i % KH == phase (compile-time wherever this is called): window row r <= rmax of output i - r
  // (slot (phase - r) mod KH), window column j - p of output column p.
#if SEP
  // Note [Pooling separable sums]: the row's KW-cell sum of each output column once, then added to the KH
  // output rows that hold it (set by the first).
  auto add_row = [&](int phase, int rmax, const wv_t* cur) {
    float h[CPX][OPW];
#pragma unroll
    for (int j = 0; j < RC; ++j) {
      float v[OPW];
      unpack_words(cur[j], v);
#pragma unroll
      for (int p = 0; p < CPX; ++p) {
        if (j - p < 0 || j - p >= KW) continue;
#pragma unroll
        for (int e = 0; e < OPW; ++e) h[p][e] = j == p ? v[e] : h[p][e] + v[e];
      }
    }
#pragma unroll
    for (int r = 0; r < KH; ++r) {
      if (r > rmax) continue;
#pragma unroll
      for (int p = 0; p < CPX; ++p) {
        float* a = acc[(phase - r + KH) % KH][p];
#pragma unroll
        for (int e = 0; e < OPW; ++e) a[e] = r == 0 ? h[p][e] : a[e] + h[p][e];
      }
    }
  };
#else
  // Per output, rows arrive in order and columns left to right: ATen's order.
  auto add_row = [&](int phase, int rmax, const wv_t* cur) {
#pragma unroll
    for (int j = 0; j < RC; ++j) {
      float v[OPW];
      unpack_words(cur[j], v);
#pragma unroll
      for (int r = 0; r < KH; ++r) {
        if (r > rmax) continue;
#pragma unroll
        for (int p = 0; p < CPX; ++p) {
          if (j - p < 0 || j - p >= KW) continue;
          float* a = acc[(phase - r + KH) % KH][p];
#pragma unroll
          for (int e = 0; e < OPW; ++e) a[e] = (r == 0 && j == p) ? 0.f + v[e] : a[e] + v[e];
        }
      }
    }
  };
#endif
  // Output o (its last row added) from slot `slot`: ATen's divisor, stored as OPW-channel vectors.
  auto finish = [&](int o, int slot) {
    const int hs = hs0 + o;
    const bool rin = hs >= 0 && hs + KH <= H;
#pragma unroll
    for (int p = 0; p < CPX; ++p) {
      if (ow0 + p >= OW) break;
      float* a = acc[slot][p];
      float d = (float)INNER_DIV, rd = 1.f / (float)INNER_DIV;
      if (CONST_DIV) {
        d = (float)CONST_DIV, rd = 1.f / (float)CONST_DIV;
      } else if (!(rin && cin[p])) {
        // A border window: ATen's divisor at run time. An empty window (none for the arguments ATen accepts)
        // sums +0 cells only, and +0 / 1 is ATen's 0.
        bool empty;
        const int di = avg_divisor(hs, ws0 + p, &empty);
        d = empty ? 1.f : (float)di;
        rd = __frcp_rn(d);
      }
#if SEP
#pragma unroll
      for (int e = 0; e < OPW; ++e) a[e] *= rd;  // Note [Pooling separable sums]: within an ulp of s / d
#else
      div_rn_n<OPW>(a, a, d, rd);
#endif
      store_vec<OPW>(y + ((index_t)o * OW + p) * C, a);
    }
  };
  wv_t nxt[RC];
  load_row(0, nxt);
  // Rows 0 .. KH - 2 only start outputs (none before the walk is touched), ...
#pragma unroll
  for (int i = 0; i < KH - 1; ++i) {
    wv_t cur[RC];
#pragma unroll
    for (int j = 0; j < RC; ++j) cur[j] = nxt[j];
    load_row(i + 1, nxt);  // one row ahead
    add_row(i, i, cur);
  }
  // ... then steps of KH rows, unrolled KH times so that every slot is a compile-time register (the code of KH
  // rows, not of the whole walk): row i0 + q finishes output i0 + q - KH + 1, in slot q. Only the last step may
  // run past the walk's rows (loaded as +0; the outputs they start are never stored).
#pragma unroll 1
  for (int i0 = KH - 1; i0 < rows; i0 += KH) {
#pragma unroll
    for (int q = 0; q < KH; ++q) {
      wv_t cur[RC];
#pragma unroll
      for (int j = 0; j < RC; ++j) cur[j] = nxt[j];
      load_row(i0 + q + 1, nxt);
      add_row((KH - 1 + q) % KH, KH - 1, cur);
      const int o = i0 + q - (KH - 1);
      if (o < nout) finish(o, q);
    }
  }
}
)";

}  // namespace

int walk_rows(const PoolShape& s, const PoolKnobs& k) { return k.walk * s.kh; }

int walk_registers(const PoolShape& s, const PoolKnobs& k) {
  const int rc = k.cpx + s.kw - 1;
  const int wpv = k.opw * elem_size(s.dtype) / 4;
  return s.kh * k.cpx * k.opw + 2 * rc * wpv;  // the accumulators, the current and the next row's words
}

std::string walk_kernel_source(const PoolShape& s, const PoolKnobs& k) {
  std::ostringstream o;
  o << "#define CG (C / OPW)\n#define CPX " << k.cpx << "\n#define WALK " << walk_rows(s, k)
    << "\n#define RC (CPX + KW - 1)\n#define NSEG ((OH + WALK - 1) / WALK)\n#define OWR ((OW + CPX - 1) / CPX)"
    << "\n#define WPV (OPW * STORAGE_BITS / 32)\n#define SEP " << k.sep
    << "\n#define MINB " << std::max(1, 65536 / (k.block * 128)) << "\n"
    << kWalk;
  return o.str();
}

}  // namespace cudal1::optimizer::pool
