/// @brief The op table of the unary family: each op as float math, matching ATen's CUDA formulas (opmath float,
/// no fast-math), so that fp32 results agree to rounding and fp16/bf16 results to within ATen's own error
/// (Note [Gelu for 16-bit outputs]).
#include <map>

#include "unary_family.h"

namespace cudal1::optimizer::unary {

// Note [Gelu for 16-bit outputs]
// ATen's erf gelu is x * 0.5 * (1 + erff(x / sqrt 2)) in fp32 for every dtype. CUDA's erff is ~28 instructions
// (one degree-6 polynomial whose coefficients are picked by seven selects, an ex2, a copysign), so the whole op is
// ~30 an element: 45 M fp16 elements issue for ~45 us on an H200 (132 SMs x 4 issue a clock at 1.98 GHz), more
// than the 42.7 us the device copy of the same bytes takes. Measured before (session 16): gelu f16 [4096,11008]
// best of all 128 variants 52.6 us, 1.23x the copy; only two variants under 1.25x.
// For fp16 and bf16 outputs the op uses Abramowitz & Stegun 7.1.26 instead, in fp32:
//   erfc(|v|) = t (a1 + t (a2 + t (a3 + t (a4 + t a5)))) exp(-v^2),  t = 1 / (1 + p |v|),  |error| <= 1.5e-7,
// with v = x / sqrt 2 folded into the constants, the 1/2 folded into the coefficients, a hardware reciprocal and
// exp2 (rcp.approx, ex2.approx: ~1 ulp), and gelu = x * (x >= 0 ? 1 - erfc/2 : erfc/2): ~17 instructions an
// element. Accuracy over every one of the 65536 inputs of each dtype (tests/gpu/unary_exhaustive_test.cpp, H200,
// 2026-12-01): fp16 535 outputs differ from ATen's, by at most 3 ulp, where ATen's own formula is up to 2 ulp from
// the exact value (a host emulation put ours within 1); bf16 199 differ, in the negative tail where 1 + erff(v)
// cancels in ATen's formula (up to 13215 ulp from the exact value there; ours within 9 on the host); all within
// the dtype's tolerance (atol 1e-5). fp32 outputs keep erff: there that cancellation would show against rtol 1e-5.
// Measured after (same day, session 17 run 1): gelu f16 [4096,11008] best variant 43.0 us (1.01x the copy), 81 of
// the 128 variants under 1.25x; the unary fuzz 775 of 775.
// Specials: +-0 -> +-0, +Inf -> +Inf, -Inf -> NaN (0 * -Inf, as ATen), NaN -> NaN, overflowing squares -> exp 0.
constexpr const char* kGelu16 =
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
      {"relu", "(x != x) ? x : (x > 0.f ? x : 0.f)"},
      {"gelu_none", "x * 0.5f * (1.f + erff(x * 0.70710678118654752440f))"},
      // ATen: kBeta = sqrt(2) * (2/sqrt(pi)) * 0.5, kKappa = 0.044715.
      {"gelu_tanh",
       "0.5f * x * (1.f + tanhf(0.79788456080286535588f * (x + 0.044715f * x * x * x)))"},
      {"sigmoid", "1.f / (1.f + expf(-x))"},
      {"tanh", "tanhf(x)"},
      {"silu", "x / (1.f + expf(-x))"},
      {"exp", "expf(x)"},
      {"neg", "-x"},
      {"abs", "fabsf(x)"},
  };
  if (math == "gelu_none" && (dtype == c10::ScalarType::Half || dtype == c10::ScalarType::BFloat16)) return kGelu16;
  const auto it = table.find(math);
  return it == table.end() ? "" : "  return " + it->second + ";\n";
}

}  // namespace cudal1::optimizer::unary
