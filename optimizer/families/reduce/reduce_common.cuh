// @brief Device code every reduction shares ahead of its accumulator (Note [Reductions] in reduce_family.h): the
// vector type, the infinities, the output's rounding, a norm's per-element term and projection, and the op's float
// constants.
//
// Compiled by NVRTC after a generated head (reduce_codegen.cpp) that defines, with no CUDA headers:
//   index_t (int: extent < 2^31), storage_t, to_float(storage_t), to_storage(float)   the input (dtype_prelude)
//   out_t                                  the values' type: storage_t, or float for a norm's dtype=float
//   in namespace reduce, typed constants (enumerators: Note [Device constants] in codegen_common.h):
//     int kKind                            the accumulator: kSumKind, kExtremeKind, kArgKind or kWelfordKind
//     bool kGreater                        max rather than min (extremes, (value, index))
//     bool kMean, kTakeSqrt, kHasValues    mean's factor; std's square root; (value, index) writes values too
//     bool kNorm; int kOrd                 linalg_vector_norm and its ord class, in NormOrd's order
//     bool kFloatOut                       out_t is float of fp16/bf16 input (a norm's dtype=float)
//     unsigned kMeanFactorBits, kCorrectionBits, kNormPBits, kNormInvPBits   fp32 bits of the op's constants
//     int kVec, kBlock, kMinBlocks         elements per vector load, the kernel's __launch_bounds__ (0: none)
//     index_t kSplits, kOutputs, kLength   chunks of r (1 unsplit), O, K
//   and reduce::kept_off(o), reduce::red_off(r): the offsets of output o's kept dims and of reduced index r
// then this file, the accumulator's file (reduce_float_acc.cuh, reduce_arg_acc.cuh or reduce_welford_acc.cuh,
// after welford_source for Welford), reduce_combine.cuh, and the technique's constants and file, which defines the
// kernel
//   extern "C" __global__ void cudal1_reduce(const storage_t* x, out_t* y, long long* yi, acc_t* ws, int phase)
// (pointers __restrict__; yi: int64 indices, null where none; ws: the technique's workspace; phase: 1 for a second
// pass, else 0).
//
// Each loop stays in the function that holds it (a kernel, row_range, column_tile, the accumulator's functions):
// NVVM simplifies each function on its own before inlining it into its caller, so code moved across a call can
// compile to other instructions. For the same reason a NaN test is written x != x in place, not as a function (a
// call reorders the compares around it).

/// kVec elements, the unit of every vector load (at namespace scope: codegen_common's copy_in takes it).
struct __align__(reduce::kVec * sizeof(storage_t)) vec_t { storage_t v[reduce::kVec]; };

namespace reduce {

/// kKind's values: fp32 sums (sum, mean, norms of ord 0, 1, 2, p), NaN-propagating max/min (amax, amin, norms of
/// ord inf, -inf), (value, index) under ATen's order (max.dim, min.dim, argmax, argmin), Welford (var, std).
enum : int { kSumKind = 0, kExtremeKind = 1, kArgKind = 2, kWelfordKind = 3 };

/// kOrd's values, in NormOrd's order (reduce_family.h).
enum : int { kOrdZero, kOrdOne, kOrdTwo, kOrdInf, kOrdNegInf, kOrdP };

__device__ __forceinline__ float neg_inf() { return __int_as_float(0xff800000u); }
__device__ __forceinline__ float pos_inf() { return __int_as_float(0x7f800000u); }

/// A result rounded to the values' type.
__device__ __forceinline__ out_t to_out(float f) {
  if constexpr (kFloatOut)
    return f;
  else
    return to_storage(f);
}

/// The term an element contributes: x, or a norm's (ATen's NormZeroOps ... NormOps in fp32: x != 0 counted, NaN
/// included; |x|; x * x; pow(|x|, acc_t(p))).
__device__ __forceinline__ float elem(float x) {
  if constexpr (!kNorm) {
    return x;
  } else if constexpr (kOrd == kOrdZero) {
    return x == 0.f ? 0.f : 1.f;
  } else if constexpr (kOrd == kOrdTwo) {
    return x * x;
  } else if constexpr (kOrd == kOrdP) {
    return powf(fabsf(x), __int_as_float(kNormPBits));
  } else {
    return fabsf(x);
  }
}

/// The result of a sum: v, or a norm's projection (sqrtf for ord 2, pow(s, acc_t(1) / acc_t(p)) for ord p, the
/// division in fp32).
__device__ __forceinline__ float project(float v) {
  if constexpr (kNorm && kOrd == kOrdTwo)
    return sqrtf(v);
  else if constexpr (kNorm && kOrd == kOrdP)
    return powf(v, __int_as_float(kNormInvPBits));
  else
    return v;
}

/// mean's factor float(O) / numel, as ATen computes it; var/std's correction.
__device__ __forceinline__ float mean_factor() { return __int_as_float(kMeanFactorBits); }
__device__ __forceinline__ float correction() { return __int_as_float(kCorrectionBits); }

}  // namespace reduce
