/// @brief The op table of the unary family: each op as float math, matching ATen's CUDA formulas (opmath float,
/// no fast-math), so that fp32 results agree to rounding and fp16/bf16 results to within ATen's own error
/// (Note [Unary math for 16-bit outputs]).
#include <map>

#include "unary_family.h"

namespace cudal1::optimizer::unary {

// Note [Unary math for 16-bit outputs]
// ATen computes every op in fp32 (opmath) with CUDA's accurate functions, for every dtype. For 16-bit outputs
// those make the heavy ops' kernels issue-bound at their memory time. CUDA's erff is ~28 instructions (a degree-6
// polynomial whose coefficients are picked by seven selects, an ex2, a copysign), so the erf gelu is ~30 an
// element: 45 M fp16 elements issue for ~45 us on an H200 (132 SMs x 4 issue a clock at 1.98 GHz), more than the
// 42.7 us the device copy of the same bytes takes (with erff the best of 128 gelu f16 [4096,11008] variants runs
// 1.23x the copy). tanhf, expf and the IEEE division of sigmoid and silu cost the same kind of count (gelu-tanh
// bf16 [8192,8192] ~1.07x the copy, silu bf16 gate half ~1.14x).
// For fp16 and bf16 outputs these ops use forms that are exact in real arithmetic, in fp32, with a hardware
// reciprocal and exp2 (rcp.approx, ex2.approx: ~1 ulp of fp32, flushing fp32 subnormals):
// - erf gelu: Abramowitz & Stegun 7.1.26,
//     erfc(|v|) = t (a1 + t (a2 + t (a3 + t (a4 + t a5)))) exp(-v^2),  t = 1 / (1 + p |v|),  |error| <= 1.5e-7,
//   v = x / sqrt 2 folded into the constants, the 1/2 into the coefficients, and
//   gelu = x * (x >= 0 ? 1 - erfc/2 : erfc/2): ~17 instructions an element;
// - tanh gelu: 0.5 x (1 + tanh(u)) = x / (1 + exp(-2u)), u = sqrt(2/pi) (x + 0.044715 x^3) as ATen rounds it;
// - sigmoid: 1 / (1 + exp(-x)); silu: x * (1 / (1 + exp(-x))).
// exp(y) is ex2(y log2 e); the product's rounding (2^-24 |y log2 e|, |y| <= ~88 where the result is not 0 or 1)
// moves a result by <= ~6e-6 relative, a hundredth of a 16-bit ulp. The negative tails need no subtraction here,
// where ATen's 1 + erff(v) and 1 + tanhf(u) cancel: there ATen's own result is off by up to ~13000 bf16 ulp from
// the exact value, and ours is closer. Every result stays within the dtype's verification tolerance (rtol 2e-3 /
// 1.6e-2, atol 1e-5); tests/gpu/unary_exhaustive_test.cpp checks all 65536 inputs of each dtype on the GPU and
// prints how many differ from ATen's (fp16 / bf16, most ulp, on an H200): erf gelu 535 (3) / 199 (tail), tanh gelu
// 272 (2) / 150 (tail), sigmoid 2 (1) / 3 (bf16: the fp32 subnormal tail, x ~ -87.5, flushed to 0), silu 2 (1) / 3
// (same); all within tolerance. fp32 outputs keep ATen's functions: there the tails' cancellation and the flushes
// would show against rtol 1e-5. With these forms each of the rows above runs at its copy's time (gelu f16
// [4096,11008] ~1.01x the copy).
// Specials as ATen: +-0 -> +-0 (sigmoid 0.5), +Inf -> +Inf (sigmoid 1), -Inf -> NaN for the gelus and silu
// (0 * -Inf, as ATen's -Inf * 0 and -Inf / Inf) and 0 for sigmoid, NaN -> NaN, overflowing squares and cubes
// -> exp 0 or Inf.
constexpr const char* kErfGelu16 =
    "  const float t = rcp_approx(fmaf(0.3275911f * 0.70710678118654752440f, fabsf(x), 1.f));\n"
    "  float p = 0.5f * 1.061405429f;\n"
    "  p = fmaf(p, t, 0.5f * -1.453152027f);\n"
    "  p = fmaf(p, t, 0.5f * 1.421413741f);\n"
    "  p = fmaf(p, t, 0.5f * -0.284496736f);\n"
    "  p = fmaf(p, t, 0.5f * 0.254829592f);\n"
    "  const float half_erfc = p * t * ex2_approx((x * -0.72134752044448170368f) * x);  // exp(-x^2 / 2)\n"
    "  return x * (x >= 0.f ? 1.f - half_erfc : half_erfc);\n";

std::string unary_math(const std::string& math, c10::ScalarType dtype) {
  static const std::map<std::string, std::string> table = {
      // clamp_min(x, 0) with NaN propagation, as ATen's relu.
      {"relu", "  return (x != x) ? x : (x > 0.f ? x : 0.f);\n"},
      {"gelu_none", "  return x * 0.5f * (1.f + erff(x * 0.70710678118654752440f));\n"},
      // ATen: kBeta = sqrt(2) * (2/sqrt(pi)) * 0.5, kKappa = 0.044715.
      {"gelu_tanh", "  return 0.5f * x * (1.f + tanhf(0.79788456080286535588f * (x + 0.044715f * x * x * x)));\n"},
      {"sigmoid", "  return 1.f / (1.f + expf(-x));\n"},
      {"tanh", "  return tanhf(x);\n"},
      {"silu", "  return x / (1.f + expf(-x));\n"},
      {"exp", "  return expf(x);\n"},
      {"neg", "  return -x;\n"},
      {"abs", "  return fabsf(x);\n"},
  };
  // Note [Unary math for 16-bit outputs]
  static const std::map<std::string, std::string> table16 = {
      {"gelu_none", kErfGelu16},
      {"gelu_tanh",
       "  const float u = 0.79788456080286535588f * (x + 0.044715f * x * x * x);\n"
       "  return x * rcp_approx(1.f + ex2_approx(u * -2.88539008177792681472f));  // x / (1 + exp(-2u))\n"},
      {"sigmoid", "  return rcp_approx(1.f + ex2_approx(x * -1.44269504088896340736f));\n"},
      {"silu", "  return x * rcp_approx(1.f + ex2_approx(x * -1.44269504088896340736f));\n"},
  };
  if (dtype == c10::ScalarType::Half || dtype == c10::ScalarType::BFloat16) {
    const auto it = table16.find(math);
    if (it != table16.end()) return it->second;
  }
  const auto it = table.find(math);
  return it == table.end() ? "" : it->second;
}

}  // namespace cudal1::optimizer::unary
