/// @brief Building a signature from a boxed call's arguments (Note [Signature encoding] in core/signature.h).
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <c10/util/OptionalArrayRef.h>
#include <c10/util/SmallVector.h>

#include <string>
#include <vector>

#include "cudal1/core/signature.h"
#include "cudal1/dispatcher/sig_record.h"

namespace cudal1::dispatcher {

/// The transient form of a signature, built on the hook's stack.
struct SigKey {
  c10::SmallVector<int64_t, 48> words;
  uint64_t hash = 0;
  c10::DeviceType device_type = c10::DeviceType::CPU;
  int device_index = -1;  ///< of the tensors (all must agree); -1 for CPU
  bool has_tensor = false;
};

/// Key building, argument by argument (the typed hook uses these directly; encode_call is built from them, so
/// both carriers produce identical keys). key_begin clears `key` and writes the op's word; key_add appends one
/// argument and returns false when it cannot be keyed; key_finish hashes and returns false without a tensor.
void key_begin(const c10::OperatorHandle& op, SigKey* key);
bool key_add(const c10::IValue& v, SigKey* key);
bool key_add(const at::Tensor& t, SigKey* key);
bool key_add(c10::string_view s, SigKey* key);
bool key_add(int64_t v, SigKey* key);
bool key_add(bool v, SigKey* key);
/// Int lists, optional int lists and optional tensors without building an IValue (no allocation):
/// the same words as key_add of the
/// IValue the dispatcher would box them into. A list holding a symbolic SymInt cannot be keyed (false).
bool key_add(c10::IntArrayRef v, SigKey* key);
bool key_add(c10::SymIntArrayRef v, SigKey* key);
bool key_add(c10::OptionalIntArrayRef v, SigKey* key);
bool key_add(const c10::optional<at::Tensor>& t, SigKey* key);
bool key_finish(SigKey* key);

/// Encodes `op` and its `nargs` arguments on top of `stack` into `key`. Returns false when the call cannot be
/// keyed (no tensor, tensors on several devices, a sparse/quantized/complex-typed layout, an argument kind
/// cudal1 does not key such as a Generator): such calls are passed through unprofiled. Never throws for
/// well-formed stacks; does not allocate for up to ~5-d tensors.
bool encode_call(const c10::OperatorHandle& op, const torch::jit::Stack& stack, size_t nargs, SigKey* key);

/// The readable, stable text of a call, e.g. `aten::gelu(f32[64,1024]{1024,1}, approximate='tanh')`.
std::string describe_call(const c10::OperatorHandle& op, const torch::jit::Stack& stack, size_t nargs);

/// The argument specs the optimizer rebuilds a call from.
std::vector<ArgSpec> arg_specs(const torch::jit::Stack& stack, size_t nargs);

/// Short dtype name used in signature text ("f32", "f16", "bf16", "i64", ...).
const char* dtype_short_name(c10::ScalarType t);

}  // namespace cudal1::dispatcher
