// @brief Device code every batch-norm technique shares (Note [Batch norm inference] in batchnorm_family.h): a
// channel's parameters, the normalisation of one element, and the kernel entry, which calls the technique's walk.
//
// Compiled by NVRTC after a generated head (batchnorm_codegen.cpp) that defines, with no CUDA headers:
//   index_t, storage_t, to_float(storage_t), to_storage(float)   the input's dtype (dtype_prelude)
//   param_t, bn::param_float(param_t)    the parameters' storage type and its exact conversion to fp32
//   in namespace bn, typed constants (enumerators: Note [Device constants] in batchnorm_codegen.cpp):
//     int kVec, kBlock                   elements per vector load/store, threads per block
//     bool kHasWeight, kHasBias          weight / bias given (else 1 and 0)
//     bool kStats                        save_mean and save_invstd are written (native_batch_norm)
//     unsigned kEpsBits                  eps as fp32 bits
//     index_t kNumel, kChannels, kInner  the flat view: element i's channel is (i / kInner) % kChannels
// and followed by the technique's own constants, if any (its file names them), and its file, which defines
// bn::walk.
//
// NVVM simplifies each function on its own before inlining it into its caller, so index arithmetic split across
// functions comes out worse (64-bit remainders and divisions it otherwise narrows, loop bounds computed twice).
// Hence a grid-stride loop spells its thread's index and the grid's threads out in place, (index_t)blockIdx.x *
// kBlock + threadIdx.x and (index_t)gridDim.x * kBlock, and all of a kernel's loops and its vector views of x and
// y sit in one function, the walk (the entry only calls it).

namespace bn {

struct __align__(kVec * sizeof(storage_t)) vec_t { storage_t v[kVec]; };

/// A call's tensors besides x and y; an absent weight or bias is null and never read, save_* are null unless
/// kStats.
struct Params {
  const param_t* w;
  const param_t* b;
  const param_t* rm;
  const param_t* rv;
  float* save_mean;
  float* save_invstd;
};

/// One channel's statistics and affine parameters in fp32.
struct Channel {
  float mean, weight, invstd, bias;
};

__device__ __forceinline__ float eps() { return __int_as_float(kEpsBits); }

__device__ __forceinline__ Channel channel(index_t c, const Params& p) {
  Channel k;
  k.mean = param_float(p.rm[c]);
  k.invstd = rsqrtf(param_float(p.rv[c]) + eps());
  if constexpr (kHasWeight)
    k.weight = param_float(p.w[c]);
  else
    k.weight = 1.f;
  if constexpr (kHasBias)
    k.bias = param_float(p.b[c]);
  else
    k.bias = 0.f;
  return k;
}

/// ((x - mean) * w) * invstd + b in fp32, ATen's association (Note [Batch norm inference]).
__device__ __forceinline__ storage_t normalize(storage_t x, const Channel& k) {
  return to_storage((to_float(x) - k.mean) * k.weight * k.invstd + k.bias);
}

/// native_batch_norm's save_mean = float(running_mean) and save_invstd (kStats), a channel a thread.
__device__ __forceinline__ void save_statistics(const Params& p) {
  if constexpr (kStats) {
    for (index_t c = (index_t)blockIdx.x * kBlock + threadIdx.x; c < kChannels; c += (index_t)gridDim.x * kBlock) {
      p.save_mean[c] = param_float(p.rm[c]);
      p.save_invstd[c] = rsqrtf(param_float(p.rv[c]) + eps());
    }
  }
}

/// save_statistics(p), then y = normalize(x) over the whole flat view in kVec-element vectors, as the technique
/// walks it (defined by the technique's file). The kernel's pointers are __restrict__.
__device__ __forceinline__ void walk(const storage_t* x, storage_t* y, const Params& p);

}  // namespace bn

extern "C" __global__ void __launch_bounds__(bn::kBlock)
cudal1_bn(const storage_t* __restrict__ x, const param_t* __restrict__ w, const param_t* __restrict__ b,
          const param_t* __restrict__ rm, const param_t* __restrict__ rv, storage_t* __restrict__ y,
          float* __restrict__ save_mean, float* __restrict__ save_invstd) {
  bn::walk(x, y, bn::Params{w, b, rm, rv, save_mean, save_invstd});
}
