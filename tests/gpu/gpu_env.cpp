/// @brief GPU availability for tests.
#include "gpu/gpu_env.h"

#include "cudal1/core/cuda_driver.h"
#include "cudal1/core/nvrtc.h"
#include "cudal1/dispatcher/cuda_glue.h"

namespace cudal1::testing {

bool gpu_available(std::string* why) {
  if (!dispatcher::has_torch_cuda()) {
    *why = "no GPU test here: this build uses a CPU-only LibTorch";
    return false;
  }
  if (auto d = driver(); !d.ok()) {
    *why = "no GPU test here: " + d.status().message();
    return false;
  }
  if (dispatcher::cuda_device_count() < 1) {
    *why = "no GPU test here: no CUDA device visible";
    return false;
  }
  if (auto n = nvrtc(); !n.ok()) {
    *why = "no GPU test here: " + n.status().message();
    return false;
  }
  return true;
}

}  // namespace cudal1::testing
