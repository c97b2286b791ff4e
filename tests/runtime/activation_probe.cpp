/// @brief A small LibTorch app linked with cudal1::cudal1: prints what cudal1 says of itself and checks that a
/// computation, eager and through a TorchScript method (which reaches cudal1's definition of
/// torch::jit::Method::operator(): Note [Forward graphs]), still gives the right answer. Used by activation_test.sh.
#include <ATen/ATen.h>
#include <torch/script.h>

#include <cstdio>

#include "cudal1/cudal1.h"

int main() {
  const at::Tensor x = at::randn({64, 64});
  const at::Tensor y = at::sigmoid(at::relu(x));
  bool right = at::allclose(y, 1 / (1 + at::exp(-at::clamp_min(x, 0))));
  torch::jit::Module m("Probe");
  m.register_parameter("w", at::full({64}, 2.0), false);
  m.define("def forward(self, x):\n  return x * self.w + 1.0\n");
  for (int i = 0; i < 3; ++i) right = right && at::allclose(m.forward({x}).toTensor(), x * 2.0 + 1.0);
  std::printf("cudal1 %s %s\n", cudal1::version(), cudal1::status_line().c_str());
  std::printf("%s\n", cudal1::forward_graph_status().c_str());
  std::printf("result %s\n", right ? "ok" : "WRONG");
  return right ? 0 : 1;
}
