/// @brief GPU test, second process: an app linked with libcudal1.so (CUDAL1_ENABLE=1, CUDAL1_MODE=serve, the
/// writer's cache) must serve its very first relu call of the cached signature with the cached kernel, and
/// the result must equal ATen's (clamp_min, which cudal1 does not hook). With "--expect-miss" the cache must
/// not serve it (a record of another fingerprint that no allowance covers: Note [Cache transfer]). With "--any"
/// (a damaged cache: tests/gpu/damaged_cache.sh) the cache may serve it or not; the result must equal ATen's.
#include <ATen/ATen.h>

#include <cstdio>
#include <string>

#include "cudal1/cudal1.h"

int main(int argc, char** argv) {
  const bool expect_miss = argc == 2 && std::string(argv[1]) == "--expect-miss";
  const bool any = argc == 2 && std::string(argv[1]) == "--any";
  if (!cudal1::is_active()) {
    std::printf("cudal1 is not active: %s\n", cudal1::status_line().c_str());
    return 1;
  }
  const at::Tensor x = at::randn({4096, 1024}, at::TensorOptions().device(at::kCUDA));
  const at::Tensor y = at::relu(x);  // first call of this signature in this process
  const cudal1::Stats s = cudal1::stats();
  std::printf("%s\n", cudal1::status_line().c_str());
  if (any) {
    if (!at::equal(y, at::clamp_min(x, 0))) {
      std::printf("FAIL: the result differs from ATen's\n");
      return 1;
    }
    std::printf("ok: the result equals ATen's (%s)\n", s.replaced_calls ? "served by a cached kernel" : "by ATen");
    return 0;
  }
  if (expect_miss) {
    if (s.cache_hits != 0 || s.replaced_calls != 0 || !at::equal(y, at::clamp_min(x, 0))) {
      std::printf("FAIL: expected the cache not to serve a record no allowance covers\n");
      return 1;
    }
    std::printf("ok: the record of another fingerprint was not used\n");
    return 0;
  }
  if (s.cache_hits < 1 || s.replaced_calls != 1) {
    std::printf("FAIL: expected the first call to be served from the cache\n");
    return 1;
  }
  if (!at::equal(y, at::clamp_min(x, 0))) {
    std::printf("FAIL: cached kernel's result differs from ATen's\n");
    return 1;
  }
  std::printf("ok: first call served by the cached kernel, result equals ATen's\n");
  return 0;
}
