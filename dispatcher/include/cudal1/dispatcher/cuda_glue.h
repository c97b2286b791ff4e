/// @brief The torch-CUDA glue: torch's current stream and the device's primary context for Driver API work.
/// Compiled in only when LibTorch has CUDA (CUDAL1_TORCH_CUDA); otherwise every call reports Unavailable.
#pragma once

#include <cuda.h>

#include "cudal1/core/status.h"

namespace cudal1::dispatcher {

/// True when this build has torch's CUDA side (current stream, device guard).
bool has_torch_cuda() noexcept;

/// Number of CUDA devices torch sees (0 without torch-CUDA or without a device).
int cuda_device_count() noexcept;

/// torch's current stream on `device` for the calling thread, as a CUstream (torch's streams are the
/// runtime's, which are the driver's). Unavailable without torch-CUDA.
Result<CUstream> current_stream(int device) noexcept;

/// Makes `device`'s primary context (the one torch uses; retained once per process) current on the calling
/// thread for the scope's lifetime and restores the previous context afterwards, like torch's device guard:
/// the app thread's current device is never changed behind its back. Cheap when it already is current.
class ContextScope {
 public:
  explicit ContextScope(int device) noexcept;
  ~ContextScope();
  ContextScope(const ContextScope&) = delete;
  ContextScope& operator=(const ContextScope&) = delete;
  /// Ok when the device's context is current.
  const Status& status() const noexcept { return status_; }

 private:
  Status status_;
  CUcontext previous_ = nullptr;
  bool restore_ = false;
};

/// Whether torch's current stream on `device` is being captured into a CUDA graph: 1 yes, 0 no, -1 unknown
/// (no torch-CUDA, or the query failed).
int stream_capturing(int device) noexcept;

/// The CUDA runtime version torch was built with (e.g. 13000); 0 without torch-CUDA.
int cuda_runtime_version() noexcept;

}  // namespace cudal1::dispatcher
