/// @brief Private: the gemm family, a rewrite of `mm` around cuBLAS rather than a GEMM of its own
/// (Notes [Padded GEMM] and [Residue rows]).
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
///
/// Note [Residue rows]
/// The padded GEMM pays two memory passes beside the GEMM (GPT-2's lm_head on an H100: 815 us, of which the
/// [4096, 50264] scratch read and written again is about 300). The second technique writes the contiguous result
/// in place with aligned GEMMs only. Row r of an [M, N] result starts at element r*N, so with A = 16 / 2 elements
/// a 16-byte vector, the rows r = j, j + A, j + 2A, ... (residue j) all start at the same offset modulo A, and
/// their columns from s_j = (-j*N) mod A on start at aligned addresses, one row stride of A*N apart (aligned
/// too). For each residue, one cuBLAS GEMM (at::mm_out into the strided view of the result, no copy) computes the
/// n_j = the multiple of A at most N - s_j columns from s_j on, reading a's rows of that residue (a row stride of
/// A times a's) and the weight's rows from s_j on: every pointer, leading dimension and extent aligned. What is
/// left of each row, at most A - 1 columns on each side, is a generated kernel's: a warp per element, a dot
/// product of K with 16-byte loads and fp32 accumulation, rounded once to the dtype. Every element is written
/// exactly once, by cuBLAS or by that kernel; verification's poisoned outputs find any left out.
/// Offered for `mm` (not addmm: into a strided view ATen writes the broadcast bias first, a pass of the whole
/// result that the padded GEMM's bias epilogue does not pay) whose a is row-major with a row
/// stride that is a multiple of A and whose b is a weight seen transposed (b[k, c] at c * ldw + k, ldw a multiple
/// of A), the nn.Linear layout; pointers are checked at launch. The tolerance is the padded GEMM's.
/// Variants: warps a block of the remainder kernel {4, 8}; id "rows8.warpsW".
#pragma once

#include <variant>

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

/// Note [Residue rows]: residues of the row index, 16-byte vectors of 2-byte elements.
constexpr int kResidueRows = 8;

/// The techniques: each has its knobs and `source`, its kernel's CUDA source exactly as NVRTC compiles it (a head
/// of constants, Note [Gemm constants] in gemm_codegen.cpp, then the kernel's .cuh, embedded at build time). The
/// bound kernel (gemm_kernel.cpp) runs the technique's cuBLAS GEMMs and launches that kernel.

/// Note [Padded GEMM]: the weight copied into a zero-padded buffer, cuBLAS into an [M, NP] scratch, the
/// unpadding copy (gemm_unpad.cuh) into the result.
struct PaddedGemm {
  int pad = 8;      ///< N rounded up to a multiple of this many elements
  int orient = 0;   ///< 0: padded weight [NP, K] used transposed; 1: [K, NP]
  int vec = 8;      ///< elements per thread of the unpadding copy (one vec-wide aligned store)
  int block = 256;  ///< threads per block of the copy
  int64_t padded_n(int64_t n) const { return (n + pad - 1) / pad * pad; }
  /// Blocks of the unpadding copy.
  int64_t grid(const GemmShape& s) const;
  /// The unpadding copy: extern "C" cudal1_gemm_unpad(src [M, NP], dst [M, N]), 2-byte elements.
  KernelSource source(const GemmShape& s) const;
};

/// Note [Residue rows]: an aligned cuBLAS GEMM per residue of kResidueRows rows, in place, and the remainder
/// kernel (gemm_remainder.cuh) for the columns left over.
struct ResidueRows {
  int warps = 4;  ///< warps per block of the remainder kernel
  /// The most remainder elements of one row (over the residues), the remainder kernel's slots a row.
  int slots(const GemmShape& s) const;
  /// The remainder kernel: extern "C" cudal1_gemm_remainder(a, w, out).
  KernelSource source(const GemmShape& s) const;
};

/// One variant's technique and knobs (default: PaddedGemm, pad 8, orient 0, vec 8, block 256).
using GemmTechnique = std::variant<PaddedGemm, ResidueRows>;

/// The variant of `t`: knobs {pad, orient, vec, block} (PaddedGemm) or {rows = kResidueRows, warps}
/// (ResidueRows), in that order; id "pad8.orient0.vec8.block256" or "rows8.warps4".
Variant variant_of(const GemmTechnique& t);

/// Note [Residue rows]: for residue j of `rows`, the first aligned column s and the aligned width n of the GEMM
/// over rows j, j + rows, ...; the remainder kernel computes columns [0, s) and [s + n, N).
struct ResidueSplit {
  int64_t shift = 0, width = 0;
};
ResidueSplit residue_split(int64_t n_cols, int rows, int j);

/// Whether `s` has the layout the residue technique needs (a row-major with a row stride that is a multiple of
/// kResidueRows, b a weight seen transposed with its row stride one too, both offsets multiples of it, no bias).
bool residue_layout(const GemmShape& s);

/// The shape of an mm or addmm call, or Unsupported (Note [Padded GEMM]).
Result<GemmShape> parse_mm(const Problem& p);

/// Binds a loaded module of technique `t`'s kernel to `s`.
std::unique_ptr<BoundKernel> make_gemm_kernel(const GemmShape& s, const GemmTechnique& t,
                                              std::shared_ptr<LoadedModule> module);

}  // namespace cudal1::optimizer::gemm
