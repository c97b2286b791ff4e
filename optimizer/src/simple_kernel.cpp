/// @brief SimpleKernel (see simple_kernel.h).
#include "simple_kernel.h"

#include <algorithm>

#include "cudal1/core/cuda_driver.h"
#include "grid.h"

namespace cudal1::optimizer {

SimpleKernel::SimpleKernel(std::shared_ptr<LoadedModule> module, OutputSpec out, std::vector<int64_t> in_sizes,
                           std::vector<int64_t> in_strides, int align, int64_t grid, int block,
                           double input_scaled_atol)
    : module_(std::move(module)),
      outputs_{std::move(out)},
      sizes_(std::move(in_sizes)),
      strides_(std::move(in_strides)),
      align_(static_cast<uintptr_t>(std::max(align, 1))),
      grid_(grid_dim(grid)),
      block_(static_cast<unsigned>(block)),
      input_scaled_atol_(input_scaled_atol) {}

Status SimpleKernel::launch(const c10::IValue* args, size_t nargs, at::Tensor* outs, CUstream stream) noexcept {
  if (nargs < 1 || !args[0].isTensor()) return Status(Code::kUnsupported, "no tensor argument");
  const at::Tensor& in = args[0].toTensor();
  // The signature matched, so dtype/sizes/strides are the planned ones; re-check what is cheap and vital.
  if (!in.defined() || in.sizes() != c10::IntArrayRef(sizes_) || in.strides() != c10::IntArrayRef(strides_))
    return Status(Code::kUnsupported, "call does not match the planned layout");
  const void* src = in.data_ptr();
  void* dst = outs[0].data_ptr();
  if (reinterpret_cast<uintptr_t>(src) % align_ || reinterpret_cast<uintptr_t>(dst) % align_)
    return Status(Code::kUnsupported, "data not aligned for the vector width");
  auto d = driver();
  if (!d.ok()) return d.status();
  void* params[] = {&src, &dst};
  const CUresult r =
      d.value()->cuLaunchKernel(module_->function(), grid_, 1, 1, block_, 1, 1, 0, stream, params, nullptr);
  if (r != CUDA_SUCCESS) return cu_status(r, "cuLaunchKernel", __FILE__, __LINE__);
  return Status();
}

}  // namespace cudal1::optimizer
