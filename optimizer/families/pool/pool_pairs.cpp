/// @brief Packed-pair max pooling for 16-bit NCHW inputs with column stride 2 (Note [Pooling packed pairs]): a lane
/// owns two adjacent outputs of a row and compares both windows' candidates as one 16-bit pair.
#include <algorithm>
#include <sstream>

#include "codegen_common.h"
#include "pool_family.h"

namespace cudal1::optimizer::pool {

/// Note [Pooling packed pairs]
/// Knob pair (RS = 4 or 8 output rows a warp; 0 off). Scope: max_pool2d with or without indices, fp16/bf16, NCHW,
/// column stride 2, no column dilation, unit column stride, W and the row/plane/batch strides multiples of 4 (the
/// data pointer's 8-byte alignment is checked at the launch), PW <= 2, KW - PW <= 4, OW <= W / 2; any rows (KH,
/// DH, PH, dilation, ceil mode). Its own stratum (16).
/// Why (H200; bench/probes/stem_probe.cu k16-k18): the fp16 ResNet stem [64,64,112,112] k3 s2 p1 with indices
/// runs at ~70 us (1.28x the copy) in every tile, walk, staging and load-width variant of pool_family.h, all
/// at ~3.1 TB/s. A flat stream of the same bytes (8-byte loads, one
/// fp16 and one int64 store a thread) ran 60 us, so the bytes allowed more. The register tile makes each output
/// from 9 scalar loads (3 overlapping ones a row, ~58% L1 hits) and ~5 instructions a candidate in fp32.
/// How: lane L of a warp owns input columns 4 jg .. 4 jg + 3 (jg = 32 x chunk + L) and outputs 2 jg, 2 jg + 1 of
/// its segment's RS output rows: one 8-byte load a row (a warp reads whole rows, each once; all the segment's
/// rows, (RS - 1) DH + (KH - 1) DLH + 1, are loaded before the first window), the 2-column halo word on the left
/// (PW > 0) and on the right (KW - PW > 2) from the neighbouring lanes by shuffles, a chunk's edge lanes loading
/// theirs. Window column kw of both outputs is one 16-bit pair (columns 4 jg - PW + kw and 4 jg + 2 - PW + kw: one
/// PRMT of two words), and ATen's step "greater or NaN replaces" is one mask for both outputs (set.gt | set.neu
/// on the pair: the comparison ATen makes in fp32, exact for 16-bit values), which selects the maximum and the
/// window-relative index kh x DLH x W + kw (16 bits a half) by LOP3. The scan is ATen's (rows outer, columns
/// inner); cells outside the image are -Inf pairs (never replace, as skipping them); the index starts at the
/// window's first in-image position (first_in), as ATen's NCHW kernel. Values keep their bits, except that a
/// NaN maximum is converted through fp32 as ATen stores it (canonical NaN). Pairs of fp16 values and 16-byte
/// index pairs are stored as vectors where OW is even, else element by element. bf16 on sm_80 compares through
/// fp32 (set.*.bf16x2 is sm_90+).
/// Instructions: ~5 a candidate for two outputs (2 compares, 3 LOP3) against ~5 for one in the register tile; at
/// row stride 2 a lane's two outputs of a row take 2 new 8-byte loads and 2 shuffles, where the tile's two outputs
/// (a column, two rows) take 15 scalar loads. Registers: the stem at RS 8 keeps 17 rows x 3 words (64 registers,
/// no spills; kMaxPairWords caps the words).
/// Speed: the stem ~58.5 us (pair 4, block 128; 1.06x the copy, 1.07x the floor) against ~70 us for the register
/// tile; every pair variant within 1% of that. The probe's kernels give outputs and indices bit for bit the
/// generator tile's on inputs with NaN, +-Inf, a plane of -Inf, one of NaN and one constant; the GPU sweep
/// (PoolPairs) and the pool fuzz check the generated ones.

PairGeometry pair_geometry(const PoolShape& s, const PoolKnobs& k) {
  PairGeometry g;
  if (k.pair <= 0) return g;
  g.lanes = s.w / 4;
  g.chunks = (g.lanes + 31) / 32;
  g.segments = (s.oh + k.pair - 1) / k.pair;
  g.rows = static_cast<int64_t>(k.pair - 1) * s.dh + static_cast<int64_t>(s.kh - 1) * s.dil_h + 1;
  g.words = g.rows * (2 + (s.pw > 0 ? 1 : 0) + (s.kw - s.pw > 2 ? 1 : 0));
  return g;
}

bool pair_fits(const PoolShape& s) {
  if (s.kind != PoolKind::kMax || s.channels_last || elem_size(s.dtype) != 2) return false;
  if (s.dw != 2 || s.dil_w != 1 || s.sw != 1 || s.w % 4 != 0) return false;
  // A lane's candidates lie in its own 4 columns and at most one 2-column word on each side.
  if (s.pw > 2 || s.kw - s.pw > 4 || s.ow > s.w / 2) return false;
  // Every row's 4-column group starts on 8 bytes (the data pointer's alignment is checked at the launch).
  if ((s.h > 1 && s.sh % 4) || (s.c > 1 && s.sc % 4) || (s.n > 1 && s.sn % 4)) return false;
  // Window-relative indices (the first in-image start included) fit the 16 bits of a pair's half.
  return (static_cast<int64_t>(s.kh - 1) * s.dil_h + s.ph + s.dil_h) * s.w + s.kw < 65536;
}

std::string pair_kernel_source(const PoolShape& s, const PoolKnobs& kn) {
  const PairGeometry g = pair_geometry(s, kn);
  std::ostringstream k;
  k << "#define RS " << kn.pair << "\n#define TWL " << g.lanes << "\n#define CHUNKS " << g.chunks << "\n#define SEGS "
    << g.segments << "\n#define NR " << g.rows << "\n#define NEED_L " << (s.pw > 0) << "\n#define NEED_R "
    << (s.kw - s.pw > 2) << "\n#define NEG2 " << (s.dtype == c10::ScalarType::BFloat16 ? "0xFF80FF80u" : "0xFC00FC00u")
    << "\n";
  k << R"(__device__ __forceinline__ unsigned prmt(unsigned a, unsigned b, unsigned sel) {
  unsigned d;
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(sel));
  return d;
}
// 0xffff in each half where a > b (ordered: false for NaN), the comparison ATen makes in fp32 (exact widening).
__device__ __forceinline__ unsigned gt_mask(unsigned a, unsigned b) {
  unsigned d;
#if !STORAGE_BF16
  asm("set.gt.u32.f16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
#elif __CUDA_ARCH__ >= 900
  asm("set.gt.u32.bf16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
#else
  float a0, a1, b0, b1;
  unpack2(a, a0, a1);
  unpack2(b, b0, b1);
  d = (a0 > b0 ? 0xffffu : 0u) | (a1 > b1 ? 0xffff0000u : 0u);
#endif
  return d;
}
// 0xffff in each half that is NaN.
__device__ __forceinline__ unsigned nan_mask(unsigned a) {
  unsigned d;
#if !STORAGE_BF16
  asm("set.neu.u32.f16x2 %0, %1, %1;" : "=r"(d) : "r"(a));
#elif __CUDA_ARCH__ >= 900
  asm("set.neu.u32.bf16x2 %0, %1, %1;" : "=r"(d) : "r"(a));
#else
  float a0, a1;
  unpack2(a, a0, a1);
  d = (a0 != a0 ? 0xffffu : 0u) | (a1 != a1 ? 0xffff0000u : 0u);
#endif
  return d;
}
// Columns (4 j + o, 4 j + 2 + o) as one pair, o in [-2, 3], from the words l (4 j - 2, 4 j - 1), x (4 j, 4 j + 1),
// y (4 j + 2, 4 j + 3) and r (4 j + 4, 4 j + 5); o is a constant after unrolling.
__device__ __forceinline__ unsigned cand(unsigned l, unsigned x, unsigned y, unsigned r, int o) {
  switch (o) {
    case -2: return prmt(l, x, 0x5410);
    case -1: return prmt(l, x, 0x7632);
    case 0: return prmt(x, y, 0x5410);
    case 1: return prmt(x, y, 0x7632);
    case 2: return prmt(y, r, 0x5410);
    default: return prmt(y, r, 0x7632);
  }
}
extern "C" __global__ void __launch_bounds__(BLOCK)
cudal1_pool(const storage_t* __restrict__ in, storage_t* __restrict__ out, long long* __restrict__ idx) {
  // Warp (plane, segment, chunk): lane L of chunk c owns input columns 4 jg .. 4 jg + 3 (jg = 32 c + L) and the
  // outputs 2 jg, 2 jg + 1 of the segment's RS output rows. Whole warps return together (THREADS is a multiple
  // of 32), so every shuffle has all 32 lanes.
  const index_t wid = ((index_t)blockIdx.x * BLOCK + threadIdx.x) / 32;
  if (wid >= THREADS / 32) return;
  const int lane = threadIdx.x % 32, chunk = (int)(wid % CHUNKS);
  const index_t r1 = wid / CHUNKS;
  const int seg = (int)(r1 % SEGS);
  const index_t plane = r1 / SEGS;
  const int jg = chunk * 32 + lane, j = min(jg, TWL - 1);  // lanes past the row load lane TWL - 1's columns
  const storage_t* __restrict__ x = in + (plane / C) * SN + (plane % C) * SC + 4 * j;
  const int oh0 = seg * RS, h0 = oh0 * DH - PH;
  // Every input row of the segment, loaded before the first window: rows outside the image hold -Inf pairs,
  // which never replace a maximum (as skipping them).
  unsigned wx[NR], wy[NR];
#pragma unroll
  for (int r = 0; r < NR; ++r) {
    uint2 v = make_uint2(NEG2, NEG2);
    if ((unsigned)(h0 + r) < (unsigned)H) v = *reinterpret_cast<const uint2*>(x + (index_t)(h0 + r) * SH);
    wx[r] = v.x;
    wy[r] = v.y;
  }
  // Halo words from the neighbouring lanes; a chunk's edge lanes load theirs; columns outside the image: -Inf.
#if NEED_L
  unsigned wl[NR];
#pragma unroll
  for (int r = 0; r < NR; ++r) {
    unsigned t = __shfl_up_sync(0xffffffffu, wy[r], 1);
    if (lane == 0) {
      const bool ok = jg > 0 && (unsigned)(h0 + r) < (unsigned)H;
      t = ok ? *reinterpret_cast<const unsigned*>(x - 2 + (index_t)(h0 + r) * SH) : NEG2;
    }
    wl[r] = t;
  }
#define WL(r) wl[r]
#else
#define WL(r) NEG2
#endif
#if NEED_R
  unsigned wr[NR];
#pragma unroll
  for (int r = 0; r < NR; ++r) {
    unsigned t = __shfl_down_sync(0xffffffffu, wx[r], 1);
    if (lane == 31 && jg + 1 < TWL)
      t = (unsigned)(h0 + r) < (unsigned)H ? *reinterpret_cast<const unsigned*>(x + 4 + (index_t)(h0 + r) * SH) : NEG2;
    wr[r] = jg + 1 < TWL ? t : NEG2;
  }
#define WR(r) wr[r]
#else
#define WR(r) NEG2
#endif
  storage_t* __restrict__ y = out + plane * (index_t)(OH * OW) + 2 * jg;
#if INDICES
  long long* __restrict__ yi = idx + plane * (index_t)(OH * OW) + 2 * jg;
#endif
  const int wsl = 4 * jg - PW;  // the low output's window starts at column wsl, the high one's at wsl + 2
  // The first in-image columns of both windows, relative to their starts (ATen's starting index).
  const unsigned rel_cols = (unsigned)(max(wsl, 0) - wsl) | ((unsigned)(max(wsl + 2, 0) - (wsl + 2)) << 16);
#pragma unroll
  for (int t = 0; t < RS; ++t) {
    const int oh = oh0 + t;
    if (oh >= OH) break;
    const int hs = oh * DH - PH;
    unsigned m = NEG2;
    unsigned rel = (unsigned)((first_in(hs, DLH) - hs) * W) * 0x10001u + rel_cols;
    // ATen's scan (rows outer, columns inner): a candidate replaces the maximum when greater or NaN, for both
    // outputs at once; rel keeps the winner's window-relative index (kh x DLH x W + kw) in each half.
#pragma unroll
    for (int kh = 0; kh < KH; ++kh)
#pragma unroll
      for (int kw = 0; kw < KW; ++kw) {
        const int r = t * DH + kh * DLH;
        const unsigned cv = cand(WL(r), wx[r], wy[r], WR(r), kw - PW);
        const unsigned sel = gt_mask(cv, m) | nan_mask(cv);
        m = (cv & sel) | (m & ~sel);
        rel = ((unsigned)(kh * DLH * W + kw) * 0x10001u & sel) | (rel & ~sel);
      }
    if (jg >= TWL || 2 * jg >= OW) continue;
    // ATen stores the fp32 maximum converted back: the same bits, except that a NaN comes out canonical.
    if (nan_mask(m)) {
      float a, b;
      unpack2(m, a, b);
      m = pack2(a, b);
    }
#if INDICES
    const int base = hs * W + wsl;
    const long long i0 = base + (int)(rel & 0xffffu), i1 = base + 2 + (int)(rel >> 16);
#endif
#if OW % 2 == 0
    *reinterpret_cast<unsigned*>(y + oh * OW) = m;  // 2 jg + 1 < OW as well
#if INDICES
    *reinterpret_cast<longlong2*>(yi + oh * OW) = make_longlong2(i0, i1);
#endif
#else
    y[oh * OW] = (storage_t)(m & 0xffffu);
#if INDICES
    yi[oh * OW] = i0;
#endif
    if (2 * jg + 1 < OW) {
      y[oh * OW + 1] = (storage_t)(m >> 16);
#if INDICES
      yi[oh * OW + 1] = i1;
#endif
    }
#endif
  }
}
)";
  return k.str();
}

}  // namespace cudal1::optimizer::pool
