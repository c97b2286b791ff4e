/// @brief The GPUs this machine's driver shows (gpus.h).
#include "gpus.h"

#include "cudal1/core/cuda_driver.h"

namespace cudal1::cli {

int gpu_count() {
  auto api = driver();
  if (!api.ok()) return 0;
  int n = 0;
  return api.value()->cuDeviceGetCount(&n) == CUDA_SUCCESS ? n : 0;
}

Result<GpuFingerprint> describe_gpu(int device) {
  auto api = driver();
  if (!api.ok()) return Status(Code::kUnavailable, "no GPU here");
  if (device < 0 || device >= gpu_count()) return Status(Code::kUnavailable, "no GPU " + std::to_string(device));
  const DriverApi* d = api.value();
  CUdevice dev = 0;
  int major = 0, minor = 0, sms = 0;
  char name[256] = {0};
  CUDAL1_CU_TRY(d->cuDeviceGet(&dev, device));
  CUDAL1_CU_TRY(d->cuDeviceGetName(name, sizeof(name) - 1, dev));
  CUDAL1_CU_TRY(d->cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev));
  CUDAL1_CU_TRY(d->cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev));
  CUDAL1_CU_TRY(d->cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev));
  GpuFingerprint f;
  f.gpu_name = name;
  f.sm = 10 * major + minor;
  f.sm_count = sms;
  f.driver_version = d->driver_version;
  return f;
}

}  // namespace cudal1::cli
