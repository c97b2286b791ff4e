/// @brief LoadedModule: a cubin loaded into a device's primary context.
#include "cudal1/core/cuda_driver.h"
#include "cudal1/dispatcher/cuda_glue.h"
#include "cudal1/optimizer/family.h"

namespace cudal1::optimizer {

Result<std::shared_ptr<LoadedModule>> LoadedModule::load(int device, const std::string& cubin,
                                                         const std::string& kernel_name) {
  CUDAL1_ASSIGN_OR_RETURN(const DriverApi* api, driver());
  dispatcher::ContextScope ctx(device);
  CUDAL1_RETURN_IF_ERROR(ctx.status());
  std::shared_ptr<LoadedModule> m(new LoadedModule());
  m->device_ = device;
  CUDAL1_CU_TRY(api->cuModuleLoadData(&m->module_, cubin.data()));
  CUDAL1_CU_TRY(api->cuModuleGetFunction(&m->fn_, m->module_, kernel_name.c_str()));
  CUdevice dev;
  CUDAL1_CU_TRY(api->cuDeviceGet(&dev, device));
  CUDAL1_CU_TRY(api->cuDeviceGetAttribute(&m->sm_count_, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev));
  return m;
}

int LoadedModule::max_blocks_per_sm(int block) const {
  auto d = driver();
  int n = 0;
  if (!d.ok() || d.value()->cuOccupancyMaxActiveBlocksPerMultiprocessor(&n, fn_, block, 0) != CUDA_SUCCESS)
    return 1;
  return n > 0 ? n : 1;
}

LoadedModule::~LoadedModule() {
  if (!module_) return;
  auto d = driver();
  if (!d.ok()) return;
  dispatcher::ContextScope ctx(device_);
  if (ctx.status().ok()) d.value()->cuModuleUnload(module_);  // result ignored: may run at driver shutdown
}

}  // namespace cudal1::optimizer
