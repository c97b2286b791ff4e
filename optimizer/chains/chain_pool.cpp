/// @brief The CUDA source of a pooled chain's variant (Note [Pooled chains] in chain_plan.h): pointwise steps
/// computed at every element of a max-pool's windows, folded into the window maxima.
#include <sstream>
#include <stdexcept>

#include "chain_plan.h"
#include "codegen_common.h"

namespace cudal1::optimizer::chains {
namespace {

/// An external that holds one value per (n, c): read once a thread.
bool invariant(const External& e) { return e.strides.size() == 4 && e.strides[2] == 0 && e.strides[3] == 0; }

}  // namespace

std::string pool_chain_source(const ChainPlan& plan, const ChainVariant& v) {
  const PoolWindow& w = plan.pool;
  if (!w.active() || plan.shape.size() != 4 || v.pool_rows < 1 || plan.steps.empty() ||
      plan.steps.back().op != StepOp::kPoolMax)
    throw std::logic_error("pool_chain_source: not a pooled chain");
  const int64_t C = plan.shape[1], H = plan.shape[2], W = plan.shape[3];
  const int64_t R = v.pool_rows, blocks_down = (w.oh + R - 1) / R;
  const size_t pool_step = plan.steps.size() - 1;
  const Step& pool = plan.steps[pool_step];
  const int input = pool.args.at(0).index;

  // Which values are the same over a thread's windows: invariant externals, scalars, and steps of only those.
  std::vector<bool> step_inv(pool_step, false);
  auto inv = [&](const Operand& o) {
    if (o.kind == Operand::kExternal) return invariant(plan.externals[static_cast<size_t>(o.index)]);
    if (o.kind == Operand::kStep) return static_cast<bool>(step_inv[static_cast<size_t>(o.index)]);
    return true;
  };
  for (size_t k = 0; k < pool_step; ++k) {
    bool all = true;
    for (const Operand& o : plan.steps[k].args) all = all && inv(o);
    step_inv[k] = all;
  }

  std::ostringstream os;
  os << "// cudal1 pooled chain, variant " << v.id() << "\n// ";
  for (char ch : plan.text) os << (ch == '\n' ? std::string("\n// ") : std::string(1, ch));
  os << "\n" << mixed_dtype_prelude() << "\n";
  os << "#define BLOCK " << v.block << "\n";
  os << "extern \"C\" __global__ void __launch_bounds__(BLOCK) chain_kernel(long long n";
  for (size_t e = 0; e < plan.externals.size(); ++e)
    os << ", const " << mixed_storage_type(plan.externals[e].dtype) << "* __restrict__ e" << e;
  os << ", " << mixed_storage_type(pool.dtype) << "* o0) {\n";
  os << "  const long long item = (long long)blockIdx.x * BLOCK + threadIdx.x;\n  if (item >= n) return;\n";
  os << "  const int j = 0;\n";  // the operands' element index (one value a thread)
  os << "  const long long ow = item % " << w.ow << "LL;\n  long long r = item / " << w.ow << "LL;\n";
  os << "  const long long oh0 = (r % " << blocks_down << "LL) * " << R << "LL;\n  r /= " << blocks_down << "LL;\n";
  os << "  const long long c = r % " << C << "LL, nb = r / " << C << "LL;\n";

  auto load = [&](size_t e, const std::string& offset) {
    const External& x = plan.externals[e];
    os << "    float x" << e << "[1] = {cvt_" << dtype_tag(x.dtype) << "(e" << e << "[" << offset << "])};\n";
  };
  auto compute = [&](size_t k) {
    const Step& s = plan.steps[k];
    os << "    float t" << k << "[1];\n    { float v = " << step_formula(s, operand_text) << ";\n";
    if (s.dtype != c10::ScalarType::Float)
      os << "      v = cvt_" << dtype_tag(s.dtype) << "(st_" << dtype_tag(s.dtype) << "(v));\n";
    os << "      t" << k << "[0] = v; }\n";
  };
  auto base = [&](const External& x) {
    return "nb * " + std::to_string(x.strides[0]) + "LL + c * " + std::to_string(x.strides[1]) + "LL";
  };
  for (size_t e = 0; e < plan.externals.size(); ++e)
    if (invariant(plan.externals[e])) load(e, base(plan.externals[e]));
  for (size_t k = 0; k < pool_step; ++k)
    if (step_inv[k]) compute(k);

  const int64_t span = (R - 1) * w.sh + (w.kh - 1) * w.dh + 1;  // input rows under the thread's windows
  os << "  float m[" << R << "];\n#pragma unroll\n  for (int q = 0; q < " << R
     << "; ++q) m[q] = __int_as_float(0xff800000);\n";
  os << "  const long long h0 = oh0 * " << w.sh << "LL - " << w.ph << "LL, w0 = ow * " << w.sw << "LL - " << w.pw
     << "LL;\n";
  os << "#pragma unroll\n  for (int a = 0; a < " << span << "; ++a) {\n";
  // Output q holds row a when a - q*SH is a multiple of DH below KH*DH (a constant once unrolled).
  os << "    bool held = false;\n#pragma unroll\n    for (int q = 0; q < " << R << "; ++q) { const int d = a - q * "
     << w.sh << "; held = held || (d >= 0 && d % " << w.dh << " == 0 && d / " << w.dh << " < " << w.kh << "); }\n";
  os << "    const long long h = h0 + a;\n    if (!held || h < 0 || h >= " << H << "LL) continue;\n";
  os << "#pragma unroll\n    for (int b = 0; b < " << w.kw << "; ++b) {\n";
  os << "    const long long wc = w0 + b * " << w.dw << "LL;\n    if (wc < 0 || wc >= " << W << "LL) continue;\n";
  for (size_t e = 0; e < plan.externals.size(); ++e) {
    const External& x = plan.externals[e];
    if (invariant(x)) continue;
    load(e, base(x) + " + h * " + std::to_string(x.strides[2]) + "LL + wc * " + std::to_string(x.strides[3]) + "LL");
  }
  for (size_t k = 0; k < pool_step; ++k)
    if (!step_inv[k]) compute(k);
  // ATen's rule (DilatedMaxPool2d.cu): a greater value or a NaN replaces the maximum, in window order.
  os << "    const float v = t" << input << "[0];\n#pragma unroll\n    for (int q = 0; q < " << R
     << "; ++q) { const int d = a - q * " << w.sh << ";\n      if (d >= 0 && d % " << w.dh << " == 0 && d / " << w.dh
     << " < " << w.kh << " && (v > m[q] || v != v)) m[q] = v; }\n";
  os << "    }\n  }\n";
  os << "#pragma unroll\n  for (int q = 0; q < " << R << "; ++q)\n    if (oh0 + q < " << w.oh << "LL) o0[((nb * " << C
     << "LL + c) * " << w.oh << "LL + oh0 + q) * " << w.ow << "LL + ow] = st_" << dtype_tag(pool.dtype) << "(m[q]);\n";
  os << "}\n";
  return os.str();
}

}  // namespace cudal1::optimizer::chains
