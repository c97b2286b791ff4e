// @brief ChannelsLastWalk (Note [Pooling channels-last walk] in pool_walk.cpp; Note [Pooling separable sums] for
// kSeparable): channels-last avg_pool2d, stride 1 both ways. A thread takes kOpw channels of kCpx adjacent output
// columns and walks kWalkRows output rows, loading each input row of its columns once.
//
// Compiled by NVRTC after the generated head of pool_codegen.cpp (index_t, storage_t, to_float, to_storage; the
// signature's typed constants in namespace pool, pool_constants; pool_common.cuh, whose unpack2, avg_divisor,
// div_rn_n and store_vec it calls) and these constants of its own (namespace pool, Note [Device constants]):
//   int kOpw                 channels a thread (one vector)
//   int kCpx                 adjacent output columns a thread
//   int kWalkRows            output rows a walk (walk x KH)
//   int kGroups              channel vectors a pixel (C / kOpw)
//   int kRunCols             input columns a thread's windows reach (kCpx + KW - 1)
//   int kWalks               walks down the image (ceil(OH / kWalkRows))
//   int kRuns                runs of kCpx columns a row (ceil(OW / kCpx))
//   int kWords               32-bit words of a kOpw-channel vector
//   int kMinBlocks           the launch bounds' blocks an SM (registers capped at 128)
//   bool kSeparable          row sums, then column sums, times 1 / d (not ATen's order)

namespace pool {

// The kOpw channels of one pixel as raw 32-bit words (16-bit pairs stay packed until use).
struct __align__(kOpw * sizeof(storage_t)) wv_t { unsigned x[kWords]; };
__device__ __forceinline__ void unpack_words(const wv_t& w, float* v) {
#pragma unroll
  for (int e = 0; e < kWords; ++e) {
    if constexpr (kStorageBits == 16)
      unpack2(w.x[e], v[2 * e], v[2 * e + 1]);
    else
      v[e] = __uint_as_float(w.x[e]);
  }
}

}  // namespace pool

extern "C" __global__ void __launch_bounds__(pool::kBlock, pool::kMinBlocks)
cudal1_pool(const storage_t* __restrict__ in, storage_t* __restrict__ out, long long* __restrict__ idx) {
  using namespace pool;
  // 32-bit decomposition: kThreads < 2^31 (the planner declines larger outputs).
  const unsigned t = blockIdx.x * kBlock + threadIdx.x;
  if (t >= (unsigned)kThreads) return;
  const int c0 = (int)(t % kGroups) * kOpw;
  const unsigned run = t / kGroups;
  const int ow0 = (int)(run % kRuns) * kCpx;
  const int oh0 = (int)((run / kRuns) % kWalks) * kWalkRows;
  const int n = (int)(run / (kRuns * kWalks));
  const int hs0 = oh0 - kPh, ws0 = ow0 - kPw;  // the strides are 1
  // One 64-bit base each; loads and stores are at whole rows and pixels from it (compile-time pixel offsets;
  // rows and columns outside the image are never read through it).
  const storage_t* __restrict__ x =
      in + ((index_t)n * kSn + (index_t)c0 * kSc + (index_t)hs0 * kSh + (index_t)ws0 * kSw);
  storage_t* __restrict__ y = out + ((((index_t)n * kOh + oh0) * kOw + ow0) * kC + c0);
  bool cok[kRunCols];
#pragma unroll
  for (int j = 0; j < kRunCols; ++j) cok[j] = (unsigned)(ws0 + j) < (unsigned)kW;
  // Per output column: the window lies within the image's columns (the interior divisor applies if its rows do).
  bool cin[kCpx];
#pragma unroll
  for (int p = 0; p < kCpx; ++p) cin[p] = ws0 + p >= 0 && ws0 + p + kKw <= kW;
  const bool call = ws0 >= 0 && ws0 + kRunCols <= kW;  // every column of the run's windows in the image
  // The walk's output rows (the image's last walk may have fewer than kWalkRows) and the input rows they read.
  const int nout = min(kWalkRows, kOh - oh0), rows = nout + kKh - 1;
  // Row i of the walk (input row hs0 + i): words of its kRunCols pixels, +0 outside the image or past the walk.
  auto load_row = [&](int i, wv_t* r) {
    const bool rok = i < rows && (unsigned)(hs0 + i) < (unsigned)kH;
    if (rok && call) {
#pragma unroll
      for (int j = 0; j < kRunCols; ++j)
        r[j] = *reinterpret_cast<const wv_t*>(x + ((index_t)i * kSh + (index_t)j * kSw));
    } else {
#pragma unroll
      for (int j = 0; j < kRunCols; ++j) {
        wv_t w = {};
        if (rok && cok[j]) w = *reinterpret_cast<const wv_t*>(x + ((index_t)i * kSh + (index_t)j * kSw));
        r[j] = w;
      }
    }
  };
  // acc[o % KH]: output row oh0 + o, which input rows o .. o + KH - 1 of the walk reach. A slot is set from +0
  // by its output's first row and stored after its last.
  float acc[kKh][kCpx][kOpw];
#pragma unroll
  for (int a = 0; a < kKh; ++a)
#pragma unroll
    for (int p = 0; p < kCpx; ++p)
#pragma unroll
      for (int e = 0; e < kOpw; ++e) acc[a][p][e] = 0.f;
  // Input row i, i % KH == phase (compile-time wherever this is called): window row r <= rmax of output i - r
  // (slot (phase - r) mod KH), window column j - p of output column p.
  auto add_row = [&](int phase, int rmax, const wv_t* cur) {
    if constexpr (kSeparable) {
      // Note [Pooling separable sums]: the row's KW-cell sum of each output column once, then added to the KH
      // output rows that hold it (set by the first).
      float h[kCpx][kOpw];
#pragma unroll
      for (int j = 0; j < kRunCols; ++j) {
        float v[kOpw];
        unpack_words(cur[j], v);
#pragma unroll
        for (int p = 0; p < kCpx; ++p) {
          if (j - p < 0 || j - p >= kKw) continue;
#pragma unroll
          for (int e = 0; e < kOpw; ++e) h[p][e] = j == p ? v[e] : h[p][e] + v[e];
        }
      }
#pragma unroll
      for (int r = 0; r < kKh; ++r) {
        if (r > rmax) continue;
#pragma unroll
        for (int p = 0; p < kCpx; ++p) {
          float* a = acc[(phase - r + kKh) % kKh][p];
#pragma unroll
          for (int e = 0; e < kOpw; ++e) a[e] = r == 0 ? h[p][e] : a[e] + h[p][e];
        }
      }
    } else {
      // Per output, rows arrive in order and columns left to right: ATen's order.
#pragma unroll
      for (int j = 0; j < kRunCols; ++j) {
        float v[kOpw];
        unpack_words(cur[j], v);
#pragma unroll
        for (int r = 0; r < kKh; ++r) {
          if (r > rmax) continue;
#pragma unroll
          for (int p = 0; p < kCpx; ++p) {
            if (j - p < 0 || j - p >= kKw) continue;
            float* a = acc[(phase - r + kKh) % kKh][p];
#pragma unroll
            for (int e = 0; e < kOpw; ++e) a[e] = (r == 0 && j == p) ? 0.f + v[e] : a[e] + v[e];
          }
        }
      }
    }
  };
  // Output o (its last row added) from slot `slot`: ATen's divisor, stored as kOpw-channel vectors.
  auto finish = [&](int o, int slot) {
    const int hs = hs0 + o;
    const bool rin = hs >= 0 && hs + kKh <= kH;
#pragma unroll
    for (int p = 0; p < kCpx; ++p) {
      if (ow0 + p >= kOw) break;
      float* a = acc[slot][p];
      float d = (float)kInnerDiv, rd = 1.f / (float)kInnerDiv;
      if (kConstDiv) {
        d = (float)kConstDiv, rd = 1.f / (float)kConstDiv;
      } else if (!(rin && cin[p])) {
        // A border window: ATen's divisor at run time. An empty window (none for the arguments ATen accepts)
        // sums +0 cells only, and +0 / 1 is ATen's 0.
        bool empty;
        const int di = avg_divisor(hs, ws0 + p, &empty);
        d = empty ? 1.f : (float)di;
        rd = __frcp_rn(d);
      }
      if constexpr (kSeparable) {
#pragma unroll
        for (int e = 0; e < kOpw; ++e) a[e] *= rd;  // Note [Pooling separable sums]: within an ulp of s / d
      } else {
        div_rn_n<kOpw>(a, a, d, rd);
      }
      store_vec<kOpw>(y + ((index_t)o * kOw + p) * kC, a);
    }
  };
  wv_t nxt[kRunCols];
  load_row(0, nxt);
  // Rows 0 .. KH - 2 only start outputs (none before the walk is touched), ...
#pragma unroll
  for (int i = 0; i < kKh - 1; ++i) {
    wv_t cur[kRunCols];
#pragma unroll
    for (int j = 0; j < kRunCols; ++j) cur[j] = nxt[j];
    load_row(i + 1, nxt);  // one row ahead
    add_row(i, i, cur);
  }
  // ... then steps of KH rows, unrolled KH times so that every slot is a compile-time register (the code of KH
  // rows, not of the whole walk): row i0 + q finishes output i0 + q - KH + 1, in slot q. Only the last step may
  // run past the walk's rows (loaded as +0; the outputs they start are never stored).
#pragma unroll 1
  for (int i0 = kKh - 1; i0 < rows; i0 += kKh) {
#pragma unroll
    for (int q = 0; q < kKh; ++q) {
      wv_t cur[kRunCols];
#pragma unroll
      for (int j = 0; j < kRunCols; ++j) cur[j] = nxt[j];
      load_row(i0 + q + 1, nxt);
      add_row((kKh - 1 + q) % kKh, kKh - 1, cur);
      const int o = i0 + q - (kKh - 1);
      if (o < nout) finish(o, q);
    }
  }
}
