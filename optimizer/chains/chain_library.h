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
/// whose NaN or Inf handling differs from ATen's fails verification and the chain stays on ATen. Its cache
/// record holds no code (kernel name cache::kLibraryKernel, KernelEntry::library()).
#pragma once

#include <memory>
#include <string>

#include "chain_plan.h"
#include "cudal1/core/status.h"
#include "cudal1/dispatcher/regions.h"

namespace cudal1::optimizer::chains {

struct LibraryPlan {
  enum class Epilogue : uint8_t { kNone, kRelu, kGeluTanh };
  Epilogue epilogue = Epilogue::kNone;
  int x = 0, w = 0, bias = 0;  ///< external slots
  int64_t m = 0, n = 0, k = 0;
  c10::ScalarType dtype = c10::ScalarType::Float;
  /// The chain as verification sees it: the externals (sizes and strides as recorded), one step per node output
  /// (each a GEMM's value: Step::gemm_k set) and the output slots. Its text names the library call.
  ChainPlan check;
  std::string call() const;  ///< "addmm", "_addmm_activation(relu)" or "_addmm_activation(gelu tanh)"
};

/// The library plan of `chain`, or Unsupported saying why it is not one (Note [Library chains]).
Result<LibraryPlan> plan_library_chain(const dispatcher::ChainRecord& chain);

/// The chain kernel of `plan` for `chain` (which must outlive it; chain records are never removed).
std::unique_ptr<dispatcher::ChainKernel> library_chain_kernel(const dispatcher::ChainRecord& chain, LibraryPlan plan);

}  // namespace cudal1::optimizer::chains
