// @brief PlanePerBlock (Note [Batch norm inference]; kInner > 1): a block per (outer, c) plane of kInner
// elements, grid-stride over the planes; the parameters read once per plane, kVec-element vectors over it.
// Follows batchnorm_common.cuh.

namespace bn {

__device__ __forceinline__ void walk(const storage_t* x, storage_t* y, const Params& p) {
  save_statistics(p);
  const vec_t* xv = reinterpret_cast<const vec_t*>(x);
  vec_t* yv = reinterpret_cast<vec_t*>(y);
  for (index_t plane = blockIdx.x; plane < kNumel / kInner; plane += gridDim.x) {
    const Channel k = channel(plane % kChannels, p);
    const vec_t* __restrict__ xp = xv + plane * (kInner / kVec);
    vec_t* __restrict__ yp = yv + plane * (kInner / kVec);
    for (index_t j = threadIdx.x; j < kInner / kVec; j += kBlock) {
      const vec_t t = xp[j];
      vec_t o;
#pragma unroll
      for (int e = 0; e < kVec; ++e) o.v[e] = normalize(t.v[e], k);
      yp[j] = o;
    }
  }
}

}  // namespace bn
