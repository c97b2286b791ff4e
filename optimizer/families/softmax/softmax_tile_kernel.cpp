/// @brief The bound kernel of the softmax family's tiled column variants (Note [Softmax column tiles]): one
/// launch, or two (phase 0: per-chunk statistics into an fp32 workspace; phase 1: merge and write) on the call's
/// stream.
#include <ATen/ATen.h>

#include "codegen_common.h"
#include "cudal1/core/cuda_driver.h"
#include "grid.h"
#include "softmax_codegen.h"

namespace cudal1::optimizer::softmax {
namespace {

class TileKernel final : public BoundKernel {
 public:
  TileKernel(const ColumnShape& c, int vec, int chunks, int block, std::shared_ptr<LoadedModule> m)
      : c_(c), chunks_(chunks), block_(static_cast<unsigned>(block)), module_(std::move(m)) {
    outputs_.push_back(OutputSpec{c_.dtype, c_.sizes, c_.out_strides});
    align_ = static_cast<uintptr_t>(vec) * elem_size(c_.dtype);
    blocks_ = c_.outer * ((c_.inner / vec + 31) / 32) * chunks;
  }

  const std::vector<OutputSpec>& outputs() const override { return outputs_; }
  double input_scaled_atol() const override { return c_.log ? 4.0 : 0.0; }  // as the other softmax kernels

  Status launch(const c10::IValue* args, size_t nargs, at::Tensor* outs, CUstream stream) noexcept override {
    try {
      CUDAL1_RETURN_IF_ERROR(check_column_call(c_, align_, args, nargs, outs));
      const at::Tensor& x = args[0].toTensor();
      const void* src = x.data_ptr();
      void* dst = outs[0].data_ptr();
      auto d = driver();
      if (!d.ok()) return d.status();
      at::Tensor ws;
      float* wsp = nullptr;
      if (chunks_ > 1) {
        ws = at::empty({2 * chunks_ * c_.outer * c_.inner}, x.options().dtype(at::kFloat));
        wsp = ws.data_ptr<float>();
      }
      for (int phase = chunks_ > 1 ? 0 : 1; phase <= 1; ++phase) {
        void* params[] = {&src, &dst, &wsp, &phase};
        const CUresult r = d.value()->cuLaunchKernel(module_->function(), grid_dim(blocks_), 1, 1, block_, 1, 1, 0,
                                                     stream, params, nullptr);
        if (r != CUDA_SUCCESS) return cu_status(r, "cuLaunchKernel", __FILE__, __LINE__);
      }
      return Status();
    } catch (const std::exception& e) {
      return Status(Code::kInternal, std::string("softmax launch raised: ") + e.what());
    }
  }

 private:
  ColumnShape c_;
  int64_t chunks_, blocks_ = 1;
  unsigned block_;
  std::shared_ptr<LoadedModule> module_;
  std::vector<OutputSpec> outputs_;
  uintptr_t align_ = 1;
};

}  // namespace

Status check_column_call(const ColumnShape& c, uintptr_t align, const c10::IValue* args, size_t nargs,
                         const at::Tensor* outs) {
  if (nargs < 1 || !args[0].isTensor()) return Status(Code::kUnsupported, "no tensor argument");
  const at::Tensor& x = args[0].toTensor();
  if (!x.defined() || x.sizes() != c10::IntArrayRef(c.sizes) || x.strides() != c10::IntArrayRef(c.in_strides))
    return Status(Code::kUnsupported, "call does not match the planned layout");
  if (reinterpret_cast<uintptr_t>(x.data_ptr()) % align || reinterpret_cast<uintptr_t>(outs[0].data_ptr()) % align)
    return Status(Code::kUnsupported, "data not aligned for the vector width");
  return Status();
}

std::unique_ptr<BoundKernel> make_tile_kernel(const ColumnShape& c, const ColumnTiles& t,
                                              std::shared_ptr<LoadedModule> m) {
  return std::make_unique<TileKernel>(c, t.vec, t.chunks, t.block, std::move(m));
}

}  // namespace cudal1::optimizer::softmax
