/// @brief GPU test app for `cudal1 warm` (tests/gpu/warm_then_serve.sh), linked with libcudal1.so.
/// `warm_app record`: makes three calls 60 times each (cudal1 in profile mode records them as hot; the layer norm
/// as the composite aten::layer_norm).
/// `warm_app serve`: calls each once (cudal1 in serve mode, cache warmed by `cudal1 warm`): every signature's
/// outcome must come from the cache on first use, at least one served by a cudal1 kernel, and every output must
/// match ATen's own result (computed with cudal1 bypassed). Exit 77 (skip) without a GPU.
#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>

#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "cudal1/cudal1.h"
#include "gpu/app_start.h"

int main(int argc, char** argv) {
  if (const int rc = cudal1::test::app_start()) return rc;
  const bool serve = argc > 1 && std::strcmp(argv[1], "serve") == 0;
  const auto cuda = at::TensorOptions().device(at::kCUDA);
  const at::Tensor cols = at::randn({8, 4096, 64}, cuda.dtype(at::kBFloat16));
  const at::Tensor wide = at::randn({4096, 2048}, cuda.dtype(at::kHalf)).t();  // transposed: strided
  const at::Tensor rows = at::randn({8192, 1024}, cuda.dtype(at::kHalf));
  const at::Tensor w = at::randn({1024}, cuda.dtype(at::kHalf)), b = at::randn({1024}, cuda.dtype(at::kHalf));
  const std::vector<std::pair<const char*, std::function<at::Tensor()>>> calls = {
      {"log_softmax bf16 over dim 1", [&] { return at::_log_softmax(cols, 1, false); }},
      {"tanh f16 transposed", [&] { return at::tanh(wide); }},
      // Under InferenceMode, as in the example app: profile mode then records the composite aten::layer_norm
      // (autograd's decomposition is skipped), which `cudal1 warm` must follow down to aten::native_layer_norm.
      {"layer_norm f16", [&] {
         c10::InferenceMode inference;
         return at::layer_norm(rows, {1024}, w, b, 1e-5);
       }},
  };
  int bad = 0;
  for (const auto& [name, fn] : calls) {
    at::Tensor y;
    for (int i = 0; i < (serve ? 1 : 60); ++i) y = fn();
    at::Tensor ref;
    {
      cudal1::ScopedAtenOnly aten_only;
      ref = fn();
    }
    const bool ok = at::allclose(y.to(at::kFloat), ref.to(at::kFloat), 2e-2, 2e-2);
    std::printf("%-28s %s\n", name, ok ? "matches ATen" : "DIFFERS from ATen");
    bad += !ok;
  }
  cudal1::flush();
  const cudal1::Stats s = cudal1::stats();
  std::printf("%s\n", cudal1::status_line().c_str());
  if (bad) return 1;
  if (serve && (s.cache_hits < calls.size() || s.replaced < 1 || s.replaced_calls < 1)) {
    std::printf("FAIL: expected every signature from the cache and at least one served by a cudal1 kernel\n");
    return 1;
  }
  return cudal1::test::serve_end(s, serve);
}
