/// @brief Private: the BoundKernel of generated kernels with the signature `kernel(const T* in, T* out)`: one
/// tensor input (argument 0 of the call), one fresh output, a fixed launch shape.
#pragma once

#include <memory>
#include <vector>

#include "cudal1/optimizer/family.h"

namespace cudal1::optimizer {

class SimpleKernel final : public BoundKernel {
 public:
  /// `in_sizes`/`in_strides`: the planned input layout (checked on every call); `align`: bytes both pointers
  /// must be aligned to (the vector width); `grid` x `block` threads.
  SimpleKernel(std::shared_ptr<LoadedModule> module, OutputSpec out, std::vector<int64_t> in_sizes,
               std::vector<int64_t> in_strides, int align, int64_t grid, int block, double input_scaled_atol = 0);
  const std::vector<OutputSpec>& outputs() const override { return outputs_; }
  Status launch(const c10::IValue* args, size_t nargs, at::Tensor* outs, CUstream stream) noexcept override;
  double input_scaled_atol() const override { return input_scaled_atol_; }

 private:
  std::shared_ptr<LoadedModule> module_;
  std::vector<OutputSpec> outputs_;
  std::vector<int64_t> sizes_, strides_;
  uintptr_t align_;
  unsigned grid_, block_;
  double input_scaled_atol_;
};

}  // namespace cudal1::optimizer
