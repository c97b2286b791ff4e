/// @brief GPU availability for tests.
#include "gpu/gpu_env.h"

#include "cudal1/core/cuda_driver.h"
#include "cudal1/core/nvrtc.h"
#include "cudal1/dispatcher/cuda_glue.h"
#include "cudal1/dispatcher/hook.h"
#include "cudal1/dispatcher/regions.h"

namespace cudal1::testing {

Status install_region_hooks(std::vector<std::string> ops) {
  dispatcher::HookOptions o;
  o.mode = Mode::kTune;
  o.ops = std::move(ops);
  o.hot_calls = 1000000;
  o.sample_every = 1000000;
  o.chains = true;
  CUDAL1_RETURN_IF_ERROR(dispatcher::install_hooks(o, dispatcher::HookCallbacks{}));
  dispatcher::DeferralOptions d;
  d.poison = true;
  return dispatcher::enable_deferral(d);
}

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
