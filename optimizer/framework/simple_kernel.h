/// @brief Private: the BoundKernel of generated kernels with the signature `kernel(const T* in, T* out)`: one
/// tensor input (argument 0 of the call), one fresh output, a fixed launch shape (optionally with dynamic shared
/// memory and thread-block clusters, Note [Clusters]).
#pragma once

#include <memory>
#include <vector>

#include "cudal1/optimizer/family.h"

namespace cudal1::optimizer {

class SimpleKernel final : public BoundKernel {
 public:
  /// `in_sizes`/`in_strides`: the planned input layout (checked on every call); `align`: bytes both pointers
  /// must be aligned to (the vector width); `grid` x `block` threads with `smem` bytes of dynamic shared memory.
  /// `cluster` > 0: a cluster kernel; every launch first asks LoadedModule::prepare_clusters (the opt-in to
  /// `smem` and clusters, once per module; kUnsupported when the device cannot hold one cluster), and
  /// `cluster` > 1 launches in clusters of that many blocks along x.
  SimpleKernel(std::shared_ptr<LoadedModule> module, OutputSpec out, std::vector<int64_t> in_sizes,
               std::vector<int64_t> in_strides, int64_t align, int64_t grid, int block, double input_scaled_atol = 0,
               int64_t smem = 0, int cluster = 0);
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
  unsigned smem_, cluster_;
};

}  // namespace cudal1::optimizer
