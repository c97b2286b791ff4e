/// @brief GPU test app for serving a cached chain early (tests/gpu/chain_served_early.sh; Note [Cached chains turn
/// hot early] in csrc/runtime/src/runtime.cpp), linked with libcudal1.so.
/// `chain_serve_app tune`: runs `sigmoid(a) * b` until cudal1 (tune mode) has fused it, which stores the chain
/// kernel in the cache.
/// `chain_serve_app serve`: runs the chain 3 times, waits 300 ms (several ticks of the serve-mode chain server),
/// then 5 times more: far fewer than CUDAL1_HOT_CALLS commits, so only a chain served from the cache on
/// recurrence is fused by then. Every output must match ATen's (cudal1 bypassed). Exit 77 (skip) without a GPU.
#include <ATen/ATen.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>

#include "cudal1/cudal1.h"
#include "gpu/app_start.h"

int main(int argc, char** argv) {
  if (const int rc = cudal1::test::app_start()) return rc;
  const bool serve = argc > 1 && std::strcmp(argv[1], "serve") == 0;
  const auto cuda = at::TensorOptions().device(at::kCUDA).dtype(at::kFloat);
  const at::Tensor a = at::randn({4096, 4096}, cuda), b = at::randn({4096, 4096}, cuda);
  auto chain = [&] { return at::sigmoid(a).mul(b); };
  at::Tensor y;
  int bad = 0;
  auto check = [&](const at::Tensor& got) {
    at::Tensor ref;
    {
      cudal1::ScopedAtenOnly aten_only;
      ref = chain();
    }
    bad += !at::allclose(got, ref, 1e-5, 1e-5);
  };
  if (serve) {
    for (int i = 0; i < 3; ++i) check(chain());
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    for (int i = 0; i < 5; ++i) check(chain());
  } else {
    for (int round = 0; round < 20 && cudal1::stats().chains_fused == 0; ++round) {
      for (int i = 0; i < 100; ++i) y = chain();
      cudal1::wait_idle(120.0);
    }
    check(chain());
  }
  cudal1::flush();
  const cudal1::Stats s = cudal1::stats();
  std::printf("%s\n", cudal1::status_line().c_str());
  if (bad) {
    std::printf("FAIL: %d outputs differ from ATen's\n", bad);
    return 1;
  }
  if (s.chains_fused < 1 || (serve && s.regions_completed < 1)) {
    std::printf("FAIL: expected the chain fused%s\n", serve ? " from the cache after its first commits" : "");
    return 1;
  }
  return cudal1::test::serve_end(s, serve);
}
