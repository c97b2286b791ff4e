/// @brief The typed carrier: unboxed kernels for the families' ops, so that a cold call costs no boxing of its
/// arguments (a stack is built only to create a record or to run a replacement).
#include "hook_state.h"  // first: the generated op headers need the dispatcher's types
#include "region.h"

#include <ATen/ops/_adaptive_avg_pool2d_ops.h>
#include <ATen/ops/_log_softmax_ops.h>
#include <ATen/ops/_softmax_ops.h>
#include <ATen/ops/abs_ops.h>
#include <ATen/ops/add_ops.h>
#include <ATen/ops/addmm_ops.h>
#include <ATen/ops/amax_ops.h>
#include <ATen/ops/amin_ops.h>
#include <ATen/ops/argmax_ops.h>
#include <ATen/ops/argmin_ops.h>
#include <ATen/ops/avg_pool2d_ops.h>
#include <ATen/ops/cudnn_batch_norm_ops.h>
#include <ATen/ops/clamp_ops.h>
#include <ATen/ops/cumprod_ops.h>
#include <ATen/ops/_convolution_ops.h>
#include <ATen/ops/cumsum_ops.h>
#include <ATen/ops/div_ops.h>
#include <ATen/ops/erf_ops.h>
#include <ATen/ops/exp_ops.h>
#include <ATen/ops/gelu_ops.h>
#include <ATen/ops/linalg_vector_norm_ops.h>
#include <ATen/ops/log_ops.h>
#include <ATen/ops/max_ops.h>
#include <ATen/ops/max_pool2d_ops.h>
#include <ATen/ops/max_pool2d_with_indices_ops.h>
#include <ATen/ops/maximum_ops.h>
#include <ATen/ops/mean_ops.h>
#include <ATen/ops/min_ops.h>
#include <ATen/ops/mm_ops.h>
#include <ATen/ops/minimum_ops.h>
#include <ATen/ops/mul_ops.h>
#include <ATen/ops/native_batch_norm_ops.h>
#include <ATen/ops/native_group_norm_ops.h>
#include <ATen/ops/native_layer_norm_ops.h>
#include <ATen/ops/neg_ops.h>
#include <ATen/ops/pow_ops.h>
#include <ATen/ops/reciprocal_ops.h>
#include <ATen/ops/relu_ops.h>
#include <ATen/ops/rsqrt_ops.h>
#include <ATen/ops/sigmoid_ops.h>
#include <ATen/ops/silu_ops.h>
#include <ATen/ops/sqrt_ops.h>
#include <ATen/ops/std_ops.h>
#include <ATen/ops/sub_ops.h>
#include <ATen/ops/sum_ops.h>
#include <ATen/ops/tanh_ops.h>
#include <ATen/ops/var_ops.h>
#include <ATen/ops/where_ops.h>

#include <functional>
#include <map>
#include <tuple>
#include <type_traits>
#include <utility>

namespace cudal1::dispatcher::detail {
namespace {

// Arguments are keyed and boxed through the same IValue conversions the dispatcher's own boxing uses, so a
// typed call and a boxed call of the same arguments get the same signature (tests/dispatcher, HookCpu).
template <typename T>
c10::IValue boxed(const T& v) {
  return c10::IValue(v);
}
c10::IValue boxed(c10::string_view s) { return c10::IValue(std::string(s.data(), s.size())); }

bool key_arg(const at::Tensor& t, SigKey* k) { return key_add(t, k); }
bool key_arg(c10::string_view s, SigKey* k) { return key_add(s, k); }
bool key_arg(int64_t v, SigKey* k) { return key_add(v, k); }
bool key_arg(bool v, SigKey* k) { return key_add(v, k); }
bool key_arg(c10::IntArrayRef v, SigKey* k) { return key_add(v, k); }
bool key_arg(c10::SymIntArrayRef v, SigKey* k) { return key_add(v, k); }
bool key_arg(c10::OptionalIntArrayRef v, SigKey* k) { return key_add(v, k); }
bool key_arg(const c10::optional<at::Tensor>& t, SigKey* k) { return key_add(t, k); }
template <typename T>
bool key_arg(const T& v, SigKey* k) {  // doubles, scalars, dtypes, optional ints and lists: as boxed
  return key_add(boxed(v), k);
}

template <typename Op>
const c10::OperatorHandle& handle() {
  static const c10::OperatorHandle h = c10::Dispatcher::singleton().findSchemaOrThrow(Op::name, Op::overload_name);
  return h;
}

/// The outputs a replacement left on the stack, as the op returns them (one tensor or a tuple of tensors).
template <typename R>
struct FromStack {
  static R take(torch::jit::Stack& s) { return std::move(s.back()).toTensor(); }
};
template <typename... T>
struct FromStack<std::tuple<T...>> {
  static std::tuple<T...> take(torch::jit::Stack& s) { return take(s, std::index_sequence_for<T...>{}); }
  template <size_t... I>
  static std::tuple<T...> take(torch::jit::Stack& s, std::index_sequence<I...>) {
    const size_t base = s.size() - sizeof...(T);
    return std::tuple<T...>(std::move(s[base + I]).toTensor()...);
  }
};

/// A deferred call's pending outputs, as the op returns them.
template <typename R>
struct FromVector {
  static R take(std::vector<at::Tensor>& v) { return std::move(v.at(0)); }
};
template <typename... T>
struct FromVector<std::tuple<T...>> {
  static std::tuple<T...> take(std::vector<at::Tensor>& v) { return take(v, std::index_sequence_for<T...>{}); }
  template <size_t... I>
  static std::tuple<T...> take(std::vector<at::Tensor>& v, std::index_sequence<I...>) {
    if (v.size() != sizeof...(T)) throw std::logic_error("deferred call: wrong number of outputs");
    return std::tuple<T...>(std::move(v[I])...);
  }
};

/// A typed call's tensors for chain profiling (Note [Chain profiling]): tensor and optional-tensor arguments,
/// and the outputs (one tensor or a tuple of them).
void chain_arg(ChainBuilder::Call& c, const at::Tensor& t) { c.args.push_back(&t); }
void chain_arg(ChainBuilder::Call& c, const c10::optional<at::Tensor>& t) {
  c.args.push_back(t.has_value() ? &*t : nullptr);
}
template <typename T>
void chain_arg(ChainBuilder::Call&, const T&) {}
void chain_outputs(ChainBuilder::Call& c, const at::Tensor& t) { c.outputs.push_back(&t); }
template <typename... T>
void chain_outputs(ChainBuilder::Call& c, const std::tuple<T...>& t) {
  std::apply([&](const auto&... o) { (c.outputs.push_back(&o), ...); }, t);
}
template <typename R, typename... Args>
void observe_typed(HookState& st, SigRecord* rec, bool inplace, bool conv, bool bmm, const R& out,
                   const Args&... args) noexcept {
  ChainBuilder::Call c;
  c.rec = rec;
  c.inplace = inplace;
  c.conv = conv;
  c.bmm = bmm;
  (chain_arg(c, args), ...);
  chain_outputs(c, out);
  observe_chain(st, c);
}

/// The typed kernel of `Op`, its C++ signature taken from the op's generated schema (so the same source
/// builds against each torch version's argument types).
template <typename Op, typename Schema = typename Op::schema>
struct Typed;
template <typename Op, typename R, typename... Args>
struct Typed<Op, R(Args...)> {
  static constexpr bool kInplace = std::is_reference_v<R>;  // Tensor& self: Note [In-place nodes]
  static constexpr bool kConv = std::is_same_v<Op, at::_ops::_convolution>;  // Note [Program chains]
  static constexpr bool kBmm = std::is_same_v<Op, at::_ops::bmm>;            // Note [Matmul views]
  static R hook(c10::DispatchKeySet ks, Args... args) {
    HookState* st = active_state();
    if (!st) {  // bypassed or nested: an open region of this thread runs first (Note [Deferred regions])
      if (g_regions_live.load(std::memory_order_relaxed)) flush_this_thread(FlushReason::kOther);
      return Op::redispatch(after_hook(ks), args...);
    }
    DepthGuard depth;
    Visit v;
    SigKey key;
    key_begin(handle<Op>(), &key);
    const bool keyed = (key_arg(args, &key) && ...) && key_finish(&key);
    if (g_regions_live.load(std::memory_order_relaxed)) {  // defer it, or run this thread's region first
      ChainBuilder::Call c;
      c.rec = keyed && accepted(*st, key) ? lookup(*st, key) : nullptr;
      c.inplace = kInplace;
      c.conv = kConv;
      c.bmm = kBmm;
      (chain_arg(c, args), ...);
      std::vector<at::Tensor> outs;
      if (defer_or_flush(*st, c.rec, c, &outs)) {
        // A deferred call is a known chain's node: recorded again only for program chains (Note [Chain profiling]).
        c.rec->calls.fetch_add(1, std::memory_order_relaxed);
        const bool record = recording_chains(*st) && recording_programs();
        if constexpr (kInplace) {  // Note [In-place nodes]: the pending output is `self` itself
          R out = std::get<0>(std::forward_as_tuple(args...));
          if (record) observe_typed(*st, c.rec, kInplace, kConv, kBmm, out, args...);
          return out;
        } else {
          R out = FromVector<R>::take(outs);
          if (record) observe_typed(*st, c.rec, kInplace, kConv, kBmm, out, args...);
          return out;
        }
      }
    }
    if (keyed) {
      std::optional<torch::jit::Stack> stack;
      visit_call(*st, handle<Op>(), key, sizeof...(Args), [&] {
        if (!stack) stack.emplace(torch::jit::Stack{boxed(args)...});
        return &*stack;
      }, &v);
      if constexpr (!kInplace) {  // in-place ops have no replacements (no family serves them)
        if (v.served) {
          v.sample->finish();
          R out = FromStack<R>::take(*stack);
          if (recording_chains(*st)) observe_typed(*st, v.rec, kInplace, kConv, kBmm, out, args...);
          return out;
        }
      }
    }
    R out = Op::redispatch(after_hook(ks), args...);  // ATen's own errors propagate unchanged
    if (v.sample) v.sample->finish();
    if (v.rec && recording_chains(*st)) observe_typed(*st, v.rec, kInplace, kConv, kBmm, out, args...);
    return out;
  }
};

using Registrar = std::function<void(torch::Library&, const char*)>;
template <typename Op>
Registrar typed() {
  return [](torch::Library& l, const char* n) { l.impl(n, TORCH_FN(Typed<Op>::hook)); };
}

const std::map<std::string, Registrar>& table() {
  namespace ops = at::_ops;
  static const auto* t = new std::map<std::string, Registrar>{
      // unary
      {"relu", typed<ops::relu>()}, {"sigmoid", typed<ops::sigmoid>()}, {"tanh", typed<ops::tanh>()},
      {"silu", typed<ops::silu>()}, {"exp", typed<ops::exp>()}, {"neg", typed<ops::neg>()},
      {"abs", typed<ops::abs>()}, {"gelu", typed<ops::gelu>()},
      // softmax, norm, pool, scan
      {"_softmax", typed<ops::_softmax>()}, {"_log_softmax", typed<ops::_log_softmax>()},
      {"native_layer_norm", typed<ops::native_layer_norm>()}, {"native_group_norm", typed<ops::native_group_norm>()},
      {"max_pool2d", typed<ops::max_pool2d>()}, {"max_pool2d_with_indices", typed<ops::max_pool2d_with_indices>()},
      {"avg_pool2d", typed<ops::avg_pool2d>()}, {"_adaptive_avg_pool2d", typed<ops::_adaptive_avg_pool2d>()},
      {"cumsum", typed<ops::cumsum>()}, {"cumprod", typed<ops::cumprod>()},
      // reductions
      {"sum.dim_IntList", typed<ops::sum_dim_IntList>()}, {"mean.dim", typed<ops::mean_dim>()},
      {"amax", typed<ops::amax>()}, {"amin", typed<ops::amin>()}, {"max.dim", typed<ops::max_dim>()},
      {"min.dim", typed<ops::min_dim>()}, {"argmax", typed<ops::argmax>()}, {"argmin", typed<ops::argmin>()},
      {"var.correction", typed<ops::var_correction>()}, {"std.correction", typed<ops::std_correction>()},
      {"linalg_vector_norm", typed<ops::linalg_vector_norm>()},
      // binary: called everywhere in a model, so their cold path must stay cheap
      {"add.Tensor", typed<ops::add_Tensor>()}, {"sub.Tensor", typed<ops::sub_Tensor>()},
      {"mul.Tensor", typed<ops::mul_Tensor>()}, {"div.Tensor", typed<ops::div_Tensor>()},
      {"add.Scalar", typed<ops::add_Scalar>()}, {"sub.Scalar", typed<ops::sub_Scalar>()},
      {"mul.Scalar", typed<ops::mul_Scalar>()}, {"div.Scalar", typed<ops::div_Scalar>()},
      {"maximum", typed<ops::maximum>()}, {"minimum", typed<ops::minimum>()},
      {"pow.Tensor_Tensor", typed<ops::pow_Tensor_Tensor>()}, {"where.self", typed<ops::where_self>()},
      // chain ops (chain_ops() in chains.h: hooked with CUDAL1_FUSE=on so that chains are seen whole)
      {"pow.Tensor_Scalar", typed<ops::pow_Tensor_Scalar>()},
      {"rsqrt", typed<ops::rsqrt>()}, {"sqrt", typed<ops::sqrt>()}, {"log", typed<ops::log>()},
      {"reciprocal", typed<ops::reciprocal>()}, {"clamp", typed<ops::clamp>()}, {"erf", typed<ops::erf>()},
      // in-place chain ops (Note [In-place nodes])
      {"relu_", typed<ops::relu_>()}, {"add_.Tensor", typed<ops::add__Tensor>()},
      {"sub_.Tensor", typed<ops::sub__Tensor>()}, {"mul_.Tensor", typed<ops::mul__Tensor>()},
      {"div_.Tensor", typed<ops::div__Tensor>()}, {"add_.Scalar", typed<ops::add__Scalar>()},
      {"mul_.Scalar", typed<ops::mul__Scalar>()}, {"sigmoid_", typed<ops::sigmoid_>()},
      {"tanh_", typed<ops::tanh_>()}, {"silu_", typed<ops::silu_>()}, {"gelu_", typed<ops::gelu_>()},
      // GEMM rewrites (Note [Padded GEMM]): every linear layer calls mm, so its cold path must stay cheap
      {"mm", typed<ops::mm>()}, {"addmm", typed<ops::addmm>()},
      // Note [Matmul views]: eager attention's batched matmuls (a chain op)
      {"bmm", typed<ops::bmm>()},
      // batch norms: typed so that an eval-mode batch norm can begin a deferred chain
      {"cudnn_batch_norm", typed<ops::cudnn_batch_norm>()}, {"native_batch_norm", typed<ops::native_batch_norm>()},
      // convolutions: typed so that one can begin a program region (Note [Program chains])
      {"_convolution", typed<ops::_convolution>()},
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
