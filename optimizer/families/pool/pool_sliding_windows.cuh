// @brief SlidingWindows (Note [Pooling slide] in pool_family.h): NCHW max/avg with stride-1 overlapping windows.
// Thread t owns chunk t % kChunks (kVec adjacent columns) of segment (t / kChunks) % kSegments (kSeg output rows)
// of plane t / kChunks / kSegments and walks down it: one vector load an input row, kPrefetch rows ahead, the
// halo columns from the neighbouring lanes.
//
// Compiled by NVRTC after the generated head of pool_codegen.cpp (index_t, storage_t, to_float, to_storage; the
// signature's typed constants in namespace pool, pool_constants; pool_common.cuh, whose unpack2, avg_result,
// div_rn_n and store_vec it calls), the module global RING_UNROLL (the row loop's unroll: a #pragma unroll takes
// a variable, and NVRTC keeps it as a symbol of the cubin) and these constants of its own (namespace pool, Note
// [Device constants]):
//   int kVec                 columns a thread (a chunk)
//   int kSeg                 output rows a segment (the plane's where the knob seg is 0 or not below OH)
//   int kSegments            segments a plane
//   int kChunks              chunks a row (covering max(W, OW))
//   int kRightHalo           columns right of a chunk its windows reach (KW - 1 - PW)
//   int kRunCols             columns of a window row a thread reads (kVec + KW - 1)
//   int kLeftSlots           max(PW, 1), kRightSlots max(kRightHalo, 1): halo arrays that may hold nothing
//   int kWords               32-bit words of a chunk
//   bool kStoreVec           a chunk's outputs stored as one vector (OW a multiple of kVec)
//   int kPrefetch            input rows loaded ahead

namespace pool {

// Out-of-image cells hold fill(): -Inf never replaces a maximum (as skipping it), -0 leaves every sum unchanged.
__device__ __forceinline__ float fill() { return kMaxPool ? neg_inf() : -0.f; }
// A chunk as 32-bit words (16-bit pairs stay packed until used: no per-element register moves).
struct __align__(kVec * sizeof(storage_t)) lvec_t { unsigned w[kWords]; };
__device__ __forceinline__ void lvec_floats(const lvec_t& l, float* v) {
#pragma unroll
  for (int i = 0; i < kWords; ++i) {
    if constexpr (kStorageBits == 32)
      v[i] = __uint_as_float(l.w[i]);
    else
      unpack2(l.w[i], v[2 * i], v[2 * i + 1]);
  }
}
struct __align__(16) ll2_t { long long x, y; };
struct __align__(16) sv4_t { float v[4]; };
struct __align__(16) si4_t { int v[4]; };
// ATen's step: the running maximum m takes u when u is greater or NaN. As a selection ("the last NaN, else the
// first maximum") it is associative, so contiguous parts of a window may be combined first, in order.
__device__ __forceinline__ float combine_max(float m, float u) { return (u > m || u != u) ? u : m; }
// One input row of this thread: its own kVec columns, and for lane 0 / lane 31 the halo columns that the
// neighbouring warp holds (other lanes take theirs from their neighbours by shuffles).
struct row_t { lvec_t v; storage_t l[kLeftSlots], r[kRightSlots]; };
__device__ __forceinline__ void load_row(const storage_t* __restrict__ x, int ih, int c0, bool active, int lane,
                                         row_t& o) {
#pragma unroll
  for (int i = 0; i < kWords; ++i) o.v.w[i] = 0;
#pragma unroll
  for (int j = 0; j < kLeftSlots; ++j) o.l[j] = 0;
#pragma unroll
  for (int j = 0; j < kRightSlots; ++j) o.r[j] = 0;
  if (!active || (unsigned)ih >= (unsigned)kH) return;
  const storage_t* __restrict__ row = x + (index_t)ih * kSh;
  if (c0 < kW) o.v = *reinterpret_cast<const lvec_t*>(row + c0);
  if (lane == 0) {
#pragma unroll
    for (int j = 0; j < kPw; ++j)
      if ((unsigned)(c0 - kPw + j) < (unsigned)kW) o.l[j] = row[c0 - kPw + j];
  }
  if (lane == 31) {
#pragma unroll
    for (int j = 0; j < kRightHalo; ++j)
      if ((unsigned)(c0 + kVec + j) < (unsigned)kW) o.r[j] = row[c0 + kVec + j];
  }
}

}  // namespace pool

// Consecutive lanes hold consecutive chunks of one row; where a neighbouring lane holds another row, plane, or no
// work at all, the halo column it would supply lies outside the image and is masked. Every lane runs the same
// kSeg + KH - 1 iterations (shuffles need all 32 lanes): threads past the work and rows past the image load
// nothing and store nothing.
extern "C" __global__ void __launch_bounds__(pool::kBlock)
cudal1_pool(const storage_t* __restrict__ in, storage_t* __restrict__ out, long long* __restrict__ idx) {
  using namespace pool;
  const index_t t = (index_t)blockIdx.x * kBlock + threadIdx.x;
  const bool active = t < kThreads;
  const int lane = threadIdx.x & 31;
  const int c0 = (int)(t % kChunks) * kVec;
  const index_t r1 = t / kChunks;
  const int oh_begin = (int)(r1 % kSegments) * kSeg;
  const index_t plane = active ? r1 / kSegments : 0;
  const storage_t* __restrict__ x = in + (plane / kC) * kSn + (plane % kC) * kSc;
  const int ihb = oh_begin - kPh;  // input row of the walk's first iteration
  // Without kStoreVec, per warp: the row's outputs, lane-major (and their indices); per lane: the first output's
  // offset and the outputs to store.
  __shared__ __align__(16) float st_v[kBlock / 32][32 * kVec];
  __shared__ __align__(16) int st_i[kBlock / 32][32 * kVec];
  __shared__ int st_o[kBlock / 32][32], st_n[kBlock / 32][32];
  bool cok[kRunCols];  // window-row column q is image column c0 - PW + q
#pragma unroll
  for (int q = 0; q < kRunCols; ++q) cok[q] = (unsigned)(c0 - kPw + q) < (unsigned)kW;
  row_t pre[kPrefetch];  // the next kPrefetch input rows, loaded ahead
#pragma unroll
  for (int p = 0; p < kPrefetch; ++p) load_row(x, ihb + p, c0, active, lane, pre[p]);
  // The ring: entry i holds input row ih - (KH - 1) + i of the current iteration (entry KH - 1 the newest). max
  // keeps per input row of the window the row's maximum over each output's KW columns (rm) and its flat in-plane
  // index (ri, with indices); avg the window's input rows (rw).
  float rm[kKh][kVec];
  int ri[kKh][kVec];
  float rw[kKh][kRunCols];
  if constexpr (kMaxPool) {
#pragma unroll
    for (int i = 0; i < kKh; ++i)
#pragma unroll
      for (int e = 0; e < kVec; ++e) {
        rm[i][e] = neg_inf();
        if constexpr (kIndices) ri[i][e] = 0;
      }
  } else {
#pragma unroll
    for (int i = 0; i < kKh; ++i)
#pragma unroll
      for (int q = 0; q < kRunCols; ++q) rw[i][q] = fill();
  }
#pragma unroll RING_UNROLL  // renames the ring's registers instead of moving them
  for (int r = 0; r < kSeg + kKh - 1; ++r) {
    const int ih = ihb + r;
    const bool rok = active && (unsigned)ih < (unsigned)kH;
    float v[kVec], lh[kLeftSlots], rh[kRightSlots];
    lvec_floats(pre[0].v, v);
#pragma unroll
    for (int j = 0; j < kPw; ++j) lh[j] = __shfl_up_sync(0xffffffffu, v[kVec - kPw + j], 1);
#pragma unroll
    for (int j = 0; j < kRightHalo; ++j) rh[j] = __shfl_down_sync(0xffffffffu, v[j], 1);
    if (lane == 0) {
#pragma unroll
      for (int j = 0; j < kPw; ++j) lh[j] = to_float(pre[0].l[j]);
    }
    if (lane == 31) {
#pragma unroll
      for (int j = 0; j < kRightHalo; ++j) rh[j] = to_float(pre[0].r[j]);
    }
#pragma unroll
    for (int p = 0; p + 1 < kPrefetch; ++p) pre[p] = pre[p + 1];
    load_row(x, ih + kPrefetch, c0, active && r + kPrefetch < kSeg + kKh - 1, lane, pre[kPrefetch - 1]);
    float win[kRunCols];
    if constexpr (kMaxPool) {
#pragma unroll
      for (int j = 0; j < kPw; ++j) win[j] = rok && cok[j] ? lh[j] : fill();
#pragma unroll
      for (int e = 0; e < kVec; ++e) win[kPw + e] = rok && cok[kPw + e] ? v[e] : fill();
#pragma unroll
      for (int j = 0; j < kRightHalo; ++j) win[kPw + kVec + j] = rok && cok[kPw + kVec + j] ? rh[j] : fill();
    } else {
      // avg (Note [Pooling exact division], "zero fill"): rows outside the image and chunks past W were loaded
      // as +0, by this lane and by a neighbour on the same row alike; only a halo column outside the image (whose
      // neighbour may hold another row or plane) is masked, and +0 there equals skipping it.
#pragma unroll
      for (int j = 0; j < kPw; ++j) win[j] = cok[j] ? lh[j] : 0.f;
#pragma unroll
      for (int e = 0; e < kVec; ++e) win[kPw + e] = v[e];
#pragma unroll
      for (int j = 0; j < kRightHalo; ++j) win[kPw + kVec + j] = cok[kPw + kVec + j] ? rh[j] : 0.f;
    }
    if constexpr (kMaxPool) {
      // Row summaries in ATen's scan order (Note [Pooling slide]: combining them row by row gives ATen's result).
#pragma unroll
      for (int i = 0; i + 1 < kKh; ++i)
#pragma unroll
        for (int e = 0; e < kVec; ++e) {
          rm[i][e] = rm[i + 1][e];
          if constexpr (kIndices) ri[i][e] = ri[i + 1][e];
        }
      if constexpr (kIndices) {
#pragma unroll
        for (int e = 0; e < kVec; ++e) {
          float m = neg_inf();
          int mi = 0;
#pragma unroll
          for (int j = 0; j < kKw; ++j) {
            const float u = win[e + j];
            if (u > m || u != u) { m = u; mi = j; }
          }
          rm[kKh - 1][e] = m;
          ri[kKh - 1][e] = (rok ? ih : 0) * kW + c0 - kPw + e + mi;  // used only where m > -Inf or NaN: rok
        }
      } else {
        // Values only (Note [Pooling slide], "fewer combines"): neighbouring outputs share the pairs' maxima.
        float hp[kRunCols - 1];
        if constexpr (kKw >= 2) {
#pragma unroll
          for (int j = 0; j + 1 < kRunCols; ++j) hp[j] = combine_max(win[j], win[j + 1]);
        }
#pragma unroll
        for (int e = 0; e < kVec; ++e) {
          float m;
          int j;
          if constexpr (kKw >= 2) {
            m = hp[e];
            j = 2;
#pragma unroll
            for (; j + 1 < kKw; j += 2) m = combine_max(m, hp[e + j]);
          } else {
            m = win[e];
            j = 1;
          }
          if (j < kKw) m = combine_max(m, win[e + j]);
          rm[kKh - 1][e] = m;
        }
      }
    } else {
#pragma unroll
      for (int i = 0; i + 1 < kKh; ++i)
#pragma unroll
        for (int q = 0; q < kRunCols; ++q) rw[i][q] = rw[i + 1][q];
#pragma unroll
      for (int q = 0; q < kRunCols; ++q) rw[kKh - 1][q] = win[q];
    }
    const int oh = oh_begin + r - (kKh - 1);
    if (r < kKh - 1) continue;  // warp-uniform: the ring is still filling
    const bool valid = active && oh < kOh;
    float res[kVec];
    int rid[kVec];
#pragma unroll
    for (int e = 0; e < kVec; ++e) {
      const int hs = oh - kPh, ws = c0 + e - kPw;
      if constexpr (kMaxPool && kIndices) {
        float m = neg_inf();
        int mi = max(hs, 0) * kW + max(ws, 0);  // ATen's start: the window's first in-image position
#pragma unroll
        for (int i = 0; i < kKh; ++i) {
          const float u = rm[i][e];
          if (u > m || u != u) {
            m = u;
            mi = ri[i][e];
          }
        }
        res[e] = m;
        rid[e] = mi;
      } else if constexpr (kMaxPool) {
        float m = rm[0][e];  // what the first combine with the starting -Inf gives
#pragma unroll
        for (int i = 1; i < kKh; ++i) m = combine_max(m, rm[i][e]);
        res[e] = m;
      } else {
        float sum = 0.f;
#pragma unroll
        for (int i = 0; i < kKh; ++i)
#pragma unroll
          for (int j = 0; j < kKw; ++j) sum += rw[i][e + j];
        res[e] = sum;
      }
    }
    if constexpr (kAvgPool) {
      // ATen's divisor (Note [Pooling exact division]): the signature's constant one, else the interior one where
      // all kVec windows lie in the image, else per window (no window of a stride-1 walk is empty).
      if (kConstDiv) {
        div_rn_n<kVec>(res, res, (float)kConstDiv, 1.f / (float)kConstDiv);
      } else if (oh - kPh >= 0 && oh - kPh + kKh <= kH && c0 - kPw >= 0 && c0 + kVec - 1 - kPw + kKw <= kW) {
        div_rn_n<kVec>(res, res, (float)kInnerDiv, 1.f / (float)kInnerDiv);
      } else {
#pragma unroll
        for (int e = 0; e < kVec; ++e) res[e] = avg_result(res[e], oh - kPh, c0 + e - kPw);
      }
    }
    if constexpr (kStoreVec) {
      const index_t o = plane * (index_t)kOh * kOw + (index_t)oh * kOw + c0;
      if (valid && c0 < kOw) {
        store_vec<kVec>(out + o, res);
        if constexpr (kIndices) {
#pragma unroll
          for (int e = 0; e < kVec; e += 2) {
            ll2_t p;
            p.x = rid[e];
            p.y = rid[e + 1];
            *reinterpret_cast<ll2_t*>(idx + o + e) = p;
          }
        }
      }
    } else {
      // Rows not a whole number of vectors: the warp's kVec x 32 outputs go through shared memory so that store
      // e of lane L writes slot 32e + L (chunk (32e + L) / kVec, element (32e + L) % kVec): consecutive lanes
      // write consecutive addresses wherever their chunks share a row, whole 32-byte sectors instead of
      // kVec-strided scalars. Every lane takes part (counts of 0 where it has nothing to store).
      const int wp = threadIdx.x >> 5;
#pragma unroll
      for (int h = 0; h < kVec; h += 4) {
        sv4_t sv;
#pragma unroll
        for (int e = 0; e < 4; ++e) sv.v[e] = res[h + e];
        *reinterpret_cast<sv4_t*>(&st_v[wp][lane * kVec + h]) = sv;
        if constexpr (kIndices) {
          si4_t si;
#pragma unroll
          for (int e = 0; e < 4; ++e) si.v[e] = rid[h + e];
          *reinterpret_cast<si4_t*>(&st_i[wp][lane * kVec + h]) = si;
        }
      }
      const int n = valid ? max(0, min(kVec, kOw - c0)) : 0;
      st_n[wp][lane] = n;
      st_o[wp][lane] = n ? (int)(plane * kOh * kOw + oh * kOw + c0) : 0;  // < N*C*OH*OW < 2^31
      __syncwarp();
#pragma unroll
      for (int e = 0; e < kVec; ++e) {
        const int slot = e * 32 + lane, src = slot / kVec, q = slot % kVec;
        if (q < st_n[wp][src]) {
          out[st_o[wp][src] + q] = to_storage(st_v[wp][slot]);
          if constexpr (kIndices) idx[st_o[wp][src] + q] = st_i[wp][slot];
        }
      }
      __syncwarp();  // the buffers are rewritten by the next row
    }
  }
}
