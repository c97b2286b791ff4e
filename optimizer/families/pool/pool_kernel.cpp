/// @brief The bound kernel of the pooling family: checks the call against the plan and launches one grid on the
/// call's stream.
#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>

#include "codegen_common.h"
#include "cudal1/core/cuda_driver.h"
#include "grid.h"
#include "pool_family.h"

namespace cudal1::optimizer::pool {
namespace {

class PoolKernel final : public BoundKernel {
 public:
  PoolKernel(PoolShape s, PoolKnobs k, std::shared_ptr<LoadedModule> m)
      : s_(std::move(s)), k_(k), module_(std::move(m)) {
    outputs_.push_back(OutputSpec{s_.dtype, s_.out_sizes, s_.out_strides});
    if (s_.indices) outputs_.push_back(OutputSpec{c10::ScalarType::Long, s_.out_sizes, s_.out_strides});
    const uintptr_t es = static_cast<uintptr_t>(elem_size(s_.dtype));
    in_align_ = s_.channels_last && k_.opw > 1 && k_.opw <= s_.max_vec ? k_.opw * es : es;
    out_align_ = k_.opw * es;
    if (k_.slide) {  // Note [Pooling slide]: vector loads of every row's chunk; vector stores where OW allows
      in_align_ = k_.slide * es;
      out_align_ = s_.ow % k_.slide == 0 ? k_.slide * es : es;
    }
    if (k_.flat) in_align_ = 16, out_align_ = es;  // Note [Pooling adaptive staging]: 16-byte staging loads
    if (k_.pair) in_align_ = 8, out_align_ = s_.ow % 2 == 0 ? 4 : es;  // Note [Pooling packed pairs]
  }

  const std::vector<OutputSpec>& outputs() const override { return outputs_; }

  /// Note [Pooling separable sums]: the other order's fp32 rounding, scaled by the input (a window's sum
  /// cancels). Without `sep` the results are ATen's bits: no tolerance beyond the dtype's.
  OutputTolerance output_tolerance(size_t i) const override {
    OutputTolerance t;
    if (!k_.sep || i != 0) return t;
    const double cells = static_cast<double>(s_.kh) * s_.kw;
    const double d = s_.divisor ? std::abs(static_cast<double>(s_.divisor)) : cells;
    t.input_scaled = 2 * cells * std::max(1.0, cells / d);
    return t;
  }

  Status launch(const c10::IValue* args, size_t nargs, at::Tensor* outs, CUstream stream) noexcept override {
    try {
      if (nargs < 1 || !args[0].isTensor()) return Status(Code::kUnsupported, "no tensor argument");
      const at::Tensor& x = args[0].toTensor();
      if (!x.defined() || x.sizes() != c10::IntArrayRef(s_.in_sizes) ||
          x.strides() != c10::IntArrayRef(s_.in_strides))
        return Status(Code::kUnsupported, "call does not match the planned layout");
      const void* xp = x.data_ptr();
      void* yp = outs[0].data_ptr();
      void* ip = s_.indices ? outs[1].data_ptr() : nullptr;
      if (reinterpret_cast<uintptr_t>(xp) % in_align_ || reinterpret_cast<uintptr_t>(yp) % out_align_ ||
          reinterpret_cast<uintptr_t>(ip) % 16)
        return Status(Code::kUnsupported, "data not aligned for the vector width");
      auto d = driver();
      if (!d.ok()) return d.status();
      const int64_t grid = (pool_threads(s_, k_) + k_.block - 1) / k_.block;
      const unsigned g = grid_dim(grid);
      void* params[] = {&xp, &yp, &ip};
      const CUresult r = d.value()->cuLaunchKernel(module_->function(), g, 1, 1, static_cast<unsigned>(k_.block), 1,
                                                   1, 0, stream, params, nullptr);
      if (r != CUDA_SUCCESS) return cu_status(r, "cuLaunchKernel", __FILE__, __LINE__);
      return Status();
    } catch (const std::exception& e) {
      return Status(Code::kInternal, std::string("pool launch raised: ") + e.what());
    }
  }

 private:
  PoolShape s_;
  PoolKnobs k_;
  std::shared_ptr<LoadedModule> module_;
  std::vector<OutputSpec> outputs_;
  uintptr_t in_align_ = 1, out_align_ = 1;
};

}  // namespace

std::unique_ptr<BoundKernel> make_pool_kernel(const PoolShape& s, const PoolKnobs& k,
                                              std::shared_ptr<LoadedModule> module) {
  return std::make_unique<PoolKernel>(s, k, std::move(module));
}

}  // namespace cudal1::optimizer::pool
