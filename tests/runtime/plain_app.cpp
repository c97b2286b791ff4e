/// @brief A LibTorch app that knows nothing of cudal1: linked with cudal1::cudal1 under -Wl,--as-needed it
/// must still load libcudal1.so; run plainly it can take it through LD_PRELOAD.
#include <ATen/ATen.h>

#include <cstdio>

int main() {
  const at::Tensor x = at::randn({16});
  std::printf("plain app sum %s\n", at::allclose(at::relu(x), at::clamp_min(x, 0)) ? "ok" : "WRONG");
  return 0;
}
