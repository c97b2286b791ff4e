/// @brief Planning a pointwise chain (Note [Pointwise chains]): the steps, externals and variants of a chain.
#include "chain_plan.h"

#include <ATen/core/dispatch/Dispatcher.h>

#include <algorithm>
#include <sstream>

#include "args.h"

namespace cudal1::optimizer::chains {
namespace {

Status unsupported(const std::string& why) { return Status(Code::kUnsupported, "chain: " + why); }

std::vector<int64_t> contiguous_strides(const std::vector<int64_t>& shape) {
  std::vector<int64_t> s(shape.size(), 1);
  for (size_t d = shape.size(); d-- > 1;) s[d - 1] = s[d] * std::max<int64_t>(shape[d], 1);
  return s;
}

/// The external's strides broadcast to `shape`, or false when it does not broadcast.
bool broadcast(const dispatcher::TensorSpec& t, const std::vector<int64_t>& shape, std::vector<int64_t>* out) {
  const size_t R = shape.size(), r = t.sizes.size();
  if (r > R) return false;
  out->assign(R, 0);
  for (size_t d = 0; d < R; ++d) {
    if (d < R - r) continue;
    const size_t e = d - (R - r);
    if (t.sizes[e] == shape[d]) (*out)[d] = shape[d] == 1 ? 0 : t.strides[e];
    else if (t.sizes[e] != 1) return false;
  }
  return true;
}

}  // namespace

bool scalar_of(const c10::IValue& v, double* out) {
  if (v.isDouble()) *out = v.toDouble();
  else if (v.isInt()) *out = static_cast<double>(v.toInt());
  else if (v.isBool()) *out = v.toBool() ? 1.0 : 0.0;
  else if (v.isScalar()) {
    const c10::Scalar s = v.toScalar();
    if (s.isComplex()) return false;
    *out = s.toDouble();
  } else {
    return false;
  }
  return true;
}

namespace {

const char* op_name(StepOp op) {
  switch (op) {
    case StepOp::kAdd: return "add";
    case StepOp::kSub: return "sub";
    case StepOp::kMul: return "mul";
    case StepOp::kDiv: return "div";
    case StepOp::kDivScalar: return "div_scalar";
    case StepOp::kMaximum: return "maximum";
    case StepOp::kMinimum: return "minimum";
    case StepOp::kNeg: return "neg";
    case StepOp::kExp: return "exp";
    case StepOp::kLog: return "log";
    case StepOp::kSqrt: return "sqrt";
    case StepOp::kRsqrt: return "rsqrt";
    case StepOp::kTanh: return "tanh";
    case StepOp::kSigmoid: return "sigmoid";
    case StepOp::kSilu: return "silu";
    case StepOp::kRelu: return "relu";
    case StepOp::kAbs: return "abs";
    case StepOp::kReciprocal: return "reciprocal";
    case StepOp::kErf: return "erf";
    case StepOp::kGelu: return "gelu";
    case StepOp::kGeluTanh: return "gelu_tanh";
    case StepOp::kPow: return "pow";
    case StepOp::kClamp: return "clamp";
    case StepOp::kRowSum: return "row_sum";
    case StepOp::kRowMean: return "row_mean";
    case StepOp::kRowMax: return "row_max";
    case StepOp::kRowMin: return "row_min";
    case StepOp::kGemm: return "gemm";
    case StepOp::kPoolMax: return "max_pool";
  }
  return "?";
}

/// The step of one node from its op name, tensor operands and non-tensor arguments (by schema name).
Result<Step> step_of(const std::string& op, const std::vector<Operand>& tensors,
                     const std::vector<std::pair<std::string, c10::IValue>>& named) {
  auto arg = [&](const char* name) -> const c10::IValue* {
    for (const auto& [n, v] : named)
      if (n == name) return &v;
    return nullptr;
  };
  auto scalar = [&](const char* name, double* out) -> bool {
    const c10::IValue* v = arg(name);
    return v && scalar_of(*v, out);
  };
  Step s;
  static const std::vector<std::pair<const char*, StepOp>> unary = {
      {"aten::neg", StepOp::kNeg},         {"aten::exp", StepOp::kExp},       {"aten::log", StepOp::kLog},
      {"aten::sqrt", StepOp::kSqrt},       {"aten::rsqrt", StepOp::kRsqrt},   {"aten::tanh", StepOp::kTanh},
      {"aten::sigmoid", StepOp::kSigmoid}, {"aten::silu", StepOp::kSilu},     {"aten::relu", StepOp::kRelu},
      {"aten::abs", StepOp::kAbs},         {"aten::reciprocal", StepOp::kReciprocal}, {"aten::erf", StepOp::kErf}};
  for (const auto& [name, u] : unary)
    if (op == name) {
      if (tensors.size() != 1) return unsupported(op + ": operands");
      s.op = u;
      s.args = tensors;
      return s;
    }
  if (op == "aten::add.Tensor" || op == "aten::sub.Tensor" || op == "aten::add.Scalar" || op == "aten::sub.Scalar") {
    s.op = op.rfind("aten::add", 0) == 0 ? StepOp::kAdd : StepOp::kSub;
    if (!scalar("alpha", &s.alpha)) return unsupported(op + ": alpha");
  } else if (op == "aten::mul.Tensor" || op == "aten::mul.Scalar") {
    s.op = StepOp::kMul;
  } else if (op == "aten::div.Tensor") {
    s.op = StepOp::kDiv;
  } else if (op == "aten::div.Scalar") {
    s.op = StepOp::kDivScalar;
  } else if (op == "aten::maximum" || op == "aten::minimum") {
    s.op = op == "aten::maximum" ? StepOp::kMaximum : StepOp::kMinimum;
  } else if (op == "aten::gelu") {
    const c10::IValue* a = arg("approximate");
    const std::string mode = a && a->isString() ? a->toStringRef() : "none";
    if (mode != "none" && mode != "tanh") return unsupported("gelu approximate=" + mode);
    s.op = mode == "tanh" ? StepOp::kGeluTanh : StepOp::kGelu;
    s.args = tensors;
    return s;
  } else if (op == "aten::pow.Tensor_Scalar") {
    s.op = StepOp::kPow;
    if (!scalar("exponent", &s.exponent)) return unsupported("pow exponent");
    s.args = tensors;
    return s;
  } else if (op == "aten::clamp") {
    s.op = StepOp::kClamp;
    s.has_lo = scalar("min", &s.lo);
    s.has_hi = scalar("max", &s.hi);
    if (!s.has_lo && !s.has_hi) return unsupported("clamp without bounds");
    s.args = tensors;
    return s;
  } else {
    return unsupported(op + " is not a pointwise op the generator knows");
  }
  s.args = tensors;
  if (s.args.size() == 1) {  // the Scalar overloads: the second operand is `other`
    Operand o;
    if (!scalar("other", &o.value)) return unsupported(op + ": other");
    s.args.push_back(o);
  }
  if (s.args.size() != 2) return unsupported(op + ": operands");
  return s;
}

}  // namespace

int readers(const std::vector<dispatcher::ChainNode>& nodes, int k, int index) {
  int n = 0;
  for (size_t j = static_cast<size_t>(k) + 1; j < nodes.size(); ++j)
    for (const dispatcher::ChainInput& in : nodes[j].inputs) n += in.producer == k && in.index == index;
  return n;
}

bool float_like(c10::ScalarType t) {
  return t == c10::ScalarType::Float || t == c10::ScalarType::Half || t == c10::ScalarType::BFloat16;
}

bool is_reduction(StepOp op) {
  return op == StepOp::kRowSum || op == StepOp::kRowMean || op == StepOp::kRowMax || op == StepOp::kRowMin;
}

namespace {

/// The ops of row chains (Note [Row chains]); true when `op` is one of them.
bool row_op(const std::string& op) {
  return op == "aten::sum.dim_IntList" || op == "aten::mean.dim" || op == "aten::amax" || op == "aten::amin" ||
         op == "aten::native_layer_norm" || op == "aten::_softmax";
}

/// True when the IValue `v` names the last of `rank` dims only: [-1], [rank-1], -1 or rank-1.
bool last_dim_only(const c10::IValue* v, size_t rank) {
  if (!v) return false;
  auto last = [&](int64_t d) { return d == -1 || d == static_cast<int64_t>(rank) - 1; };
  if (v->isInt()) return last(v->toInt());
  if (!v->isIntList()) return false;
  const auto dims = v->toIntVector();
  return dims.size() == 1 && last(dims[0]);
}

/// Builds a plan's steps, with the text of each.
class StepWriter {
 public:
  explicit StepWriter(ChainPlan* p) : p_(p) {}
  int add(Step s) {
    double d = 0;
    for (const Operand& o : s.args)
      if (o.kind == Operand::kStep) d = std::max(d, p_->steps[static_cast<size_t>(o.index)].depth);
    s.depth = d + (is_reduction(s.op) ? 2 : 1);
    const int k = static_cast<int>(p_->steps.size());
    text_ << (k ? "\n" : "") << "t" << k << " = " << op_name(s.op) << "(";
    for (size_t i = 0; i < s.args.size(); ++i) {
      const Operand& o = s.args[i];
      text_ << (i ? ", " : "")
            << (o.kind == Operand::kStep ? "t" + std::to_string(o.index)
                : o.kind == Operand::kExternal ? "e" + std::to_string(o.index)
                                               : std::to_string(o.value));
    }
    if (s.op == StepOp::kPow) text_ << ", " << s.exponent;
    if (s.op == StepOp::kAdd || s.op == StepOp::kSub)
      if (s.alpha != 1) text_ << ", alpha=" << s.alpha;
    if (s.op == StepOp::kClamp)
      text_ << ", " << (s.has_lo ? std::to_string(s.lo) : "-") << ", " << (s.has_hi ? std::to_string(s.hi) : "-");
    text_ << ") " << c10::toString(s.dtype) << (s.row ? " row" : "");
    p_->steps.push_back(std::move(s));
    return k;
  }
  std::string text() const { return text_.str(); }

 private:
  ChainPlan* p_;
  std::ostringstream text_;
};

Step make(StepOp op, std::vector<Operand> args, c10::ScalarType dtype, bool row) {
  Step s;
  s.op = op;
  s.args = std::move(args);
  s.dtype = dtype;
  s.row = row;
  return s;
}
Operand step_ref(int k) { return Operand{Operand::kStep, k, 0}; }
Operand scalar_ref(double v) { return Operand{Operand::kScalar, 0, v}; }

/// The chain's full shape: the largest node output (every other is that shape or its row shape).
std::vector<int64_t> full_shape(const dispatcher::ChainRecord& chain) {
  std::vector<int64_t> best;
  int64_t best_n = -1;
  for (const auto& node : chain.nodes)
    for (const auto& o : node.outputs) {
      int64_t n = 1;
      for (int64_t s : o.sizes) n *= s;
      if (n > best_n) best_n = n, best = o.sizes;
    }
  return best;
}

}  // namespace

namespace {

/// "aten::relu_" -> "aten::relu", "aten::add_.Tensor" -> "aten::add.Tensor": an in-place node computes its
/// functional form's value (Note [In-place nodes]).
std::string functional_name(const std::string& op) {
  const size_t dot = op.find('.');
  std::string base = op.substr(0, dot), ov = dot == std::string::npos ? "" : op.substr(dot);
  if (!base.empty() && base.back() == '_') base.pop_back();
  return base + ov;
}

bool batch_norm_op(const std::string& op) { return op == "aten::cudnn_batch_norm" || op == "aten::native_batch_norm"; }

/// A 2-d pooling argument of the node (Note [Pooled chains]) as ATen reads it (int_pair); false when absent or not one.
bool pair_arg(const c10::IValue* v, std::optional<std::pair<int64_t, int64_t>> empty, int64_t* a, int64_t* b) {
  const auto x = v ? int_pair(*v, empty) : std::nullopt;
  if (!x) return false;
  *a = x->first, *b = x->second;
  return true;
}

/// The window of a max_pool2d_with_indices node over `shape` (NCHW) producing `out` (Note [Pooled chains]).
Result<PoolWindow> pool_window(const std::function<const c10::IValue*(const char*)>& arg,
                               const std::vector<int64_t>& shape, const std::vector<int64_t>& out) {
  PoolWindow w;
  if (!pair_arg(arg("kernel_size"), std::nullopt, &w.kh, &w.kw) ||
      !pair_arg(arg("stride"), std::make_pair(w.kh, w.kw), &w.sh, &w.sw) ||
      !pair_arg(arg("padding"), std::make_pair(int64_t{0}, int64_t{0}), &w.ph, &w.pw) ||
      !pair_arg(arg("dilation"), std::make_pair(int64_t{1}, int64_t{1}), &w.dh, &w.dw))
    return unsupported("max-pool: window arguments");
  if (w.kh <= 0 || w.kw <= 0 || w.sh <= 0 || w.sw <= 0 || w.dh <= 0 || w.dw <= 0 || w.ph < 0 || w.pw < 0)
    return unsupported("max-pool: window arguments");
  if (w.kh * w.kw > 64) return unsupported("max-pool: a window of more than 64 elements");
  if (out.size() != 4 || out[0] != shape[0] || out[1] != shape[1] || out[2] <= 0 || out[3] <= 0)
    return unsupported("max-pool: output sizes");
  w.oh = out[2];
  w.ow = out[3];
  // Every window starts inside the input or its left padding (ATen's output size guarantees it).
  if ((w.oh - 1) * w.sh - w.ph >= shape[2] || (w.ow - 1) * w.sw - w.pw >= shape[3])
    return unsupported("max-pool: a window outside the input");
  return w;
}

}  // namespace

bool is_external(const TensorArg& t) { return t.in.producer < 0 && t.in.index >= 0 && t.spec && t.spec->defined; }

void fill_external(External* e, const dispatcher::TensorSpec& s) {
  e->dtype = s.dtype;
  e->sizes = s.sizes;
  e->arg_strides = s.strides;
}

bool NodeArgs::is_one(const char* name) const {
  double x = 0;
  const c10::IValue* v = arg(name);
  return !v || (scalar_of(*v, &x) && x == 1.0);
}

const c10::IValue* NodeArgs::arg(const char* name) const {
  for (const auto& [n, v] : named)
    if (n == name) return v;
  return nullptr;
}

Result<NodeArgs> args_of(const dispatcher::ChainNode& node) {
  NodeArgs out;
  const auto& schema = node.rec->op.schema().arguments();
  size_t ti = 0;
  for (size_t a = 0; a < schema.size(); ++a) {
    if (a >= node.rec->args.size()) return Status(Code::kUnsupported, "chain: a record without arguments");
    if (!dispatcher::is_tensor_argument(schema[a])) {
      out.named.emplace_back(schema[a].name(), &node.rec->args[a].value);
      continue;
    }
    if (ti >= node.inputs.size()) return Status(Code::kUnsupported, "chain: inputs do not match the op");
    out.tensors.push_back({node.inputs[ti++], &node.rec->args[a].tensor});
  }
  return out;
}

std::string functional_op(const dispatcher::ChainNode& node) {
  const auto& schema = node.rec->op.schema();
  const std::string op = schema.name() + (schema.overload_name().empty() ? "" : "." + schema.overload_name());
  return node.inplace ? functional_name(op) : op;
}

Result<ChainPlan> plan_chain(const dispatcher::ChainRecord& chain) {
  if (chain.nodes.empty()) return unsupported("empty");
  if (dispatcher::has_view_input(chain.nodes)) return unsupported("a view of a chain value (Note [Matmul views])");
  ChainPlan p;
  for (const auto& node : chain.nodes) {
    const auto& schema = node.rec->op.schema();
    p.rows = p.rows || row_op(schema.name() + (schema.overload_name().empty() ? "" : "." + schema.overload_name()));
  }
  p.shape = full_shape(chain);
  p.numel = 1;
  for (int64_t s : p.shape) p.numel *= s;
  if (p.numel <= 0) return unsupported("empty shape");
  std::vector<int64_t> row_shape;
  if (p.rows) {
    if (p.shape.empty() || p.shape.back() < 2) return unsupported("a reduction over a dim of size < 2");
    p.cols = p.shape.back();
    p.nrows = p.numel / p.cols;
    if (p.cols > int64_t{32} * 1024) return unsupported("a row of more than 32768 values");
    row_shape = p.shape;
    row_shape.back() = 1;
  }
  const std::vector<int64_t> contig = contiguous_strides(p.shape);
  p.externals.resize(static_cast<size_t>(chain.externals));
  std::vector<bool> seen(p.externals.size(), false);
  std::vector<std::vector<int>> out_step(chain.nodes.size());  // node output -> step
  StepWriter w(&p);
  for (size_t k = 0; k < chain.nodes.size(); ++k) {
    const dispatcher::ChainNode& node = chain.nodes[k];
    const auto& schema = node.rec->op.schema();
    const std::string op = functional_op(node);
    const bool bn = batch_norm_op(op);
    const bool pool = op == "aten::max_pool2d_with_indices";  // Note [Pooled chains]
    if (node.outputs.empty()) return unsupported("a node without outputs");
    std::vector<Operand> tensors;
    std::vector<std::pair<std::string, c10::IValue>> named;
    size_t ti = 0;
    const auto& args = schema.arguments();
    for (size_t a = 0; a < args.size(); ++a) {
      if (a >= node.rec->args.size()) return unsupported("record without arguments");
      if (!dispatcher::is_tensor_argument(args[a])) {
        named.emplace_back(args[a].name(), node.rec->args[a].value);
        continue;
      }
      if (ti >= node.inputs.size()) return unsupported("inputs do not match the op");
      const dispatcher::ChainInput in = node.inputs[ti++];
      const bool channel = bn && ti > 1;  // a batch norm's weight, bias, running mean or running var
      Operand o;
      if (in.producer >= 0) {
        const auto& steps = out_step[static_cast<size_t>(in.producer)];
        if (in.index < 0 || static_cast<size_t>(in.index) >= steps.size() || steps[static_cast<size_t>(in.index)] < 0)
          return unsupported("an output the plan does not compute");
        o.kind = Operand::kStep;
        o.index = steps[static_cast<size_t>(in.index)];
      } else if (in.index >= 0) {
        o.kind = Operand::kExternal;
        o.index = in.index;
        const dispatcher::TensorSpec& t = node.rec->args[a].tensor;
        External& e = p.externals[static_cast<size_t>(in.index)];
        if (seen[static_cast<size_t>(in.index)] && e.channel != channel)
          return unsupported("an external read both per channel and broadcast");
        if (channel && ti == 5) e.positive = true;  // running_var
        if (!seen[static_cast<size_t>(in.index)] && channel) {
          if (!t.defined || !float_like(t.dtype)) return unsupported("a batch norm parameter of an unsupported dtype");
          if (p.shape.size() < 2 || t.sizes.size() != 1 || t.sizes[0] != p.shape[1])
            return unsupported("a batch norm parameter that is not per channel");
          e.channel = true;
          e.dtype = t.dtype;
          e.sizes = t.sizes;
          e.arg_strides = t.strides;
          e.strides.assign(p.shape.size(), 0);
          e.strides[1] = p.shape[1] == 1 ? 0 : t.strides[0];
          e.scalar = e.strides[1] == 0;
          seen[static_cast<size_t>(in.index)] = true;
        }
        if (!seen[static_cast<size_t>(in.index)]) {
          if (!t.defined || !float_like(t.dtype)) return unsupported("an external of an unsupported dtype");
          if (!broadcast(t, p.shape, &e.strides)) return unsupported("an external that does not broadcast");
          e.dtype = t.dtype;
          e.sizes = t.sizes;
          e.arg_strides = t.strides;
          e.contiguous = t.sizes == p.shape && (p.numel == 1 || t.strides == contig);
          e.scalar = true;
          for (int64_t s : e.strides) e.scalar = e.scalar && s == 0;
          e.row = p.rows && e.strides.back() == 0;
          seen[static_cast<size_t>(in.index)] = true;
        }
      } else {
        o.kind = Operand::kNone;
      }
      tensors.push_back(o);
    }
    auto is_row = [&](const Operand& o) {
      if (o.kind == Operand::kStep) return p.steps[static_cast<size_t>(o.index)].row;
      if (o.kind == Operand::kExternal) return p.externals[static_cast<size_t>(o.index)].row;
      return true;  // a scalar is the same everywhere
    };
    auto arg = [&](const char* name) -> const c10::IValue* {
      for (const auto& [n, v] : named)
        if (n == name) return &v;
      return nullptr;
    };
    const bool reduce_op = op == "aten::sum.dim_IntList" || op == "aten::mean.dim" || op == "aten::amax" ||
                           op == "aten::amin";
    if (reduce_op) {
      const c10::IValue* keep = arg("keepdim");
      const c10::IValue* dt = arg("dtype");
      if (!keep || !keep->isBool() || !keep->toBool()) return unsupported(op + " without keepdim");
      if (!last_dim_only(arg("dim"), p.shape.size())) return unsupported(op + " over other dims than the last");
      if (dt && !dt->isNone()) return unsupported(op + " with a dtype");
    }
    std::vector<bool> out_row(node.outputs.size(), false);
    for (size_t o = 0; o < node.outputs.size(); ++o) {
      const dispatcher::TensorSpec& out = node.outputs[o];
      if (bn && o > 0) continue;  // statistics: empty in eval mode, none computed (checked below)
      if (pool) continue;         // pooled sizes (checked below)
      out_row[o] = p.rows && out.sizes == row_shape;
      if (out.sizes != p.shape && !out_row[o]) return unsupported("outputs of different shapes");
      const std::vector<int64_t> want = out_row[o] ? contiguous_strides(row_shape) : contig;
      if (p.numel > 1 && out.strides != want) return unsupported("a non-contiguous output");
      if (!float_like(out.dtype)) return unsupported(std::string("dtype ") + c10::toString(out.dtype));
    }
    out_step[k].assign(node.outputs.size(), -1);
    const c10::ScalarType F = c10::ScalarType::Float;
    if (reduce_op) {
      if (tensors.size() != 1 || tensors[0].kind == Operand::kNone || is_row(tensors[0]) || !out_row[0])
        return unsupported(op + ": operands");
      const StepOp r = op == "aten::sum.dim_IntList" ? StepOp::kRowSum
                       : op == "aten::mean.dim"      ? StepOp::kRowMean
                       : op == "aten::amax"          ? StepOp::kRowMax
                                                     : StepOp::kRowMin;
      Step red = make(r, {tensors[0]}, node.outputs[0].dtype, true);
      // ATen's MeanOps: the sum times float(outputs) / float(inputs), in float.
      red.alpha = static_cast<double>(static_cast<float>(p.nrows) / static_cast<float>(p.numel));
      out_step[k][0] = w.add(std::move(red));
    } else if (op == "aten::native_layer_norm") {
      // ATen's kernel in float: mean, rstd = rsqrt(var + eps), (x - mean) * rstd * weight + bias, rounded once.
      const c10::IValue* ns = arg("normalized_shape");
      double eps = 0;
      if (!ns || !ns->isIntList() || ns->toIntVector() != std::vector<int64_t>{p.cols})
        return unsupported("layer norm over more than the last dim");
      if (!arg("eps") || !scalar_of(*arg("eps"), &eps)) return unsupported("layer norm eps");
      if (tensors.size() != 3 || tensors[0].kind == Operand::kNone || is_row(tensors[0]) || node.outputs.size() != 3 ||
          out_row[0] || !out_row[1] || !out_row[2])
        return unsupported("layer norm: operands");
      for (int i : {1, 2})
        if (tensors[static_cast<size_t>(i)].kind != Operand::kNone && is_row(tensors[static_cast<size_t>(i)]))
          return unsupported("layer norm: a weight that is not per column");
      if (node.outputs[1].dtype != F || node.outputs[2].dtype != F) return unsupported("layer norm: statistics dtype");
      const Operand x = tensors[0];
      Step m = make(StepOp::kRowMean, {x}, F, true);
      m.alpha = 1.0 / static_cast<double>(p.cols);
      const int mean = w.add(m);
      const int d = w.add(make(StepOp::kSub, {x, step_ref(mean)}, F, false));
      const int sq = w.add(make(StepOp::kMul, {step_ref(d), step_ref(d)}, F, false));
      m.args = {step_ref(sq)};
      const int var = w.add(m);
      const int ve = w.add(make(StepOp::kAdd, {step_ref(var), scalar_ref(eps)}, F, true));
      const int rstd = w.add(make(StepOp::kRsqrt, {step_ref(ve)}, F, true));
      const bool has_w = tensors[1].kind != Operand::kNone, has_b = tensors[2].kind != Operand::kNone;
      const c10::ScalarType od = node.outputs[0].dtype;
      int y = w.add(make(StepOp::kMul, {step_ref(d), step_ref(rstd)}, has_w || has_b ? F : od, false));
      if (has_w) y = w.add(make(StepOp::kMul, {step_ref(y), tensors[1]}, has_b ? F : od, false));
      if (has_b) y = w.add(make(StepOp::kAdd, {step_ref(y), tensors[2]}, od, false));
      p.steps[static_cast<size_t>(y)].depth = p.steps[static_cast<size_t>(rstd)].depth + 1;  // one rounding
      p.steps[static_cast<size_t>(mean)].any_nonfinite = p.steps[static_cast<size_t>(rstd)].any_nonfinite = true;
      out_step[k] = {y, mean, rstd};
    } else if (bn) {
      // Note [Batch norm in chains]: ATen's eval formula in float, as its native kernels associate it (and the
      // batch norm family serves it, Note [Batch norm inference]), rounded once.
      const c10::IValue* tr = arg("training");
      const c10::IValue* ev = arg(op == "aten::cudnn_batch_norm" ? "epsilon" : "eps");
      double eps = 0;
      if (!tr || !tr->isBool() || tr->toBool()) return unsupported("batch norm in training mode");
      if (!ev || !scalar_of(*ev, &eps)) return unsupported("batch norm eps");
      if (p.rows) return unsupported("batch norm in a row chain");
      if (tensors.size() != 5 || tensors[0].kind == Operand::kNone || tensors[3].kind != Operand::kExternal ||
          tensors[4].kind != Operand::kExternal)
        return unsupported("batch norm: operands (eval mode needs running statistics)");
      for (int i : {1, 2})
        if (tensors[static_cast<size_t>(i)].kind == Operand::kStep) return unsupported("batch norm: a computed weight");
      for (size_t o = 1; o < node.outputs.size(); ++o)
        if (dispatcher::numel_of(node.outputs[o].sizes) != 0) return unsupported("batch norm with statistics outputs");
      const bool has_w = tensors[1].kind != Operand::kNone, has_b = tensors[2].kind != Operand::kNone;
      const c10::ScalarType od = node.outputs[0].dtype;
      const int first = w.add(make(StepOp::kSub, {tensors[0], tensors[3]}, F, false));
      int y = first;
      if (has_w) y = w.add(make(StepOp::kMul, {step_ref(y), tensors[1]}, F, false));
      const int ve = w.add(make(StepOp::kAdd, {tensors[4], scalar_ref(eps)}, F, false));
      const int inv = w.add(make(StepOp::kRsqrt, {step_ref(ve)}, F, false));
      y = w.add(make(StepOp::kMul, {step_ref(y), step_ref(inv)}, has_b ? F : od, false));
      if (has_b) y = w.add(make(StepOp::kAdd, {step_ref(y), tensors[2]}, od, false));
      p.steps[static_cast<size_t>(y)].depth = p.steps[static_cast<size_t>(first)].depth + 2;  // one rounding
      out_step[k][0] = y;
    } else if (pool) {
      if (k + 1 != chain.nodes.size()) return unsupported("a max-pool before the chain's end");
      if (p.rows) return unsupported("a max-pool in a row chain");
      if (p.shape.size() != 4) return unsupported("a max-pool of a value that is not NCHW");
      if (tensors.size() != 1 || tensors[0].kind != Operand::kStep)
        return unsupported("max-pool: operands (its input must be a value of the chain)");
      if (node.outputs.size() != 2) return unsupported("max-pool: outputs");
      CUDAL1_ASSIGN_OR_RETURN(p.pool, pool_window(arg, p.shape, node.outputs[0].sizes));
      const Step& in = p.steps[static_cast<size_t>(tensors[0].index)];
      if (node.outputs[0].dtype != in.dtype || node.outputs[0].strides != contiguous_strides(node.outputs[0].sizes))
        return unsupported("max-pool: an output of another dtype or layout");
      Step m = make(StepOp::kPoolMax, {tensors[0]}, in.dtype, false);
      m.pooled = true;
      const double depth = in.depth;
      const int t = w.add(std::move(m));
      p.steps[static_cast<size_t>(t)].depth = depth;  // a maximum rounds nothing
      out_step[k][0] = t;
    } else if (op == "aten::_softmax") {
      const c10::IValue* h2f = arg("half_to_float");
      if (!last_dim_only(arg("dim"), p.shape.size())) return unsupported("softmax over other dims than the last");
      if (!h2f || !h2f->isBool() || h2f->toBool()) return unsupported("softmax half_to_float");
      if (tensors.size() != 1 || tensors[0].kind == Operand::kNone || is_row(tensors[0]) || out_row[0])
        return unsupported("softmax: operands");
      const int mx = w.add(make(StepOp::kRowMax, {tensors[0]}, F, true));
      const int d = w.add(make(StepOp::kSub, {tensors[0], step_ref(mx)}, F, false));
      const int e = w.add(make(StepOp::kExp, {step_ref(d)}, F, false));
      const int sum = w.add(make(StepOp::kRowSum, {step_ref(e)}, F, true));
      out_step[k][0] = w.add(make(StepOp::kDiv, {step_ref(e), step_ref(sum)}, node.outputs[0].dtype, false));
    } else {
      if (node.outputs.size() != 1) return unsupported("a node with several outputs");
      for (const Operand& o : tensors)
        if (o.kind == Operand::kNone) return unsupported("a None tensor argument");
      CUDAL1_ASSIGN_OR_RETURN(Step s, step_of(op, tensors, named));
      s.dtype = node.outputs[0].dtype;
      s.row = out_row[0];
      for (const Operand& o : s.args)
        if (s.row && !is_row(o)) return unsupported(op + ": a row value from a full one");
      out_step[k][0] = w.add(std::move(s));
    }
    if (node.inplace) {  // Note [In-place nodes]: the storage now holds this node's value only
      const dispatcher::ChainInput self = node.inputs.empty() ? dispatcher::ChainInput{} : node.inputs[0];
      if (self.producer < 0) return unsupported("an in-place op on an external");
      const auto superseded = std::find_if(p.outputs.begin(), p.outputs.end(), [&](const OutputSlot& s) {
        return s.node == self.producer && s.out == self.index;
      });
      if (superseded == p.outputs.end()) return unsupported("an in-place op on a value the plan does not store");
      p.outputs.erase(superseded);
    }
    for (size_t o = 0; o < out_step[k].size(); ++o)
      if (out_step[k][o] >= 0) p.outputs.push_back(OutputSlot{static_cast<int>(k), static_cast<int>(o), out_step[k][o]});
  }
  for (size_t e = 0; e < seen.size(); ++e)
    if (!seen[e]) return unsupported("an external no node reads");
  p.text = w.text();
  if (p.pool.active()) {  // Note [Pooled chains]: the pooled value is the only output
    p.outputs.erase(std::remove_if(p.outputs.begin(), p.outputs.end(),
                                   [&](const OutputSlot& o) { return !p.steps[static_cast<size_t>(o.step)].pooled; }),
                    p.outputs.end());
    const PoolWindow& pw = p.pool;
    p.text += "\nwindow " + std::to_string(pw.kh) + "x" + std::to_string(pw.kw) + " stride " + std::to_string(pw.sh) +
              "x" + std::to_string(pw.sw) + " padding " + std::to_string(pw.ph) + "x" + std::to_string(pw.pw) +
              " dilation " + std::to_string(pw.dh) + "x" + std::to_string(pw.dw) + " -> " + std::to_string(pw.oh) +
              "x" + std::to_string(pw.ow);
  }
  return p;
}

std::string ChainVariant::id() const {
  if (pool_rows) return "pool.r" + std::to_string(pool_rows) + ".b" + std::to_string(block);
  if (group)
    return "rows.vec" + std::to_string(vec) + ".b" + std::to_string(block) +
           (group == block ? std::string(".block") : ".warp");
  return "vec" + std::to_string(vec) + ".b" + std::to_string(block) + (looped ? ".loop" : ".grid");
}

bool packed(const External& e, int vec) {
  if (e.row || e.scalar || e.strides.empty() || e.strides.back() != 1) return false;
  for (size_t d = 0; d + 1 < e.strides.size(); ++d)
    if (e.strides[d] % vec != 0) return false;
  return true;
}

namespace {

std::vector<ChainVariant> row_variants(const ChainPlan& plan) {
  int64_t widest = 4;  // bytes of the widest full operand or output
  for (const External& e : plan.externals) widest = std::max<int64_t>(widest, c10::elementSize(e.dtype));
  for (const Step& s : plan.steps) widest = std::max<int64_t>(widest, c10::elementSize(s.dtype));
  std::vector<int> vecs = {1};
  for (int v : {2, 4, 8}) {
    bool ok = plan.cols % v == 0 && v * widest <= 16;
    if (ok) vecs.push_back(v);
  }
  std::vector<ChainVariant> out;
  for (int v : vecs) {
    const int64_t chunks = (plan.cols + v - 1) / v;  // chunks of a row
    for (int g : {32, 128, 256, 512, 1024}) {
      const int64_t items = (chunks + g - 1) / g;
      if (items * v > 32) continue;                          // too many values a thread
      if (g > 32 && (g / 2) >= chunks) continue;             // half the group or more would idle
      if (g == 32) {
        for (int b : {128, 256}) out.push_back(ChainVariant{v, b, false, 32});
      } else {
        out.push_back(ChainVariant{v, g, false, g});
      }
    }
  }
  return out;
}

}  // namespace

std::vector<ChainVariant> variants(const ChainPlan& plan) {
  if (plan.rows) return row_variants(plan);
  if (plan.pool.active()) {  // Note [Pooled chains]
    std::vector<ChainVariant> out;
    for (int r : {1, 2, 4})
      for (int b : {128, 256, 512}) {
        ChainVariant v{1, b, false, 0};
        v.pool_rows = r;
        out.push_back(v);
      }
    return out;
  }
  int64_t widest = 1;  // bytes of the widest operand or output: a pack is at most 16 bytes
  for (const External& e : plan.externals) widest = std::max<int64_t>(widest, c10::elementSize(e.dtype));
  for (const Step& s : plan.steps) widest = std::max<int64_t>(widest, c10::elementSize(s.dtype));
  std::vector<int> vecs = {1};
  for (int v : {2, 4, 8}) {
    bool ok = plan.numel % v == 0 && !plan.shape.empty() && plan.shape.back() % v == 0 && (v < 8 || v * widest <= 16);
    for (const External& e : plan.externals)
      ok = ok && (e.contiguous || e.scalar || e.strides.back() == 0 || e.strides.back() == 1);
    if (ok) vecs.push_back(v);
  }
  std::vector<ChainVariant> out;
  for (int v : vecs)
    for (int b : {128, 256, 512})
      for (bool l : {false, true}) out.push_back(ChainVariant{v, b, l, 0});
  return out;
}

}  // namespace cudal1::optimizer::chains
