/// @brief The op table of the unary family: each op as float math, matching ATen's CUDA formulas (opmath float,
/// no fast-math), so that fp32 results agree to rounding and fp16/bf16 results to one output ulp.
#include <map>

#include "unary_family.h"

namespace cudal1::optimizer::unary {

std::string unary_math(const std::string& math) {
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
  const auto it = table.find(math);
  return it == table.end() ? "" : it->second;
}

}  // namespace cudal1::optimizer::unary
