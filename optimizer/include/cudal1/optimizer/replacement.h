/// @brief KernelReplacement: serves a hooked call with a BoundKernel on torch's current stream.
#pragma once

#include <memory>
#include <string>

#include "cudal1/dispatcher/sig_record.h"
#include "cudal1/optimizer/family.h"

namespace cudal1::optimizer {

/// Allocates the outputs exactly as ATen would (dtype, sizes, strides recorded at planning and checked against
/// ATen during verification), launches on torch's current stream of `device` under that device's context,
/// and leaves the outputs on the stack. Any failure leaves the stack untouched (see Replacement::run).
class KernelReplacement final : public dispatcher::Replacement {
 public:
  KernelReplacement(std::unique_ptr<BoundKernel> kernel, int device, std::string description);
  Status run(torch::jit::Stack* stack, size_t nargs) noexcept override;
  std::string describe() const override { return description_; }

 private:
  std::unique_ptr<BoundKernel> kernel_;
  int device_;
  std::string description_;
};

}  // namespace cudal1::optimizer
