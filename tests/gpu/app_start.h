/// @brief The start and end of a GPU test app linked with libcudal1.so (tests/gpu/*_app.cpp): skip without a GPU,
/// fail when cudal1 is not on; in serve mode, fail when anything was compiled.
#pragma once

#include <ATen/ATen.h>
#include <ATen/detail/CUDAHooksInterface.h>

#include <cstdio>

#include "cudal1/cudal1.h"

namespace cudal1::test {

/// 77 (the tests' skip code) without a CUDA device, 1 when cudal1 is not active, else 0.
inline int app_start() {
  if (!at::hasCUDA() || at::detail::getCUDAHooks().getNumGPUs() < 1) {  // not gpu_env: it links cudal1's internals
    std::printf("skip: no CUDA device (or a CPU-only LibTorch)\n");
    return 77;
  }
  if (!cudal1::is_active()) {
    std::printf("cudal1 is not active: %s\n", cudal1::status_line().c_str());
    return 1;
  }
  return 0;
}

/// The end of a serve-mode run (Note [Serve mode]): 1 when cudal1 compiled anything in this process, else 0 ("ok").
inline int serve_end(const cudal1::Stats& s, bool serve) {
  if (serve && s.compiled != 0) {
    std::printf("FAIL: serve mode compiled %llu kernels\n", static_cast<unsigned long long>(s.compiled));
    return 1;
  }
  std::printf("ok\n");
  return 0;
}

}  // namespace cudal1::test
