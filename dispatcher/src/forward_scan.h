/// @brief Private: what Note [Forward graphs] reads from a TorchScript call before graphing it: the call's
/// signature, the module's state, and the obstacles in the method's graph. Host-only (no CUDA).
#pragma once

#include <ATen/core/ivalue.h>

#include <cstdint>
#include <string>
#include <vector>

namespace torch::jit {
struct Method;
}

namespace cudal1::dispatcher::detail {

/// The key of one call: every input's kind and metadata (tensors: dtype, device, sizes, strides, requires_grad),
/// scalar values, and the grad and inference modes. `tensors` gets the tensor inputs in order, `device` the first
/// one's device index (-1: none). False with `why` for an input cudal1 does not graph (an object, a dict, ...).
bool call_key(const std::vector<c10::IValue>& inputs, std::vector<int64_t>* key, std::vector<at::Tensor>* tensors,
              int* device, std::string* why);

/// `inputs` with each tensor replaced, in order, by the next of `tensors` (the static copies).
std::vector<c10::IValue> with_tensors(const std::vector<c10::IValue>& inputs, const std::vector<at::Tensor>& tensors);

/// Every tensor in `v` (nested tuples, lists and dicts included), in order.
void tensors_of(const c10::IValue& v, std::vector<at::Tensor>* out);

/// The state of a module tree, slot by slot: what a graph captured from it depends on.
class ModuleSnapshot {
 public:
  /// Takes the snapshot of `root` and everything under it; false with `why` when a slot holds a type whose
  /// contents are not compared (a list, a dict, a custom class).
  bool take(const c10::intrusive_ptr<c10::ivalue::Object>& root, std::string* why);
  /// True when every slot still holds what it held: the same tensor at the same data pointer and version, the
  /// same module, an equal number, bool or string. One pass, no allocation. The root must be alive (the caller
  /// holds it); every other module is reached through a slot checked before it.
  bool same() const;
  /// True when some tensor slot requires grad.
  bool any_requires_grad() const { return requires_grad_; }

 private:
  struct Slot {
    c10::ivalue::Object* obj;
    size_t index;
    int kind;  ///< 0 tensor, 1 object, 2 int, 3 double, 4 bool, 5 string, 6 none
    const void* ptr;
    const void* data;
    int64_t value;
    uint32_t version;
  };
  // Weak references: the module and its tensors may go (a replay then finds them changed), but their addresses
  // are not reused while the snapshot holds them, so pointer equality is identity.
  std::vector<c10::weak_intrusive_ptr<c10::ivalue::Object>> objects_;
  std::vector<c10::weak_intrusive_ptr<c10::TensorImpl>> tensors_;
  std::vector<Slot> slots_;
  bool requires_grad_ = false;
};

/// Why `m` cannot be graphed (Note [Forward graphs]: its graph or a method it calls sets an attribute, forks,
/// prints, calls a free function, draws random numbers), or "".
std::string graph_obstacle(const torch::jit::Method& m);

}  // namespace cudal1::dispatcher::detail
