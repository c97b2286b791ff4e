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
  int major = 0, minor = 0;
  CUDAL1_CU_TRY(api->cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev));
  CUDAL1_CU_TRY(api->cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev));
  m->cc_ = 10 * major + minor;
  return m;
}

int LoadedModule::max_blocks_per_sm(int block) const {
  auto d = driver();
  if (!d.ok()) return 1;
  dispatcher::ContextScope ctx(device_);  // the occupancy query needs the device's context current
  int n = 0;
  if (!ctx.status().ok() || d.value()->cuOccupancyMaxActiveBlocksPerMultiprocessor(&n, fn_, block, 0) != CUDA_SUCCESS)
    return 1;
  return n > 0 ? n : 1;
}

// Note [Clusters]
// Hopper groups up to 8 blocks (16 with the non-portable opt-in) into a cluster that is scheduled at once on
// one GPC; its blocks read and write each other's shared memory (distributed shared memory, `mapa` +
// `ld.shared::cluster`) and meet at a hardware barrier (`barrier.cluster`), far cheaper than a grid-wide wait
// through global atomics. A family uses it to split one reduction (a long row, a column) over the blocks of a
// cluster and exchange partial statistics on chip, keeping the data in shared memory or registers between
// the statistics and the output (one HBM read). Co-residency of a cluster's blocks is guaranteed by the
// hardware, so no cooperative launch is needed; a cluster that cannot fit fails at launch and the call stays
// on ATen. Kernels with clusters are only offered where Problem::sm >= 90.
namespace {

/// Opts `fn` in to `dynamic_smem` bytes of dynamic shared memory per block; the caller holds the device's
/// context. Any nonzero amount, not only > 48 KB: the default limit of 48 KB counts static and dynamic memory
/// together, so 48 KB of dynamic memory beside static arrays needs the opt-in too.
Status opt_in_shared_memory(const DriverApi* api, CUfunction fn, unsigned dynamic_smem) {
  if (dynamic_smem > 0)
    CUDAL1_CU_TRY(api->cuFuncSetAttribute(fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                          static_cast<int>(dynamic_smem)));
  return Status();
}

}  // namespace

Status LoadedModule::configure_clusters(unsigned dynamic_smem) const {
  CUDAL1_ASSIGN_OR_RETURN(const DriverApi* api, driver());
  dispatcher::ContextScope ctx(device_);
  CUDAL1_RETURN_IF_ERROR(ctx.status());
  CUDAL1_CU_TRY(api->cuFuncSetAttribute(fn_, CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1));
  return opt_in_shared_memory(api, fn_, dynamic_smem);
}

Status LoadedModule::prepare_shared_memory(unsigned dynamic_smem) const {
  std::call_once(smem_once_, [&] {
    if (dynamic_smem == 0) return;  // nothing to opt in to
    const Status st = [&]() -> Status {
      CUDAL1_ASSIGN_OR_RETURN(const DriverApi* api, driver());
      dispatcher::ContextScope ctx(device_);
      CUDAL1_RETURN_IF_ERROR(ctx.status());
      return opt_in_shared_memory(api, fn_, dynamic_smem);
    }();
    if (!st.ok()) smem_ready_ = Status(Code::kUnsupported, "shared memory opt-in failed: " + st.to_string());
  });
  return smem_ready_;
}

Status LoadedModule::prepare_clusters(unsigned block, unsigned cluster, unsigned dynamic_smem) const {
  std::call_once(clusters_once_, [&] {
    const Status st = configure_clusters(dynamic_smem);
    if (!st.ok())  // e.g. more shared memory than this device lets a block have
      clusters_ready_ = Status(Code::kUnsupported, "shared memory / cluster opt-in failed: " + st.to_string());
    else if (cluster > 1 && max_active_clusters(block, cluster, dynamic_smem) < 1)
      clusters_ready_ = Status(Code::kUnsupported, "the device cannot hold a cluster of " + std::to_string(cluster) +
                                                       " blocks of " + std::to_string(dynamic_smem) + " bytes");
  });
  return clusters_ready_;
}

namespace {

struct ClusterConfig {
  CUlaunchAttribute attr{};
  CUlaunchConfig config{};
  ClusterConfig(unsigned grid, unsigned block, unsigned cluster, unsigned smem, CUstream stream) {
    attr.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    attr.value.clusterDim.x = cluster;
    attr.value.clusterDim.y = 1;
    attr.value.clusterDim.z = 1;
    config.gridDimX = grid;
    config.gridDimY = 1;
    config.gridDimZ = 1;
    config.blockDimX = block;
    config.blockDimY = 1;
    config.blockDimZ = 1;
    config.sharedMemBytes = smem;
    config.hStream = stream;
    config.attrs = &attr;
    config.numAttrs = 1;
  }
  ClusterConfig(const ClusterConfig&) = delete;
  ClusterConfig& operator=(const ClusterConfig&) = delete;
};

}  // namespace

int LoadedModule::max_active_clusters(unsigned block, unsigned cluster, unsigned dynamic_smem) const {
  auto d = driver();
  if (!d.ok()) return 0;
  dispatcher::ContextScope ctx(device_);  // the occupancy query needs the device's context current
  if (!ctx.status().ok()) return 0;
  ClusterConfig c(cluster, block, cluster, dynamic_smem, nullptr);
  int n = 0;
  if (d.value()->cuOccupancyMaxActiveClusters(&n, fn_, &c.config) != CUDA_SUCCESS) return 0;
  return n;
}

Status LoadedModule::launch_clusters(unsigned grid, unsigned block, unsigned cluster, unsigned dynamic_smem,
                                     CUstream stream, void** params) const {
  if (cluster == 0 || grid % cluster != 0)
    return Status(Code::kInvalidArgument, "cluster launch: grid " + std::to_string(grid) +
                                              " is not a multiple of the cluster size " + std::to_string(cluster));
  CUDAL1_ASSIGN_OR_RETURN(const DriverApi* api, driver());
  ClusterConfig c(grid, block, cluster, dynamic_smem, stream);
  CUDAL1_CU_TRY(api->cuLaunchKernelEx(&c.config, fn_, params, nullptr));
  return Status();
}

LoadedModule::~LoadedModule() {
  if (!module_) return;
  auto d = driver();
  if (!d.ok()) return;
  dispatcher::ContextScope ctx(device_);
  if (ctx.status().ok()) d.value()->cuModuleUnload(module_);  // result ignored: may run at driver shutdown
}

}  // namespace cudal1::optimizer
