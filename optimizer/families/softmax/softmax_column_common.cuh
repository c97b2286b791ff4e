// @brief Device code the softmax column techniques share (softmax_family.h, Note [Softmax columns]): the special
// values, ATen's column epilogue, and the online (max, sum) pairs of the tiles (Note [Softmax column tiles]).
// Follows softmax_common.cuh; reads only its constants.
//
// Note [Softmax column walks]
// The column kernels write out each walk over a thread's rows, and what it does with each vector, where it runs (in
// the kernel, or in the helper that holds it), and give helpers scalars (an element, its column's maximum and sum)
// rather than the address of a thread's arrays or of its rows: NVVM optimises a helper on its own before inlining
// it, so an address computed there, or an array whose address escapes into it, compiles to other code than the
// same statements in place, and these kernels keep the cubins the family has served. For the same reason a variable
// is declared in the scope the kernel has always declared it in: one moved into an `if constexpr` branch's block
// gets lifetime markers that change the code around it.

namespace softmax {

__device__ __forceinline__ float neg_inf() { return __int_as_float(0xff800000u); }
__device__ __forceinline__ float pos_inf() { return __int_as_float(0x7f800000u); }
__device__ __forceinline__ float qnan() { return __int_as_float(0x7fffffffu); }

/// The constant of ATen's epilogue for a column of sum s: log(s) (log_softmax) or 1 / s (softmax, Note [Softmax
/// epilogue]).
__device__ __forceinline__ float epilogue_constant(float s) {
  if constexpr (kLog)
    return logf(s);
  else
    return 1.f / s;
}

/// ATen's epilogue of element v of a column of maximum m, sum s and c = epilogue_constant(s): (v - m) - log(s)
/// (LogSoftMaxForwardEpilogue), else exp(v - m) / s with one rounding (SoftMaxForwardEpilogue).
__device__ __forceinline__ float column_epilogue(float v, float m, float s, float c) {
  if constexpr (kLog)
    return (v - m) - c;
  else
    return div_sum(exp_sub(v, m), s, c);
}

/// Online (max, sum of exp(x - max)) with the two-pass kernels' special values (Note [Softmax column tiles]):
/// m is never NaN; -Inf adds 0 (a column whose max stays -Inf is made NaN at the end); NaN and +Inf poison s.
__device__ __forceinline__ void online_add(float& m, float& s, float x) {
  if (x > m) {
    s = s * expf(m - x) + (x == pos_inf() ? qnan() : 1.f);
    m = x;
  } else {
    s += x == neg_inf() ? 0.f : expf(x - m);
  }
}

__device__ __forceinline__ void online_merge(float& m, float& s, float m2, float s2) {
  const float mm = fmaxf(m, m2);
  s = (m == mm ? s : s * expf(m - mm)) + (m2 == mm ? s2 : s2 * expf(m2 - mm));
  m = mm;
}

}  // namespace softmax
