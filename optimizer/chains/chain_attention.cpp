/// @brief The attention rewrite (Note [Attention rewrite] in chain_library.h): eager attention's chain planned
/// as one fused-attention call, and that call.
#include <ATen/ATen.h>
#include <torch/version.h>

#include <atomic>
#include <cmath>
#include <limits>
#include <sstream>

#include "chain_causal.h"
#include "chain_library.h"
#include "cudal1/dispatcher/cuda_glue.h"

namespace cudal1::optimizer::chains {
namespace {

Status unsupported(const std::string& why) { return Status(Code::kUnsupported, "attention: " + why); }

std::atomic<uint64_t> g_copied{0};

/// Reads node `node`'s first output, itself or a reshape of it (Note [Matmul views]).
bool reads(const TensorArg& t, int node) { return t.in.producer == node && t.in.index == 0; }

/// Contiguous from the start of its storage.
bool contiguous(const dispatcher::TensorSpec& s) { return dispatcher::contiguous_spec(s) && s.storage_offset == 0; }

/// The node's one output: `sizes` (any, when empty), contiguous, of `dtype`.
Status one_output(const dispatcher::ChainNode& node, c10::ScalarType dtype, const std::vector<int64_t>& sizes,
                  const char* what) {
  if (node.outputs.size() != 1 || node.outputs[0].dtype != dtype || !contiguous(node.outputs[0]) ||
      (!sizes.empty() && node.outputs[0].sizes != sizes))
    return unsupported(std::string(what) + "'s result is not a contiguous tensor of the scores' shape and dtype");
  return Status();
}

/// `m` broadcasts to `to` (numpy rules, from the right).
bool broadcasts(const std::vector<int64_t>& m, const std::vector<int64_t>& to) {
  if (m.size() > to.size()) return false;
  for (size_t i = 0; i < m.size(); ++i) {
    const int64_t a = m[m.size() - 1 - i], b = to[to.size() - 1 - i];
    if (a != b && a != 1) return false;
  }
  return true;
}


}  // namespace

uint64_t attention_results_copied() noexcept { return g_copied.load(std::memory_order_relaxed); }

bool adopt_result(const at::Tensor& y, const at::Tensor& result) {
  if (!y.defined() || !result.defined() || !y.has_storage() || !result.has_storage() ||
      y.scalar_type() != result.scalar_type() || y.device() != result.device() || y.sizes() != result.sizes() ||
      y.strides() != result.strides() || y.storage_offset() != 0 || result.storage_offset() != 0)
    return false;
  c10::StorageImpl* to = y.storage().unsafeGetStorageImpl();
  c10::StorageImpl* from = result.storage().unsafeGetStorageImpl();
  if (to == from || to->nbytes() != from->nbytes() || from->data_ptr().get() == nullptr) return false;
  to->set_data_ptr_noswap(from->set_data_ptr(at::DataPtr(nullptr, result.device())));
  return true;
}

Result<LibraryPlan> plan_attention(const dispatcher::ChainRecord& chain) {
  const auto& nodes = chain.nodes;
  if (nodes.size() < 3 || nodes.size() > 5) return unsupported("not 3 to 5 ops");
  if (functional_op(nodes.front()) != "aten::bmm" || functional_op(nodes.back()) != "aten::bmm")
    return unsupported("does not begin and end with bmm");
  for (const auto& n : nodes)
    if (n.inplace) return unsupported("an in-place op");
  LibraryPlan p;
  p.kind = LibraryPlan::Kind::kAttention;
  AttentionPlan& a = p.attention;

  CUDAL1_ASSIGN_OR_RETURN(NodeArgs b0, args_of(nodes[0]));
  if (b0.tensors.size() != 2 || !is_external(b0.tensors[0]) || !is_external(b0.tensors[1]))
    return unsupported("the first bmm's operands are not external tensors");
  const auto& qs = *b0.tensors[0].spec;
  const auto& ks = *b0.tensors[1].spec;
  if (qs.sizes.size() != 3 || ks.sizes.size() != 3 || qs.sizes[0] != ks.sizes[0] || qs.sizes[2] != ks.sizes[1])
    return unsupported("the first bmm is not [BH, L, D] @ [BH, D, S]");
  if (qs.dtype != ks.dtype || !float_like(qs.dtype)) return unsupported("operands of mixed or unsupported dtypes");
  p.dtype = qs.dtype;
  a.bh = qs.sizes[0];
  a.l = qs.sizes[1];
  a.d = qs.sizes[2];
  a.s = ks.sizes[2];
  if (a.bh < 1 || a.l < 1 || a.d < 1 || a.s < 1) return unsupported("an empty attention");
  a.q = b0.tensors[0].in.index;
  a.kt = b0.tensors[1].in.index;
  CUDAL1_RETURN_IF_ERROR(one_output(nodes[0], p.dtype, {a.bh, a.l, a.s}, "the first bmm"));

  // The nodes between the bmms: each reads the previous one's result (itself or a reshape of it).
  size_t k = 1;
  std::vector<int64_t> scores = {a.bh, a.l, a.s};
  std::ostringstream steps;
  const dispatcher::TensorSpec* mask_spec = nullptr;
  auto next_op = [&] { return k + 1 < nodes.size() ? functional_op(nodes[k]) : std::string(); };
  auto scores_of = [&](const TensorArg& t) -> Status {  // the shape the elementwise part runs at
    if (t.spec->sizes.size() < 2 || dispatcher::numel_of(t.spec->sizes) != a.bh * a.l * a.s ||
        t.spec->sizes[t.spec->sizes.size() - 2] != a.l || t.spec->sizes.back() != a.s)
      return unsupported("the scores are not read as [..., L, S]");
    scores = t.spec->sizes;
    return Status();
  };
  if (const std::string op = next_op(); op == "aten::mul.Scalar" || op == "aten::div.Scalar") {
    CUDAL1_ASSIGN_OR_RETURN(NodeArgs s, args_of(nodes[k]));
    double c = 0;
    const c10::IValue* other = s.arg("other");
    if (s.tensors.size() != 1 || !reads(s.tensors[0], static_cast<int>(k) - 1) || !other || !scalar_of(*other, &c) ||
        !std::isfinite(c) || (op == "aten::div.Scalar" && c == 0))
      return unsupported("the scale is not a finite constant applied to the scores");
    a.scale = op == "aten::mul.Scalar" ? c : 1.0 / c;
    CUDAL1_RETURN_IF_ERROR(scores_of(s.tensors[0]));
    CUDAL1_RETURN_IF_ERROR(one_output(nodes[k], p.dtype, scores, "the scale"));
    steps << " * " << a.scale;
    ++k;
  }
  if (next_op() == "aten::add.Tensor") {
    CUDAL1_ASSIGN_OR_RETURN(NodeArgs m, args_of(nodes[k]));
    if (m.tensors.size() != 2 || !m.is_one("alpha")) return unsupported("a mask add with alpha != 1");
    const bool left = reads(m.tensors[0], static_cast<int>(k) - 1);
    const TensorArg& scores_arg = m.tensors[left ? 0 : 1];
    const TensorArg& mask = m.tensors[left ? 1 : 0];
    if (!reads(scores_arg, static_cast<int>(k) - 1) || !is_external(mask))
      return unsupported("the add is not the scores plus an external mask");
    if (k == 1) CUDAL1_RETURN_IF_ERROR(scores_of(scores_arg));
    if (mask.spec->dtype != p.dtype || !broadcasts(mask.spec->sizes, scores))
      return unsupported("the mask is not of the scores' dtype or does not broadcast to them");
    a.mask = mask.in.index;
    a.mask_sizes = mask.spec->sizes;
    mask_spec = mask.spec;
    CUDAL1_RETURN_IF_ERROR(one_output(nodes[k], p.dtype, scores, "the mask add"));
    steps << " + mask e" << a.mask;
    ++k;
  }
  if (k + 1 >= nodes.size() || functional_op(nodes[k]) != "aten::_softmax")
    return unsupported("no softmax before the second bmm");
  {
    CUDAL1_ASSIGN_OR_RETURN(NodeArgs sm, args_of(nodes[k]));
    double dim = 0, upcast = 1;
    const c10::IValue* d = sm.arg("dim");
    const c10::IValue* h = sm.arg("half_to_float");
    if (sm.tensors.size() != 1 || !reads(sm.tensors[0], static_cast<int>(k) - 1) || !d || !h ||
        !scalar_of(*d, &dim) || !scalar_of(*h, &upcast) || upcast != 0)
      return unsupported("the softmax does not read the scores in their dtype");
    if (k == 1) CUDAL1_RETURN_IF_ERROR(scores_of(sm.tensors[0]));
    if (dim != -1 && dim != static_cast<double>(scores.size()) - 1) return unsupported("a softmax not over the keys");
    CUDAL1_RETURN_IF_ERROR(one_output(nodes[k], p.dtype, scores, "the softmax"));
    ++k;
  }
  CUDAL1_ASSIGN_OR_RETURN(NodeArgs b1, args_of(nodes[k]));
  if (b1.tensors.size() != 2 || !reads(b1.tensors[0], static_cast<int>(k) - 1) || !is_external(b1.tensors[1]))
    return unsupported("the second bmm does not read the probabilities and an external v");
  const auto& ps = *b1.tensors[0].spec;
  const auto& vs = *b1.tensors[1].spec;
  if (ps.sizes != std::vector<int64_t>{a.bh, a.l, a.s} || !contiguous(ps))
    return unsupported("the second bmm does not read the probabilities as [BH, L, S]");
  if (vs.sizes.size() != 3 || vs.sizes[0] != a.bh || vs.sizes[1] != a.s || vs.dtype != p.dtype)
    return unsupported("v is not [BH, S, Dv] of the dtype");
  a.dv = vs.sizes[2];
  a.v = b1.tensors[1].in.index;
  CUDAL1_RETURN_IF_ERROR(one_output(nodes[k], p.dtype, {a.bh, a.l, a.dv}, "the second bmm"));
  if (chain.externals != (a.mask >= 0 ? 4 : 3)) return unsupported("inputs beyond q, k, v and a mask");
  a.scores = scores;

  // The chain as verification sees it (Note [Chain tuning]): externals, one step per node, the exact value.
  ChainPlan& c = p.check;
  c.shape = {a.bh, a.l, a.dv};
  c.numel = a.bh * a.l * a.dv;
  c.externals.resize(static_cast<size_t>(chain.externals));
  fill_external(&c.externals.at(static_cast<size_t>(a.q)), qs);
  fill_external(&c.externals.at(static_cast<size_t>(a.kt)), ks);
  fill_external(&c.externals.at(static_cast<size_t>(a.v)), vs);
  if (mask_spec) fill_external(&c.externals.at(static_cast<size_t>(a.mask)), *mask_spec);
  if (a.mask >= 0 && a.l == a.s && a.mask_sizes == std::vector<int64_t>{a.l, a.s}) c.causal_mask = a.mask;
  for (size_t j = 0; j < nodes.size(); ++j) {
    Step st;
    st.op = StepOp::kGemm;
    st.dtype = p.dtype;
    st.depth = static_cast<double>(j + 1);
    st.gemm_k = j == 0 ? a.d : a.s;
    c.steps.push_back(st);
    c.outputs.push_back(OutputSlot{static_cast<int>(j), 0, static_cast<int>(j)});
  }
  const AttentionPlan plan = a;
  c.exact = [plan](const std::vector<at::Tensor>& ext) -> std::vector<at::Tensor> {
    const at::Tensor q = ext.at(static_cast<size_t>(plan.q)).to(at::kDouble);
    const at::Tensor kt = ext.at(static_cast<size_t>(plan.kt)).to(at::kDouble);
    const at::Tensor v = ext.at(static_cast<size_t>(plan.v)).to(at::kDouble);
    at::Tensor s = at::bmm(q, kt).mul(plan.scale).view(plan.scores);
    if (plan.mask >= 0) s = s + ext.at(static_cast<size_t>(plan.mask)).to(at::kDouble);
    const at::Tensor x = at::bmm(at::softmax(s, -1).reshape({plan.bh, plan.l, plan.s}), v);
    return {x, std::get<0>(v.min(1, true)), std::get<0>(v.max(1, true))};
  };
  std::ostringstream text;
  text << "library " << p.call() << "(q e" << a.q << ", k^T e" << a.kt << ", v e" << a.v << ") softmax(q k^T"
       << steps.str() << ") v: [" << a.bh << ", " << a.l << ", " << a.d << "] x [" << a.s << "] -> " << a.dv << " "
       << c10::toString(p.dtype) << " (" << nodes.size() << " ops)";
  c.text = text.str();
  return p;
}

Status run_attention(const AttentionPlan& a, const std::vector<at::Tensor>& ext, at::Tensor& y, CausalPath* causal) {
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 1)
  if (!y.is_cuda()) return Status(Code::kUnavailable, "attention: fused attention runs on CUDA tensors only");
  const at::Tensor& q = ext.at(static_cast<size_t>(a.q));
  const at::Tensor& kt = ext.at(static_cast<size_t>(a.kt));
  const at::Tensor& v = ext.at(static_cast<size_t>(a.v));
  if (q.sizes() != at::IntArrayRef{a.bh, a.l, a.d} || kt.sizes() != at::IntArrayRef{a.bh, a.d, a.s} ||
      v.sizes() != at::IntArrayRef{a.bh, a.s, a.dv} || y.sizes() != at::IntArrayRef{a.bh, a.l, a.dv} ||
      !y.is_contiguous())
    return Status(Code::kUnsupported, "attention: a shape differs from the plan");
  std::optional<at::Tensor> mask;
  at::Tensor bad_rows;  // rows ATen's softmax makes NaN: no finite mask value, or a NaN or +inf in it
  if (a.mask >= 0) {
    const at::Tensor& m = ext.at(static_cast<size_t>(a.mask));
    if (m.sizes() != at::IntArrayRef(a.mask_sizes)) return Status(Code::kUnsupported, "attention: the mask's shape");
    if (causal && causal_capable(a) && causal->is_causal(m)) return causal->run(a, q, kt, v, y);  // Note [Causal attention]
    mask = m.expand(a.scores).reshape({a.bh, 1, a.l, a.s});
    const double inf = std::numeric_limits<double>::infinity();
    bad_rows = (m.isnan() | m.eq(inf)).any(-1) | m.eq(-inf).all(-1);  // the mask's rows; broadcast below
    bad_rows = bad_rows.expand(std::vector<int64_t>(a.scores.begin(), a.scores.end() - 1)).reshape({a.bh, a.l, 1});
  }
  const at::Tensor out = at::scaled_dot_product_attention(q.unsqueeze(1), kt.transpose(1, 2).unsqueeze(1),
                                                          v.unsqueeze(1), mask, 0.0, false, a.scale)
                             .squeeze(1);
  if (bad_rows.defined()) {
    at::where_out(y, bad_rows, at::scalar_tensor(NAN, out.options()), out);
  } else if (dispatcher::stream_capturing(static_cast<int>(y.get_device())) != 0 || !adopt_result(y, out)) {
    y.copy_(out);
    g_copied.fetch_add(1, std::memory_order_relaxed);
  }
  // Note [Causal attention]: where the causal path's kernels are loaded, the general path's special values too.
  if (causal && causal_capable(a)) return causal->fix_specials(a, q, kt, v, y, ext.at(static_cast<size_t>(a.mask)));
  return Status();
#else
  (void)a;
  (void)ext;
  (void)y;
  (void)causal;
  return Status(Code::kUnavailable, "attention: this build's torch has no scaled_dot_product_attention with a scale");
#endif
}

}  // namespace cudal1::optimizer::chains
