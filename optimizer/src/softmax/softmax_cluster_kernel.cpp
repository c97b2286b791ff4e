/// @brief The bound kernel of the softmax family's shared-memory tiles and cluster rows (Note [Softmax shared
/// tiles]): kernel(in, out) with dynamic shared memory, in clusters of `cluster` blocks along x.
#include <ATen/ATen.h>


#include "codegen_common.h"
#include "cudal1/core/cuda_driver.h"
#include "grid.h"
#include "softmax_family.h"

namespace cudal1::optimizer::softmax {
namespace {

class ClusterKernel final : public BoundKernel {
 public:
  ClusterKernel(OutputSpec out, std::vector<int64_t> sizes, std::vector<int64_t> in_strides, int64_t align,
                int64_t blocks, int block, int cluster, int64_t smem, double input_scaled_atol,
                std::shared_ptr<LoadedModule> m)
      : outputs_{std::move(out)},
        sizes_(std::move(sizes)),
        strides_(std::move(in_strides)),
        align_(static_cast<uintptr_t>(std::max<int64_t>(align, 1))),
        grid_(grid_dim(blocks)),
        block_(static_cast<unsigned>(block)),
        cluster_(static_cast<unsigned>(cluster)),
        smem_(static_cast<unsigned>(smem)),
        input_scaled_atol_(input_scaled_atol),
        module_(std::move(m)) {}

  const std::vector<OutputSpec>& outputs() const override { return outputs_; }
  double input_scaled_atol() const override { return input_scaled_atol_; }

  Status launch(const c10::IValue* args, size_t nargs, at::Tensor* outs, CUstream stream) noexcept override {
    try {
      if (nargs < 1 || !args[0].isTensor()) return Status(Code::kUnsupported, "no tensor argument");
      const at::Tensor& x = args[0].toTensor();
      if (!x.defined() || x.sizes() != c10::IntArrayRef(sizes_) || x.strides() != c10::IntArrayRef(strides_))
        return Status(Code::kUnsupported, "call does not match the planned layout");
      const void* src = x.data_ptr();
      void* dst = outs[0].data_ptr();
      if (reinterpret_cast<uintptr_t>(src) % align_ || reinterpret_cast<uintptr_t>(dst) % align_)
        return Status(Code::kUnsupported, "data not aligned for the vector width");
      CUDAL1_RETURN_IF_ERROR(module_->prepare_clusters(block_, cluster_, smem_));
      void* params[] = {&src, &dst};
      if (cluster_ > 1) return module_->launch_clusters(grid_, block_, cluster_, smem_, stream, params);
      auto d = driver();
      if (!d.ok()) return d.status();
      const CUresult r =
          d.value()->cuLaunchKernel(module_->function(), grid_, 1, 1, block_, 1, 1, smem_, stream, params, nullptr);
      if (r != CUDA_SUCCESS) return cu_status(r, "cuLaunchKernel", __FILE__, __LINE__);
      return Status();
    } catch (const std::exception& e) {
      return Status(Code::kInternal, std::string("softmax launch raised: ") + e.what());
    }
  }

 private:
  std::vector<OutputSpec> outputs_;
  std::vector<int64_t> sizes_, strides_;
  uintptr_t align_;
  unsigned grid_, block_, cluster_, smem_;
  double input_scaled_atol_;
  std::shared_ptr<LoadedModule> module_;
};

}  // namespace

std::unique_ptr<BoundKernel> make_cluster_kernel(OutputSpec out, std::vector<int64_t> sizes,
                                                 std::vector<int64_t> in_strides, int64_t align, int64_t blocks,
                                                 int block, int cluster, int64_t smem, double input_scaled_atol,
                                                 std::shared_ptr<LoadedModule> m) {
  return std::make_unique<ClusterKernel>(std::move(out), std::move(sizes), std::move(in_strides), align, blocks,
                                         block, cluster, smem, input_scaled_atol, std::move(m));
}

}  // namespace cudal1::optimizer::softmax
