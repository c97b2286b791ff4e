/// @brief The CUDA source of a pointwise chain variant (Note [Pointwise chains]).
#include <algorithm>
#include <cstdio>
#include <sstream>
#include <stdexcept>

#include "chain_plan.h"
#include "codegen_common.h"

namespace cudal1::optimizer::chains {

const char* dtype_tag(c10::ScalarType t) {
  switch (t) {
    case c10::ScalarType::Half: return "f16";
    case c10::ScalarType::BFloat16: return "bf16";
    default: return "f32";
  }
}

std::string float_literal(double v) {
  const float f = static_cast<float>(v);
  if (f != f) return "__int_as_float(0x7fc00000)";
  if (f == 1.0f / 0.0f) return "__int_as_float(0x7f800000)";
  if (f == -1.0f / 0.0f) return "__int_as_float(0xff800000)";
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.9ef", static_cast<double>(f));
  return buf;
}

std::string step_formula(const Step& s, const std::function<std::string(const Operand&)>& operand) {
  const std::string a = operand(s.args.at(0)), b = s.args.size() > 1 ? operand(s.args[1]) : "";
  const auto lit = float_literal;
  switch (s.op) {
    case StepOp::kAdd: return s.alpha == 1 ? a + " + " + b : a + " + " + lit(s.alpha) + " * " + b;
    case StepOp::kSub: return s.alpha == 1 ? a + " - " + b : a + " + " + lit(-s.alpha) + " * " + b;
    case StepOp::kMul: return a + " * " + b;
    case StepOp::kDiv: return a + " / " + b;
    case StepOp::kDivScalar:  // ATen multiplies by the reciprocal of a CPU scalar divisor, in opmath
      return a + " * " + lit(1.0f / static_cast<float>(s.args.at(1).value));
    case StepOp::kMaximum: return "(" + a + " != " + a + ") ? " + a + " : ((" + b + " != " + b + ") ? " + b +
                                  " : fmaxf(" + a + ", " + b + "))";
    case StepOp::kMinimum: return "(" + a + " != " + a + ") ? " + a + " : ((" + b + " != " + b + ") ? " + b +
                                  " : fminf(" + a + ", " + b + "))";
    case StepOp::kNeg: return "-" + a;
    case StepOp::kExp: return "expf(" + a + ")";
    case StepOp::kLog: return "logf(" + a + ")";
    case StepOp::kSqrt: return "sqrtf(" + a + ")";
    case StepOp::kRsqrt: return "rsqrtf(" + a + ")";
    case StepOp::kTanh: return "tanhf(" + a + ")";
    case StepOp::kSigmoid: return "1.0f / (1.0f + expf(-" + a + "))";
    case StepOp::kSilu: return a + " / (1.0f + expf(-" + a + "))";
    case StepOp::kRelu: return "(" + a + " != " + a + ") ? " + a + " : fmaxf(" + a + ", 0.0f)";
    case StepOp::kAbs: return "fabsf(" + a + ")";
    case StepOp::kReciprocal: return "1.0f / " + a;
    case StepOp::kErf: return "erff(" + a + ")";
    case StepOp::kGelu: return a + " * 0.5f * (1.0f + erff(" + a + " * " + lit(0.70710678118654752440) + "))";
    case StepOp::kGeluTanh:
      return "0.5f * " + a + " * (1.0f + tanhf(" + lit(1.41421356237309504880 * 1.12837916709551257390 * 0.5) +
             " * (" + a + " + " + lit(0.044715) + " * (" + a + " * " + a + " * " + a + "))))";
    case StepOp::kPow:
      if (s.exponent == 0) return "1.0f";
      if (s.exponent == 1) return a;
      if (s.exponent == 2) return a + " * " + a;
      // ATen multiplies in the tensor's own type for 3 and -2 (c10::Half * c10::Half is a Half): a 16-bit
      // square is rounded before its third factor or its reciprocal (PowKernel.cu).
      if (s.exponent == 3)
        return s.dtype == c10::ScalarType::Float ? a + " * " + a + " * " + a
                                                 : "cvt_" + std::string(dtype_tag(s.dtype)) + "(st_" + dtype_tag(s.dtype) +
                                                       "(" + a + " * " + a + ")) * " + a;
      if (s.exponent == 0.5) return "sqrtf(" + a + ")";
      if (s.exponent == -0.5) return "rsqrtf(" + a + ")";
      if (s.exponent == -1) return "1.0f / " + a;
      if (s.exponent == -2)
        return s.dtype == c10::ScalarType::Float ? "1.0f / (" + a + " * " + a + ")"
                                                 : "1.0f / cvt_" + std::string(dtype_tag(s.dtype)) + "(st_" +
                                                       dtype_tag(s.dtype) + "(" + a + " * " + a + "))";
      return "powf(" + a + ", " + lit(s.exponent) + ")";
    case StepOp::kClamp: {
      std::string v = a;
      if (s.has_lo) v = "fmaxf(" + v + ", " + lit(s.lo) + ")";
      if (s.has_hi) v = "fminf(" + v + ", " + lit(s.hi) + ")";
      return "(" + a + " != " + a + ") ? " + a + " : " + v;
    }
    case StepOp::kRowSum: case StepOp::kRowMean: case StepOp::kRowMax: case StepOp::kRowMin:
      break;  // reductions are the row kernel's (chain_rows.cpp)
    case StepOp::kGemm:
      throw std::logic_error("a GEMM step has no generated formula (library chains: chain_library.h)");
    case StepOp::kPoolMax:
      break;  // the pooled kernel's (chain_pool.cpp)
  }
  return a;
}

std::string operand_text(const Operand& o) {
  switch (o.kind) {
    case Operand::kStep: return "t" + std::to_string(o.index) + "[j]";
    case Operand::kExternal: return "x" + std::to_string(o.index) + "[j]";
    case Operand::kScalar: return float_literal(o.value);
    case Operand::kNone: break;
  }
  return "0.0f";
}

std::string chain_source(const ChainPlan& plan, const ChainVariant& v) {
  if (plan.rows) return row_chain_source(plan, v);
  if (plan.pool.active()) return pool_chain_source(plan, v);
  std::ostringstream os;
  os << "// cudal1 pointwise chain, variant " << v.id() << "\n// ";
  for (char ch : plan.text) os << (ch == '\n' ? std::string("\n// ") : std::string(1, ch));
  os << "\n";
  os << mixed_dtype_prelude() << "\n";
  os << "template <typename T, int V> struct __align__(sizeof(T) * V) Pack { T v[V]; };\n";
  const int R = static_cast<int>(plan.shape.size());
  os << "#define VEC " << v.vec << "\n#define BLOCK " << v.block << "\n";
  os << "extern \"C\" __global__ void __launch_bounds__(BLOCK) chain_kernel(long long n";
  for (size_t e = 0; e < plan.externals.size(); ++e)
    os << ", const " << mixed_storage_type(plan.externals[e].dtype) << "* __restrict__ e" << e;
  for (size_t k = 0; k < plan.outputs.size(); ++k)
    os << ", " << mixed_storage_type(plan.steps[static_cast<size_t>(plan.outputs[k].step)].dtype) << "* o" << k;
  os << ") {\n  const long long chunks = n / VEC;\n";
  os << "  for (long long c = (long long)blockIdx.x * BLOCK + threadIdx.x; c < chunks; c += "
     << (v.looped ? "(long long)gridDim.x * BLOCK" : "chunks") << ") {\n";
  os << "    const long long i0 = c * VEC;\n";
  // Externals: contiguous ones by packs, scalars once, broadcast ones through their strides (each distinct
  // stride pattern's offset computed once: a batch norm's four parameters share one).
  std::vector<std::vector<int64_t>> patterns;
  for (const External& x : plan.externals) {
    if (x.contiguous || x.scalar) continue;
    if (std::find(patterns.begin(), patterns.end(), x.strides) != patterns.end()) continue;
    const size_t k = patterns.size();
    patterns.push_back(x.strides);
    os << "    long long off" << k << " = 0;\n    { long long r = i0;\n";
    int top = 0;  // the outermost dim with a stride: no dividing above it
    while (top < R - 1 && x.strides[static_cast<size_t>(top)] == 0) ++top;
    for (int d = R - 1; d >= top; --d) {
      os << "      { const long long i = r % " << plan.shape[static_cast<size_t>(d)] << "LL; r /= "
         << plan.shape[static_cast<size_t>(d)] << "LL; off" << k << " += i * " << x.strides[static_cast<size_t>(d)]
         << "LL; }\n";
    }
    os << "    }\n";
  }
  for (size_t e = 0; e < plan.externals.size(); ++e) {
    const External& x = plan.externals[e];
    const char* st = mixed_storage_type(x.dtype);
    os << "    float x" << e << "[VEC];\n";
    if (x.contiguous) {
      os << "    { const Pack<" << st << ", VEC> p = *reinterpret_cast<const Pack<" << st << ", VEC>*>(e" << e
         << " + i0);\n#pragma unroll\n      for (int j = 0; j < VEC; ++j) x" << e << "[j] = cvt_" << dtype_tag(x.dtype)
         << "(p.v[j]); }\n";
    } else if (x.scalar) {
      os << "    { const float s = cvt_" << dtype_tag(x.dtype) << "(e" << e << "[0]);\n#pragma unroll\n"
         << "      for (int j = 0; j < VEC; ++j) x" << e << "[j] = s; }\n";
    } else {
      const size_t k = static_cast<size_t>(std::find(patterns.begin(), patterns.end(), x.strides) - patterns.begin());
      os << "    {\n#pragma unroll\n      for (int j = 0; j < VEC; ++j) x" << e << "[j] = cvt_" << dtype_tag(x.dtype)
         << "(e" << e << "[off" << k << " + j * " << (R ? x.strides.back() : 0) << "LL]); }\n";
    }
  }
  for (size_t k = 0; k < plan.steps.size(); ++k) {
    const Step& s = plan.steps[k];
    os << "    float t" << k << "[VEC];\n#pragma unroll\n    for (int j = 0; j < VEC; ++j) {\n      float v = "
       << step_formula(s, operand_text) << ";\n";
    if (s.dtype != c10::ScalarType::Float) os << "      v = cvt_" << dtype_tag(s.dtype) << "(st_" << dtype_tag(s.dtype) << "(v));\n";
    os << "      t" << k << "[j] = v;\n    }\n";
  }
  for (size_t k = 0; k < plan.outputs.size(); ++k) {
    const size_t t = static_cast<size_t>(plan.outputs[k].step);
    const char* st = mixed_storage_type(plan.steps[t].dtype);
    os << "    if (o" << k << ") { Pack<" << st << ", VEC> p;\n#pragma unroll\n      for (int j = 0; j < VEC; ++j) p.v[j] = st_"
       << dtype_tag(plan.steps[t].dtype) << "(t" << t << "[j]);\n      *reinterpret_cast<Pack<" << st << ", VEC>*>(o" << k
       << " + i0) = p; }\n";
  }
  os << "  }\n}\n";
  return os.str();
}

}  // namespace cudal1::optimizer::chains
