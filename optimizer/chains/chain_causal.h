/// @brief Private: causal attention (Note [Causal attention]): an attention chain whose mask is the causal one
/// runs as fused attention with `is_causal`, its special values recomputed exactly.
///
/// Note [Causal attention]
/// Why: with an additive mask, fused attention (Note [Attention rewrite]) must read the mask and compute every
/// score; the memory-efficient kernel that takes a mask ran the suite's causal row ([8, 32, 1024, 128] fp16, H100)
/// in ~630 us where flash attention's causal path, which skips the masked half, needs about a fifth. The mask is
/// data, so whether it is the causal one (0 on and below the diagonal, -inf above, L == S) is a fact about its
/// values:
///  - *Which masks.* A mask is compared with the causal one on the device (a synchronisation) once per tensor,
///    the second time the same tensor arrives: the same TensorImpl (held by a weak reference, so its address is not
///    reused while remembered), data pointer and version counter. A mask seen for the first time, an inference
///    tensor (no version counter), a tensor changed in place since, and any call while a CUDA graph is captured
///    (no synchronisation is allowed there) take the general path. An app that builds its mask afresh for every
///    call therefore never synchronises and keeps the general path. Verification has two trials with a causal mask and
///    special values in q, k and v: one at first sight (the general path), one under CausalMaskProbeScope, which
///    compares at first sight (this path). A write through a raw pointer that moves no version
///    counter is not seen (as for the folded weights of Note [Program chains]).
///  - *Special values.* Flash attention never computes the masked scores, but the ATen chain does: a NaN or an
///    infinity in k or v spreads through them into rows that flash attention leaves finite (NaN + -inf, 0 x inf).
///    So every call also runs attention_specials, one pass over q, k and v that marks the heads holding a NaN or an
///    infinity, and attention_exact_rows, which rewrites every row of a marked head as the chain's exact value (the
///    verification's reference: scores, mask, softmax and product in double) and leaves the others. The general
///    path of a chain that could take this one (a square [L, L] mask) runs the same two kernels with its own mask:
///    the kernels that take a mask compute every score but need not spread a special value as ATen's softmax does
///    (a row whose scores are all -inf, say; fp32's fused kernel failed a trial with specials before this), so
///    their result is not trusted on those heads either. Both are
///    generated kernels (attention_fixup.cuh); their cubin is the library chain's code in the cache (entry
///    point attention_specials, so the record is no code-less library call). The pass reads q, k and v once
///    (201 MB on the suite's row: ~65 us at an H100's bandwidth, predicted, not timed apart); a marked head costs
///    O(L S (D + Dv)) double operations, rare inputs only.
/// Precision is the unmasked rewrite's (Note [Attention rewrite]): scores in fp32, closer to the exact value than
/// the ATen chain.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "cudal1/core/status.h"
#include "cudal1/optimizer/family.h"

namespace cudal1::optimizer::chains {

struct AttentionPlan;

/// Whether `a` can take the causal path: a mask of exactly [L, S] with L == S.
bool causal_capable(const AttentionPlan& a);

/// The CUDA source of the two kernels for `dtype` (fp32, fp16, bf16), exactly what NVRTC compiles.
std::string causal_source(c10::ScalarType dtype);

/// Calls that took the causal path in this process (reports and tests).
uint64_t causal_calls() noexcept;

/// While alive on a thread, a causal path compares a mask with the causal one at first sight (Note [Causal
/// attention]): verification's fresh masks. Nests.
class CausalMaskProbeScope {
 public:
  CausalMaskProbeScope() noexcept;
  ~CausalMaskProbeScope();
  CausalMaskProbeScope(const CausalMaskProbeScope&) = delete;
  CausalMaskProbeScope& operator=(const CausalMaskProbeScope&) = delete;
};

/// The causal path of one attention chain on one device: its loaded kernels and the mask it last saw.
/// Thread-safe.
class CausalPath {
 public:
  /// Loads `cubin` (compiled from causal_source) on `device`.
  static Result<std::shared_ptr<CausalPath>> load(int device, const std::string& cubin);

  /// Whether `mask` may be served by the causal path now (see the Note: may synchronise `mask`'s stream once).
  bool is_causal(const at::Tensor& mask);

  /// Runs the causal path: `y` [BH, L, Dv] (contiguous) from q [BH, L, D], kt [BH, D, S], v [BH, S, Dv].
  Status run(const AttentionPlan& a, const at::Tensor& q, const at::Tensor& kt, const at::Tensor& v, at::Tensor& y);

  /// Rewrites, in `y` (written by fused attention), every row of each head whose q, k or v holds a NaN or an
  /// infinity as the chain's exact value with `mask` ([L, S] of the chain's dtype; undefined: the causal mask), on
  /// the current stream (see the Note: the general path of a capable chain runs it too).
  Status fix_specials(const AttentionPlan& a, const at::Tensor& q, const at::Tensor& kt, const at::Tensor& v,
                      at::Tensor& y, const at::Tensor& mask);

 private:
  CausalPath() = default;
  std::shared_ptr<LoadedModule> specials_, exact_;
  std::mutex mu_;
  std::optional<c10::weak_intrusive_ptr<c10::TensorImpl>> seen_;  ///< the mask last seen
  const void* seen_data_ = nullptr;
  uint32_t seen_version_ = 0;
  bool checked_ = false, causal_ = false;
};

}  // namespace cudal1::optimizer::chains
