/// @brief KernelReplacement (see replacement.h).
#include "cudal1/optimizer/replacement.h"

#include <ATen/ATen.h>
#include <c10/util/SmallVector.h>

#include "cudal1/dispatcher/cuda_glue.h"

namespace cudal1::optimizer {

KernelReplacement::KernelReplacement(std::unique_ptr<BoundKernel> kernel, int device, std::string description)
    : kernel_(std::move(kernel)), device_(device), description_(std::move(description)) {}

Status KernelReplacement::run(torch::jit::Stack* stack, size_t nargs) noexcept {
  try {
    if (stack->size() < nargs) return Status(Code::kInternal, "stack shorter than the op's arguments");
    const c10::IValue* args = stack->data() + (stack->size() - nargs);
    const auto& specs = kernel_->outputs();
    c10::SmallVector<at::Tensor, 2> outs;
    const at::Device dev(at::kCUDA, static_cast<c10::DeviceIndex>(device_));
    for (const auto& s : specs)
      outs.push_back(at::empty_strided(s.sizes, s.strides, at::TensorOptions().dtype(s.dtype).device(dev)));
    dispatcher::ContextScope ctx(device_);
    if (!ctx.status().ok()) return ctx.status();
    auto stream = dispatcher::current_stream(device_);
    if (!stream.ok()) return stream.status();
    const Status st = kernel_->launch(args, nargs, outs.data(), stream.value());
    if (!st.ok()) return st;
    torch::jit::drop(*stack, nargs);
    for (auto& o : outs) stack->emplace_back(std::move(o));
    return Status();
  } catch (const std::exception& e) {
    return Status(Code::kInternal, std::string("replacement raised: ") + e.what());
  } catch (...) {
    return Status(Code::kInternal, "replacement raised an unknown exception");
  }
}

}  // namespace cudal1::optimizer
