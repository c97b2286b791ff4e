// @brief ChannelColumns (Note [Batch norm inference]; kInner == 1: channels-last, [N, C] rows): a thread holds
// kVec consecutive channels, reads their parameters once and strides over the rows r0, r0 + kSlots, ...
// Follows batchnorm_common.cuh and its own constant (namespace bn, Note [Device constants]):
//   index_t kSlots   row slots the grid covers: ceil(rows / rows per thread)

namespace bn {

__device__ __forceinline__ void walk(const storage_t* x, storage_t* y, const Params& p) {
  save_statistics(p);
  const vec_t* xv = reinterpret_cast<const vec_t*>(x);
  vec_t* yv = reinterpret_cast<vec_t*>(y);
  // The thread's index spelled out in both (batchnorm_common.cuh): through one local, NVVM keeps a 64-bit
  // remainder where it otherwise takes the thread index's low bits in 32 bits.
  const index_t cv = ((index_t)blockIdx.x * kBlock + threadIdx.x) % (kChannels / kVec),
                r0 = ((index_t)blockIdx.x * kBlock + threadIdx.x) / (kChannels / kVec);
  if (r0 >= kSlots) return;
  Channel k[kVec];
#pragma unroll
  for (int e = 0; e < kVec; ++e) k[e] = channel(cv * kVec + e, p);
  for (index_t r = r0; r < kNumel / kChannels; r += kSlots) {
    const index_t i = r * (kChannels / kVec) + cv;
    const vec_t t = xv[i];
    vec_t o;
#pragma unroll
    for (int e = 0; e < kVec; ++e) o.v[e] = normalize(t.v[e], k[e]);
    yv[i] = o;
  }
}

}  // namespace bn
