// @brief FlatVectors (Note [Batch norm inference]): a grid-stride loop over the flat view's kVec-element vectors,
// the parameters read per vector. A vector lies in one channel (kInner % kVec == 0) or holds kVec consecutive
// channels (kInner == 1, kChannels % kVec == 0). Follows batchnorm_common.cuh.

namespace bn {

__device__ __forceinline__ void walk(const storage_t* x, storage_t* y, const Params& p) {
  save_statistics(p);
  const vec_t* xv = reinterpret_cast<const vec_t*>(x);
  vec_t* yv = reinterpret_cast<vec_t*>(y);
  for (index_t v = (index_t)blockIdx.x * kBlock + threadIdx.x; v < kNumel / kVec; v += (index_t)gridDim.x * kBlock) {
    const vec_t t = xv[v];
    vec_t o;
    if constexpr (kInner == 1) {
      const index_t c0 = (v * kVec) % kChannels;
#pragma unroll
      for (int e = 0; e < kVec; ++e) o.v[e] = normalize(t.v[e], channel(c0 + e, p));
    } else {
      const Channel k = channel((v * kVec / kInner) % kChannels, p);
#pragma unroll
      for (int e = 0; e < kVec; ++e) o.v[e] = normalize(t.v[e], k);
    }
    yv[v] = o;
  }
}

}  // namespace bn
