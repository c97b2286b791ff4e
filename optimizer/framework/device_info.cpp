/// @brief Device properties and the GPU fingerprint.
#include "cudal1/optimizer/device_info.h"

#include <torch/version.h>

#include <array>
#include <mutex>
#include <optional>

#include "cudal1/core/cuda_driver.h"
#include "cudal1/core/version.h"
#include "cudal1/dispatcher/cuda_glue.h"
#include "cudal1/optimizer/compiler.h"
#include "cudal1/optimizer/family.h"

namespace cudal1::optimizer {
namespace {

constexpr int kMaxDevices = 64;

Result<DeviceInfo> read_info(int device) {
  CUDAL1_ASSIGN_OR_RETURN(const DriverApi* api, driver());
  CUdevice dev;
  CUDAL1_CU_TRY(api->cuDeviceGet(&dev, device));
  DeviceInfo d;
  char name[256] = {0};
  CUDAL1_CU_TRY(api->cuDeviceGetName(name, sizeof(name) - 1, dev));
  d.name = name;
  int major = 0, minor = 0, l2 = 0;
  CUDAL1_CU_TRY(api->cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev));
  CUDAL1_CU_TRY(api->cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev));
  CUDAL1_CU_TRY(api->cuDeviceGetAttribute(&d.sm_count, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev));
  CUDAL1_CU_TRY(api->cuDeviceGetAttribute(&l2, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, dev));
  d.sm = major * 10 + minor;
  d.l2_bytes = l2;
  return d;
}

}  // namespace

std::string torch_version() { return TORCH_VERSION; }

Result<DeviceInfo> device_info(int device) {
  if (device < 0 || device >= kMaxDevices) return Status(Code::kInvalidArgument, "bad device index");
  // Leaked on purpose: used by atexit handlers (Note [Exit order] in csrc/runtime/src/runtime.cpp).
  static auto* mu = new std::mutex();
  static auto* cache = new std::array<std::optional<Result<DeviceInfo>>, kMaxDevices>();
  std::lock_guard<std::mutex> lock(*mu);
  if (!(*cache)[device]) (*cache)[device] = read_info(device);
  return *(*cache)[device];
}

Result<GpuFingerprint> fingerprint_for(int device) {
  CUDAL1_ASSIGN_OR_RETURN(DeviceInfo info, device_info(device));
  CUDAL1_ASSIGN_OR_RETURN(const DriverApi* api, driver());
  GpuFingerprint f;
  f.gpu_name = info.name;
  f.sm = info.sm;
  f.sm_count = info.sm_count;
  f.driver_version = api->driver_version;
  f.cuda_runtime_version = dispatcher::cuda_runtime_version();
  f.nvrtc_version = nvrtc_version();
  if (f.nvrtc_version.empty()) return Status(Code::kUnavailable, "NVRTC is unavailable");
  f.torch_version = torch_version();
  f.cudal1_version = kVersion;
  f.generators = generators_fingerprint();
  f.format_version = kCacheFormatVersion;
  return f;
}

}  // namespace cudal1::optimizer
