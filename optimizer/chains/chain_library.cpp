/// @brief Library chains (Note [Library chains] in chain_library.h): a GEMM and its bias add, optionally an
/// activation, computed by one cuBLASLt-epilogue call through ATen.
#include "chain_library.h"

#include <ATen/ATen.h>
#include <c10/core/impl/LocalDispatchKeySet.h>

#include <algorithm>
#include <cmath>
#include <sstream>

#include "chain_causal.h"
#include "cudal1/dispatcher/hook.h"

namespace cudal1::optimizer::chains {
namespace {

Status unsupported(const std::string& why) { return Status(Code::kUnsupported, "library chain: " + why); }

/// The tanh GELU in double: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
double tanh_gelu(double x) {
  constexpr double kSqrt2OverPi = 0.79788456080286535588;
  return 0.5 * x * (1 + std::tanh(kSqrt2OverPi * (x + 0.044715 * x * x * x)));
}

bool output_of(const TensorArg& t, int node) { return t.in.producer == node && t.in.index == 0; }

/// The node's one output: [m, n], contiguous, of `dtype`.
bool result_shape(const dispatcher::ChainNode& node, int64_t m, int64_t n, c10::ScalarType dtype) {
  if (node.outputs.size() != 1) return false;
  const dispatcher::TensorSpec& o = node.outputs[0];
  return o.dtype == dtype && o.sizes == std::vector<int64_t>{m, n} &&
         (o.strides == std::vector<int64_t>{n, 1} || m == 1 || n == 1) && o.storage_offset == 0;
}

/// Sets the epilogue from an activation node reading node `from`'s output; false when it is not one.
bool activation(const dispatcher::ChainNode& node, int from, LibraryPlan* p) {
  const std::string op = functional_op(node);
  auto args = args_of(node);
  if (!args.ok() || args.value().tensors.size() != 1 || !output_of(args.value().tensors[0], from)) return false;
  if (op == "aten::relu") {
    p->epilogue = LibraryPlan::Epilogue::kRelu;
  } else if (op == "aten::gelu") {
    const c10::IValue* a = args.value().arg("approximate");
    if (!a || !a->isString() || a->toStringRef() != "tanh") return false;  // the epilogue is the tanh form
    p->epilogue = LibraryPlan::Epilogue::kGeluTanh;
  } else {
    return false;
  }
  return result_shape(node, p->m, p->n, p->dtype);
}

/// One pointwise step in double (ATen's formulas without the roundings; `v` the steps' values so far, `x` the one
/// external's). NaN for what a composite activation does not use.
double eval_step(const Step& s, const std::vector<double>& v, double x) {
  auto val = [&](size_t i) {
    const Operand& o = s.args.at(i);
    switch (o.kind) {
      case Operand::kStep: return v.at(static_cast<size_t>(o.index));
      case Operand::kExternal: return x;
      case Operand::kScalar: return o.value;
      default: return std::nan("");
    }
  };
  const double a = val(0), b = s.args.size() > 1 ? val(1) : 0.0;
  switch (s.op) {
    case StepOp::kAdd: return a + s.alpha * b;
    case StepOp::kSub: return a - s.alpha * b;
    case StepOp::kMul: return a * b;
    case StepOp::kDiv:
    case StepOp::kDivScalar: return a / b;
    case StepOp::kNeg: return -a;
    case StepOp::kTanh: return std::tanh(a);
    case StepOp::kPow: return std::pow(a, s.exponent);
    case StepOp::kGeluTanh: return tanh_gelu(a);
    default: return std::nan("");
  }
}

/// True when nodes `from`.. of `chain` compute the tanh GELU, 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), of
/// node `from - 1`'s result read directly or through a row view (Note [Row views]), however the model wrote it
/// (HF's gelu_new: 0.5 * x * (1 + tanh(c * (x + 0.044715 * pow(x, 3))))): the nodes plan as a pointwise chain
/// of that one value and scalars, whose last output equals the GELU in double at points across its range.
bool tanh_gelu_composite(const dispatcher::ChainRecord& chain, size_t from, int64_t m, int64_t n,
                         c10::ScalarType dtype) {
  const auto& nodes = chain.nodes;
  if (from < 1 || nodes.size() - from < 2) return false;
  const int value = static_cast<int>(from) - 1;
  for (size_t k = from; k < nodes.size(); ++k) {
    for (const dispatcher::ChainInput& in : nodes[k].inputs)
      if (in.producer >= 0 && in.producer < value) return false;  // reads the GEMM or x: not a function of the value
    if (nodes[k].outputs.size() != 1 || nodes[k].outputs[0].dtype != dtype || !dispatcher::contiguous_spec(nodes[k].outputs[0]) ||
        dispatcher::numel_of(nodes[k].outputs[0].sizes) != m * n || nodes[k].outputs[0].sizes.back() != n)
      return false;
  }
  int externals = 0;
  std::vector<dispatcher::ChainNode> rest = dispatcher::suffix_nodes(chain, from, &externals);
  if (externals != 1) return false;  // the value alone: every constant a Scalar argument
  const dispatcher::ChainRecord composite(0, {}, std::move(rest), externals);
  auto planned = plan_chain(composite);
  if (!planned.ok() || planned->outputs.empty()) return false;
  const ChainPlan& p = planned.value();
  const int last = p.outputs.back().step;
  for (double x : {-7.5, -3.1, -1.7, -0.8, -0.23, 0.0, 0.11, 0.6, 1.3, 2.2, 4.9, 9.0}) {
    std::vector<double> v;
    for (const Step& s : p.steps) v.push_back(eval_step(s, v, x));
    const double want = tanh_gelu(x);
    const double got = v.at(static_cast<size_t>(last));
    if (!(std::fabs(got - want) <= 1e-6 * (1 + std::fabs(want)))) return false;
  }
  return true;
}

/// A 2-D operand cuBLAS reads in place (row- or column-major with a leading dimension at least its extent), so
/// the library call copies nothing.
bool blas_layout(const dispatcher::TensorSpec& s) {
  const int64_t r = s.sizes[0], c = s.sizes[1], sr = s.strides[0], sc = s.strides[1];
  return (sc == 1 && sr >= std::max<int64_t>(c, 1)) || (sr == 1 && sc >= std::max<int64_t>(r, 1));
}

/// x [M, K] and w [K, N] of one float dtype; fills m, n, k, dtype.
Status gemm_operands(const TensorArg& x, const TensorArg& w, LibraryPlan* p) {
  if (!is_external(x) || !is_external(w)) return unsupported("a GEMM operand computed inside the chain");
  const auto& xs = *x.spec;
  const auto& ws = *w.spec;
  if (xs.sizes.size() != 2 || ws.sizes.size() != 2 || xs.sizes[1] != ws.sizes[0]) return unsupported("not a 2-D GEMM");
  if (!blas_layout(xs) || !blas_layout(ws)) return unsupported("a GEMM operand cuBLAS cannot read in place");
  if (xs.dtype != ws.dtype || !float_like(xs.dtype)) return unsupported("GEMM operands of mixed or unsupported dtypes");
  p->m = xs.sizes[0];
  p->k = xs.sizes[1];
  p->n = ws.sizes[1];
  if (p->m < 1 || p->n < 1 || p->k < 1) return unsupported("an empty GEMM");
  p->dtype = xs.dtype;
  p->x = x.in.index;
  p->w = w.in.index;
  return Status();
}

/// The bias: an external, contiguous [N] vector of the GEMM's dtype.
Status bias_operand(const TensorArg& b, LibraryPlan* p) {
  if (!is_external(b)) return unsupported("the bias is computed inside the chain");
  const auto& s = *b.spec;
  const bool contiguous = p->n == 1 || s.strides == std::vector<int64_t>{1};
  if (s.dtype != p->dtype || s.sizes != std::vector<int64_t>{p->n} || !contiguous)
    return unsupported("the bias is not a contiguous [N] vector of the GEMM's dtype");
  p->bias = b.in.index;
  return Status();
}


}  // namespace

std::string LibraryPlan::call() const {
  if (kind == Kind::kAttention)
    return attention.mask >= 0 ? "scaled_dot_product_attention(mask)" : "scaled_dot_product_attention";
  switch (epilogue) {
    case Epilogue::kNone: return "addmm";
    case Epilogue::kRelu: return "_addmm_activation(relu)";
    case Epilogue::kGeluTanh: return "_addmm_activation(gelu tanh)";
  }
  return "?";
}

Result<LibraryPlan> plan_library_chain(const dispatcher::ChainRecord& chain) {
  const auto& nodes = chain.nodes;
  if (!nodes.empty() && functional_op(nodes.front()) == "aten::bmm") return plan_attention(chain);

  if (nodes.size() < 2 || nodes.size() > kMaxLibraryNodes) return unsupported("not 2 to 16 ops");
  LibraryPlan p;
  const std::string first = functional_op(nodes[0]);
  CUDAL1_ASSIGN_OR_RETURN(NodeArgs a0, args_of(nodes[0]));
  size_t gemm_nodes = 0;  // the nodes before the activation
  if (first == "aten::mm") {
    if (a0.tensors.size() != 2) return unsupported("mm operands");
    CUDAL1_RETURN_IF_ERROR(gemm_operands(a0.tensors[0], a0.tensors[1], &p));
    if (!result_shape(nodes[0], p.m, p.n, p.dtype)) return unsupported("mm's result");
    const std::string second = functional_op(nodes[1]);
    if (second != "aten::add.Tensor") return unsupported("mm not followed by a bias add");
    CUDAL1_ASSIGN_OR_RETURN(NodeArgs a1, args_of(nodes[1]));
    if (a1.tensors.size() != 2 || !a1.is_one("alpha")) return unsupported("an add with alpha != 1");
    const bool left = output_of(a1.tensors[0], 0);  // add(mm, bias) or add(bias, mm)
    if (!left && !output_of(a1.tensors[1], 0)) return unsupported("the add does not read mm's result");
    if (nodes[1].inplace && !left) return unsupported("an in-place add on the bias");
    CUDAL1_RETURN_IF_ERROR(bias_operand(a1.tensors[left ? 1 : 0], &p));
    if (!result_shape(nodes[1], p.m, p.n, p.dtype)) return unsupported("the add's result is not mm's shape");
    gemm_nodes = 2;
  } else if (first == "aten::addmm") {
    if (a0.tensors.size() != 3 || !a0.is_one("beta") || !a0.is_one("alpha"))
      return unsupported("addmm with beta or alpha != 1");
    CUDAL1_RETURN_IF_ERROR(gemm_operands(a0.tensors[1], a0.tensors[2], &p));
    CUDAL1_RETURN_IF_ERROR(bias_operand(a0.tensors[0], &p));
    if (!result_shape(nodes[0], p.m, p.n, p.dtype)) return unsupported("addmm's result");
    gemm_nodes = 1;
  } else {
    return unsupported("does not start with mm or addmm");
  }
  // Note [Row views]: only the activation may read the GEMM's value through a view (a reshape of its rows).
  for (size_t k = 0; k < nodes.size(); ++k)
    for (const dispatcher::ChainInput& in : nodes[k].inputs)
      if (in.view && (k < gemm_nodes || in.producer != static_cast<int>(gemm_nodes) - 1))
        return unsupported("a view of a chain value (Note [Matmul views])");
  if (nodes.size() == gemm_nodes + 1) {
    if (!activation(nodes[gemm_nodes], static_cast<int>(gemm_nodes) - 1, &p))
      return unsupported("the op after the bias add is not relu or gelu(approximate='tanh')");
  } else if (nodes.size() > gemm_nodes) {
    if (!tanh_gelu_composite(chain, gemm_nodes, p.m, p.n, p.dtype))
      return unsupported("the ops after the bias add are not an activation the epilogues compute");
    p.epilogue = LibraryPlan::Epilogue::kGeluTanh;
  }
  if (chain.externals > 3) return unsupported("more inputs than x, w and the bias");

  // The chain as verification sees it (Note [Chain tuning]): externals, one GEMM-valued step per node.
  ChainPlan& c = p.check;
  c.shape = {p.m, p.n};
  c.numel = p.m * p.n;
  c.externals.resize(static_cast<size_t>(chain.externals));
  fill_external(&c.externals.at(static_cast<size_t>(p.x)), *a0.tensors[first == "aten::mm" ? 0 : 1].spec);
  fill_external(&c.externals.at(static_cast<size_t>(p.w)), *a0.tensors[first == "aten::mm" ? 1 : 2].spec);
  {
    dispatcher::TensorSpec b;
    b.dtype = p.dtype;
    b.sizes = {p.n};
    b.strides = {1};
    b.defined = true;
    fill_external(&c.externals.at(static_cast<size_t>(p.bias)), b);
  }
  for (size_t k = 0; k < nodes.size(); ++k) {
    Step s;
    s.op = StepOp::kGemm;
    s.dtype = p.dtype;
    s.depth = static_cast<double>(k + 1);  // an activation composite: one rounding a step in the ATen chain
    s.gemm_k = p.k;
    if (k >= gemm_nodes) s.overflow_node = static_cast<int>(gemm_nodes) - 1;
    c.steps.push_back(s);
    c.outputs.push_back(OutputSlot{static_cast<int>(k), 0, static_cast<int>(k)});
  }
  std::ostringstream text;
  text << "library " << p.call() << "(bias e" << p.bias << ", x e" << p.x << ", w e" << p.w << ") " << p.m << "x" << p.k
       << " @ " << p.k << "x" << p.n << " " << c10::toString(p.dtype) << " (" << nodes.size() << " ops)";
  c.text = text.str();
  return p;
}

namespace {

class LibraryChainKernel final : public dispatcher::ChainKernel {
 public:
  LibraryChainKernel(const dispatcher::ChainRecord& chain, LibraryPlan plan, std::shared_ptr<CausalPath> causal)
      : chain_(chain), p_(std::move(plan)), causal_(std::move(causal)) {}

  Status run(const std::vector<at::Tensor>& ext, const std::vector<std::vector<at::Tensor>>& outs) noexcept override {
    try {
      const size_t last = chain_.nodes.size() - 1;
      if (outs.size() != chain_.nodes.size()) return unsupported("output count");
      const at::Tensor y = outs[last].empty() ? at::Tensor() : outs[last][0];
      for (size_t k = 0; k < last; ++k)
        for (const at::Tensor& t : outs[k])
          if (t.defined() && !(y.defined() && t.is_same(y)))  // an intermediate the app kept: exact, through ATen
            return Status(Code::kUnavailable, "library chain: an intermediate is kept");
      if (!y.defined()) return Status();  // the app dropped the result too
      if (p_.kind == LibraryPlan::Kind::kAttention) {  // Note [Attention rewrite]
        if (ext.size() != p_.check.externals.size()) return unsupported("operand count");
        for (const at::Tensor& t : ext)
          if (!t.defined() || t.scalar_type() != p_.dtype || t.device() != y.device())
            return unsupported("an operand differs from the plan");
        c10::impl::ExcludeDispatchKeyGuard no_key(c10::DispatchKey::DeferredInit);
        dispatcher::BypassScope bypass;
        at::Tensor out = y;
        return run_attention(p_.attention, ext, out, causal_.get());
      }
      if (!y.is_cuda() && p_.epilogue == LibraryPlan::Epilogue::kGeluTanh)  // ATen's CPU kernel uses erf's GELU
        return Status(Code::kUnavailable, "library chain: the tanh GELU epilogue is CUDA's");
      if (ext.size() != p_.check.externals.size()) return unsupported("operand count");
      const at::Tensor &x = ext[static_cast<size_t>(p_.x)], &w = ext[static_cast<size_t>(p_.w)],
                       &b = ext[static_cast<size_t>(p_.bias)];
      for (const at::Tensor* t : {&x, &w, &b, &y})
        if (!t->defined() || t->scalar_type() != p_.dtype || t->device() != y.device())
          return unsupported("an operand differs from the plan");
      // The activation's result may be a row reshape of the GEMM's [M, N] (Note [Row views]).
      if (x.sizes() != at::IntArrayRef{p_.m, p_.k} || w.sizes() != at::IntArrayRef{p_.k, p_.n} ||
          b.sizes() != at::IntArrayRef{p_.n} || !b.is_contiguous() || y.numel() != p_.m * p_.n || y.dim() < 1 ||
          y.size(-1) != p_.n || !y.is_contiguous())
        return unsupported("a shape differs from the plan");
      c10::impl::ExcludeDispatchKeyGuard no_key(c10::DispatchKey::DeferredInit);
      dispatcher::BypassScope bypass;
      at::Tensor out = y.dim() == 2 ? y : y.view({p_.m, p_.n});
      if (p_.epilogue == LibraryPlan::Epilogue::kNone) at::addmm_out(out, b, x, w);
      else at::_addmm_activation_out(out, b, x, w, 1, 1, p_.epilogue == LibraryPlan::Epilogue::kGeluTanh);
      return Status();
    } catch (const std::exception& e) {
      return Status(Code::kInternal, std::string("library chain: ") + e.what());
    } catch (...) {
      return Status(Code::kInternal, "library chain: unknown exception");
    }
  }
  std::string describe() const override { return "library " + p_.call() + (causal_ ? " (causal path)" : ""); }

 private:
  const dispatcher::ChainRecord& chain_;
  LibraryPlan p_;
  std::shared_ptr<CausalPath> causal_;  ///< Note [Causal attention]; null: masks run the general path
};

}  // namespace

std::unique_ptr<dispatcher::ChainKernel> library_chain_kernel(const dispatcher::ChainRecord& chain, LibraryPlan plan,
                                                              std::shared_ptr<CausalPath> causal) {
  return std::make_unique<LibraryChainKernel>(chain, std::move(plan), std::move(causal));
}

}  // namespace cudal1::optimizer::chains
