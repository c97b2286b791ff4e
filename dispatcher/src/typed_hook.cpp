/// @brief The typed carrier: unboxed kernels for the families' ops, so that a cold call costs no boxing of its
/// arguments (a stack is built only to create a record or to run a replacement).
#include "hook_state.h"  // first: the generated op headers need the dispatcher's types

#include <ATen/ops/_log_softmax_ops.h>
#include <ATen/ops/_softmax_ops.h>
#include <ATen/ops/abs_ops.h>
#include <ATen/ops/add_ops.h>
#include <ATen/ops/div_ops.h>
#include <ATen/ops/exp_ops.h>
#include <ATen/ops/gelu_ops.h>
#include <ATen/ops/maximum_ops.h>
#include <ATen/ops/minimum_ops.h>
#include <ATen/ops/mul_ops.h>
#include <ATen/ops/neg_ops.h>
#include <ATen/ops/relu_ops.h>
#include <ATen/ops/sigmoid_ops.h>
#include <ATen/ops/silu_ops.h>
#include <ATen/ops/sub_ops.h>
#include <ATen/ops/tanh_ops.h>
#include <ATen/ops/where_ops.h>

#include <functional>
#include <map>

namespace cudal1::dispatcher::detail {
namespace {

c10::IValue boxed(const at::Tensor& t) { return c10::IValue(t); }
c10::IValue boxed(c10::string_view s) { return c10::IValue(std::string(s.data(), s.size())); }
c10::IValue boxed(int64_t v) { return c10::IValue(v); }
c10::IValue boxed(bool v) { return c10::IValue(v); }
c10::IValue boxed(const c10::Scalar& v) { return c10::IValue(v); }

template <typename Op>
const c10::OperatorHandle& handle() {
  static const c10::OperatorHandle h = c10::Dispatcher::singleton().findSchemaOrThrow(Op::name, Op::overload_name);
  return h;
}

/// The typed kernel of an op whose schema is `at::Tensor(Args...)`.
template <typename Op, typename... Args>
at::Tensor typed_hook(c10::DispatchKeySet ks, Args... args) {
  HookState* st = active_state();
  if (!st) return Op::redispatch(after_hook(ks), args...);
  DepthGuard depth;
  Visit v;
  SigKey key;
  key_begin(handle<Op>(), &key);
  if ((key_add(args, &key) && ...) && key_finish(&key)) {
    std::optional<torch::jit::Stack> stack;
    visit_call(*st, handle<Op>(), key, sizeof...(Args), [&] {
      if (!stack) stack.emplace(torch::jit::Stack{boxed(args)...});
      return &*stack;
    }, &v);
    if (v.served) {
      v.sample->finish();
      return std::move(stack->back()).toTensor();
    }
  }
  at::Tensor out = Op::redispatch(after_hook(ks), args...);  // ATen's own errors propagate unchanged
  if (v.sample) v.sample->finish();
  return out;
}


const std::map<std::string, std::function<void(torch::Library&, const char*)>>& table() {
  static const auto* t = new std::map<std::string, std::function<void(torch::Library&, const char*)>>{
      {"relu", [](torch::Library& l, const char* n) { l.impl(n, TORCH_FN((typed_hook<at::_ops::relu, const at::Tensor&>))); }},
      {"sigmoid", [](torch::Library& l, const char* n) { l.impl(n, TORCH_FN((typed_hook<at::_ops::sigmoid, const at::Tensor&>))); }},
      {"tanh", [](torch::Library& l, const char* n) { l.impl(n, TORCH_FN((typed_hook<at::_ops::tanh, const at::Tensor&>))); }},
      {"silu", [](torch::Library& l, const char* n) { l.impl(n, TORCH_FN((typed_hook<at::_ops::silu, const at::Tensor&>))); }},
      {"exp", [](torch::Library& l, const char* n) { l.impl(n, TORCH_FN((typed_hook<at::_ops::exp, const at::Tensor&>))); }},
      {"neg", [](torch::Library& l, const char* n) { l.impl(n, TORCH_FN((typed_hook<at::_ops::neg, const at::Tensor&>))); }},
      {"abs", [](torch::Library& l, const char* n) { l.impl(n, TORCH_FN((typed_hook<at::_ops::abs, const at::Tensor&>))); }},
      {"_softmax", [](torch::Library& l, const char* n) {
         l.impl(n, TORCH_FN((typed_hook<at::_ops::_softmax, const at::Tensor&, int64_t, bool>)));
       }},
      {"_log_softmax", [](torch::Library& l, const char* n) {
         l.impl(n, TORCH_FN((typed_hook<at::_ops::_log_softmax, const at::Tensor&, int64_t, bool>)));
       }},
      {"gelu", [](torch::Library& l, const char* n) {
         l.impl(n, TORCH_FN((typed_hook<at::_ops::gelu, const at::Tensor&, c10::string_view>)));
       }},
      // Binary ops: called everywhere in a model, so their cold path must stay cheap.
      {"add.Tensor", [](torch::Library& l, const char* n) {
         l.impl(n, TORCH_FN((typed_hook<at::_ops::add_Tensor, const at::Tensor&, const at::Tensor&, const c10::Scalar&>)));
       }},
      {"sub.Tensor", [](torch::Library& l, const char* n) {
         l.impl(n, TORCH_FN((typed_hook<at::_ops::sub_Tensor, const at::Tensor&, const at::Tensor&, const c10::Scalar&>)));
       }},
      {"mul.Tensor", [](torch::Library& l, const char* n) {
         l.impl(n, TORCH_FN((typed_hook<at::_ops::mul_Tensor, const at::Tensor&, const at::Tensor&>)));
       }},
      {"div.Tensor", [](torch::Library& l, const char* n) {
         l.impl(n, TORCH_FN((typed_hook<at::_ops::div_Tensor, const at::Tensor&, const at::Tensor&>)));
       }},
      {"maximum", [](torch::Library& l, const char* n) {
         l.impl(n, TORCH_FN((typed_hook<at::_ops::maximum, const at::Tensor&, const at::Tensor&>)));
       }},
      {"minimum", [](torch::Library& l, const char* n) {
         l.impl(n, TORCH_FN((typed_hook<at::_ops::minimum, const at::Tensor&, const at::Tensor&>)));
       }},
      {"where.self", [](torch::Library& l, const char* n) {
         l.impl(n, TORCH_FN((typed_hook<at::_ops::where_self, const at::Tensor&, const at::Tensor&, const at::Tensor&>)));
       }},
  };
  return *t;
}

}  // namespace

bool register_typed(torch::Library& lib, const std::string& spec) {
  const auto it = table().find(spec);
  if (it == table().end()) return false;
  it->second(lib, spec.c_str());
  return true;
}

}  // namespace cudal1::dispatcher::detail
