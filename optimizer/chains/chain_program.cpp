/// @brief Program chains (Note [Program chains] in chain_program.h): planning conv groups, and the program kernel
/// that runs them channels-last with folded batch norms.
#include "chain_program.h"

#include <ATen/ATen.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <c10/util/intrusive_ptr.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <sstream>

#include "chain_layers.h"
#include "chain_plan.h"
#include "cudal1/dispatcher/hook.h"

namespace cudal1::optimizer::chains {
namespace {

using dispatcher::ChainInput;
using dispatcher::ChainNode;

Status unsupported(const std::string& why) { return Status(Code::kUnsupported, "program chain: " + why); }

bool is_batch_norm(const std::string& op) { return op == "aten::cudnn_batch_norm" || op == "aten::native_batch_norm"; }
bool reads(const TensorArg& t, int node) { return t.in.producer == node && t.in.index == 0; }

/// An int list argument of a 2-d convolution, a single value expanded to both dims as ATen does.
std::vector<int64_t> ints(const c10::IValue* v) {
  if (!v || !v->isIntList()) return {};
  std::vector<int64_t> out = v->toIntVector();
  if (out.size() == 1) out.push_back(out[0]);
  return out;
}

/// What a conv group's nodes need at run time, read once from their records.
struct ConvArgs {
  int x_arg = 0;                  ///< unused: the input is node.inputs[0]
  int w = -1, bias = -1;          ///< external slots (bias -1: none)
  std::vector<int64_t> stride, padding, dilation, output_padding;
  int64_t groups = 1;
  bool deterministic = false, allow_tf32 = true;
  int bn_w = -1, bn_b = -1, bn_mean = -1, bn_var = -1;  ///< external slots
  double eps = 1e-5;
};

Result<ConvArgs> conv_args(const ChainNode& conv, const ChainNode* bn) {
  ConvArgs a;
  CUDAL1_ASSIGN_OR_RETURN(NodeArgs c, args_of(conv));
  if (c.tensors.size() != 3) return unsupported("convolution operands");
  if (!is_external(c.tensors[1])) return unsupported("a convolution weight computed inside the chain");
  a.w = c.tensors[1].in.index;
  if (c.tensors[2].spec->defined) {
    if (!is_external(c.tensors[2])) return unsupported("a convolution bias computed inside the chain");
    a.bias = c.tensors[2].in.index;
  }
  const c10::IValue* transposed = c.arg("transposed");
  if (!transposed || !transposed->isBool() || transposed->toBool()) return unsupported("a transposed convolution");
  a.stride = ints(c.arg("stride"));
  a.padding = ints(c.arg("padding"));
  a.dilation = ints(c.arg("dilation"));
  a.output_padding = ints(c.arg("output_padding"));
  const c10::IValue* g = c.arg("groups");
  if (a.stride.size() != 2 || a.padding.size() != 2 || a.dilation.size() != 2 || !g || !g->isInt())
    return unsupported("not a 2-d convolution");
  a.groups = g->toInt();
  const c10::IValue* det = c.arg("deterministic");
  const c10::IValue* tf32 = c.arg("allow_tf32");
  a.deterministic = det && det->isBool() && det->toBool();
  a.allow_tf32 = !tf32 || !tf32->isBool() || tf32->toBool();
  const auto& x = *c.tensors[0].spec;
  const auto& w = *c.tensors[1].spec;
  if (x.sizes.size() != 4 || w.sizes.size() != 4) return unsupported("not a 4-d convolution");
  if (x.dtype != w.dtype || !float_like(x.dtype)) return unsupported("convolution operands of mixed or unsupported dtypes");
  if (!bn) return a;
  CUDAL1_ASSIGN_OR_RETURN(NodeArgs b, args_of(*bn));
  if (b.tensors.size() != 5) return unsupported("batch norm operands");
  for (size_t i = 1; i < 5; ++i)
    if (!is_external(b.tensors[i])) return unsupported("a batch norm parameter or statistic computed inside the chain");
  const c10::IValue* training = b.arg("training");
  if (!training || !training->isBool() || training->toBool()) return unsupported("a training-mode batch norm");
  const c10::IValue* eps = b.arg("epsilon") ? b.arg("epsilon") : b.arg("eps");
  if (!eps || !scalar_of(*eps, &a.eps)) return unsupported("a batch norm without its epsilon");
  for (size_t i = 1; i < 5; ++i) {
    const auto& s = *b.tensors[i].spec;
    if (s.sizes != std::vector<int64_t>{w.sizes[0]} || !float_like(s.dtype))
      return unsupported("batch norm parameters that are not one per output channel");
  }
  a.bn_w = b.tensors[1].in.index;
  a.bn_b = b.tensors[2].in.index;
  a.bn_mean = b.tensors[3].in.index;
  a.bn_var = b.tensors[4].in.index;
  return a;
}

std::string slot_text(const ChainInput& in) {
  return in.producer >= 0 ? "%" + std::to_string(in.producer) : "e" + std::to_string(in.index);
}

}  // namespace

Result<ProgramPlan> plan_program(const dispatcher::ChainRecord& chain) {
  const auto& nodes = chain.nodes;
  if (nodes.size() < 2) return unsupported("fewer than 2 ops");
  if (dispatcher::has_view_input(nodes)) return unsupported("a view of a chain value (Note [Matmul views])");
  ProgramPlan p;
  std::ostringstream text;
  bool have_dtype = false;
  for (size_t k = 0; k < nodes.size(); ++k) {
    const std::string op = functional_op(nodes[k]);
    const int ik = static_cast<int>(k);
    ProgramPlan::Group g;
    g.first = g.last = k;
    if (op != "aten::_convolution") {
      std::string line;
      if (plan_layer_group(nodes, k, &g, &line)) {  // Note [Skinny layers]
        const auto dt = nodes[static_cast<size_t>(g.gemm)].outputs[0].dtype;
        if (!have_dtype) p.dtype = dt, have_dtype = true;
        if (dt == p.dtype) {
          ++p.layers;
          p.rows = std::max(p.rows, g.args.m);
          // The weight is at::linear's w.t(), a view that dies with the call: verification draws it fresh.
          for (int slot : {g.args.bias, g.args.ln_w, g.args.ln_b})
            if (slot >= 0) p.params.push_back(slot);
          text << "group " << p.groups.size() << ": " << line << "\n";
          p.groups.push_back(g);
          k = g.last;
          continue;
        }
        g = ProgramPlan::Group{};
        g.first = g.last = k;
      }
      if (nodes[k].inplace && !nodes[k].inputs.empty() && nodes[k].inputs[0].producer < 0)
        return unsupported("an in-place op on an external");
      if (nodes[k].outputs.empty()) return unsupported("an op without outputs");
      p.groups.push_back(g);
      text << "node " << k << ": " << op << " (ATen)\n";
      continue;
    }
    const ChainNode* bn = nullptr;
    size_t j = k + 1;
    if (j < nodes.size() && is_batch_norm(functional_op(nodes[j])) && !nodes[j].inputs.empty() &&
        nodes[j].inputs[0] == ChainInput{ik, 0} && readers(nodes, ik, 0) == 1)
      bn = &nodes[j];
    CUDAL1_ASSIGN_OR_RETURN(ConvArgs a, conv_args(nodes[k], bn));
    {
      CUDAL1_ASSIGN_OR_RETURN(NodeArgs c, args_of(nodes[k]));
      const auto& w = *c.tensors[1].spec;
      p.max_k = std::max(p.max_k, w.sizes[1] * w.sizes[2] * w.sizes[3]);
      if (!have_dtype) p.dtype = w.dtype, have_dtype = true;
      if (w.dtype != p.dtype) return unsupported("convolutions of several dtypes");
    }
    g.conv = true;
    ++p.convs;
    text << "group " << p.groups.size() << ": conv %" << k;
    if (bn) {
      g.bn = static_cast<int>(j++);
      ++p.folded;
      text << " + batch norm %" << g.bn << " (folded)";
      int prev = g.bn;
      if (j < nodes.size() && (functional_op(nodes[j]) == "aten::add.Tensor") && readers(nodes, prev, 0) == 1) {
        auto add = args_of(nodes[j]);
        if (add.ok() && add->tensors.size() == 2 && add->is_one("alpha")) {
          const bool left = reads(add->tensors[0], prev), right = reads(add->tensors[1], prev);
          const TensorArg& other = add->tensors[left ? 1 : 0];
          const auto& bn_out = nodes[static_cast<size_t>(prev)].outputs.at(0);
          // In place on the residual (`identity += downsample(x)` order) only where it is a program value: the
          // group's result is a new tensor the add's later readers read, and an app tensor is written at the end.
          const bool swapped_ok = !nodes[j].inplace || other.in.producer >= 0;
          if ((left || (right && swapped_ok)) && !(left && right) && other.spec->defined &&
              other.spec->sizes == bn_out.sizes && other.spec->dtype == bn_out.dtype) {
            g.add = static_cast<int>(j++);
            g.residual = other.in;
            prev = g.add;
            text << " + residual " << slot_text(g.residual);
          }
        }
      }
      if (j < nodes.size() && functional_op(nodes[j]) == "aten::relu" && !nodes[j].inputs.empty() &&
          nodes[j].inputs[0] == ChainInput{prev, 0} && readers(nodes, prev, 0) == 1) {
        g.relu = static_cast<int>(j++);
        ++p.fused_epilogues;
        text << " + relu";
      }
    }
    for (int slot : {a.w, a.bias, a.bn_w, a.bn_b, a.bn_mean, a.bn_var})  // -1: absent (no bias, no batch norm)
      if (slot >= 0) p.params.push_back(slot);
    g.last = j - 1;
    text << "\n";
    p.groups.push_back(g);
    k = g.last;
  }
  if (p.convs == 0 && p.layers == 0) return unsupported("no convolution and no skinny linear layer");
  std::ostringstream head;
  head << "program: " << nodes.size() << " ops, " << p.convs << " convolutions (" << p.folded
       << " batch norms folded, " << p.fused_epilogues << " with a ReLU epilogue), ";
  if (p.layers) head << p.layers << " layers of at most " << p.rows << " rows, ";
  head << p.groups.size() << " groups, " << c10::toString(p.dtype) << "\n";
  p.text = head.str() + text.str();
  return p;
}

namespace {

/// A conv group's folded weight and bias, and the tensors (weak references: an address is never reused while
/// one is held) and versions they were computed from.
struct Folded {
  std::vector<c10::weak_intrusive_ptr<c10::TensorImpl>> from;
  std::vector<uint32_t> versions;
  at::Tensor w, b;
};

uint32_t version_of(const at::Tensor& t) {
  c10::TensorImpl* impl = t.unsafeGetTensorImpl();
  return impl->is_inference() ? 0 : impl->version_counter().current_version();
}

class ProgramKernel final : public dispatcher::ChainKernel {
 public:
  ProgramKernel(const dispatcher::ChainRecord& chain, ProgramPlan plan, bool fused, LayerVariant lv,
                std::shared_ptr<LoadedModule> module)
      : chain_(chain), p_(std::move(plan)), fused_(fused), lv_(lv), module_(std::move(module)),
        folded_(p_.groups.size()) {
    if (!fused_ || !module_) lv_ = LayerVariant{};
    for (const auto& g : p_.groups) {
      args_.emplace_back();
      if (!g.conv) continue;
      auto a = conv_args(chain_.nodes[g.first], g.bn >= 0 ? &chain_.nodes[static_cast<size_t>(g.bn)] : nullptr);
      if (a.ok()) args_.back() = a.value();
    }
    // The last group reading each node's outputs: a value is released after it (unless the app holds it).
    last_use_.assign(chain_.nodes.size(), -1);
    for (size_t gi = 0; gi < p_.groups.size(); ++gi)
      for (size_t k = p_.groups[gi].first; k <= p_.groups[gi].last; ++k)
        for (const ChainInput& in : chain_.nodes[k].inputs)
          if (in.producer >= 0) last_use_[static_cast<size_t>(in.producer)] = static_cast<int>(gi);
    for (const auto& g : p_.groups)
      if (g.residual.producer >= 0)
        last_use_[static_cast<size_t>(g.residual.producer)] =
            std::max(last_use_[static_cast<size_t>(g.residual.producer)], static_cast<int>(&g - p_.groups.data()));
  }

  /// Note [Incremental regions]: the values computed so far and the next group to run.
  struct State final : dispatcher::ChainKernel::Progress {
    std::vector<std::vector<at::Tensor>> values;
    size_t next = 0;
  };

  std::unique_ptr<Progress> begin() noexcept override {
    try {
      auto s = std::make_unique<State>();
      s->values.resize(chain_.nodes.size());
      return s;
    } catch (...) {
      return nullptr;
    }
  }

  Status advance(Progress& progress, size_t deferred, const std::vector<at::Tensor>& ext,
                 const std::vector<std::vector<at::Tensor>>& held) noexcept override {
    return guarded([&] { return steps(static_cast<State&>(progress), deferred, ext, held); });
  }

  Status finish(Progress& progress, const std::vector<at::Tensor>& ext,
                const std::vector<std::vector<at::Tensor>>& outs) noexcept override {
    return guarded([&]() -> Status {
      CUDAL1_RETURN_IF_ERROR(counted(check(ext, outs)));
      State& s = static_cast<State&>(progress);
      CUDAL1_RETURN_IF_ERROR(steps(s, chain_.nodes.size(), ext, outs));
      return materialize(s, outs);
    });
  }

  Status run(const std::vector<at::Tensor>& ext, const std::vector<std::vector<at::Tensor>>& outs) noexcept override {
    return guarded([&]() -> Status {
      CUDAL1_RETURN_IF_ERROR(counted(check(ext, outs)));
      State s;
      s.values.resize(chain_.nodes.size());
      CUDAL1_RETURN_IF_ERROR(steps(s, chain_.nodes.size(), ext, outs));
      return materialize(s, outs);
    });
  }

  /// The folds' inputs: a conv group's weight, bias and batch-norm tensors (fold() caches what it computes).
  bool derives_from(size_t slot) const noexcept override {
    const int sl = static_cast<int>(slot);
    for (const ConvArgs& a : args_)
      for (int s : {a.w, a.bias, a.bn_w, a.bn_b, a.bn_mean, a.bn_var})
        if (s >= 0 && s == sl) return true;
    return false;
  }

  /// The variant, then what it did in this process: regions computed and declined, convolutions run with cuDNN's
  /// fused epilogue and as separate ops, batch norm folds computed (once a group while the model is unchanged).
  std::string describe() const override {
    std::string layers;
    if (p_.layers)
      layers = ", " + std::to_string(p_.layers) + " layers" + (lv_.warps ? " as kernel " + lv_.id() : " as ATen ops");
    return std::string("program ") + (fused_ ? "fused" : "separate") + " (" + std::to_string(p_.convs) +
           " convolutions" + layers + "): " + std::to_string(n_.regions.load()) + " regions, " +
           std::to_string(n_.declined.load()) + " declined, " + std::to_string(n_.epilogue.load()) +
           " convolutions with the fused epilogue, " + std::to_string(n_.separate.load()) + " without, " +
           std::to_string(n_.folds.load()) + " folds" +
           (p_.layers ? ", " + std::to_string(n_.layer_kernels.load()) + " layer kernels, " +
                            std::to_string(n_.layer_aten.load()) + " layers as ATen ops"
                      : "");
  }

 private:
  static bool wanted(const std::vector<std::vector<at::Tensor>>& outs, size_t k) {
    return k < outs.size() &&
           std::any_of(outs[k].begin(), outs[k].end(), [](const at::Tensor& t) { return t.defined(); });
  }

  template <typename F>
  static Status guarded(F&& f) noexcept {
    try {
      return f();
    } catch (const std::exception& e) {
      return Status(Code::kInternal, std::string("program chain: ") + e.what());
    } catch (...) {
      return Status(Code::kInternal, "program chain: unknown exception");
    }
  }

  /// `s` (check()'s verdict on a region), counted.
  Status counted(Status s) {
    (s.ok() ? n_.regions : n_.declined).fetch_add(1, std::memory_order_relaxed);
    return s;
  }

  /// Unavailable when the region is one the program does not compute: the app holds a value inside a conv group
  /// (other than the group's result, which an in-place epilogue makes the same tensor), a batch norm's statistics,
  /// or an index output (a max-pool's over channels-last values may pick another of equal maxima than ATen's).
  Status check(const std::vector<at::Tensor>& ext, const std::vector<std::vector<at::Tensor>>& outs) const {
    if (outs.size() != chain_.nodes.size()) return unsupported("output count");
    if (ext.size() != static_cast<size_t>(chain_.externals)) return unsupported("operand count");
    for (const auto& g : p_.groups) {
      if (!g.grouped()) continue;
      const at::Tensor& result = outs[g.last].empty() ? at::Tensor() : outs[g.last][0];
      for (size_t k = g.first; k < g.last; ++k)
        for (const at::Tensor& t : outs[k])
          if (t.defined() && !(result.defined() && t.is_same(result)))
            return Status(Code::kUnavailable, "program chain: a value inside a conv or layer group is kept");
      for (size_t i = 1; i < outs[g.last].size(); ++i)
        if (outs[g.last][i].defined()) return Status(Code::kUnavailable, "program chain: batch norm statistics kept");
    }
    for (const auto& node : outs)
      for (const at::Tensor& t : node)
        if (t.defined() && !at::isFloatingType(t.scalar_type()))
          return Status(Code::kUnavailable, "program chain: an index output is kept");
    return Status();
  }

  /// Runs every group not yet run whose nodes are among the first `deferred`, on the current stream. A value no
  /// later group reads is released unless the app may still want it (`held`: defined where the app holds it).
  Status steps(State& s, size_t deferred, const std::vector<at::Tensor>& ext,
               const std::vector<std::vector<at::Tensor>>& held) {
    const auto& nodes = chain_.nodes;
    c10::impl::ExcludeDispatchKeyGuard no_key(c10::DispatchKey::DeferredInit);
    dispatcher::BypassScope bypass;
    auto value = [&](const ChainInput& in) -> at::Tensor {
      if (in.producer >= 0) {
        const auto& v = s.values.at(static_cast<size_t>(in.producer));
        if (static_cast<size_t>(in.index) >= v.size() || !v[static_cast<size_t>(in.index)].defined())
          throw std::logic_error("a value read before it was computed");
        return v[static_cast<size_t>(in.index)];
      }
      return in.index >= 0 ? ext.at(static_cast<size_t>(in.index)) : at::Tensor();
    };
    for (; s.next < p_.groups.size() && p_.groups[s.next].last < deferred; ++s.next) {
      const size_t gi = s.next;
      const auto& g = p_.groups[gi];
      if (g.conv) {
        CUDAL1_ASSIGN_OR_RETURN(at::Tensor y, run_conv(gi, value, ext));
        s.values[g.last] = {y};
      } else if (g.layer) {
        run_layer(g, value, ext, s);
      } else {
        dispatcher::run_chain_node(nodes[g.first], value, &s.values[g.first]);
      }
      for (size_t k = 0; k <= g.last; ++k)  // values no later group reads, unless the app may want them
        if (last_use_[k] == static_cast<int>(gi) && !wanted(held, k)) s.values[k].clear();
    }
    return Status();
  }

  /// Copies each value the app holds into its tensor.
  Status materialize(State& s, const std::vector<std::vector<at::Tensor>>& outs) {
    c10::impl::ExcludeDispatchKeyGuard no_key(c10::DispatchKey::DeferredInit);
    dispatcher::BypassScope bypass;
    for (size_t k = 0; k < chain_.nodes.size(); ++k)
      for (size_t i = 0; i < outs[k].size(); ++i) {
        const at::Tensor& o = outs[k][i];
        if (!o.defined()) continue;
        const bool have = i < s.values[k].size() && s.values[k][i].defined();
        const bool in_group = std::any_of(p_.groups.begin(), p_.groups.end(),
                                          [&](const auto& g) { return g.grouped() && k >= g.first && k < g.last; });
        if (!have && in_group) continue;  // the group's result, the same tensor (check())
        if (!have) return Status(Code::kInternal, "program chain: a held value was released");
        if (!o.is_same(s.values[k][i])) o.copy_(s.values[k][i]);
      }
    return Status();
  }

  /// The folded weight (channels-last) and bias of conv group `gi`, cached while its tensors stay the same.
  Result<std::pair<at::Tensor, at::Tensor>> fold(size_t gi, const std::vector<at::Tensor>& ext) {
    const auto& g = p_.groups[gi];
    const ConvArgs& a = args_[gi];
    std::vector<at::Tensor> from = {ext.at(static_cast<size_t>(a.w))};
    if (a.bias >= 0) from.push_back(ext.at(static_cast<size_t>(a.bias)));
    if (g.bn >= 0)
      for (int s : {a.bn_w, a.bn_b, a.bn_mean, a.bn_var}) from.push_back(ext.at(static_cast<size_t>(s)));
    bool inference = false;
    for (const at::Tensor& t : from) inference = inference || t.unsafeGetTensorImpl()->is_inference();
    std::lock_guard<std::mutex> lock(mu_);
    Folded& f = folded_[gi];
    bool same = !inference && f.from.size() == from.size() && f.w.defined();
    for (size_t i = 0; same && i < from.size(); ++i)
      same = f.from[i]._unsafe_get_target() == from[i].unsafeGetTensorImpl() && f.versions[i] == version_of(from[i]);
    if (same) return std::make_pair(f.w, f.b);
    // In double: s = weight / sqrt(var + eps); W' = W s; b' = (bias - mean) s + beta (bias 0 without one).
    const at::Tensor w = from[0];
    at::Tensor fw, fb;
    if (g.bn >= 0) {
      const size_t o = a.bias >= 0 ? 2 : 1;
      const at::Tensor gamma = from[o].to(at::kDouble), beta = from[o + 1].to(at::kDouble),
                       mean = from[o + 2].to(at::kDouble), var = from[o + 3].to(at::kDouble);
      const at::Tensor s = gamma / (var + a.eps).sqrt();
      fw = (w.to(at::kDouble) * s.view({-1, 1, 1, 1})).to(w.scalar_type());
      const at::Tensor cb = a.bias >= 0 ? from[1].to(at::kDouble) : at::zeros_like(mean);
      fb = ((cb - mean) * s + beta).to(w.scalar_type());
    } else {
      fw = w;
      if (a.bias >= 0) fb = from[1];
    }
    fw = fw.contiguous(at::MemoryFormat::ChannelsLast);
    f.from.clear();
    f.versions.clear();
    for (const at::Tensor& t : from) {
      f.from.emplace_back(c10::weak_intrusive_ptr<c10::TensorImpl>(t.getIntrusivePtr()));
      f.versions.push_back(version_of(t));
    }
    f.w = fw;
    f.b = fb;
    n_.folds.fetch_add(1, std::memory_order_relaxed);
    return std::make_pair(fw, fb);
  }

  template <typename Value>
  Result<at::Tensor> run_conv(size_t gi, Value& value, const std::vector<at::Tensor>& ext) {
    const auto& g = p_.groups[gi];
    const ConvArgs& a = args_[gi];
    if (a.w < 0) return unsupported("conv group arguments");
    const at::Tensor x = value(chain_.nodes[g.first].inputs.at(0));
    CUDAL1_ASSIGN_OR_RETURN(auto wb, fold(gi, ext));
    const at::Tensor xc = x.contiguous(at::MemoryFormat::ChannelsLast);
    at::Tensor z;
    if (g.add >= 0) z = value(g.residual);
    const bool cudnn_epilogue = fused_ && g.relu >= 0 && x.is_cuda() && !a.deterministic &&
                                a.allow_tf32 == at::globalContext().allowTF32CuDNN() && at::globalContext().userEnabledCuDNN();
    (cudnn_epilogue ? n_.epilogue : n_.separate).fetch_add(1, std::memory_order_relaxed);
    if (cudnn_epilogue) {
      if (g.add >= 0)
        return at::cudnn_convolution_add_relu(xc, wb.first, z.contiguous(at::MemoryFormat::ChannelsLast), 1.0,
                                              wb.second, a.stride, a.padding, a.dilation, a.groups);
      return at::cudnn_convolution_relu(xc, wb.first, wb.second, a.stride, a.padding, a.dilation, a.groups);
    }
    at::Tensor y = at::convolution(xc, wb.first, wb.second.defined() ? c10::optional<at::Tensor>(wb.second)
                                                                     : c10::optional<at::Tensor>(),
                                   a.stride, a.padding, a.dilation, false, a.output_padding, a.groups);
    if (g.add >= 0) y.add_(z);
    if (g.relu >= 0) y.relu_();
    return y;
  }

  /// Layer group `g` (Note [Skinny layers]): the generated kernel into a new [M, N] value, or, without one or
  /// where the operands do not meet its layout, the group's nodes as ATen ops.
  template <typename Value>
  void run_layer(const ProgramPlan::Group& g, Value& value, const std::vector<at::Tensor>& ext, State& s) {
    const LayerArgs& a = g.args;
    if (module_) {
      auto slot = [&](int e) { return e >= 0 ? ext.at(static_cast<size_t>(e)) : at::Tensor(); };
      LayerOperands o;
      o.x = value(chain_.nodes[g.first].inputs.at(0));
      o.ln_w = slot(a.ln_w);
      o.ln_b = slot(a.ln_b);
      o.w = slot(a.w);
      o.bias = slot(a.bias);
      if (g.add >= 0) o.res = value(g.residual);
      o.y = at::empty({a.m, a.n}, o.x.options());
      if (launch_layer(*module_, lv_, a, o).ok()) {
        n_.layer_kernels.fetch_add(1, std::memory_order_relaxed);
        s.values[g.last] = {o.y};
        return;
      }
    }
    n_.layer_aten.fetch_add(1, std::memory_order_relaxed);
    for (size_t k = g.first; k <= g.last; ++k) dispatcher::run_chain_node(chain_.nodes[k], value, &s.values[k]);
  }

  const dispatcher::ChainRecord& chain_;
  ProgramPlan p_;
  bool fused_;
  LayerVariant lv_;
  std::shared_ptr<LoadedModule> module_;
  std::vector<ConvArgs> args_;
  std::vector<int> last_use_;
  std::mutex mu_;
  std::vector<Folded> folded_;
  struct Counts {
    std::atomic<uint64_t> regions{0}, declined{0}, epilogue{0}, separate{0}, folds{0}, layer_kernels{0}, layer_aten{0};
  } n_;
};

}  // namespace

std::unique_ptr<dispatcher::ChainKernel> program_kernel(const dispatcher::ChainRecord& chain, ProgramPlan plan,
                                                        bool fused, LayerVariant layers,
                                                        std::shared_ptr<LoadedModule> module) {
  return std::make_unique<ProgramKernel>(chain, std::move(plan), fused, layers, std::move(module));
}

}  // namespace cudal1::optimizer::chains
