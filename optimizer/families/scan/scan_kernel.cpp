/// @brief The bound kernel of the scan family: checks the call against the plan and launches one phase, or two
/// with an fp32 workspace of chunk totals (split techniques), or a zeroed status workspace then one phase
/// (kColumnLookback), on the call's stream.
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
  ScanKernel(ScanShape s, ScanKnobs k, std::shared_ptr<LoadedModule> m)
      : s_(std::move(s)), k_(k), module_(std::move(m)) {
    // ATen's cumsum/cumprod meta function allocates the result with the input's sizes and no strides: contiguous.
    outputs_.push_back(OutputSpec{s_.dtype, s_.sizes, contiguous_strides(s_.sizes)});
    align_ = static_cast<uintptr_t>(k_.vec) * static_cast<uintptr_t>(elem_size(s_.dtype));
    const int64_t lines = s_.outer * s_.inner;
    switch (k_.mode) {
      case kRowWarp:
      case kRowExact: grid_x_ = (s_.outer + k_.block / 32 - 1) / (k_.block / 32); break;
      case kRowBlock: grid_x_ = s_.outer; break;
      case kRowLanes: grid_x_ = (s_.outer + k_.block / k_.splits - 1) / (k_.block / k_.splits); break;
      case kColumnLookback:
        grid_x_ = scan_groups(s_, k_) * scan_chunks(s_, k_);
        workspace_ = 2 * lines * scan_chunks(s_, k_);  // a 64-bit status word per column and chunk
        zero_workspace_ = true;
        break;
      case kRowSplit:
        grid_x_ = s_.outer * k_.splits;
        workspace_ = s_.outer * k_.splits;
        break;
      default: {
        const int64_t threads = (lines + k_.vec - 1) / k_.vec;
        grid_x_ = (threads + k_.block - 1) / k_.block;
        if (k_.mode == kColumnSplit) {
          grid_y_ = k_.splits;
          workspace_ = lines * k_.splits;
        }
      }
    }
  }

  const std::vector<OutputSpec>& outputs() const override { return outputs_; }

  OutputTolerance output_tolerance(size_t) const override {
    OutputTolerance t;
    t.output_scaled = scan_output_scaled_tolerance(s_, k_);  // Note [Scans]; 0 for exact variants
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
      if (workspace_ > 0) {
        ws = at::empty({workspace_}, x.options().dtype(at::kFloat));
        wsp = ws.data_ptr<float>();
        if (zero_workspace_) {
          const CUresult r = d.value()->cuMemsetD32Async(reinterpret_cast<CUdeviceptr>(wsp), 0,
                                                         static_cast<size_t>(workspace_), stream);
          if (r != CUDA_SUCCESS) return cu_status(r, "cuMemsetD32Async", __FILE__, __LINE__);
        }
      }
      const bool two_phase = k_.mode == kRowSplit || k_.mode == kColumnSplit;
      for (int phase = two_phase ? 0 : 1; phase <= 1; ++phase) {
        void* params[] = {&xp, &yp, &wsp, &phase};
        const CUresult r = d.value()->cuLaunchKernel(module_->function(), grid_dim(grid_x_), grid_dim(grid_y_), 1,
                                                     static_cast<unsigned>(k_.block), 1, 1, 0, stream, params, nullptr);
        if (r != CUDA_SUCCESS) return cu_status(r, "cuLaunchKernel", __FILE__, __LINE__);
      }
      return Status();
    } catch (const std::exception& e) {
      return Status(Code::kInternal, std::string("scan launch raised: ") + e.what());
    }
  }

 private:
  ScanShape s_;
  ScanKnobs k_;
  std::shared_ptr<LoadedModule> module_;
  std::vector<OutputSpec> outputs_;
  uintptr_t align_ = 1;
  int64_t grid_x_ = 1, grid_y_ = 1, workspace_ = 0;  ///< workspace_: fp32 words
  bool zero_workspace_ = false;  ///< kColumnLookback's status words start at 0 (not published)
};

}  // namespace

std::unique_ptr<BoundKernel> make_scan_kernel(const ScanShape& s, const ScanKnobs& k,
                                              std::shared_ptr<LoadedModule> module) {
  return std::make_unique<ScanKernel>(s, k, std::move(module));
}

}  // namespace cudal1::optimizer::scan
