// @brief ColumnTiles (softmax_family.h, Note [Softmax column tiles]): a warp reads 32 x kVec adjacent inner elements
// of one n-row (whole 128-byte lines), the kWarps warps of a block split n, and per-column online (max, sum) pairs
// are merged across warps in shared memory and, with kChunks > 1, across the blocks of a column through an fp32
// workspace between two launches (phase 0: each chunk's pairs; phase 1: merged in chunk order, then written).
// Follows softmax_column_common.cuh and its own constants (namespace softmax, Note [Device constants]):
//   int kChunks                          blocks a column
//   bool kCache                          the block's rows kept in registers (one chunk only)
//   bool kFast                           Note [Softmax fast tiles] (not cached)
//   int kUnroll                          rows a warp loads at a time when it does not cache them
//   int kN, kChunkRows                   rows, rows a chunk
//   index_t kInnerVectors, kTiles        vectors along inner, tiles along inner
//   index_t kGridBlocks                  blocks of a launch
//   index_t kOuterStride, kNStride       input strides of outer and n, in vectors
//   int kPer                             vectors a thread keeps (kCache; else 1)
//   index_t kWorkspaceStride             columns: the stride of the workspace's chunk rows (kChunks > 1)
// (bound to the column variables N, NC, IV, TILES, BLOCKS, OSV, NSV, PER, COLS: Note [Softmax column constants]
// in softmax_columns_codegen.cpp).

namespace softmax {

static_assert(!(kChunks > 1 && kCache), "a column split over blocks cannot stay in registers between the launches");
static_assert(!(kFast && kCache), "fast tiles fold the rows they load: Note [Softmax fast tiles]");

enum : int { kWarps = kBlock / 32 };

/// Each lane's kVec pairs merged over the block's kWarps warps in warp order through red_m and red_s ([kWarps][32 x
/// kVec] shared arrays): every warp ends with the same values.
__device__ __forceinline__ void merge_warps(float* m, float* s, float (*red_m)[32 * kVec],
                                            float (*red_s)[32 * kVec]) {
  const int lane = threadIdx.x % 32, w = threadIdx.x / 32;
#pragma unroll
  for (int e = 0; e < kVec; ++e) {
    red_m[w][e * 32 + lane] = m[e];
    red_s[w][e * 32 + lane] = s[e];
  }
  __syncthreads();
#pragma unroll
  for (int e = 0; e < kVec; ++e) {
    m[e] = red_m[0][e * 32 + lane];
    s[e] = red_s[0][e * 32 + lane];
    for (int i = 1; i < kWarps; ++i) online_merge(m[e], s[e], red_m[i][e * 32 + lane], red_s[i][e * 32 + lane]);
  }
}

}  // namespace softmax

extern "C" __global__ void __launch_bounds__(softmax::kBlock)
cudal1_softmax(const storage_t* __restrict__ in, storage_t* __restrict__ out, float* __restrict__ ws, int phase) {
  using namespace softmax;
  const int lane = threadIdx.x % 32, w = threadIdx.x / 32;
  // Phase 1 walks the blocks backwards: its first blocks re-read what phase 0 read last (still in L2).
  const index_t b = (kChunks > 1 && phase == 1) ? kGridBlocks - 1 - (index_t)blockIdx.x : (index_t)blockIdx.x;
  const int chunk = (int)(b % kChunks);
  const index_t tile = (b / kChunks) % kTiles, o = b / (kChunks * kTiles);
  const index_t iv = tile * 32 + lane;
  const bool live = iv < kInnerVectors;  // dead lanes still take part in the merges
  const int n0 = chunk * kChunkRows, n1 = min(kN, n0 + kChunkRows);
  const vec_t* __restrict__ x = reinterpret_cast<const vec_t*>(in) + o * kOuterStride + (live ? iv : 0);
  vec_t* __restrict__ y = reinterpret_cast<vec_t*>(out) + o * ((index_t)kN * kInnerVectors) + (live ? iv : 0);
  float m[kVec], s[kVec];
#pragma unroll
  for (int e = 0; e < kVec; ++e) { m[e] = neg_inf(); s[e] = 0.f; }
  // The passes walk this warp's rows of the chunk, n0 + w + i kWarps below n1 (Note [Softmax column walks]): from
  // registers with kCache, else loaded kUnroll rows at a time (loads first, for memory-level parallelism).
  vec_t cached[kPer];
  if constexpr (kCache) {
#pragma unroll
    for (int i = 0; i < kPer; ++i) {
      const int j = n0 + w + i * kWarps;
      if (live && j < n1) cached[i] = x[j * kNStride];
    }
  }
  if (kChunks == 1 || phase == 0) {
    // This block's rows of its columns: online pairs per lane, then merged over the kWarps warps in warp order.
    __shared__ float red_m[kWarps][kVec * 32], red_s[kWarps][kVec * 32];
    if constexpr (kFast) {
      // Note [Softmax fast tiles]: kUnroll rows at a time (rows past the chunk as -Inf): their maximum, one rescale
      // where it grew, then the fast exp of each.
      vec_t neg;
#pragma unroll
      for (int e = 0; e < kVec; ++e) neg.v[e] = to_storage(neg_inf());
      for (int j0 = n0 + w; j0 < n1; j0 += kUnroll * kWarps) {
        vec_t tu[kUnroll];
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {
          const int j = j0 + u * kWarps;
          tu[u] = live && j < n1 ? x[j * kNStride] : neg;
        }
#pragma unroll
        for (int e = 0; e < kVec; ++e) {
          float xs[kUnroll], bm = m[e];
#pragma unroll
          for (int u = 0; u < kUnroll; ++u) {
            xs[u] = to_float(tu[u].v[e]);
            bm = fmaxf(bm, xs[u]);  // NaN skipped
          }
          if (bm > m[e]) {
            s[e] *= expf(m[e] - bm);  // 0 from m = -Inf (NaN stays NaN)
            m[e] = bm;
          }
#pragma unroll
          for (int u = 0; u < kUnroll; ++u) s[e] += xs[u] == neg_inf() ? 0.f : exp_sub(xs[u], m[e]);
        }
      }
    } else if constexpr (kCache) {
#pragma unroll
      for (int i = 0; i < kPer; ++i) {
        const int j = n0 + w + i * kWarps;
        if (live && j < n1) {
          const vec_t t = cached[i];
#pragma unroll
          for (int e = 0; e < kVec; ++e) online_add(m[e], s[e], to_float(t.v[e]));
        }
      }
    } else {
      for (int j0 = n0 + w; j0 < n1; j0 += kUnroll * kWarps) {
        vec_t tu[kUnroll];
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {
          const int j = j0 + u * kWarps;
          if (live && j < n1) tu[u] = x[j * kNStride];
        }
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {
          const int j = j0 + u * kWarps;
          if (live && j < n1) {
            const vec_t t = tu[u];
#pragma unroll
            for (int e = 0; e < kVec; ++e) online_add(m[e], s[e], to_float(t.v[e]));
          }
        }
      }
    }
    merge_warps(m, s, red_m, red_s);
    if constexpr (kChunks > 1) {
      if (w == 0 && live)
#pragma unroll
        for (int e = 0; e < kVec; ++e) {
          const index_t col = o * (kInnerVectors * kVec) + iv * kVec + e;
          ws[chunk * kWorkspaceStride + col] = m[e];
          ws[(kChunks + chunk) * kWorkspaceStride + col] = s[e];
        }
      return;
    }
  }
  if constexpr (kChunks > 1) {
    // Phase 1: the column's pairs of every chunk, merged in chunk order (the same in every block of the column).
    if (live)
#pragma unroll
      for (int e = 0; e < kVec; ++e) {
        const index_t col = o * (kInnerVectors * kVec) + iv * kVec + e;
        m[e] = ws[col];
        s[e] = ws[kChunks * kWorkspaceStride + col];
        for (int i = 1; i < kChunks; ++i)
          online_merge(m[e], s[e], ws[i * kWorkspaceStride + col], ws[(kChunks + i) * kWorkspaceStride + col]);
      }
  }
#pragma unroll
  for (int e = 0; e < kVec; ++e)
    if (m[e] == neg_inf()) s[e] = qnan();  // every element -Inf or NaN: the two-pass sum is NaN too
  float c[kVec];
#pragma unroll
  for (int e = 0; e < kVec; ++e) c[e] = epilogue_constant(s[e]);
  if constexpr (kCache) {
#pragma unroll
    for (int i = 0; i < kPer; ++i) {
      const int j = n0 + w + i * kWarps;
      if (live && j < n1) {
        const vec_t t = cached[i];
        vec_t r;
#pragma unroll
        for (int e = 0; e < kVec; ++e) r.v[e] = to_storage(column_epilogue(to_float(t.v[e]), m[e], s[e], c[e]));
        y[j * kInnerVectors] = r;
      }
    }
  } else {
    for (int j0 = n0 + w; j0 < n1; j0 += kUnroll * kWarps) {
      vec_t tu[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int j = j0 + u * kWarps;
        if (live && j < n1) tu[u] = x[j * kNStride];
      }
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int j = j0 + u * kWarps;
        if (live && j < n1) {
          const vec_t t = tu[u];
          vec_t r;
#pragma unroll
          for (int e = 0; e < kVec; ++e) r.v[e] = to_storage(column_epilogue(to_float(t.v[e]), m[e], s[e], c[e]));
          y[j * kInnerVectors] = r;
        }
      }
    }
  }
}
