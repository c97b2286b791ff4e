/// @brief The CUDA source of a row chain's variant (Note [Row chains] in chain_plan.h): a group of threads per
/// row holding the row's full values in registers, phases separated by the group's reductions.
#include <algorithm>
#include <sstream>

#include "chain_plan.h"
#include "codegen_common.h"

namespace cudal1::optimizer::chains {
namespace {

/// The combining expression of a reduction (NaN-propagating max and min, as ATen's amax and amin).
std::string combine(StepOp op, const std::string& a, const std::string& b) {
  switch (op) {
    case StepOp::kRowMax: return "((" + a + " != " + a + ") || " + a + " > " + b + ") ? " + a + " : " + b;
    case StepOp::kRowMin: return "((" + a + " != " + a + ") || " + a + " < " + b + ") ? " + a + " : " + b;
    default: return a + " + " + b;
  }
}

const char* identity(StepOp op) {
  switch (op) {
    case StepOp::kRowMax: return "__int_as_float(0xff800000)";  // -inf
    case StepOp::kRowMin: return "__int_as_float(0x7f800000)";  // +inf
    default: return "0.0f";
  }
}

}  // namespace

std::string row_chain_source(const ChainPlan& plan, const ChainVariant& v) {
  const int R = static_cast<int>(plan.shape.size());
  const int64_t C = plan.cols, CH = C / v.vec, ITEMS = (CH + v.group - 1) / v.group;
  const bool block_group = v.group == v.block;
  // Phase of every step: the reductions between it and the inputs.
  std::vector<int> ph(plan.steps.size(), 0);
  int phases = 1;
  for (size_t k = 0; k < plan.steps.size(); ++k) {
    const Step& s = plan.steps[k];
    int p = 0;
    for (const Operand& o : s.args)
      if (o.kind == Operand::kStep) p = std::max(p, ph[static_cast<size_t>(o.index)]);
    ph[k] = is_reduction(s.op) ? p + 1 : p;
    phases = std::max(phases, ph[k] + 1);
  }
  auto full = [&](const Operand& o) {
    if (o.kind == Operand::kStep) return !plan.steps[static_cast<size_t>(o.index)].row;
    if (o.kind == Operand::kExternal) return !plan.externals[static_cast<size_t>(o.index)].row;
    return false;
  };
  auto spell = [&](const Operand& o) -> std::string {
    const std::string idx = full(o) ? "[q]" : "";
    switch (o.kind) {
      case Operand::kStep: return "t" + std::to_string(o.index) + idx;
      case Operand::kExternal: return "x" + std::to_string(o.index) + idx;
      case Operand::kScalar: return float_literal(o.value);
      case Operand::kNone: break;
    }
    return "0.0f";
  };
  auto round = [&](c10::ScalarType t, const std::string& v) {
    return t == c10::ScalarType::Float ? v : "cvt_" + std::string(dtype_tag(t)) + "(st_" + dtype_tag(t) + "(" + v + "))";
  };

  std::ostringstream os;
  os << "// cudal1 row chain, variant " << v.id() << "\n// ";
  for (char ch : plan.text) os << (ch == '\n' ? std::string("\n// ") : std::string(1, ch));
  os << "\n" << mixed_dtype_prelude() << "\n";
  os << "template <typename T, int V> struct __align__(sizeof(T) * V) Pack { T v[V]; };\n";
  os << "#define VEC " << v.vec << "\n#define BLOCK " << v.block << "\n#define GROUP " << v.group << "\n#define ITEMS "
     << ITEMS << "\n#define CH " << CH << "LL\n#define COLS " << C << "LL\n";
  os << "extern \"C\" __global__ void __launch_bounds__(BLOCK) chain_kernel(long long rows";
  for (size_t e = 0; e < plan.externals.size(); ++e)
    os << ", const " << mixed_storage_type(plan.externals[e].dtype) << "* __restrict__ e" << e;
  for (size_t k = 0; k < plan.outputs.size(); ++k)
    os << ", " << mixed_storage_type(plan.steps[static_cast<size_t>(plan.outputs[k].step)].dtype) << "* o" << k;
  os << ") {\n";
  os << "  const int lane = threadIdx.x % GROUP;\n";
  os << "  const long long row = (long long)blockIdx.x * (BLOCK / GROUP) + threadIdx.x / GROUP;\n";
  if (!block_group) os << "  if (row >= rows) return;  // a whole warp: no barrier below\n";
  // The row's index along each leading dim, then each external's offset of this row.
  os << "  long long r = row;\n";
  for (int d = R - 2; d >= 0; --d) {
    const int64_t n = plan.shape[static_cast<size_t>(d)];
    os << "  const long long i" << d << " = " << (d ? "r % " + std::to_string(n) + "LL" : std::string("r")) << ";"
       << (d ? " r /= " + std::to_string(n) + "LL;" : "") << "\n";
  }
  os << "  (void)r;\n";
  for (size_t e = 0; e < plan.externals.size(); ++e) {
    const External& x = plan.externals[e];
    os << "  const long long r" << e << " = 0";
    for (int d = 0; d + 1 < R; ++d)
      if (x.strides[static_cast<size_t>(d)] != 0) os << " + i" << d << " * " << x.strides[static_cast<size_t>(d)] << "LL";
    os << ";\n";
    if (x.row) {
      os << "  const float x" << e << " = cvt_" << dtype_tag(x.dtype) << "(e" << e << "[r" << e << "]);\n";
    } else {
      os << "  float x" << e << "[ITEMS * VEC];\n";
    }
  }
  for (size_t k = 0; k < plan.steps.size(); ++k) {
    const Step& s = plan.steps[k];
    if (s.row) {
      os << "  float t" << k << ";\n";
      if (is_reduction(s.op)) os << "  float a" << k << " = " << identity(s.op) << ";\n";
    } else {
      os << "  float t" << k << "[ITEMS * VEC];\n";
    }
  }
  auto store_row = [&](size_t k) {
    for (size_t o = 0; o < plan.outputs.size(); ++o)
      if (static_cast<size_t>(plan.outputs[o].step) == k)
        os << "    if (o" << o << " && lane == 0) o" << o << "[row] = st_" << dtype_tag(plan.steps[k].dtype) << "(t" << k
           << ");\n";
  };
  for (int p = 0; p < phases; ++p) {
    os << "  // phase " << p << "\n  {\n";
    // Row values of this phase: reductions that ended with the last phase, then row steps.
    for (size_t k = 0; k < plan.steps.size(); ++k) {
      const Step& s = plan.steps[k];
      if (!s.row || ph[k] != p) continue;
      if (is_reduction(s.op)) {
        const std::string a = "a" + std::to_string(k);
        os << "#pragma unroll\n    for (int m = 16; m > 0; m >>= 1) { const float b = __shfl_xor_sync(0xffffffffu, " << a
           << ", m); " << a << " = " << combine(s.op, a, "b") << "; }\n";
        if (block_group) {
          os << "    { __shared__ float s" << k << "[BLOCK / 32];\n      if (threadIdx.x % 32 == 0) s" << k
             << "[threadIdx.x / 32] = " << a << ";\n      __syncthreads();\n      " << a << " = s" << k
             << "[0];\n#pragma unroll\n      for (int w = 1; w < BLOCK / 32; ++w) { const float b = s" << k << "[w]; " << a
             << " = " << combine(s.op, a, "b") << "; } }\n";
        }
        std::string val = a;
        if (s.op == StepOp::kRowMean) val = a + " * " + float_literal(s.alpha);  // the plan's factor
        os << "    t" << k << " = " << round(s.dtype, val) << ";\n";
      } else {
        os << "    t" << k << " = " << round(s.dtype, step_formula(s, spell)) << ";\n";
      }
      store_row(k);
    }
    // Full values of this phase, the reductions that read them, and their stores.
    os << "#pragma unroll\n    for (int it = 0; it < ITEMS; ++it) {\n      const long long c = (long long)it * GROUP + lane;\n"
       << "      if (c < CH) {\n        const long long col0 = c * VEC;\n";
    if (p == 0) {
      for (size_t e = 0; e < plan.externals.size(); ++e) {
        const External& x = plan.externals[e];
        if (x.row) continue;
        const char* st = mixed_storage_type(x.dtype);
        if (packed(x, v.vec)) {
          os << "        { const Pack<" << st << ", VEC> pk = *reinterpret_cast<const Pack<" << st << ", VEC>*>(e" << e
             << " + r" << e << " + col0);\n#pragma unroll\n          for (int j = 0; j < VEC; ++j) x" << e
             << "[it * VEC + j] = cvt_" << dtype_tag(x.dtype) << "(pk.v[j]); }\n";
        } else {
          os << "#pragma unroll\n        for (int j = 0; j < VEC; ++j) x" << e << "[it * VEC + j] = cvt_"
             << dtype_tag(x.dtype) << "(e" << e << "[r" << e << " + (col0 + j) * " << x.strides.back() << "LL]);\n";
        }
      }
    }
    for (size_t k = 0; k < plan.steps.size(); ++k) {
      const Step& s = plan.steps[k];
      if (s.row || ph[k] != p) continue;
      os << "#pragma unroll\n        for (int j = 0; j < VEC; ++j) { const int q = it * VEC + j; t" << k << "[q] = "
         << round(s.dtype, step_formula(s, spell)) << "; }\n";
    }
    for (size_t k = 0; k < plan.steps.size(); ++k) {
      const Step& s = plan.steps[k];
      if (!is_reduction(s.op) || ph[k] != p + 1) continue;
      const std::string a = "a" + std::to_string(k), in = spell(s.args.at(0));
      os << "#pragma unroll\n        for (int j = 0; j < VEC; ++j) { const int q = it * VEC + j; " << a << " = "
         << combine(s.op, a, in) << "; }\n";
    }
    for (size_t o = 0; o < plan.outputs.size(); ++o) {
      const size_t k = static_cast<size_t>(plan.outputs[o].step);
      const Step& s = plan.steps[k];
      if (s.row || ph[k] != p) continue;
      const char* st = mixed_storage_type(s.dtype);
      os << "        if (o" << o << ") { Pack<" << st << ", VEC> pk;\n#pragma unroll\n          for (int j = 0; j < VEC; ++j) pk.v[j] = st_"
         << dtype_tag(s.dtype) << "(t" << k << "[it * VEC + j]);\n          *reinterpret_cast<Pack<" << st << ", VEC>*>(o" << o
         << " + row * COLS + col0) = pk; }\n";
    }
    os << "      }\n    }\n  }\n";
  }
  os << "}\n";
  return os.str();
}

}  // namespace cudal1::optimizer::chains
