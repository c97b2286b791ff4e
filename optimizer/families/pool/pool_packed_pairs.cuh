// @brief PackedPairs (Note [Pooling packed pairs] in pool_pairs.cpp): 16-bit NCHW max_pool2d at column stride 2.
// A lane owns two adjacent outputs of a row and compares both windows' candidates as one 16-bit pair.
//
// Compiled by NVRTC after the generated head of pool_codegen.cpp (index_t, storage_t, to_float, to_storage; the
// signature's typed constants in namespace pool, pool_constants; pool_common.cuh, whose first_in, unpack2 and
// pack2 it calls) and these constants of its own (namespace pool, Note [Device constants]):
//   int kRowsPerSeg          output rows a segment (knob pair)
//   int kLanes               4-column groups a row (W / 4)
//   int kChunks              warps a row (ceil(kLanes / 32))
//   int kSegments            segments a plane (ceil(OH / kRowsPerSeg))
//   int kRows                input rows a segment loads ((kRowsPerSeg - 1) DH + (KH - 1) DLH + 1)
//   bool kNeedLeft           the windows reach the 2-column word left of a lane's own (PW > 0)
//   bool kNeedRight          ... and the word right of it (KW - PW > 2)
//   unsigned kNeg2           a pair of -Inf in the storage type

namespace pool {

__device__ __forceinline__ unsigned prmt(unsigned a, unsigned b, unsigned sel) {
  unsigned d;
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(sel));
  return d;
}
// 0xffff in each half where a > b (ordered: false for NaN), the comparison ATen makes in fp32 (exact widening).
__device__ __forceinline__ unsigned gt_mask(unsigned a, unsigned b) {
  unsigned d;
  if constexpr (!kStorageBf16) {
    asm("set.gt.u32.f16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
  } else {
#if __CUDA_ARCH__ >= 900
    asm("set.gt.u32.bf16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
#else
    float a0, a1, b0, b1;
    unpack2(a, a0, a1);
    unpack2(b, b0, b1);
    d = (a0 > b0 ? 0xffffu : 0u) | (a1 > b1 ? 0xffff0000u : 0u);
#endif
  }
  return d;
}
// 0xffff in each half that is NaN.
__device__ __forceinline__ unsigned nan_mask(unsigned a) {
  unsigned d;
  if constexpr (!kStorageBf16) {
    asm("set.neu.u32.f16x2 %0, %1, %1;" : "=r"(d) : "r"(a));
  } else {
#if __CUDA_ARCH__ >= 900
    asm("set.neu.u32.bf16x2 %0, %1, %1;" : "=r"(d) : "r"(a));
#else
    float a0, a1;
    unpack2(a, a0, a1);
    d = (a0 != a0 ? 0xffffu : 0u) | (a1 != a1 ? 0xffff0000u : 0u);
#endif
  }
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

}  // namespace pool

extern "C" __global__ void __launch_bounds__(pool::kBlock)
cudal1_pool(const storage_t* __restrict__ in, storage_t* __restrict__ out, long long* __restrict__ idx) {
  using namespace pool;
  // Warp (plane, segment, chunk): lane L of chunk c owns input columns 4 jg .. 4 jg + 3 (jg = 32 c + L) and the
  // outputs 2 jg, 2 jg + 1 of the segment's kRowsPerSeg output rows. Whole warps return together (kThreads is a
  // multiple of 32), so every shuffle has all 32 lanes.
  const index_t wid = ((index_t)blockIdx.x * kBlock + threadIdx.x) / 32;
  if (wid >= kThreads / 32) return;
  const int lane = threadIdx.x % 32, chunk = (int)(wid % kChunks);
  const index_t r1 = wid / kChunks;
  const int seg = (int)(r1 % kSegments);
  const index_t plane = r1 / kSegments;
  const int jg = chunk * 32 + lane, j = min(jg, kLanes - 1);  // lanes past the row load lane kLanes - 1's columns
  const storage_t* __restrict__ x = in + (plane / kC) * kSn + (plane % kC) * kSc + 4 * j;
  const int oh0 = seg * kRowsPerSeg, h0 = oh0 * kDh - kPh;
  // Every input row of the segment, loaded before the first window: rows outside the image hold -Inf pairs,
  // which never replace a maximum (as skipping them).
  unsigned wx[kRows], wy[kRows];
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    uint2 v = make_uint2(kNeg2, kNeg2);
    if ((unsigned)(h0 + r) < (unsigned)kH) v = *reinterpret_cast<const uint2*>(x + (index_t)(h0 + r) * kSh);
    wx[r] = v.x;
    wy[r] = v.y;
  }
  // Halo words from the neighbouring lanes; a chunk's edge lanes load theirs; columns outside the image: -Inf.
  // Without a halo on a side its words are -Inf pairs (wl / wr are then never read).
  unsigned wl[kRows], wr[kRows];
  if constexpr (kNeedLeft) {
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      unsigned t = __shfl_up_sync(0xffffffffu, wy[r], 1);
      if (lane == 0) {
        const bool ok = jg > 0 && (unsigned)(h0 + r) < (unsigned)kH;
        t = ok ? *reinterpret_cast<const unsigned*>(x - 2 + (index_t)(h0 + r) * kSh) : kNeg2;
      }
      wl[r] = t;
    }
  }
  if constexpr (kNeedRight) {
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      unsigned t = __shfl_down_sync(0xffffffffu, wx[r], 1);
      if (lane == 31 && jg + 1 < kLanes)
        t = (unsigned)(h0 + r) < (unsigned)kH ? *reinterpret_cast<const unsigned*>(x + 4 + (index_t)(h0 + r) * kSh)
                                              : kNeg2;
      wr[r] = jg + 1 < kLanes ? t : kNeg2;
    }
  }
  storage_t* __restrict__ y = out + plane * (index_t)(kOh * kOw) + 2 * jg;
  long long* __restrict__ yi = idx + plane * (index_t)(kOh * kOw) + 2 * jg;  // kIndices only
  const int wsl = 4 * jg - kPw;  // the low output's window starts at column wsl, the high one's at wsl + 2
  // The first in-image columns of both windows, relative to their starts (ATen's starting index).
  const unsigned rel_cols = (unsigned)(max(wsl, 0) - wsl) | ((unsigned)(max(wsl + 2, 0) - (wsl + 2)) << 16);
#pragma unroll
  for (int t = 0; t < kRowsPerSeg; ++t) {
    const int oh = oh0 + t;
    if (oh >= kOh) break;
    const int hs = oh * kDh - kPh;
    unsigned m = kNeg2;
    unsigned rel = (unsigned)((first_in(hs, kDlh) - hs) * kW) * 0x10001u + rel_cols;
    // ATen's scan (rows outer, columns inner): a candidate replaces the maximum when greater or NaN, for both
    // outputs at once; rel keeps the winner's window-relative index (kh x DLH x W + kw) in each half.
#pragma unroll
    for (int kh = 0; kh < kKh; ++kh)
#pragma unroll
      for (int kw = 0; kw < kKw; ++kw) {
        const int r = t * kDh + kh * kDlh;
        const unsigned cv = cand(kNeedLeft ? wl[r] : (unsigned)kNeg2, wx[r], wy[r],
                                 kNeedRight ? wr[r] : (unsigned)kNeg2, kw - kPw);
        const unsigned sel = gt_mask(cv, m) | nan_mask(cv);
        m = (cv & sel) | (m & ~sel);
        rel = ((unsigned)(kh * kDlh * kW + kw) * 0x10001u & sel) | (rel & ~sel);
      }
    if (jg >= kLanes || 2 * jg >= kOw) continue;
    // ATen stores the fp32 maximum converted back: the same bits, except that a NaN comes out canonical.
    if (nan_mask(m)) {
      float a, b;
      unpack2(m, a, b);
      m = pack2(a, b);
    }
    const int base = hs * kW + wsl;  // the indices (kIndices only)
    const long long i0 = base + (int)(rel & 0xffffu), i1 = base + 2 + (int)(rel >> 16);
    if constexpr (kOw % 2 == 0) {
      *reinterpret_cast<unsigned*>(y + oh * kOw) = m;  // 2 jg + 1 < OW as well
      if constexpr (kIndices) *reinterpret_cast<longlong2*>(yi + oh * kOw) = make_longlong2(i0, i1);
    } else {
      y[oh * kOw] = (storage_t)(m & 0xffffu);
      if constexpr (kIndices) yi[oh * kOw] = i0;
      if (2 * jg + 1 < kOw) {
        y[oh * kOw + 1] = (storage_t)(m >> 16);
        if constexpr (kIndices) yi[oh * kOw + 1] = i1;
      }
    }
  }
}
