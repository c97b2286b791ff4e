// @brief Device code every norm technique shares (Note [Norm rows] in norm_family.h): a row's statistics from
// vectors, the affine parameters of a vector and its normalisation.
//
// Compiled by NVRTC after a generated head (norm_codegen.cpp) that defines, with no CUDA headers:
//   index_t, storage_t, to_float(storage_t), to_storage(float)   the input's dtype (dtype_prelude)
//   stat_t, to_stat(float)               mean/rstd's dtype and the rounding to it
//   in namespace rownorm, typed constants (enumerators: Note [Device constants] in codegen_common.h):
//     int kVec, kBlock                   elements per vector load/store, threads per block that reduce a row
//     int kTpr                           threads per row: 32 (a warp per row) or kBlock
//     int kThreads, kMinBlocks           the kernel's __launch_bounds__ (kMinBlocks 0: none asked)
//     bool kHasWeight, kHasBias          weight / bias given (else 1 and 0)
//     bool kGroup                        group norm: the parameters are per channel (Note [Norm rows])
//     bool kFusedAffine                  y = a * x + b as ATen's group norm with HxW > 1
//     bool kRoundStats                   the output uses mean and rstd rounded to the input's dtype
//     unsigned kEpsBits                  eps as fp32 bits
//     index_t kRows, kCols, kVectors     rows, their length in elements and in kVec-element vectors
//     index_t kGroups, kChannelsPerGroup, kHw   group norm's layout (1 for layer norm)
// then codegen_common's row reductions over kTpr threads of kBlock, their barrier row_barrier() (named barrier 1
// for the held rows' consumers) and its Welford merge (row_reduce_source, welford_source). After this file
// come the technique's constants and files, which define rownorm::rows, and norm_entry.cuh, the kernel that calls it.

/// kVec elements, the unit of every load and store of x, y, w and b (at namespace scope: codegen_common's
/// copy_in takes it).
struct __align__(rownorm::kVec * sizeof(storage_t)) vec_t { storage_t v[rownorm::kVec]; };

namespace rownorm {

__device__ __forceinline__ float eps() { return __int_as_float(kEpsBits); }

/// The exact two-pass statistics of one vector.
__device__ __forceinline__ Welford wf_vector(const vec_t& t) {
  float s = 0.f;
#pragma unroll
  for (int e = 0; e < kVec; ++e) s += to_float(t.v[e]);
  const float m = s * (1.f / kVec);
  float q = 0.f;
#pragma unroll
  for (int e = 0; e < kVec; ++e) {
    const float d = to_float(t.v[e]) - m;
    q += d * d;
  }
  return Welford{(float)kVec, m, q};
}

/// The warp's triples merged (Chan) down a shuffle tree, the result broadcast from lane 0.
__device__ __forceinline__ Welford warp_welford(Welford w) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const Welford b{__shfl_down_sync(0xffffffffu, w.n, o), __shfl_down_sync(0xffffffffu, w.mean, o),
                    __shfl_down_sync(0xffffffffu, w.m2, o)};
    w = wf_combine(w, b);
  }
  return Welford{__shfl_sync(0xffffffffu, w.n, 0), __shfl_sync(0xffffffffu, w.mean, 0),
                 __shfl_sync(0xffffffffu, w.m2, 0)};
}

/// The triples of the kTpr threads of a row merged, the same in every one of them: the warp's, or the block's
/// through `red` (96 floats of shared memory) between two row_barrier()s.
__device__ __forceinline__ Welford row_welford(Welford w, float* red) {
  if constexpr (kTpr == 32) {
    return warp_welford(w);
  } else {
    w = warp_welford(w);
    const int wid = threadIdx.x / 32, l = threadIdx.x % 32;
    if (l == 0) {
      red[wid] = w.n;
      red[32 + wid] = w.mean;
      red[64 + wid] = w.m2;
    }
    row_barrier();
    Welford t{0.f, 0.f, 0.f};
    if (l < kBlock / 32) t = Welford{red[l], red[32 + l], red[64 + l]};
    t = warp_welford(t);
    row_barrier();
    return t;
  }
}

/// Affine parameters of vector `j` of row `row` (Note [Norm rows]): layer norm's by column (vectors of w and b),
/// group norm's by channel (one value for the whole vector: a vector never straddles two channels).
__device__ __forceinline__ void affine(const storage_t* __restrict__ w, const storage_t* __restrict__ b, index_t row,
                                       index_t j, float* wv, float* bv) {
  if constexpr (kGroup) {
    const index_t c = (row % kGroups) * kChannelsPerGroup + (j * kVec) / kHw;
    const float ww = kHasWeight ? to_float(w[kHasWeight ? c : 0]) : 1.f;
    const float bb = kHasBias ? to_float(b[kHasBias ? c : 0]) : 0.f;
#pragma unroll
    for (int e = 0; e < kVec; ++e) {
      wv[e] = ww;
      bv[e] = bb;
    }
  } else {
    vec_t tw, tb;
    if constexpr (kHasWeight) tw = reinterpret_cast<const vec_t*>(w)[j];
    if constexpr (kHasBias) tb = reinterpret_cast<const vec_t*>(b)[j];
#pragma unroll
    for (int e = 0; e < kVec; ++e) {
      if constexpr (kHasWeight)
        wv[e] = to_float(tw.v[e]);
      else
        wv[e] = 1.f;
      if constexpr (kHasBias)
        bv[e] = to_float(tb.v[e]);
      else
        bv[e] = 0.f;
    }
  }
}

/// The statistics the output is computed from (Note [Norm rows]: group norm in fp16/bf16 uses rounded ones).
__device__ __forceinline__ float used_stat(float v) {
  if constexpr (kRoundStats)
    return to_float(to_storage(v));
  else
    return v;
}

/// One output vector from input vector `t`, the row's statistics and the vector's affine parameters.
__device__ __forceinline__ vec_t normalise(const vec_t& t, float mean, float rstd, const float* wv, const float* bv) {
  vec_t o;
  if constexpr (kFusedAffine) {
    // ATen's group norm: y = a * x + b with a = rstd * w, b = bias - a * mean (with HxW = 1 it uses the
    // layer-norm form below).
#pragma unroll
    for (int e = 0; e < kVec; ++e) {
      const float a = kHasWeight ? rstd * wv[e] : rstd;
      const float c = fmaf(-a, mean, kHasBias ? bv[e] : 0.f);
      o.v[e] = to_storage(fmaf(a, to_float(t.v[e]), c));
    }
  } else {
#pragma unroll
    for (int e = 0; e < kVec; ++e) {
      float v = (to_float(t.v[e]) - mean) * rstd;
      if constexpr (kHasWeight) v = v * wv[e];
      if constexpr (kHasBias) v = v + bv[e];
      o.v[e] = to_storage(v);
    }
  }
  return o;
}

/// y's rows and mean/rstd from x, as the technique walks them (defined by the technique's file). `ws` is the
/// launch's workspace (null where the technique has none), `phase` the launch's phase (SplitRow), `red` 96
/// floats of shared memory.
__device__ __forceinline__ void rows(const storage_t* __restrict__ x, const storage_t* __restrict__ w,
                                     const storage_t* __restrict__ b, storage_t* __restrict__ y,
                                     stat_t* __restrict__ mean_out, stat_t* __restrict__ rstd_out,
                                     float* __restrict__ ws, int phase, float* red);

}  // namespace rownorm
