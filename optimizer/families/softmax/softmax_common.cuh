// @brief Device code every softmax technique shares (softmax_family.h): the vector type, Note [Softmax fast exp]'s
// forms of exp(x - max) and of the division by the sum, and ATen's row epilogue of one element.
//
// Compiled by NVRTC after a generated head (device_head in softmax_codegen.cpp) that defines, with no CUDA headers:
//   index_t, storage_t, to_float(storage_t), to_storage(float)   the dtype (dtype_prelude)
//   div_rn(a, b, rb)                     a / b with rb = 1 / b (codegen_common's exact_divide_source)
//   in namespace softmax, typed constants (enumerators: Note [Device constants] in codegen_common.h):
//     int kVec, kBlock                   elements per vector load/store, threads per block
//     bool kLog                          log_softmax (else softmax)
//     bool kFastExp, kFlushSubnormals    Note [Softmax fast exp]'s forms (16-bit outputs of ClusterRows, the fast
//                                        and two-pass column tiles, the held slabs), with .ftz (fp16)
// and by the technique's own constants. A row technique's head then declares the row's constexpr variables of
// Note [Softmax row constants] (softmax_codegen.cpp) at global scope and codegen_common's row_reduce_source
// (neg_inf, warp_max, warp_sum, row_max, row_sum over kThreadsPerRow threads of a kBlock-thread block, the typed
// constants it writes); a column technique's head its column variables (Note [Softmax column constants]
// in softmax_columns_codegen.cpp). The technique's files follow this one and define the kernel cudal1_softmax.

namespace softmax {

struct __align__(kVec * sizeof(storage_t)) vec_t { storage_t v[kVec]; };

/// exp(x - mx): with kFastExp, ex2.approx((x - mx) * log2 e) (Note [Softmax fast exp]: FADD, FMUL, MUFU; within
/// 2^-19 of exp(x - m) for x - m >= -10), else expf.
__device__ __forceinline__ float exp_sub(float x, float mx) {
  if constexpr (kFastExp) {
    const float t = (x - mx) * 1.4426950408889634f;
    float r;
    if constexpr (kFlushSubnormals)
      asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(t));
    else
      asm("ex2.approx.f32 %0, %1;" : "=f"(r) : "f"(t));
    return r;
  } else {
    return expf(x - mx);
  }
}

/// a / s with rs = 1 / s: a * rs with kFastExp (Note [Softmax fast exp]), else div_rn (Note [Softmax epilogue]).
__device__ __forceinline__ float div_sum(float a, float s, float rs) {
  if constexpr (kFastExp)
    return a * rs;
  else
    return div_rn(a, s, rs);
}

/// ATen's epilogue of element `v` of a row of maximum `m` and sum `s` (Note [Softmax epilogue]): log_softmax
/// v - logsum with logsum = m + log(s); softmax exp(v - m) / s, with rs = 1 / s.
__device__ __forceinline__ float epilogue(float v, float m, float logsum, float s, float rs) {
  if constexpr (kLog)
    return v - logsum;
  else
    return div_sum(exp_sub(v, m), s, rs);
}

}  // namespace softmax
