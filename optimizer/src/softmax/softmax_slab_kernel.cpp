/// @brief The bound kernel of the softmax family's grid slabs (Note [Softmax grid slabs]): a workspace of the
/// blocks' pairs and a zeroed counter a slab, then one cooperative launch on the call's stream.
#include <ATen/ATen.h>

#include <algorithm>

#include "codegen_common.h"
#include "cudal1/core/cuda_driver.h"
#include "softmax_family.h"

namespace cudal1::optimizer::softmax {
namespace {

class SlabKernel final : public BoundKernel {
 public:
  SlabKernel(const ColumnShape& c, const SlabLayout& l, int block, std::shared_ptr<LoadedModule> m)
      : c_(c), l_(l), threads_(static_cast<unsigned>(block + 64)), module_(std::move(m)) {
    outputs_.push_back(OutputSpec{c_.dtype, c_.sizes, c_.out_strides});
    pairs_ = c_.outer * l_.parts * l_.iv * (16 / elem_size(c_.dtype)) * 2;
  }

  const std::vector<OutputSpec>& outputs() const override { return outputs_; }
  double input_scaled_atol() const override { return c_.log ? 4.0 : 0.0; }  // as the other softmax kernels

  Status launch(const c10::IValue* args, size_t nargs, at::Tensor* outs, CUstream stream) noexcept override {
    try {
      CUDAL1_RETURN_IF_ERROR(check_column_call(c_, 16, args, nargs, outs));
      const int64_t sms = module_->sm_count();
      if (sms < l_.parts)
        return Status(Code::kUnsupported, "the device has fewer SMs (" + std::to_string(sms) +
                                              ") than a slab has blocks (" + std::to_string(l_.parts) + ")");
      auto d = driver();
      if (!d.ok()) return d.status();
      const DriverApi* api = d.value();
      CUstreamCaptureStatus capture = CU_STREAM_CAPTURE_STATUS_NONE;
      CUDAL1_CU_TRY(api->cuStreamIsCapturing(stream, &capture));
      if (capture != CU_STREAM_CAPTURE_STATUS_NONE) return Status(Code::kUnsupported, "stream is being captured");
      CUDAL1_RETURN_IF_ERROR(module_->prepare_shared_memory(static_cast<unsigned>(l_.smem)));
      const at::Tensor& x = args[0].toTensor();
      at::Tensor ws = at::empty({pairs_ + c_.outer}, x.options().dtype(at::kFloat));
      float* wsp = ws.data_ptr<float>();
      CUDAL1_CU_TRY(api->cuMemsetD32Async(reinterpret_cast<CUdeviceptr>(wsp + pairs_), 0,
                                          static_cast<size_t>(c_.outer), stream));
      const void* src = x.data_ptr();
      void* dst = outs[0].data_ptr();
      void* params[] = {&src, &dst, &wsp};
      const int64_t groups = std::min<int64_t>(c_.outer, sms / l_.parts);
      const CUresult r = api->cuLaunchCooperativeKernel(module_->function(), static_cast<unsigned>(groups * l_.parts),
                                                        1, 1, threads_, 1, 1, static_cast<unsigned>(l_.smem),
                                                        stream, params);
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
  SlabLayout l_;
  unsigned threads_;
  std::shared_ptr<LoadedModule> module_;
  std::vector<OutputSpec> outputs_;
  int64_t pairs_ = 0;  ///< workspace floats before the counters
};

}  // namespace

std::unique_ptr<BoundKernel> make_slab_kernel(const ColumnShape& c, const SlabLayout& l, int block,
                                              std::shared_ptr<LoadedModule> m) {
  return std::make_unique<SlabKernel>(c, l, block, std::move(m));
}

}  // namespace cudal1::optimizer::softmax
