/// @brief The bound kernel of the batch-norm family: checks the call against the plan and launches once on the
/// call's stream.
#include <ATen/ATen.h>

#include "batchnorm_family.h"
#include "codegen_common.h"
#include "cudal1/core/cuda_driver.h"
#include "grid.h"

namespace cudal1::optimizer::batchnorm {
namespace {

class BnKernel final : public BoundKernel {
 public:
  BnKernel(BnShape s, const BnTechnique& t, std::shared_ptr<LoadedModule> m)
      : s_(std::move(s)), module_(std::move(m)) {
    outputs_.push_back(OutputSpec{s_.dtype, s_.sizes, s_.out_strides});
    if (s_.cudnn) {  // eval branch of cudnn/BatchNorm.cpp: empty [0] save tensors of the weight's dtype, u8 reserve
      outputs_.push_back(OutputSpec{s_.param_dtype, {0}, {1}});
      outputs_.push_back(OutputSpec{s_.param_dtype, {0}, {1}});
      outputs_.push_back(OutputSpec{c10::ScalarType::Byte, {0}, {1}});
    } else {  // batch_norm_cuda: save_mean, save_invstd [C] in the accumulation type (fp32 here)
      outputs_.push_back(OutputSpec{c10::ScalarType::Float, {s_.channels}, {1}});
      outputs_.push_back(OutputSpec{c10::ScalarType::Float, {s_.channels}, {1}});
    }
    std::visit(
        [&](const auto& k) {
          grid_ = k.grid(s_);
          block_ = k.block;
          align_ = static_cast<uintptr_t>(k.vec) * static_cast<uintptr_t>(elem_size(s_.dtype));
        },
        t);
  }

  const std::vector<OutputSpec>& outputs() const override { return outputs_; }

  OutputTolerance output_tolerance(size_t i) const override {
    // Note [Batch norm inference]: cuDNN associates its own way (e.g. x * scale + shift), whose error follows
    // the largest product rather than the element; the statistics are exact conversions and rsqrtf.
    OutputTolerance t;
    if (i == 0) {
      t.output_scaled = 16;
      t.nonfinite_equivalent = s_.cudnn;  // Inf - Inf vs Inf * 0 orders give NaN or Inf
      t.overflow_equivalent = true;       // fp16 outputs at the edge of overflow round to 65504 or Inf
    }
    return t;
  }

  Status launch(const c10::IValue* args, size_t nargs, at::Tensor* outs, CUstream stream) noexcept override {
    try {
      if (nargs < 5 || !args[0].isTensor()) return Status(Code::kUnsupported, "unexpected arguments");
      const at::Tensor& x = args[0].toTensor();
      if (!x.defined() || x.sizes() != c10::IntArrayRef(s_.sizes) || x.strides() != c10::IntArrayRef(s_.strides))
        return Status(Code::kUnsupported, "call does not match the planned layout");
      const void* p[4] = {nullptr, nullptr, nullptr, nullptr};  // weight, bias, running_mean, running_var
      const bool present[4] = {s_.has_weight, s_.has_bias, true, true};
      for (int i = 0; i < 4; ++i) {
        const c10::IValue& a = args[1 + i];
        const bool defined = a.isTensor() && a.toTensor().defined();
        if (defined != present[i]) return Status(Code::kUnsupported, "parameters differ from the plan");
        if (!defined) continue;
        const at::Tensor& t = a.toTensor();
        if (t.numel() != s_.channels || !t.is_contiguous())
          return Status(Code::kUnsupported, "parameter layout differs from the plan");
        p[i] = t.data_ptr();
      }
      const void* xp = x.data_ptr();
      void* yp = outs[0].data_ptr();
      void* mp = s_.cudnn ? nullptr : outs[1].data_ptr();
      void* ip = s_.cudnn ? nullptr : outs[2].data_ptr();
      if (reinterpret_cast<uintptr_t>(xp) % align_ || reinterpret_cast<uintptr_t>(yp) % align_)
        return Status(Code::kUnsupported, "data not aligned for the vector width");
      auto d = driver();
      if (!d.ok()) return d.status();
      void* params[] = {&xp, &p[0], &p[1], &p[2], &p[3], &yp, &mp, &ip};
      const CUresult r = d.value()->cuLaunchKernel(module_->function(), grid_dim(grid_), 1, 1,
                                                   static_cast<unsigned>(block_), 1, 1, 0, stream, params, nullptr);
      if (r != CUDA_SUCCESS) return cu_status(r, "cuLaunchKernel", __FILE__, __LINE__);
      return Status();
    } catch (const std::exception& e) {
      return Status(Code::kInternal, std::string("batchnorm launch raised: ") + e.what());
    }
  }

 private:
  BnShape s_;
  std::shared_ptr<LoadedModule> module_;
  std::vector<OutputSpec> outputs_;
  int64_t grid_ = 1;     ///< blocks of the launch
  int block_ = 1;        ///< threads per block
  uintptr_t align_ = 1;  ///< bytes of one vector: x and y must be aligned to it
};

}  // namespace

std::unique_ptr<BoundKernel> make_batchnorm_kernel(const BnShape& s, const BnTechnique& t,
                                                   std::shared_ptr<LoadedModule> module) {
  return std::make_unique<BnKernel>(s, t, std::move(module));
}

}  // namespace cudal1::optimizer::batchnorm
