/// @brief Private: chains computed by one library call instead of a generated kernel (Note [Library chains]).
///
/// Note [Library chains]
/// Some chains are one call of a library ATen already links: a GEMM followed by its bias add is cuBLASLt's bias
/// epilogue. TorchScript splits `addmm(bias, x, w)` into `mm(x, w)` and `add(bias, ·)` (its DecomposeOps pass;
/// HF's GPT-2 Conv1D layers run this way from a traced model), so the GEMM's [M, N] result is written, re-read
/// and written again. A *library chain* is planned here and runs as
///  - `mm(x, w) -> add(bias, ·)` (either operand order, alpha 1, add_ in place too)  =>  `addmm(bias, x, w)`;
///  - the same or `addmm(bias, x, w)` (beta = alpha = 1), then `relu`/`relu_` or `gelu(approximate='tanh')`
///    =>  `_addmm_activation(bias, x, w, use_gelu)` (cuBLASLt's RELU_BIAS / GELU_BIAS epilogues);
///  - the same with the tanh GELU written as ops (HF's gelu_new, `0.5 * x * (1 + tanh(c * (x + 0.044715 *
///    pow(x, 3))))`, at most kMaxLibraryNodes in all), read directly or through a row view of the bias add's
///    result (Note [Row views]): recognised when its ops plan as a pointwise chain of that one value and Scalar
///    constants whose value equals the tanh GELU in double at points across its range (tanh_gelu_composite), then
///    computed as the GELU_BIAS epilogue. The ATen chain rounds each of its steps to the dtype where the epilogue
///    rounds once; verification's tolerance grows with the steps (Step::depth);
/// where x [M, K] and w [K, N] are 2-D with M, N, K >= 1 in a layout cuBLAS reads in place (row- or column-major:
/// the call copies nothing), the bias is a contiguous [N] vector, and every tensor has one dtype of fp32, fp16,
/// bf16. The library call is made through ATen on the region's stream (the stream
/// torch makes current while the region runs), so it follows the app's settings (TF32, cuBLAS workspace) as its
/// own calls would. It writes only the chain's last value: it declines a region whose intermediate (the GEMM's or
/// the add's result) the app kept (Unavailable), which then runs through ATen, exactly. Like ATen's own GEMMs, the
/// call may create cuBLAS's workspace for a stream the first time it runs there; a region flushed from another
/// thread's CUDA call (the CUPTI guard) can therefore allocate inside that call, as an early flush of an op without
/// an out= overload can. It is verified and timed against the
/// ATen chain like a generated kernel (Note [Chain tuning]) with a GEMM's tolerance (fp32 accumulation in another
/// order, and the one rounding to the output dtype that the epilogue skips: Note [Padded GEMM]); an epilogue
/// whose NaN or Inf handling differs from ATen's fails verification and the chain stays on ATen, except where
/// the ATen chain's GEMM value is itself infinite: an fp16 GEMM value below -65504 is -inf in ATen's chain, whose
/// tanh GELU is then -inf * 0 = NaN, while the epilogue applies the GELU to the fp32 value and gives about 0.
/// There verification accepts NaN, an infinity of the GEMM value's sign or a value of magnitude <= 1
/// (Step::overflow_node): ATen's value is an artefact of the overflow, not of the model. Its cache
/// record holds no code (kernel name cache::kLibraryKernel, KernelEntry::library()), except an attention chain's
/// causal path (Note [Causal attention]: its kernels' cubin, entry point attention_specials).
///
/// Note [Attention rewrite]
/// Eager attention, `softmax(q @ k^T * scale [+ mask]) @ v`, writes and re-reads its [.., L, S] scores four times
/// (bmm, scale, mask, softmax) where fused attention keeps them on chip. With bmm among the chain ops and
/// matmul's reshapes linked (Note [Matmul views] in chains.h) the hook records it as one chain:
///   bmm(q, kT) [BH, L, S] -> optional mul.Scalar / div.Scalar by a constant (a view of it, at the scores'
///   shape [..., L, S]) -> optional add.Tensor of an external mask (alpha 1, the mask's dtype) -> _softmax over
///   the last dim (no upcast) -> bmm(a view of it as [BH, L, S], v) [BH, L, Dv]
/// in fp32, fp16 or bf16, every operand an external (q, kT, v: the 3-D operands the bmms read), each result
/// contiguous. It runs as `at::scaled_dot_product_attention(q, kT^T, v, mask, 0, false, scale)` with the three
/// given as BH batches of one head [BH, 1, ., .] (torch picks flash, memory-efficient or cuDNN attention as it
/// would for the app;
/// with a mask, one that supports it); its result becomes the chain's (Note [Adopted results]). Where a row of the
/// mask has no finite value, or a NaN or +inf, ATen's softmax gives a row of NaN; fused attention may give zeros
/// there, so those rows are set to NaN (computed from the mask alone, on the device, in the copy). A mask that is
/// the causal one runs flash attention's causal path with the special values of q, k and v handled apart (Note
/// [Causal attention] in chain_causal.h), as does the general path of any square [L, L] mask; verification adds two
/// trials with a causal mask and specials in every operand (ChainPlan::causal_mask), one on each path. Like every
/// library chain it writes only the last result and declines a region whose intermediate the app kept.
/// Precision: the rewrite keeps the scores in fp32 where ATen rounds them to the dtype (twice with a scale,
/// three times with a mask), so it is *closer* to the exact value than the chain it replaces, and a GEMM-style
/// tolerance against ATen is the wrong test. Verification computes the result in double from the same inputs
/// (ChainPlan::exact) and accepts an element within 2 x ATen's own largest error (over the elements where
/// ATen's and the exact value are finite) + 2 ulps of the dtype of the largest exact value, NaN exactly where
/// the exact value is NaN. Where ATen's chain overflows (fp16 scores beyond 65504: its rows are NaN) the trial
/// checks what is still defined: NaN and infinities where the exact value has them, and every element within
/// its column's range of v (attention is a convex combination of v's rows). So the rewrite may return finite
/// values where ATen's fp16 chain overflowed to NaN; nowhere else does it differ beyond rounding.
///
/// Note [Adopted results]
/// Fused attention has no out= form: it returns a new tensor, and copying it into the chain's pending result
/// (already handed to the app when the last bmm was deferred) costs a read and a write of the whole result, ~45 us
/// of the ~280 us of [8, 32, 1024, 128] fp16 on an H100. Without a mask the result is instead *adopted*: the
/// pending tensor's storage takes the returned tensor's memory (c10::StorageImpl::set_data_ptr) and its own
/// unwritten block goes back to the caching allocator. It is the same storage object, so every view the app
/// already made of it sees the values, and the allocator's stream order protects both blocks (the same stream
/// allocated them). Not while a CUDA graph is being captured (a region graph's or forward graph's outputs are its
/// own static tensors, whose memory a replay must write: there the result is copied), and not with a general mask
/// (its NaN rows are written by the copy). Adoption needs the result's strides to be the pending tensor's, so the
/// call is made as BH batches of one head: a backend that allocates its output [B, L, H, D] and returns it
/// transposed (flash attention) then still returns a contiguous [BH, L, D].
#pragma once

#include <memory>
#include <string>

#include "chain_plan.h"
#include "cudal1/core/status.h"
#include "cudal1/dispatcher/regions.h"

namespace cudal1::optimizer::chains {

class CausalPath;

/// Note [Attention rewrite]: eager attention as one fused-attention call.
struct AttentionPlan {
  int q = 0, kt = 1, v = 2, mask = -1;  ///< external slots: bmm operands [BH, L, D], [BH, D, S], [BH, S, Dv]; mask or -1
  double scale = 1;                     ///< what multiplies the scores (1/c for a division by c)
  int64_t bh = 0, l = 0, s = 0, d = 0, dv = 0;
  std::vector<int64_t> scores;          ///< the shape the scale, mask and softmax ran at: [..., L, S], BH rows
  std::vector<int64_t> mask_sizes;      ///< the mask as the add read it (broadcast to `scores`)
};

/// The most nodes of a library chain: a GEMM, its bias add and an activation composite (Note [Library chains]).
constexpr size_t kMaxLibraryNodes = 16;

struct LibraryPlan {
  enum class Kind : uint8_t { kGemm, kAttention };
  Kind kind = Kind::kGemm;
  AttentionPlan attention;  ///< kAttention
  enum class Epilogue : uint8_t { kNone, kRelu, kGeluTanh };
  Epilogue epilogue = Epilogue::kNone;
  int x = 0, w = 0, bias = 0;  ///< external slots
  int64_t m = 0, n = 0, k = 0;
  c10::ScalarType dtype = c10::ScalarType::Float;
  /// The chain as verification sees it: the externals (sizes and strides as recorded), one step per node output
  /// (each a GEMM's value: Step::gemm_k set) and the output slots. Its text names the library call.
  ChainPlan check;
  /// "addmm", "_addmm_activation(relu)", "_addmm_activation(gelu tanh)", "scaled_dot_product_attention" or
  /// "scaled_dot_product_attention(mask)"
  std::string call() const;
};

/// The attention plan of `chain` (Note [Attention rewrite]), or Unsupported saying why it is not one.
Result<LibraryPlan> plan_attention(const dispatcher::ChainRecord& chain);

/// Runs an attention plan (chain_attention.cpp): writes `y` ([BH, L, Dv], contiguous) from the externals; with
/// `causal` (loaded for y's device), a mask that is the causal one runs its causal path (Note [Causal attention]).
/// Unavailable where this build's torch has no fused attention (before 2.1) or `y` is not on CUDA.
Status run_attention(const AttentionPlan& a, const std::vector<at::Tensor>& ext, at::Tensor& y,
                     CausalPath* causal = nullptr);

/// Gives `y` the memory of `result` instead of copying it (Note [Adopted results]) and returns true, where both are
/// the whole of their storages (offset 0, the same byte count) with the same sizes, strides, dtype and device.
/// `result`'s storage is left empty: the caller must hold its only use, a value just returned by a library call.
/// Otherwise changes nothing and returns false. The caller decides whether adoption is allowed at all (never
/// while a CUDA graph is being captured).
bool adopt_result(const at::Tensor& y, const at::Tensor& result);

/// Unmasked attention results copied into the chain's result rather than adopted (Note [Adopted results]), in
/// this process: while no CUDA graph is captured, a copy means adopt_result refused (reports and benchmarks).
uint64_t attention_results_copied() noexcept;

/// The library plan of `chain`, or Unsupported saying why it is not one (Note [Library chains]).
Result<LibraryPlan> plan_library_chain(const dispatcher::ChainRecord& chain);

/// The chain kernel of `plan` for `chain` (which must outlive it; chain records are never removed); an attention
/// plan with `causal` runs a causal mask on its causal path (Note [Causal attention]).
std::unique_ptr<dispatcher::ChainKernel> library_chain_kernel(const dispatcher::ChainRecord& chain, LibraryPlan plan,
                                                              std::shared_ptr<CausalPath> causal = nullptr);

}  // namespace cudal1::optimizer::chains
