/// @brief Sliding-window pooling kernels for NCHW max/avg with stride-1 overlapping windows (Note [Pooling
/// slide]): each thread owns VEC adjacent columns of one plane and walks down a segment of output rows.
#include <algorithm>
#include <sstream>

#include "codegen_common.h"
#include "pool_family.h"

namespace cudal1::optimizer::pool {

SlideGeometry slide_geometry(const PoolShape& s, const PoolKnobs& k) {
  SlideGeometry g;
  if (k.slide <= 0) return g;
  g.chunks = (std::max(s.w, s.ow) + k.slide - 1) / k.slide;
  g.seg = k.seg > 0 ? std::min<int64_t>(k.seg, s.oh) : s.oh;
  g.segments = (s.oh + g.seg - 1) / g.seg;
  const int64_t row = k.slide + s.kw - 1;  // columns of one window row: left halo, own VEC, right halo
  // max keeps the KH row summaries (value, and index when asked) plus the current row; avg the KH raw rows.
  g.ring = s.kind == PoolKind::kMax ? int64_t{s.kh} * k.slide * (s.indices ? 2 : 1) + row : int64_t{s.kh} * row;
  return g;
}

bool slide_fits(const PoolShape& s, int vec) {
  if (s.channels_last || s.kind == PoolKind::kAdaptiveAvg) return false;
  if (s.dh != 1 || s.dw != 1 || s.dil_h != 1 || s.dil_w != 1 || (s.kh == 1 && s.kw == 1)) return false;
  if (s.sw != 1 || s.w % vec != 0 || s.pw > vec || s.kw - 1 - s.pw > vec) return false;
  // Every row's chunk must start on a vec boundary (the data pointer's alignment is checked at the launch).
  if ((s.h > 1 && s.sh % vec) || (s.c > 1 && s.sc % vec) || (s.n > 1 && s.sn % vec)) return false;
  PoolKnobs k;
  k.slide = vec;
  return slide_geometry(s, k).ring <= kMaxPatch;
}

std::string slide_kernel_source(const PoolShape& s, const PoolKnobs& kn) {
  const SlideGeometry g = slide_geometry(s, kn);
  std::ostringstream k;
  k << "#define VEC " << kn.slide << "\n#define SEG " << g.seg << "\n#define NSEG " << g.segments << "\n#define CW "
    << g.chunks << "\n#define PWR (KW - 1 - PW)\n#define RC (VEC + KW - 1)\n#define STORE_VEC "
    << (s.ow % kn.slide == 0) << "\n";
  // Rows loaded ahead, and the loop's unroll: max keeps 4 and KH (measured); avg unrolls a multiple of both KH
  // and PFD so that neither the window ring nor the prefetch ring is moved (Note [Pooling exact division]).
  const int pfd = s.kind == PoolKind::kAvg && s.kh >= 3 ? s.kh : 4;
  k << "#define PFD " << pfd << "\n#define UNROLL_ROWS " << (s.kind == PoolKind::kAvg ? pfd : s.kh) << "\n";
  k << R"(// Out-of-image cells hold FILL: -Inf never replaces a maximum (as skipping it), -0 leaves every sum unchanged.
#define FILL (KIND == 0 ? NEG_INF : -0.f)
#define NL(n) ((n) > 0 ? (n) : 1)
// A chunk as 32-bit words (16-bit pairs stay packed until used: no per-element register moves).
#define LW (VEC * (int)sizeof(storage_t) / 4)
struct __align__(VEC * sizeof(storage_t)) lvec_t { unsigned w[LW]; };
__device__ __forceinline__ void lvec_floats(const lvec_t& l, float* v) {
#pragma unroll
  for (int i = 0; i < LW; ++i) {
#if STORAGE_BITS == 32
    v[i] = __uint_as_float(l.w[i]);
#else
    unpack2(l.w[i], v[2 * i], v[2 * i + 1]);
#endif
  }
}
static constexpr int RING_UNROLL = UNROLL_ROWS;  // a #pragma unroll takes no macro
struct __align__(16) ll2_t { long long x, y; };
struct __align__(16) sv4_t { float v[4]; };
struct __align__(16) si4_t { int v[4]; };
// ATen's step: the running maximum m takes u when u is greater or NaN. As a selection ("the last NaN, else the
// first maximum") it is associative, so contiguous parts of a window may be combined first, in order.
__device__ __forceinline__ float combine_max(float m, float u) { return (u > m || u != u) ? u : m; }
// One input row of this thread: its own VEC columns, and for lane 0 / lane 31 the halo columns that the
// neighbouring warp holds (other lanes take theirs from their neighbours by shuffles).
struct row_t { lvec_t v; storage_t l[NL(PW)], r[NL(PWR)]; };
__device__ __forceinline__ void load_row(const storage_t* __restrict__ x, int ih, int c0, bool active, int lane, row_t& o) {
#pragma unroll
  for (int i = 0; i < LW; ++i) o.v.w[i] = 0;
#pragma unroll
  for (int j = 0; j < NL(PW); ++j) o.l[j] = 0;
#pragma unroll
  for (int j = 0; j < NL(PWR); ++j) o.r[j] = 0;
  if (!active || (unsigned)ih >= (unsigned)H) return;
  const storage_t* __restrict__ row = x + (index_t)ih * SH;
  if (c0 < W) o.v = *reinterpret_cast<const lvec_t*>(row + c0);
  if (lane == 0) {
#pragma unroll
    for (int j = 0; j < PW; ++j)
      if ((unsigned)(c0 - PW + j) < (unsigned)W) o.l[j] = row[c0 - PW + j];
  }
  if (lane == 31) {
#pragma unroll
    for (int j = 0; j < PWR; ++j)
      if ((unsigned)(c0 + VEC + j) < (unsigned)W) o.r[j] = row[c0 + VEC + j];
  }
}

// Thread t: chunk t % CW (columns [VEC*cx, VEC*cx + VEC)) of segment (t / CW) % NSEG (output rows
// [SEG*sg, SEG*sg + SEG)) of plane t / CW / NSEG. Consecutive lanes hold consecutive chunks of one row; where a
// neighbouring lane holds another row, plane, or no work at all, the halo column it would supply lies outside
// the image and is masked. Every lane runs the same SEG + KH - 1 iterations (shuffles need all 32 lanes):
// threads past the work and rows past the image load nothing and store nothing.
extern "C" __global__ void __launch_bounds__(BLOCK)
cudal1_pool(const storage_t* __restrict__ in, storage_t* __restrict__ out, long long* __restrict__ idx) {
  const index_t t = (index_t)blockIdx.x * BLOCK + threadIdx.x;
  const bool active = t < THREADS;
  const int lane = threadIdx.x & 31;
  const int c0 = (int)(t % CW) * VEC;
  const index_t r1 = t / CW;
  const int oh_begin = (int)(r1 % NSEG) * SEG;
  const index_t plane = active ? r1 / NSEG : 0;
  const storage_t* __restrict__ x = in + (plane / C) * SN + (plane % C) * SC;
  const int ihb = oh_begin - PH;  // input row of the walk's first iteration
#if !STORE_VEC
  __shared__ __align__(16) float st_v[BLOCK / 32][32 * VEC];  // per warp: the row's outputs, lane-major
#if INDICES
  __shared__ __align__(16) int st_i[BLOCK / 32][32 * VEC];
#endif
  __shared__ int st_o[BLOCK / 32][32], st_n[BLOCK / 32][32];  // per lane: first output's offset, outputs to store
#endif
  bool cok[RC];  // window-row column q is image column c0 - PW + q
#pragma unroll
  for (int q = 0; q < RC; ++q) cok[q] = (unsigned)(c0 - PW + q) < (unsigned)W;
  row_t pre[PFD];  // the next PFD input rows, loaded ahead
#pragma unroll
  for (int p = 0; p < PFD; ++p) load_row(x, ihb + p, c0, active, lane, pre[p]);
  // The ring: entry i holds input row ih - (KH - 1) + i of the current iteration (entry KH - 1 the newest).
#if KIND == 0
  float rm[KH][VEC];  // per input row of the window: the row's maximum over each output's KW columns ...
#if INDICES
  int ri[KH][VEC];    // ... and its flat in-plane index
#endif
#pragma unroll
  for (int i = 0; i < KH; ++i)
#pragma unroll
    for (int e = 0; e < VEC; ++e) {
      rm[i][e] = NEG_INF;
#if INDICES
      ri[i][e] = 0;
#endif
    }
#else
  float rw[KH][RC];   // the window's input rows
#pragma unroll
  for (int i = 0; i < KH; ++i)
#pragma unroll
    for (int q = 0; q < RC; ++q) rw[i][q] = FILL;
#endif
#pragma unroll RING_UNROLL  // renames the ring's registers instead of moving them
  for (int r = 0; r < SEG + KH - 1; ++r) {
    const int ih = ihb + r;
    const bool rok = active && (unsigned)ih < (unsigned)H;
    float v[VEC], lh[NL(PW)], rh[NL(PWR)];
    lvec_floats(pre[0].v, v);
#pragma unroll
    for (int j = 0; j < PW; ++j) lh[j] = __shfl_up_sync(0xffffffffu, v[VEC - PW + j], 1);
#pragma unroll
    for (int j = 0; j < PWR; ++j) rh[j] = __shfl_down_sync(0xffffffffu, v[j], 1);
    if (lane == 0) {
#pragma unroll
      for (int j = 0; j < PW; ++j) lh[j] = to_float(pre[0].l[j]);
    }
    if (lane == 31) {
#pragma unroll
      for (int j = 0; j < PWR; ++j) rh[j] = to_float(pre[0].r[j]);
    }
#pragma unroll
    for (int p = 0; p + 1 < PFD; ++p) pre[p] = pre[p + 1];
    load_row(x, ih + PFD, c0, active && r + PFD < SEG + KH - 1, lane, pre[PFD - 1]);
    float win[RC];
#if KIND == 0
#pragma unroll
    for (int j = 0; j < PW; ++j) win[j] = rok && cok[j] ? lh[j] : FILL;
#pragma unroll
    for (int e = 0; e < VEC; ++e) win[PW + e] = rok && cok[PW + e] ? v[e] : FILL;
#pragma unroll
    for (int j = 0; j < PWR; ++j) win[PW + VEC + j] = rok && cok[PW + VEC + j] ? rh[j] : FILL;
#else
    // avg (Note [Pooling exact division], "zero fill"): rows outside the image and chunks past W were loaded
    // as +0, by this lane and by a neighbour on the same row alike; only a halo column outside the image (whose
    // neighbour may hold another row or plane) is masked, and +0 there equals skipping it.
    (void)rok;
#pragma unroll
    for (int j = 0; j < PW; ++j) win[j] = cok[j] ? lh[j] : 0.f;
#pragma unroll
    for (int e = 0; e < VEC; ++e) win[PW + e] = v[e];
#pragma unroll
    for (int j = 0; j < PWR; ++j) win[PW + VEC + j] = cok[PW + VEC + j] ? rh[j] : 0.f;
#endif
#if KIND == 0
    // Row summaries in ATen's scan order (Note [Pooling slide]: combining them row by row gives ATen's result).
#pragma unroll
    for (int i = 0; i + 1 < KH; ++i)
#pragma unroll
      for (int e = 0; e < VEC; ++e) {
        rm[i][e] = rm[i + 1][e];
#if INDICES
        ri[i][e] = ri[i + 1][e];
#endif
      }
#if INDICES
#pragma unroll
    for (int e = 0; e < VEC; ++e) {
      float m = NEG_INF;
      int mi = 0;
#pragma unroll
      for (int j = 0; j < KW; ++j) {
        const float u = win[e + j];
        if (u > m || u != u) { m = u; mi = j; }
      }
      rm[KH - 1][e] = m;
      ri[KH - 1][e] = (rok ? ih : 0) * W + c0 - PW + e + mi;  // used only where m > -Inf or NaN: rok
    }
#else
    // Values only (Note [Pooling slide], "fewer combines"): neighbouring outputs share the pairs' maxima.
#if KW >= 2
    float hp[RC - 1];
#pragma unroll
    for (int j = 0; j + 1 < RC; ++j) hp[j] = combine_max(win[j], win[j + 1]);
#endif
#pragma unroll
    for (int e = 0; e < VEC; ++e) {
#if KW >= 2
      float m = hp[e];
      int j = 2;
#pragma unroll
      for (; j + 1 < KW; j += 2) m = combine_max(m, hp[e + j]);
#else
      float m = win[e];
      int j = 1;
#endif
      if (j < KW) m = combine_max(m, win[e + j]);
      rm[KH - 1][e] = m;
    }
#endif
#else
#pragma unroll
    for (int i = 0; i + 1 < KH; ++i)
#pragma unroll
      for (int q = 0; q < RC; ++q) rw[i][q] = rw[i + 1][q];
#pragma unroll
    for (int q = 0; q < RC; ++q) rw[KH - 1][q] = win[q];
#endif
    const int oh = oh_begin + r - (KH - 1);
    if (r < KH - 1) continue;  // warp-uniform: the ring is still filling
    const bool valid = active && oh < OH;
    float res[VEC];
#if INDICES
    int rid[VEC];
#endif
#pragma unroll
    for (int e = 0; e < VEC; ++e) {
      const int hs = oh - PH, ws = c0 + e - PW;
#if KIND == 0 && INDICES
      float m = NEG_INF;
      int mi = max(hs, 0) * W + max(ws, 0);  // ATen's start: the window's first in-image position
#pragma unroll
      for (int i = 0; i < KH; ++i) {
        const float u = rm[i][e];
        if (u > m || u != u) {
          m = u;
          mi = ri[i][e];
        }
      }
      res[e] = m;
      rid[e] = mi;
#elif KIND == 0
      (void)hs;
      (void)ws;
      float m = rm[0][e];  // what the first combine with the starting -Inf gives
#pragma unroll
      for (int i = 1; i < KH; ++i) m = combine_max(m, rm[i][e]);
      res[e] = m;
#else
      (void)hs;
      (void)ws;
      float sum = 0.f;
#pragma unroll
      for (int i = 0; i < KH; ++i)
#pragma unroll
        for (int j = 0; j < KW; ++j) sum += rw[i][e + j];
      res[e] = sum;
#endif
    }
#if KIND == 1
    // ATen's divisor (Note [Pooling exact division]): the signature's constant one, else the interior one where
    // all VEC windows lie in the image, else per window (no window of a stride-1 walk is empty).
    if (CONST_DIV) {
      div_rn_n<VEC>(res, res, (float)CONST_DIV, 1.f / (float)CONST_DIV);
    } else if (oh - PH >= 0 && oh - PH + KH <= H && c0 - PW >= 0 && c0 + VEC - 1 - PW + KW <= W) {
      div_rn_n<VEC>(res, res, (float)INNER_DIV, 1.f / (float)INNER_DIV);
    } else {
#pragma unroll
      for (int e = 0; e < VEC; ++e) res[e] = avg_result(res[e], oh - PH, c0 + e - PW);
    }
#endif
#if STORE_VEC
    const index_t o = plane * (index_t)OH * OW + (index_t)oh * OW + c0;
    if (valid && c0 < OW) {
      store_vec<VEC>(out + o, res);
#if INDICES
#pragma unroll
      for (int e = 0; e < VEC; e += 2) {
        ll2_t p;
        p.x = rid[e];
        p.y = rid[e + 1];
        *reinterpret_cast<ll2_t*>(idx + o + e) = p;
      }
#endif
    }
#else
    // Rows not a whole number of vectors: the warp's VEC x 32 outputs go through shared memory so that store
    // e of lane L writes slot 32e + L (chunk (32e + L) / VEC, element (32e + L) % VEC): consecutive lanes write
    // consecutive addresses wherever their chunks share a row, whole 32-byte sectors instead of VEC-strided
    // scalars. Every lane takes part (counts of 0 where it has nothing to store).
    const int wp = threadIdx.x >> 5;
#pragma unroll
    for (int h = 0; h < VEC; h += 4) {
      sv4_t sv;
#pragma unroll
      for (int e = 0; e < 4; ++e) sv.v[e] = res[h + e];
      *reinterpret_cast<sv4_t*>(&st_v[wp][lane * VEC + h]) = sv;
#if INDICES
      si4_t si;
#pragma unroll
      for (int e = 0; e < 4; ++e) si.v[e] = rid[h + e];
      *reinterpret_cast<si4_t*>(&st_i[wp][lane * VEC + h]) = si;
#endif
    }
    const int n = valid ? max(0, min(VEC, OW - c0)) : 0;
    st_n[wp][lane] = n;
    st_o[wp][lane] = n ? (int)(plane * OH * OW + oh * OW + c0) : 0;  // < N*C*OH*OW < 2^31
    __syncwarp();
#pragma unroll
    for (int e = 0; e < VEC; ++e) {
      const int slot = e * 32 + lane, src = slot / VEC, q = slot % VEC;
      if (q < st_n[wp][src]) {
        out[st_o[wp][src] + q] = to_storage(st_v[wp][slot]);
#if INDICES
        idx[st_o[wp][src] + q] = st_i[wp][slot];
#endif
      }
    }
    __syncwarp();  // the buffers are rewritten by the next row
#endif
  }
}
)";
  return k.str();
}

}  // namespace cudal1::optimizer::pool
