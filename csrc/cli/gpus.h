/// @brief The GPUs this machine's driver shows, for the CLI (no CUDA runtime, no LibTorch).
#pragma once

#include "cudal1/core/fingerprint.h"
#include "cudal1/core/status.h"

namespace cudal1::cli {

/// GPUs the driver shows (CUDA_VISIBLE_DEVICES applies); 0 without a driver or a GPU.
int gpu_count();

/// What the driver says of GPU `device`: name, compute capability, SM count and driver version (the rest of the
/// fingerprint left empty); Unavailable without a driver or that GPU.
Result<GpuFingerprint> describe_gpu(int device);

}  // namespace cudal1::cli
