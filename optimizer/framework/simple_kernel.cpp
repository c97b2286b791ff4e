/// @brief SimpleKernel (see simple_kernel.h).
#include "simple_kernel.h"

#include <algorithm>

#include "cudal1/core/cuda_driver.h"
#include "grid.h"

namespace cudal1::optimizer {

SimpleKernel::SimpleKernel(std::shared_ptr<LoadedModule> module, OutputSpec out, std::vector<int64_t> in_sizes,
                           std::vector<int64_t> in_strides, int64_t align, int64_t grid, int block,
                           double input_scaled_atol, int64_t smem, int cluster)
    : module_(std::move(module)),
      outputs_{std::move(out)},
      sizes_(std::move(in_sizes)),
      strides_(std::move(in_strides)),
      align_(static_cast<uintptr_t>(std::max<int64_t>(align, 1))),
      grid_(grid_dim(grid)),
      block_(static_cast<unsigned>(block)),
      input_scaled_atol_(input_scaled_atol),
      smem_(static_cast<unsigned>(smem)),
      cluster_(static_cast<unsigned>(std::max(cluster, 0))) {}

Status SimpleKernel::launch(const c10::IValue* args, size_t nargs, at::Tensor* outs, CUstream stream) noexcept {
  try {
    if (nargs < 1 || !args[0].isTensor()) return Status(Code::kUnsupported, "no tensor argument");
    const at::Tensor& in = args[0].toTensor();
    // The signature matched, so dtype/sizes/strides are the planned ones; re-check what is cheap and vital.
    if (!in.defined() || in.sizes() != c10::IntArrayRef(sizes_) || in.strides() != c10::IntArrayRef(strides_))
      return Status(Code::kUnsupported, "call does not match the planned layout");
    const void* src = in.data_ptr();
    void* dst = outs[0].data_ptr();
    if (reinterpret_cast<uintptr_t>(src) % align_ || reinterpret_cast<uintptr_t>(dst) % align_)
      return Status(Code::kUnsupported, "data not aligned for the vector width");
    void* params[] = {&src, &dst};
    if (cluster_ > 0) {
      CUDAL1_RETURN_IF_ERROR(module_->prepare_clusters(block_, cluster_, smem_));
      if (cluster_ > 1) return module_->launch_clusters(grid_, block_, cluster_, smem_, stream, params);
    }
    auto d = driver();
    if (!d.ok()) return d.status();
    const CUresult r =
        d.value()->cuLaunchKernel(module_->function(), grid_, 1, 1, block_, 1, 1, smem_, stream, params, nullptr);
    if (r != CUDA_SUCCESS) return cu_status(r, "cuLaunchKernel", __FILE__, __LINE__);
    return Status();
  } catch (const std::exception& e) {
    return Status(Code::kInternal, std::string("launch raised: ") + e.what());
  }
}

}  // namespace cudal1::optimizer
