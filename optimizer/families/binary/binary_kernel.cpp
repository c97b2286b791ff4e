/// @brief The BoundKernel of the binary family: reads the call's tensors and scalars, checks that each one
/// matches the plan (layout, dtype, device, alignment, exact Scalar arguments; CPU 0-dim operands go to ATen)
/// and launches.
#include <ATen/core/Tensor.h>

#include <algorithm>
#include <cmath>

#include "codegen_common.h"
#include "binary_family.h"
#include "grid.h"
#include "cudal1/core/cuda_driver.h"

namespace cudal1::optimizer::binary {
namespace {

class BinaryKernel final : public BoundKernel {
 public:
  BinaryKernel(std::shared_ptr<LoadedModule> m, BinaryShape s, int vec, int64_t grid, int block)
      : module_(std::move(m)),
        s_(std::move(s)),
        outputs_{OutputSpec{s_.out_dtype, s_.shape, s_.out_strides}},
        vec_(vec),
        grid_(grid_dim(grid)),
        block_(static_cast<unsigned>(block)) {}

  const std::vector<OutputSpec>& outputs() const override { return outputs_; }

  Status launch(const c10::IValue* args, size_t nargs, at::Tensor* outs, CUstream stream) noexcept override {
    try {
      return launch_impl(args, nargs, outs, stream);
    } catch (...) {
      return Status(Code::kUnsupported, "unexpected argument");
    }
  }

 private:
  Status launch_impl(const c10::IValue* args, size_t nargs, at::Tensor* outs, CUstream stream) {
    const void* ptr[3] = {nullptr, nullptr, nullptr};
    float val[3] = {0.f, 0.f, 0.f};
    const c10::Device device = outs[0].device();
    for (size_t k = 0; k < s_.ins.size(); ++k) {
      const auto& o = s_.ins[k];
      if (static_cast<size_t>(o.arg) >= nargs) return Status(Code::kUnsupported, "missing argument");
      const c10::IValue& a = args[o.arg];
      double host = 0;
      if (o.kind == OperandKind::kScalar) {
        if (a.isDouble()) host = a.toDouble();
        else if (a.isInt()) host = static_cast<double>(a.toInt());
        else return Status(Code::kUnsupported, "scalar argument changed kind");
      } else {
        if (!a.isTensor()) return Status(Code::kUnsupported, "no tensor argument");
        const at::Tensor& t = a.toTensor();
        if (!t.defined() || t.scalar_type() != o.dtype) return Status(Code::kUnsupported, "dtype differs");
        if (o.kind == OperandKind::kTensor) {
          if (t.device() != device || t.sizes() != c10::IntArrayRef(o.sizes) ||
              t.strides() != c10::IntArrayRef(o.strides))
            return Status(Code::kUnsupported, "call does not match the planned layout");
          ptr[k] = t.data_ptr();
          const int es = static_cast<int>(t.element_size());
          const uintptr_t align = static_cast<uintptr_t>(vec_ > 1 && vector_readable(s_, k, vec_) ? vec_ * es : es);
          if (reinterpret_cast<uintptr_t>(ptr[k]) % align) return Status(Code::kUnsupported, "misaligned input");
          continue;
        }
        if (t.dim() != 0) return Status(Code::kUnsupported, "0-dim operand changed rank");
        if (t.device() == device) {
          ptr[k] = t.data_ptr();
          continue;
        }
        // A CPU 0-dim operand takes ATen's CPU-scalar path (a value, the divisor as a reciprocal), which
        // verification (GPU operands only) never exercises: ATen serves those calls.
        return Status(Code::kUnsupported, "0-dim operand not on the output's device");
      }
      const bool cond = s_.math == "where" && k == 0;
      const auto f = exact_scalar(host, cond ? c10::ScalarType::Float : s_.out_dtype);
      if (!f) return Status(Code::kUnsupported, "CPU scalar not exact in the result dtype");
      val[k] = cond ? (host != 0 ? 1.f : 0.f) : *f;
      if (s_.math == "div" && k == 1) val[k] = 1.0f / val[k];  // ATen: a * (1 / b) for a CPU-scalar divisor
    }
    float alpha = 1.f;
    if (s_.alpha_arg >= 0) {
      if (static_cast<size_t>(s_.alpha_arg) >= nargs) return Status(Code::kUnsupported, "missing alpha");
      const c10::IValue& a = args[s_.alpha_arg];
      const double v = a.isDouble() ? a.toDouble() : a.isInt() ? static_cast<double>(a.toInt()) : std::nan("");
      const auto f = exact_scalar(v, s_.out_dtype);
      if (!f || std::isnan(*f)) return Status(Code::kUnsupported, "alpha not exact in the result dtype");
      alpha = s_.negate_alpha ? -*f : *f;
    }
    void* out = outs[0].data_ptr();
    if (reinterpret_cast<uintptr_t>(out) % static_cast<uintptr_t>(vec_ * elem_size(s_.out_dtype)))
      return Status(Code::kUnsupported, "misaligned output");
    auto d = driver();
    if (!d.ok()) return d.status();
    void* params[] = {&out, &ptr[0], &ptr[1], &ptr[2], &val[0], &val[1], &val[2], &alpha};
    const CUresult r =
        d.value()->cuLaunchKernel(module_->function(), grid_, 1, 1, block_, 1, 1, 0, stream, params, nullptr);
    if (r != CUDA_SUCCESS) return cu_status(r, "cuLaunchKernel", __FILE__, __LINE__);
    return Status();
  }

  std::shared_ptr<LoadedModule> module_;
  BinaryShape s_;
  std::vector<OutputSpec> outputs_;
  int vec_;
  unsigned grid_, block_;
};

}  // namespace

std::unique_ptr<BoundKernel> make_binary_kernel(std::shared_ptr<LoadedModule> m, const BinaryShape& s, int vec,
                                                int64_t grid, int block) {
  return std::make_unique<BinaryKernel>(std::move(m), s, vec, grid, block);
}

}  // namespace cudal1::optimizer::binary
