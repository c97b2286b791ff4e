/// @brief torch-CUDA glue (see cuda_glue.h). Everything touching c10_cuda is behind CUDAL1_TORCH_CUDA.
#include "cudal1/dispatcher/cuda_glue.h"

#include <array>
#include <atomic>
#include <mutex>

#include "cudal1/core/cuda_driver.h"

#if defined(CUDAL1_TORCH_CUDA)
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>
#endif

namespace cudal1::dispatcher {

#if defined(CUDAL1_TORCH_CUDA)

bool has_torch_cuda() noexcept { return true; }

int cuda_device_count() noexcept {
  try {
    return static_cast<int>(c10::cuda::device_count());
  } catch (...) {
    return 0;
  }
}

Result<CUstream> current_stream(int device) noexcept {
  try {
    return static_cast<CUstream>(c10::cuda::getCurrentCUDAStream(static_cast<c10::DeviceIndex>(device)).stream());
  } catch (const std::exception& e) {
    return Status(Code::kCudaError, std::string("current stream: ") + e.what());
  }
}

int stream_capturing(int device) noexcept {
  try {
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    const auto stream = c10::cuda::getCurrentCUDAStream(static_cast<c10::DeviceIndex>(device)).stream();
    if (cudaStreamIsCapturing(stream, &status) != cudaSuccess) return -1;
    return status == cudaStreamCaptureStatusNone ? 0 : 1;
  } catch (...) {
    return -1;
  }
}

int cuda_runtime_version() noexcept {
  int v = 0;
  if (cudaRuntimeGetVersion(&v) != cudaSuccess) return 0;
  return v;
}

#else

bool has_torch_cuda() noexcept { return false; }
int cuda_device_count() noexcept { return 0; }
Result<CUstream> current_stream(int) noexcept {
  return Status(Code::kUnavailable, "this build of cudal1 has no torch-CUDA glue (CPU-only LibTorch)");
}
int stream_capturing(int) noexcept { return -1; }
int cuda_runtime_version() noexcept { return 0; }

#endif

namespace {

Result<CUcontext> primary_context(const DriverApi* api, int device) {
  static constexpr int kMaxDevices = 64;
  static std::array<std::atomic<CUcontext>, kMaxDevices> primary{};
  static std::mutex mu;
  if (device < 0 || device >= kMaxDevices) return Status(Code::kInvalidArgument, "bad device index");
  CUcontext ctx = primary[device].load(std::memory_order_acquire);
  if (ctx) return ctx;
  std::lock_guard<std::mutex> lock(mu);
  ctx = primary[device].load();
  if (!ctx) {
    CUdevice dev;
    CUDAL1_CU_TRY(api->cuDeviceGet(&dev, device));
    CUDAL1_CU_TRY(api->cuDevicePrimaryCtxRetain(&ctx, dev));  // never released: torch shares it
    primary[device].store(ctx, std::memory_order_release);
  }
  return ctx;
}

Status enter(int device, CUcontext* previous, bool* restore) {
  auto d = driver();
  if (!d.ok()) return d.status();
  const DriverApi* api = d.value();
  CUDAL1_ASSIGN_OR_RETURN(CUcontext want, primary_context(api, device));
  CUDAL1_CU_TRY(api->cuCtxGetCurrent(previous));
  if (*previous != want) {
    CUDAL1_CU_TRY(api->cuCtxSetCurrent(want));
    *restore = true;
  }
  return Status();
}

}  // namespace

ContextScope::ContextScope(int device) noexcept {
  try {
    status_ = enter(device, &previous_, &restore_);
  } catch (...) {
    status_ = Status(Code::kInternal, "ContextScope: unexpected exception");
  }
}

ContextScope::~ContextScope() {
  if (!restore_) return;
  if (auto d = driver(); d.ok()) d.value()->cuCtxSetCurrent(previous_);  // tolerate shutdown: result ignored
}

}  // namespace cudal1::dispatcher
