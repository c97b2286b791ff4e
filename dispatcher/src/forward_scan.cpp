/// @brief What Note [Forward graphs] reads from a TorchScript call: call keys, module snapshots, graph obstacles.
#include "forward_scan.h"

#include <ATen/core/grad_mode.h>
#include <c10/core/InferenceMode.h>
#include <torch/csrc/jit/api/function_impl.h>
#include <torch/csrc/jit/api/method.h>
#include <torch/csrc/jit/ir/constants.h>
#include <torch/csrc/jit/ir/ir.h>

#include <cstring>
#include <deque>
#include <functional>
#include <unordered_set>

#include "region.h"

namespace cudal1::dispatcher::detail {
namespace {

int64_t hash_string(const std::string& s) { return static_cast<int64_t>(std::hash<std::string>{}(s)); }

bool key_of(const c10::IValue& v, std::vector<int64_t>* key, std::vector<at::Tensor>* tensors, int* device,
            std::string* why) {
  if (v.isTensor()) {
    const at::Tensor& t = v.toTensor();
    if (!t.defined()) {
      key->push_back(-2);
      return true;
    }
    if (!t.is_cuda()) return *why = "a tensor input not on a CUDA device", false;
    if (*device < 0) *device = t.device().index();
    if (t.device().index() != *device) return *why = "tensor inputs on more than one device", false;
    key->push_back(1);
    key->push_back(static_cast<int64_t>(t.scalar_type()));
    key->push_back(t.device().index());
    key->push_back(t.dim());
    for (int64_t s : t.sizes()) key->push_back(s);
    for (int64_t s : t.strides()) key->push_back(s);
    key->push_back(t.requires_grad());
    tensors->push_back(t);
    return true;
  }
  if (v.isInt()) return key->insert(key->end(), {2, v.toInt()}), true;
  if (v.isDouble()) {
    const double d = v.toDouble();
    int64_t bits = 0;
    std::memcpy(&bits, &d, sizeof bits);
    return key->insert(key->end(), {3, bits}), true;
  }
  if (v.isBool()) return key->insert(key->end(), {4, v.toBool()}), true;
  if (v.isNone()) return key->push_back(5), true;
  if (v.isString()) return key->insert(key->end(), {6, hash_string(v.toStringRef())}), true;
  if (v.isTuple() || v.isList()) {
    const c10::ArrayRef<c10::IValue> elems = v.isTuple() ? v.toTupleRef().elements() : v.toListRef();
    key->insert(key->end(), {v.isTuple() ? 7 : 8, static_cast<int64_t>(elems.size())});
    for (const c10::IValue& e : elems)
      if (!key_of(e, key, tensors, device, why)) return false;
    return true;
  }
  *why = "an input of type " + v.tagKind();
  return false;
}

c10::IValue rebuilt(const c10::IValue& v, const std::vector<at::Tensor>& tensors, size_t* next) {
  if (v.isTensor()) return v.toTensor().defined() ? c10::IValue(tensors.at((*next)++)) : v;
  if (v.isTuple()) {
    std::vector<c10::IValue> elems;
    for (const c10::IValue& e : v.toTupleRef().elements()) elems.push_back(rebuilt(e, tensors, next));
    return c10::ivalue::Tuple::create(std::move(elems));
  }
  if (v.isList()) {
    c10::impl::GenericList out(v.toList().elementType());
    for (const c10::IValue& e : v.toListRef()) out.push_back(rebuilt(e, tensors, next));
    return out;
  }
  return v;
}

const std::unordered_set<std::string>& random_ops() {
  static const std::unordered_set<std::string> ops = {
      "rand", "rand_like", "randn", "randn_like", "randint", "randint_like", "randperm", "bernoulli", "bernoulli_",
      "normal", "normal_", "uniform_", "exponential_", "geometric_", "log_normal_", "cauchy_", "random_",
      "multinomial", "poisson", "rrelu", "rrelu_", "rrelu_with_noise", "_standard_gamma", "binomial"};
  return ops;
}
/// Dropout ops and the index of their `train` argument: random only where it is not a constant false.
int dropout_train_arg(const std::string& op) {
  if (op == "dropout" || op == "dropout_" || op == "feature_dropout" || op == "feature_dropout_" ||
      op == "alpha_dropout" || op == "alpha_dropout_" || op == "feature_alpha_dropout" ||
      op == "feature_alpha_dropout_" || op == "native_dropout")
    return 2;
  return -1;
}

std::string block_obstacle(const torch::jit::Block* b, std::unordered_set<const torch::jit::Graph*>* seen);

std::string graph_function_obstacle(torch::jit::Function& f, std::unordered_set<const torch::jit::Graph*>* seen) {
  torch::jit::GraphFunction* g = torch::jit::tryToGraphFunction(f);
  if (!g) return "it calls a method that is not a TorchScript graph (" + f.qualname().qualifiedName() + ")";
  const std::shared_ptr<torch::jit::Graph> graph = g->graph();
  if (!seen->insert(graph.get()).second) return "";
  return block_obstacle(graph->block(), seen);
}

std::string block_obstacle(const torch::jit::Block* b, std::unordered_set<const torch::jit::Graph*>* seen) {
  for (const torch::jit::Node* n : b->nodes()) {
    const c10::Symbol k = n->kind();
    if (k == c10::prim::SetAttr) return "it sets a module attribute";
    if (k == c10::prim::fork || k == c10::aten::wait) return "it forks";
    if (k == c10::prim::Print || k == c10::aten::warn) return "it prints";
    if (k == c10::prim::CallFunction) return "it calls a free function";
    if (k == c10::prim::CallMethod) {
      const auto cls = n->inputs().at(0)->type()->cast<c10::ClassType>();
      torch::jit::Function* f = cls ? cls->findMethod(n->s(c10::attr::name)) : nullptr;
      if (!f) return "it calls a method cudal1 cannot resolve";
      if (std::string why = graph_function_obstacle(*f, seen); !why.empty()) return why;
    }
    if (k.is_aten()) {
      const std::string op = k.toUnqualString();
      if (random_ops().count(op)) return "it draws random numbers (aten::" + op + ")";
      if (const int train = dropout_train_arg(op); train >= 0) {
        const auto c = train < static_cast<int>(n->inputs().size()) ? torch::jit::toIValue(n->input(train))
                                                                      : c10::optional<c10::IValue>();
        if (!c || !c->isBool() || c->toBool()) return "it draws random numbers (aten::" + op + " in training mode)";
      }
    }
    for (const torch::jit::Block* sub : n->blocks())
      if (std::string why = block_obstacle(sub, seen); !why.empty()) return why;
  }
  return "";
}

}  // namespace

bool call_key(const std::vector<c10::IValue>& inputs, std::vector<int64_t>* key, std::vector<at::Tensor>* tensors,
              int* device, std::string* why) {
  key->clear();
  tensors->clear();
  *device = -1;
  for (const c10::IValue& v : inputs)
    if (!key_of(v, key, tensors, device, why)) return false;
  key->push_back(c10::GradMode::is_enabled());
  key->push_back(c10::InferenceMode::is_enabled());
  return true;
}

std::vector<c10::IValue> with_tensors(const std::vector<c10::IValue>& inputs, const std::vector<at::Tensor>& tensors) {
  std::vector<c10::IValue> out;
  size_t next = 0;
  for (const c10::IValue& v : inputs) out.push_back(rebuilt(v, tensors, &next));
  return out;
}

void tensors_of(const c10::IValue& v, std::vector<at::Tensor>* out) {
  if (v.isTensor()) {
    if (v.toTensor().defined()) out->push_back(v.toTensor());
  } else if (v.isTuple()) {
    for (const c10::IValue& e : v.toTupleRef().elements()) tensors_of(e, out);
  } else if (v.isList()) {
    for (const c10::IValue& e : v.toListRef()) tensors_of(e, out);
  } else if (v.isGenericDict()) {
    for (const auto& kv : v.toGenericDict()) {
      tensors_of(kv.key(), out);
      tensors_of(kv.value(), out);
    }
  }
}

bool ModuleSnapshot::take(const c10::intrusive_ptr<c10::ivalue::Object>& root, std::string* why) {
  objects_.clear();
  tensors_.clear();
  slots_.clear();
  requires_grad_ = false;
  std::unordered_set<const c10::ivalue::Object*> seen{root.get()};
  std::deque<c10::intrusive_ptr<c10::ivalue::Object>> todo{root};
  while (!todo.empty()) {
    c10::intrusive_ptr<c10::ivalue::Object> obj = todo.front();
    todo.pop_front();
    const std::vector<c10::IValue>& slots = obj->slots();
    for (size_t i = 0; i < slots.size(); ++i) {
      const c10::IValue& s = slots[i];
      Slot slot{obj.get(), i, 0, nullptr, nullptr, 0, 0};
      if (s.isTensor()) {
        const at::Tensor& t = s.toTensor();
        if (t.defined()) {
          slot.ptr = t.unsafeGetTensorImpl();
          slot.data = t.has_storage() ? t.data_ptr() : nullptr;
          slot.version = version_of(t);
          requires_grad_ = requires_grad_ || t.requires_grad();
          tensors_.emplace_back(t.getIntrusivePtr());
        }
      } else if (s.isObject()) {
        slot.kind = 1;
        slot.ptr = &s.toObjectRef();
        if (seen.insert(&s.toObjectRef()).second) todo.push_back(s.toObject());
      } else if (s.isInt()) {
        slot.kind = 2;
        slot.value = s.toInt();
      } else if (s.isDouble()) {
        slot.kind = 3;
        const double d = s.toDouble();
        std::memcpy(&slot.value, &d, sizeof d);
      } else if (s.isBool()) {
        slot.kind = 4;
        slot.value = s.toBool();
      } else if (s.isString()) {
        slot.kind = 5;
        slot.value = hash_string(s.toStringRef());
      } else if (s.isNone()) {
        slot.kind = 6;
      } else {
        const c10::ClassTypePtr type = obj->type();
        *why = "module attribute '" + (type ? type->getAttributeName(i) : std::to_string(i)) + "' is a " +
               s.tagKind() + ", whose contents cudal1 does not compare";
        return false;
      }
      slots_.push_back(slot);
    }
    objects_.emplace_back(obj);
  }
  return true;
}

bool ModuleSnapshot::same() const {
  for (const Slot& slot : slots_) {
    const std::vector<c10::IValue>& slots = slot.obj->slots();
    if (slot.index >= slots.size()) return false;
    const c10::IValue& s = slots[slot.index];
    switch (slot.kind) {
      case 0: {
        if (!s.isTensor()) return false;
        const at::Tensor& t = s.toTensor();
        if (!t.defined()) {
          if (slot.ptr) return false;
          break;
        }
        if (t.unsafeGetTensorImpl() != slot.ptr || (t.has_storage() ? t.data_ptr() : nullptr) != slot.data ||
            version_of(t) != slot.version)
          return false;
        break;
      }
      case 1:
        if (!s.isObject() || &s.toObjectRef() != slot.ptr) return false;
        break;
      case 2:
        if (!s.isInt() || s.toInt() != slot.value) return false;
        break;
      case 3: {
        if (!s.isDouble()) return false;
        const double d = s.toDouble();
        int64_t bits = 0;
        std::memcpy(&bits, &d, sizeof bits);
        if (bits != slot.value) return false;
        break;
      }
      case 4:
        if (!s.isBool() || s.toBool() != static_cast<bool>(slot.value)) return false;
        break;
      case 5:
        if (!s.isString() || hash_string(s.toStringRef()) != slot.value) return false;
        break;
      default:
        if (!s.isNone()) return false;
    }
  }
  return true;
}

std::string graph_obstacle(const torch::jit::Method& m) {
  std::unordered_set<const torch::jit::Graph*> seen;
  try {
    return graph_function_obstacle(m.function(), &seen);
  } catch (const std::exception& e) {
    return std::string("its graph could not be read: ") + e.what();
  }
}

}  // namespace cudal1::dispatcher::detail
