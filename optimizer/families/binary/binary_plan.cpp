/// @brief Planning of the binary family: which calls it accepts, their result dtype, output layout and coalesced
/// iteration space (Note [Binary elementwise]).
#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#include <cmath>

#include "args.h"
#include "codegen_common.h"
#include "binary_family.h"

namespace cudal1::optimizer::binary {
namespace {

constexpr int kMaxDims = 8;

/// The op's math key, its value arguments and alpha, by schema.
struct OpSchema {
  std::string math;
  size_t nargs;
  int alpha_arg;  ///< -1: none
  bool negate_alpha;
  bool scalar_other;  ///< argument 1 is a Scalar
};

std::optional<OpSchema> schema_of(const std::string& op, const std::string& overload) {
  const std::string spec = overload.empty() ? op : op + "." + overload;
  if (spec == "add.Tensor") return OpSchema{"add", 3, 2, false, false};
  if (spec == "sub.Tensor") return OpSchema{"add", 3, 2, true, false};
  if (spec == "add.Scalar") return OpSchema{"add", 3, 2, false, true};
  if (spec == "sub.Scalar") return OpSchema{"add", 3, 2, true, true};
  if (spec == "mul.Tensor") return OpSchema{"mul", 2, -1, false, false};
  if (spec == "mul.Scalar") return OpSchema{"mul", 2, -1, false, true};
  if (spec == "div.Tensor") return OpSchema{"div", 2, -1, false, false};
  if (spec == "div.Scalar") return OpSchema{"div", 2, -1, false, true};
  if (spec == "maximum") return OpSchema{"maximum", 2, -1, false, false};
  if (spec == "minimum") return OpSchema{"minimum", 2, -1, false, false};
  if (spec == "pow.Tensor_Tensor") return OpSchema{"pow", 2, -1, false, false};
  if (spec == "where.self") return OpSchema{"where", 3, -1, false, false};
  return std::nullopt;
}

/// A recorded Scalar's value (double or int; bool and complex are declined).
std::optional<double> scalar_value(const c10::IValue& v) {
  if (v.isDouble()) return v.toDouble();
  if (auto i = int_value(v)) return static_cast<double>(*i);
  return std::nullopt;
}

bool dimensioned_dtype(c10::ScalarType t) { return generated_dtype(t); }
bool zero_dim_dtype(c10::ScalarType t) {
  return generated_dtype(t) || t == c10::ScalarType::Double || t == c10::ScalarType::Long ||
         t == c10::ScalarType::Int;
}

c10::ScalarType promote(c10::ScalarType a, c10::ScalarType b) {
  if (a == c10::ScalarType::Undefined) return b;
  return a == b ? a : c10::ScalarType::Float;  // among fp32/fp16/bf16 every mixed pair gives fp32
}

Status read_operand(const Problem& p, int arg, bool condition, BinaryOperand* o) {
  const auto& a = p.args[arg];
  o->arg = arg;
  if (!a.is_tensor) {
    if (condition) return Status(Code::kUnsupported, "scalar condition");
    if (!scalar_value(a.value)) return Status(Code::kUnsupported, "scalar that is not a double or an int");
    o->kind = OperandKind::kScalar;
    o->dtype = c10::ScalarType::Double;
    return Status();
  }
  const auto& t = a.tensor;
  if (!t.defined) return Status(Code::kUnsupported, "undefined tensor");
  o->dtype = t.dtype;
  if (condition ? t.dtype != c10::ScalarType::Bool : false)
    return Status(Code::kUnsupported, "condition is not bool");
  if (t.sizes.empty()) {
    if (!condition && !zero_dim_dtype(t.dtype))
      return Status(Code::kUnsupported, std::string("0-dim dtype ") + c10::toString(t.dtype));
    o->kind = OperandKind::kZeroDim;
    return Status();
  }
  if (!condition && !dimensioned_dtype(t.dtype))
    return Status(Code::kUnsupported, std::string("dtype ") + c10::toString(t.dtype));
  for (size_t d = 0; d < t.sizes.size(); ++d)
    if (t.strides[d] < 0) return Status(Code::kUnsupported, "negative stride");
  o->kind = OperandKind::kTensor;
  o->sizes = t.sizes;
  o->strides = t.strides;
  o->storage_offset = t.storage_offset;
  return Status();
}

}  // namespace

std::optional<float> exact_scalar(double v, c10::ScalarType common) {
  const float f = static_cast<float>(v);
  if (std::isnan(f)) return f;
  if (common == c10::ScalarType::Half && static_cast<float>(c10::Half(f)) != f) return std::nullopt;
  if (common == c10::ScalarType::BFloat16 && static_cast<float>(c10::BFloat16(f)) != f) return std::nullopt;
  return f;
}

bool vector_readable(const BinaryShape& s, size_t k, int vec) {
  const auto& o = s.ins[k];
  if (o.kind != OperandKind::kTensor || o.it_strides[0] != 1) return false;
  const int es = o.dtype == c10::ScalarType::Bool ? 1 : elem_size(o.dtype);
  if (vec * es > 16 || o.storage_offset % vec != 0) return false;
  for (size_t d = 1; d < o.it_strides.size(); ++d)
    if (o.it_strides[d] % vec != 0) return false;
  return true;
}

Result<BinaryShape> plan_binary(const Problem& p) {
  const auto sch = schema_of(p.op, p.overload);
  if (!sch) return Status(Code::kUnsupported, "op " + p.op + "." + p.overload + " is not in this family");
  if (p.args.size() != sch->nargs) return Status(Code::kUnsupported, "unexpected arguments");
  if (p.sm < 60) return Status(Code::kUnsupported, "needs sm_60+");
  BinaryShape s;
  s.math = sch->math;
  s.negate_alpha = sch->negate_alpha;
  s.alpha_arg = sch->alpha_arg;
  const bool where = s.math == "where";
  const int first_value = where ? 1 : 0;
  const int n_ins = where ? 3 : 2;
  for (int k = 0; k < n_ins; ++k) {
    BinaryOperand o;
    CUDAL1_RETURN_IF_ERROR(read_operand(p, k, where && k == 0, &o));
    if (sch->scalar_other && k == 1 && o.kind != OperandKind::kScalar)
      return Status(Code::kUnsupported, "Scalar overload without a scalar");
    s.ins.push_back(std::move(o));
  }
  // result_type over the value operands: the dimensioned ones decide (Note [Binary elementwise]).
  c10::ScalarType common = c10::ScalarType::Undefined;
  for (int k = first_value; k < n_ins; ++k)
    if (s.ins[k].kind == OperandKind::kTensor) common = promote(common, s.ins[k].dtype);
  if (common == c10::ScalarType::Undefined) {
    // Only 0-dim value operands (where.self's mask decides the shape: an attention mask turned additive). A
    // wrapped number (a Python or C++ scalar made a tensor) is always float64, int64, bool or complex, so 0-dim
    // fp32/fp16/bf16 operands are plain 0-dim tensors and promote as such; anything else needs the wrapped-number
    // flag the signature does not carry.
    for (int k = first_value; k < n_ins; ++k) {
      const auto& o = s.ins[k];
      const bool plain = o.kind == OperandKind::kZeroDim &&
                         (o.dtype == c10::ScalarType::Float || o.dtype == c10::ScalarType::Half ||
                          o.dtype == c10::ScalarType::BFloat16);
      if (!plain) {
        common = c10::ScalarType::Undefined;
        break;
      }
      common = promote(common, o.dtype);
    }
  }
  if (common == c10::ScalarType::Undefined)
    return Status(Code::kUnsupported, "no value operand of rank >= 1 (result dtype needs wrapped-number info)");
  s.out_dtype = common;
  for (const auto& o : s.ins) {
    if (o.dtype == c10::ScalarType::BFloat16 && p.sm < 80) return Status(Code::kUnsupported, "bf16 needs sm_80+");
    if (s.math == "pow" && o.kind != OperandKind::kTensor)
      return Status(Code::kUnsupported, "pow with a 0-dim or scalar operand");
    if (o.kind == OperandKind::kScalar && !exact_scalar(*scalar_value(p.args[o.arg].value), common))
      return Status(Code::kUnsupported, "scalar not exact in the result dtype");
  }
  if (s.alpha_arg >= 0) {
    const auto alpha = scalar_value(p.args[s.alpha_arg].value);
    if (!alpha) return Status(Code::kUnsupported, "alpha is not a double or an int");
    if (!exact_scalar(*alpha, common)) return Status(Code::kUnsupported, "alpha not exact in the result dtype");
  }
  if (where)  // where.self casts a value operand of another dtype with .to(), which keeps only dense strides
    for (int k = 1; k < 3; ++k) {
      const auto& o = s.ins[k];
      if (o.kind == OperandKind::kTensor && o.dtype != common && !non_overlapping_and_dense(o.sizes, o.strides))
        return Status(Code::kUnsupported, "where casts a non-dense operand");
    }
  std::vector<OperandLayout> layouts;
  for (const auto& o : s.ins) layouts.push_back(OperandLayout{o.sizes, o.strides});
  if (!broadcast_shape(layouts, &s.shape)) return Status(Code::kUnsupported, "shapes do not broadcast");
  if (s.shape.empty()) return Status(Code::kUnsupported, "0-dim result");
  if (s.shape.size() > static_cast<size_t>(kMaxDims)) return Status(Code::kUnsupported, "more than 8 dims");
  int64_t numel = 1;
  for (int64_t x : s.shape) numel *= x;
  if (numel == 0) return Status(Code::kUnsupported, "empty tensor");
  for (const auto& o : s.ins)
    if (o.kind == OperandKind::kTensor && o.sizes.size() > s.shape.size())
      return Status(Code::kUnsupported, "operand of higher rank than the result");  // unreachable: broadcast
  s.out_strides = broadcast_output_strides(s.shape, layouts);
  // Each tensor input's strides over the result's dims (missing and broadcast dims: 0), then coalesce.
  const size_t n = s.shape.size();
  std::vector<std::vector<int64_t>> in_strides;
  std::vector<size_t> tensor_ins;
  for (size_t k = 0; k < s.ins.size(); ++k) {
    const auto& o = s.ins[k];
    if (o.kind != OperandKind::kTensor) continue;
    std::vector<int64_t> st(n, 0);
    const size_t off = n - o.sizes.size();
    for (size_t d = 0; d < o.sizes.size(); ++d) st[off + d] = o.sizes[d] == 1 ? 0 : o.strides[d];
    in_strides.push_back(std::move(st));
    tensor_ins.push_back(k);
  }
  MultiIterSpace it = coalesce_inputs(s.shape, s.out_strides, in_strides);
  s.it_sizes = it.sizes;
  s.numel = it.numel;
  for (size_t i = 0; i < tensor_ins.size(); ++i) s.ins[tensor_ins[i]].it_strides = std::move(it.in_strides[i]);
  // Vector width: a group of VEC outputs must lie in one innermost row and fit 16 bytes of output.
  s.max_vec = 1;
  for (int v = 16 / elem_size(common); v > 1; v /= 2)
    if (s.it_sizes[0] % v == 0) {
      s.max_vec = v;
      break;
    }
  return s;
}

}  // namespace cudal1::optimizer::binary
