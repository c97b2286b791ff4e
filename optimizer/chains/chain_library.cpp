/// @brief Library chains (Note [Library chains] in chain_library.h): a GEMM and its bias add, optionally an
/// activation, computed by one cuBLASLt-epilogue call through ATen.
#include "chain_library.h"

#include <ATen/ATen.h>
#include <c10/core/impl/LocalDispatchKeySet.h>

#include <algorithm>
#include <sstream>

#include "cudal1/dispatcher/hook.h"

namespace cudal1::optimizer::chains {
namespace {

Status unsupported(const std::string& why) { return Status(Code::kUnsupported, "library chain: " + why); }

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
  if (dispatcher::has_view_input(nodes)) return unsupported("a view of a chain value (Note [Matmul views])");
  if (nodes.size() < 2 || nodes.size() > 3) return unsupported("not 2 or 3 ops");
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
  if (nodes.size() > gemm_nodes) {
    if (nodes.size() != gemm_nodes + 1 || !activation(nodes[gemm_nodes], static_cast<int>(gemm_nodes) - 1, &p))
      return unsupported("the op after the bias add is not relu or gelu(approximate='tanh')");
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
    s.depth = static_cast<double>(k + 1);
    s.gemm_k = p.k;
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
  LibraryChainKernel(const dispatcher::ChainRecord& chain, LibraryPlan plan) : chain_(chain), p_(std::move(plan)) {}

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
        return run_attention(p_.attention, ext, out);
      }
      if (!y.is_cuda() && p_.epilogue == LibraryPlan::Epilogue::kGeluTanh)  // ATen's CPU kernel uses erf's GELU
        return Status(Code::kUnavailable, "library chain: the tanh GELU epilogue is CUDA's");
      if (ext.size() != p_.check.externals.size()) return unsupported("operand count");
      const at::Tensor &x = ext[static_cast<size_t>(p_.x)], &w = ext[static_cast<size_t>(p_.w)],
                       &b = ext[static_cast<size_t>(p_.bias)];
      for (const at::Tensor* t : {&x, &w, &b, &y})
        if (!t->defined() || t->scalar_type() != p_.dtype || t->device() != y.device())
          return unsupported("an operand differs from the plan");
      if (x.sizes() != at::IntArrayRef{p_.m, p_.k} || w.sizes() != at::IntArrayRef{p_.k, p_.n} ||
          b.sizes() != at::IntArrayRef{p_.n} || !b.is_contiguous() || y.sizes() != at::IntArrayRef{p_.m, p_.n} ||
          !y.is_contiguous())
        return unsupported("a shape differs from the plan");
      c10::impl::ExcludeDispatchKeyGuard no_key(c10::DispatchKey::DeferredInit);
      dispatcher::BypassScope bypass;
      at::Tensor out = y;
      if (p_.epilogue == LibraryPlan::Epilogue::kNone) at::addmm_out(out, b, x, w);
      else at::_addmm_activation_out(out, b, x, w, 1, 1, p_.epilogue == LibraryPlan::Epilogue::kGeluTanh);
      return Status();
    } catch (const std::exception& e) {
      return Status(Code::kInternal, std::string("library chain: ") + e.what());
    } catch (...) {
      return Status(Code::kInternal, "library chain: unknown exception");
    }
  }
  std::string describe() const override { return "library " + p_.call(); }

 private:
  const dispatcher::ChainRecord& chain_;
  LibraryPlan p_;
};

}  // namespace

std::unique_ptr<dispatcher::ChainKernel> library_chain_kernel(const dispatcher::ChainRecord& chain, LibraryPlan plan) {
  return std::make_unique<LibraryChainKernel>(chain, std::move(plan));
}

}  // namespace cudal1::optimizer::chains
