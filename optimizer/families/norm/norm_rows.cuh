// @brief RowPerWarp and RowPerBlock (Note [Norm rows]): kTpr threads a row (a warp, or the whole block), a
// block holding kRowsPerBlock rows. With kCache the row stays in registers (kCachedVectors a thread) from its
// exact two-pass statistics to the output, so x is read once; without, per-thread Welford over the vectors,
// merged with Chan's formula, then a second read for the output. Follows norm_common.cuh and its own constants
// (namespace rownorm, Note [Device constants]):
//   index_t kRowsPerBlock   rows a block: kBlock / kTpr
//   bool kCache             the row is kept in registers
//   int kCachedVectors      vectors a thread keeps: ceil(kVectors / kTpr) with kCache, else 1 (unused)

namespace rownorm {

__device__ __forceinline__ void rows(const storage_t* __restrict__ x, const storage_t* __restrict__ w,
                                     const storage_t* __restrict__ b, storage_t* __restrict__ y,
                                     stat_t* __restrict__ mean_out, stat_t* __restrict__ rstd_out,
                                     float* __restrict__ ws, int phase, float* red) {
  float wv[kVec], bv[kVec];
  const int lane = threadIdx.x % kTpr;
  const index_t row = (index_t)blockIdx.x * kRowsPerBlock + threadIdx.x / kTpr;
  const bool live = row < kRows;  // dead rows still take part in the reductions
  const vec_t* __restrict__ xr = reinterpret_cast<const vec_t*>(x + (live ? row : 0) * kCols);
  vec_t* __restrict__ yr = reinterpret_cast<vec_t*>(y + (live ? row : 0) * kCols);
  vec_t c[kCachedVectors];
  float mean, var;
  if constexpr (kCache) {
    float s = 0.f;
#pragma unroll
    for (int i = 0; i < kCachedVectors; ++i) {
      const index_t j = lane + (index_t)i * kTpr;
      if (live && j < kVectors) {
        c[i] = xr[j];
#pragma unroll
        for (int e = 0; e < kVec; ++e) s += to_float(c[i].v[e]);
      }
    }
    mean = row_sum(s, red) / (float)kCols;
    float q = 0.f;
#pragma unroll
    for (int i = 0; i < kCachedVectors; ++i) {
      const index_t j = lane + (index_t)i * kTpr;
      if (live && j < kVectors) {
#pragma unroll
        for (int e = 0; e < kVec; ++e) {
          const float d = to_float(c[i].v[e]) - mean;
          q += d * d;
        }
      }
    }
    var = row_sum(q, red) / (float)kCols;
  } else {
    Welford acc{0.f, 0.f, 0.f};
    for (index_t j = lane; live && j < kVectors; j += kTpr) acc = wf_combine(acc, wf_vector(xr[j]));
    acc = row_welford(acc, red);
    mean = acc.mean;
    var = acc.m2 / (float)kCols;
  }
  const float rstd = rsqrtf(var + eps());
  if (live && lane == 0) {
    mean_out[row] = to_stat(mean);
    rstd_out[row] = to_stat(rstd);
  }
  const float mean_u = used_stat(mean), rstd_u = used_stat(rstd);
  if constexpr (kCache) {
#pragma unroll
    for (int i = 0; i < kCachedVectors; ++i) {
      const index_t j = lane + (index_t)i * kTpr;
      if (live && j < kVectors) {
        affine(w, b, row, j, wv, bv);
        yr[j] = normalise(c[i], mean_u, rstd_u, wv, bv);
      }
    }
  } else {
    for (index_t j = lane; live && j < kVectors; j += kTpr) {
      affine(w, b, row, j, wv, bv);
      yr[j] = normalise(xr[j], mean_u, rstd_u, wv, bv);
    }
  }
}

}  // namespace rownorm
