/// @brief A small LibTorch app linked with cudal1::cudal1: prints what cudal1 says of itself and checks that a
/// computation still gives the right answer. Used by activation_test.sh.
#include <ATen/ATen.h>

#include <cstdio>

#include "cudal1/cudal1.h"

int main() {
  const at::Tensor x = at::randn({64, 64});
  const at::Tensor y = at::sigmoid(at::relu(x));
  const bool right = at::allclose(y, 1 / (1 + at::exp(-at::clamp_min(x, 0))));
  std::printf("cudal1 %s %s\n", cudal1::version(), cudal1::status_line().c_str());
  std::printf("result %s\n", right ? "ok" : "WRONG");
  return right ? 0 : 1;
}
