/// @brief Private: the gemm family, a rewrite of `mm` around cuBLAS rather than a GEMM of its own
/// (Note [Padded GEMM]).
///
/// Note [Padded GEMM]
/// cuBLAS stores a row-major [M, N] fp16/bf16 result with 16-byte vectors only when a row is a multiple of 8
/// elements; otherwise it falls back to an align-1 kernel at a fraction of the card's rate. GPT-2's vocabulary
/// head is the standing case: [4096, 768] x [768, 50257] fp16 runs ATen's `cutlass_75 ... align1` kernel at
/// 103 TFLOP/s (3.06 ms) on the H200, where the same GEMM with N padded to 50264 runs at ~700 (bench/probes/
/// gemm_pad.py, docs/PERF.md). Padding only the output's row stride does not help (the probe's ld<P> rows: cuBLAS
/// wants the N extent aligned too), so the rewrite is torch.compile's pad_mm done at run time:
///   1. the weight, copied into a zero-padded buffer of NP = N rounded up to PAD columns: [NP, K] used
///      transposed (orient 0), or [K, NP] (orient 1), whichever copies faster from the call's layout;
///   2. at::mm(a, padded) on the call's stream: cuBLAS with every extent and row aligned, into an [M, NP] scratch;
///   3. a generated kernel copies the first N columns of each scratch row into the contiguous [M, N] result the
///      app expects (ATen's own layout for mm), VEC elements a thread with one aligned VEC-wide store.
/// Both extra passes are memory-bound (the weight once, the result read and written once); they pay where the
/// GEMM's own loss is larger, which the tuner measures against ATen like any variant. The values are cuBLAS's
/// with fp32 accumulation in another tile order, so verification allows the accumulation's rounding (K fp32
/// ulps of the largest output, plus two ulps of the output dtype there: cuBLAS may reduce split-K partial sums
/// in fp16/bf16, which ATen allows by default), Inf against NaN where specials meet in a sum, and a finite value
/// above 1/16 of the dtype's range against an Inf of its sign (a split-K partial sum reduced in fp16 overflows
/// where the whole sum does not: the GPU fuzz met ATen's Inf against 59040 at K = 1024, inputs of scale 30).
/// Where an element still differs, the call is computed again in double and rounded to the dtype
/// (OutputTolerance::arbitrate_in_double): with inputs of scale 1000 ATen's fp16 partial sums gave +Inf and NaN
/// where the exact sums were -55040 and -36704 (H100, 2026-12-05), and the kernel's values, being those, stand.
/// `addmm(bias, a, b)` with beta = alpha = 1 and a [N] bias (nn.Linear with a bias) is served the same way, the bias
/// padded with zeros too and cuBLAS's bias epilogue doing the add, as ATen's own addmm does.
/// Accepted: rank-2 fp16/bf16 operands of one dtype, K a multiple of 8 (an unaligned K slows the inputs' loads
/// too, which padding the weight does not mend: the probe's odd-K rows), N not a multiple of 8; any strides
/// (at::mm and the weight copy take them all). Declined: everything else, which stays on ATen.
#pragma once

#include "cudal1/optimizer/family.h"

namespace cudal1::optimizer::gemm {

/// The family object (a process-wide singleton).
const Family& gemm_family();

/// One planned mm signature.
struct GemmShape {
  bool bias = false;  ///< addmm with a [N] bias (beta = alpha = 1); else mm
  c10::ScalarType dtype = c10::ScalarType::Half;
  int64_t m = 0, k = 0, n = 0;
  std::vector<int64_t> a_strides, b_strides;  ///< the call's layouts (checked at every launch)
  int64_t a_offset = 0, b_offset = 0;
};

/// Technique choice.
struct GemmKnobs {
  int pad = 8;      ///< N rounded up to a multiple of this many elements
  int orient = 0;   ///< 0: padded weight [NP, K] used transposed; 1: [K, NP]
  int vec = 8;      ///< elements per thread of the unpadding copy (one VEC-wide aligned store)
  int block = 256;  ///< threads per block of the copy
  int64_t padded_n(int64_t n) const { return (n + pad - 1) / pad * pad; }
};

/// The shape of an mm or addmm call, or Unsupported (Note [Padded GEMM]).
Result<GemmShape> parse_mm(const Problem& p);

/// Blocks of the unpadding copy.
int64_t unpad_grid(const GemmShape& s, const GemmKnobs& k);

/// CUDA source of the unpadding copy: extern "C" cudal1_gemm_unpad(src [M, NP], dst [M, N]), 2-byte elements.
KernelSource generate_unpad(const GemmShape& s, const GemmKnobs& k);

/// Binds a loaded unpadding module of variant `k` to `s`.
std::unique_ptr<BoundKernel> make_gemm_kernel(const GemmShape& s, const GemmKnobs& k,
                                              std::shared_ptr<LoadedModule> module);

}  // namespace cudal1::optimizer::gemm
