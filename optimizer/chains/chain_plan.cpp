/// @brief Planning a pointwise chain (Note [Pointwise chains]): the steps, externals and variants of a chain.
#include "chain_plan.h"

#include <ATen/core/dispatch/Dispatcher.h>

#include <sstream>

namespace cudal1::optimizer::chains {
namespace {

Status unsupported(const std::string& why) { return Status(Code::kUnsupported, "chain: " + why); }

bool is_tensor_arg(const c10::Argument& a) {
  const auto& t = a.type();
  if (t->kind() == c10::TypeKind::TensorType) return true;
  return t->kind() == c10::TypeKind::OptionalType &&
         t->castRaw<c10::OptionalType>()->getElementType()->kind() == c10::TypeKind::TensorType;
}

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

bool float_like(c10::ScalarType t) {
  return t == c10::ScalarType::Float || t == c10::ScalarType::Half || t == c10::ScalarType::BFloat16;
}

Result<ChainPlan> plan_chain(const dispatcher::ChainRecord& chain) {
  if (chain.nodes.empty()) return unsupported("empty");
  ChainPlan p;
  const auto& first = chain.nodes.front();
  if (first.outputs.size() != 1) return unsupported("a node with several outputs");
  p.shape = first.outputs[0].sizes;
  p.numel = 1;
  for (int64_t s : p.shape) p.numel *= s;
  if (p.numel <= 0) return unsupported("empty shape");
  const std::vector<int64_t> contig = contiguous_strides(p.shape);
  p.externals.resize(static_cast<size_t>(chain.externals));
  std::vector<bool> seen(p.externals.size(), false);
  std::ostringstream text;
  for (size_t k = 0; k < chain.nodes.size(); ++k) {
    const dispatcher::ChainNode& node = chain.nodes[k];
    if (node.outputs.size() != 1) return unsupported("a node with several outputs");
    const dispatcher::TensorSpec& out = node.outputs[0];
    if (out.sizes != p.shape) return unsupported("outputs of different shapes");
    if (p.numel > 1 && out.strides != contig) return unsupported("a non-contiguous output");
    if (!float_like(out.dtype)) return unsupported(std::string("dtype ") + c10::toString(out.dtype));
    const auto& schema = node.rec->op.schema();
    const std::string op = schema.name() + (schema.overload_name().empty() ? "" : "." + schema.overload_name());
    std::vector<Operand> tensors;
    std::vector<std::pair<std::string, c10::IValue>> named;
    size_t ti = 0;
    const auto& args = schema.arguments();
    for (size_t a = 0; a < args.size(); ++a) {
      if (a >= node.rec->args.size()) return unsupported("record without arguments");
      if (!is_tensor_arg(args[a])) {
        named.emplace_back(args[a].name(), node.rec->args[a].value);
        continue;
      }
      if (ti >= node.inputs.size()) return unsupported("inputs do not match the op");
      const dispatcher::ChainInput in = node.inputs[ti++];
      Operand o;
      if (in.producer >= 0) {
        if (in.index != 0) return unsupported("a producer's second output");
        o.kind = Operand::kStep;
        o.index = in.producer;
      } else if (in.index >= 0) {
        o.kind = Operand::kExternal;
        o.index = in.index;
        const dispatcher::TensorSpec& t = node.rec->args[a].tensor;
        if (!seen[static_cast<size_t>(in.index)]) {
          External& e = p.externals[static_cast<size_t>(in.index)];
          if (!t.defined || !float_like(t.dtype)) return unsupported("an external of an unsupported dtype");
          if (!broadcast(t, p.shape, &e.strides)) return unsupported("an external that does not broadcast");
          e.dtype = t.dtype;
          e.sizes = t.sizes;
          e.arg_strides = t.strides;
          e.contiguous = t.sizes == p.shape && (p.numel == 1 || t.strides == contig);
          e.scalar = true;
          for (int64_t s : e.strides) e.scalar = e.scalar && s == 0;
          seen[static_cast<size_t>(in.index)] = true;
        }
      } else {
        return unsupported("a None tensor argument");
      }
      tensors.push_back(o);
    }
    CUDAL1_ASSIGN_OR_RETURN(Step s, step_of(op, tensors, named));
    s.dtype = out.dtype;
    text << (k ? "\n" : "") << "t" << k << " = " << op_name(s.op) << "(";
    for (size_t i = 0; i < s.args.size(); ++i) {
      const Operand& o = s.args[i];
      text << (i ? ", " : "")
           << (o.kind == Operand::kStep ? "t" + std::to_string(o.index)
                                        : o.kind == Operand::kExternal ? "e" + std::to_string(o.index)
                                                                       : std::to_string(o.value));
    }
    if (s.op == StepOp::kPow) text << ", " << s.exponent;
    if (s.op == StepOp::kAdd || s.op == StepOp::kSub)
      if (s.alpha != 1) text << ", alpha=" << s.alpha;
    if (s.op == StepOp::kClamp) text << ", " << (s.has_lo ? std::to_string(s.lo) : "-") << ", "
                                     << (s.has_hi ? std::to_string(s.hi) : "-");
    text << ") " << c10::toString(s.dtype);
    p.steps.push_back(std::move(s));
  }
  for (size_t e = 0; e < seen.size(); ++e)
    if (!seen[e]) return unsupported("an external no node reads");
  p.text = text.str();
  return p;
}

std::string ChainVariant::id() const {
  return "vec" + std::to_string(vec) + ".b" + std::to_string(block) + (looped ? ".loop" : ".grid");
}

std::vector<ChainVariant> variants(const ChainPlan& plan) {
  std::vector<int> vecs = {1};
  for (int v : {2, 4}) {
    bool ok = plan.numel % v == 0 && !plan.shape.empty() && plan.shape.back() % v == 0;
    for (const External& e : plan.externals)
      ok = ok && (e.contiguous || e.scalar || e.strides.back() == 0 || e.strides.back() == 1);
    if (ok) vecs.push_back(v);
  }
  std::vector<ChainVariant> out;
  for (int v : vecs)
    for (int b : {128, 256, 512})
      for (bool l : {false, true}) out.push_back(ChainVariant{v, b, l});
  return out;
}

}  // namespace cudal1::optimizer::chains
