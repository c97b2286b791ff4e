/// @brief The bound kernel of the softmax family's held slabs (Note [Softmax held slabs]): checks the device has the
/// SM count its source was sized for, zeroes the counters and flags, and makes one cooperative launch on the call's
/// stream.
#include <ATen/ATen.h>

#include <algorithm>

#include "codegen_common.h"
#include "cudal1/core/cuda_driver.h"
#include "softmax_codegen.h"

namespace cudal1::optimizer::softmax {
namespace {

/// Static shared memory of the kernel, (2 x kHeldMaxSlots + 4) mbarriers of 8 bytes, rounded up to the 128 bytes the
/// dynamic shared memory is aligned to.
constexpr int64_t kHeldStaticSmem = 256;
static_assert((2 * kHeldMaxSlots + 4) * 8 <= kHeldStaticSmem, "the mbarriers outgrew their shared memory");

class HeldKernel final : public BoundKernel {
 public:
  HeldKernel(const ColumnShape& c, const HeldKnobs& k, std::shared_ptr<LoadedModule> m)
      : c_(c), k_(k), module_(std::move(m)) {
    outputs_.push_back(OutputSpec{c_.dtype, c_.sizes, c_.out_strides});
    const HeldGrid g = held_grid(c_, k_, c_.sm_count);  // the grid its source was compiled for
    ready_ = g.ok && module_->sm_count() == c_.sm_count;
    grid_ = static_cast<unsigned>(g.grid);
    parts_ = g.parts;
    smem_ = g.smem;
    ws_floats_ = 2 * c_.outer * parts_ * c_.inner + 2 * c_.outer * c_.inner + 2 * c_.outer;
  }

  const std::vector<OutputSpec>& outputs() const override { return outputs_; }
  double input_scaled_atol() const override { return c_.log ? 4.0 : 0.0; }  // as the other softmax kernels

  Status launch(const c10::IValue* args, size_t nargs, at::Tensor* outs, CUstream stream) noexcept override {
    try {
      if (!ready_)
        return Status(Code::kUnsupported, "held slabs compiled for " + std::to_string(c_.sm_count) +
                                              " SMs cannot run on this device's " +
                                              std::to_string(module_->sm_count()));
      CUDAL1_RETURN_IF_ERROR(check_column_call(c_, 16, args, nargs, outs));
      auto d = driver();
      if (!d.ok()) return d.status();
      const DriverApi* api = d.value();
      CUstreamCaptureStatus capture = CU_STREAM_CAPTURE_STATUS_NONE;
      CUDAL1_CU_TRY(api->cuStreamIsCapturing(stream, &capture));
      if (capture != CU_STREAM_CAPTURE_STATUS_NONE) return Status(Code::kUnsupported, "stream is being captured");
      CUDAL1_RETURN_IF_ERROR(module_->prepare_shared_memory(static_cast<unsigned>(smem_)));
      const at::Tensor& x = args[0].toTensor();
      at::Tensor ws = at::empty({ws_floats_}, x.options().dtype(at::kFloat));
      float* wsp = ws.data_ptr<float>();
      const int64_t flags_at = ws_floats_ - 2 * c_.outer;  // the counters and flags, after the pairs
      CUDAL1_CU_TRY(api->cuMemsetD32Async(reinterpret_cast<CUdeviceptr>(wsp + flags_at), 0,
                                          static_cast<size_t>(2 * c_.outer), stream));
      const void* src = x.data_ptr();
      void* dst = outs[0].data_ptr();
      void* params[] = {&src, &dst, &wsp};
      const CUresult r =
          api->cuLaunchCooperativeKernel(module_->function(), grid_, 1, 1, static_cast<unsigned>(held_threads(k_)), 1,
                                         1, static_cast<unsigned>(smem_), stream, params);
      if (r == CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE || r == CUDA_ERROR_NOT_SUPPORTED)
        return Status(Code::kUnsupported, "cooperative grid cannot be resident: " + cu_error_text(r));
      if (r != CUDA_SUCCESS) return cu_status(r, "cuLaunchCooperativeKernel", __FILE__, __LINE__);
      return Status();
    } catch (const std::exception& e) {
      return Status(Code::kInternal, std::string("softmax launch raised: ") + e.what());
    }
  }

 private:
  ColumnShape c_;
  HeldKnobs k_;
  std::shared_ptr<LoadedModule> module_;
  std::vector<OutputSpec> outputs_;
  bool ready_ = false;
  unsigned grid_ = 1;
  int64_t parts_ = 1, smem_ = 0, ws_floats_ = 0;
};

}  // namespace

HeldGrid held_grid(const ColumnShape& c, const HeldKnobs& k, int sm_count) {
  HeldGrid g;
  g.grid = sm_count;
  const int64_t data_blocks = int64_t{sm_count} - k.merge;
  if (data_blocks < 1) return g;
  g.rows = (c.n + data_blocks - 1) / data_blocks;  // every data block one part of each slab
  g.parts = (c.n + g.rows - 1) / g.rows;           // no empty part
  const int64_t slot = g.rows * c.inner * 2, red = held_red_bytes(c, k);
  g.slots = std::min<int64_t>(kHeldMaxSlots, (kMaxBlockSmem - kHeldStaticSmem - red) / slot);
  g.smem = g.slots * slot + red;
  g.ok = g.slots >= 2 && g.smem >= int64_t{held_threads(k)} * 8;  // the merging blocks' chunks fit too
  return g;
}

std::unique_ptr<BoundKernel> make_held_kernel(const ColumnShape& c, const HeldKnobs& k,
                                              std::shared_ptr<LoadedModule> m) {
  return std::make_unique<HeldKernel>(c, k, std::move(m));
}

}  // namespace cudal1::optimizer::softmax
