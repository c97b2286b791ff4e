/// @brief The bound kernel of the scan family: checks the call against the plan and launches one phase, or two
/// with an fp32 workspace of chunk totals (split techniques), or a zeroed status workspace then one phase
/// (ColumnLookback), on the call's stream: as the technique's grid() says.
#include <ATen/ATen.h>

#include <algorithm>

#include "codegen_common.h"
#include "cudal1/core/cuda_driver.h"
#include "grid.h"
#include "cudal1/optimizer/layout.h"
#include "scan_family.h"

namespace cudal1::optimizer::scan {
namespace {

class ScanKernel final : public BoundKernel {
 public:
  ScanKernel(ScanShape s, const ScanTechnique& t, std::shared_ptr<LoadedModule> m)
      : s_(std::move(s)), module_(std::move(m)) {
    // ATen's cumsum/cumprod meta function allocates the result with the input's sizes and no strides: contiguous.
    outputs_.push_back(OutputSpec{s_.dtype, s_.sizes, contiguous_strides(s_.sizes)});
    std::visit(
        [&](const auto& k) {
          grid_ = k.grid(s_);
          block_ = k.block;
          align_ = static_cast<uintptr_t>(k.vec) * static_cast<uintptr_t>(elem_size(s_.dtype));
        },
        t);
    output_scaled_ = scan_output_scaled_tolerance(s_, t);  // Note [Scans]; 0 for exact variants
  }

  const std::vector<OutputSpec>& outputs() const override { return outputs_; }

  OutputTolerance output_tolerance(size_t) const override {
    OutputTolerance t;
    t.output_scaled = output_scaled_;
    return t;
  }

  Status launch(const c10::IValue* args, size_t nargs, at::Tensor* outs, CUstream stream) noexcept override {
    try {
      if (nargs < 1 || !args[0].isTensor()) return Status(Code::kUnsupported, "unexpected arguments");
      const at::Tensor& x = args[0].toTensor();
      if (!x.defined() || x.scalar_type() != s_.dtype || x.sizes() != c10::IntArrayRef(s_.sizes) ||
          x.strides() != c10::IntArrayRef(s_.in_strides))
        return Status(Code::kUnsupported, "call does not match the planned layout");
      const void* xp = x.data_ptr();
      void* yp = outs[0].data_ptr();
      if (reinterpret_cast<uintptr_t>(xp) % align_ || reinterpret_cast<uintptr_t>(yp) % align_)
        return Status(Code::kUnsupported, "data not aligned for the vector width");
      auto d = driver();
      if (!d.ok()) return d.status();
      at::Tensor ws;
      float* wsp = nullptr;
      if (grid_.workspace > 0) {
        ws = at::empty({grid_.workspace}, x.options().dtype(at::kFloat));
        wsp = ws.data_ptr<float>();
        if (grid_.zero_workspace) {
          const CUresult r = d.value()->cuMemsetD32Async(reinterpret_cast<CUdeviceptr>(wsp), 0,
                                                         static_cast<size_t>(grid_.workspace), stream);
          if (r != CUDA_SUCCESS) return cu_status(r, "cuMemsetD32Async", __FILE__, __LINE__);
        }
      }
      for (int phase = grid_.two_phase ? 0 : 1; phase <= 1; ++phase) {
        void* params[] = {&xp, &yp, &wsp, &phase};
        const CUresult r = d.value()->cuLaunchKernel(module_->function(), grid_dim(grid_.x), grid_dim(grid_.y), 1,
                                                     static_cast<unsigned>(block_), 1, 1, 0, stream, params, nullptr);
        if (r != CUDA_SUCCESS) return cu_status(r, "cuLaunchKernel", __FILE__, __LINE__);
      }
      return Status();
    } catch (const std::exception& e) {
      return Status(Code::kInternal, std::string("scan launch raised: ") + e.what());
    }
  }

 private:
  ScanShape s_;
  std::shared_ptr<LoadedModule> module_;
  std::vector<OutputSpec> outputs_;
  ScanGrid grid_;              ///< the launch: grid, workspace, phases
  int block_ = 1;              ///< threads per block
  uintptr_t align_ = 1;        ///< bytes of one vector: x and y must be aligned to it
  double output_scaled_ = 0;   ///< Note [Scans]; 0 for exact variants
};

}  // namespace

std::unique_ptr<BoundKernel> make_scan_kernel(const ScanShape& s, const ScanTechnique& t,
                                              std::shared_ptr<LoadedModule> module) {
  return std::make_unique<ScanKernel>(s, t, std::move(module));
}

}  // namespace cudal1::optimizer::scan
