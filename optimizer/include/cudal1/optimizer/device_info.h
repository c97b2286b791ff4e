/// @brief Facts about a CUDA device that code generation and the cache key need.
#pragma once

#include <string>

#include "cudal1/core/fingerprint.h"
#include "cudal1/core/status.h"

namespace cudal1::optimizer {

struct DeviceInfo {
  std::string name;  ///< "NVIDIA H200"
  int sm = 0;        ///< 10*major+minor
  int sm_count = 0;
  int64_t l2_bytes = 0;
};

/// Reads `device`'s properties through the driver (cached per device; thread-safe).
Result<DeviceInfo> device_info(int device);

/// The GPU fingerprint of `device` in this process: the device's name and sm plus driver, CUDA runtime,
/// NVRTC, torch, cudal1, generator and format versions. Cached per device; thread-safe.
Result<GpuFingerprint> fingerprint_for(int device);

/// The torch version this library was built against, e.g. "2.11.0".
std::string torch_version();

}  // namespace cudal1::optimizer
