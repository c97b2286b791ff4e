/// @brief Rebuilding a call from its signature text (the inverse of describe_call), so that a signature seen
/// in one process can be tuned in another (`cudal1 warm`, Note [Pre-warming] in csrc/runtime/src/warm.cpp).
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

#include <string>

#include "cudal1/core/status.h"

namespace cudal1::dispatcher {

/// A call rebuilt from a signature: the operator and its arguments, boxed in schema order.
struct RebuiltCall {
  c10::OperatorHandle op;
  torch::jit::Stack stack;  ///< exactly op.schema().arguments().size() values
};

/// Rebuilds the call whose signature text is `text` (as describe_call writes it, e.g.
/// `aten::gelu(f32[64,1024]{1024,1}, approximate='tanh')`) with its tensors on `device`: each tensor has the
/// text's dtype, sizes and strides at storage offset 0 (the text holds no offset), filled with random values
/// when `fill` (normal for floating dtypes, 0/1 for bool, 0..9 for integers), uninitialised otherwise; a Meta
/// device allocates nothing. Signatures of CPU calls (tensors marked `@cpu`) are refused: `device` decides.
/// The rebuilt call is checked to describe back to exactly `text` (modulo the `@device` marks a non-CUDA
/// `device` adds), so its cache key is the original's. Errors: InvalidArgument for malformed text or an
/// argument that does not fit the op's schema, NotFound for an operator this LibTorch does not have,
/// Unsupported for argument kinds a signature cannot carry back (generators, devices, ...). Never throws.
Result<RebuiltCall> rebuild_call(const std::string& text, c10::Device device, bool fill);

}  // namespace cudal1::dispatcher
