/// @brief The bound kernel of the normalisation family: checks the call against the plan and launches one or two
/// phases on the call's stream.
#include <ATen/ATen.h>

#include <algorithm>
#include <mutex>

#include "cudal1/core/cuda_driver.h"
#include "cudal1/optimizer/layout.h"
#include "grid.h"
#include "norm_family.h"

namespace cudal1::optimizer::norm {
namespace {

class NormKernel final : public BoundKernel {
 public:
  NormKernel(NormShape s, const NormTechnique& t, std::shared_ptr<LoadedModule> m)
      : s_(std::move(s)), module_(std::move(m)) {
    outputs_.push_back(OutputSpec{s_.dtype, s_.sizes, contiguous_strides(s_.sizes)});
    const OutputSpec stat{s_.stat_dtype, s_.stat_sizes, contiguous_strides(s_.stat_sizes)};
    outputs_.push_back(stat);
    outputs_.push_back(stat);
    std::visit(
        [&](const auto& k) {
          block_ = k.block;
          align_ = static_cast<uintptr_t>(k.vec) * (s_.dtype == c10::ScalarType::Float ? 4 : 2);
          configure(k);
        },
        t);
  }

  const std::vector<OutputSpec>& outputs() const override { return outputs_; }

  OutputTolerance output_tolerance(size_t i) const override {
    // Note [Verification]: the output and rstd carry the row's rounding, the mean the input's.
    OutputTolerance t;
    t.nonfinite_equivalent = true;
    if (i == 1)
      t.input_scaled = 64;
    else
      t.output_scaled = 64;
    // Group norm in fp16/bf16 normalises with statistics rounded to that dtype (Note [Norm rows]); where our
    // fp32 mean and ATen's round to neighbouring values, the output moves by one unit of the statistic's
    // precision times rstd * |w|, bounded by 2 eps(dtype) x max|output|.
    if (i == 0 && s_.round_stats) t.output_scaled += 2.0 * (s_.dtype == c10::ScalarType::Half ? 8192 : 65536);
    return t;
  }

  Status launch(const c10::IValue* args, size_t nargs, at::Tensor* outs, CUstream stream) noexcept override {
    try {
      const size_t wi = s_.group ? 1 : 2;  // weight's argument index; bias follows
      if (nargs < wi + 2 || !args[0].isTensor()) return Status(Code::kUnsupported, "unexpected arguments");
      const at::Tensor& x = args[0].toTensor();
      if (!x.defined() || x.sizes() != c10::IntArrayRef(s_.sizes) || x.strides() != c10::IntArrayRef(s_.strides))
        return Status(Code::kUnsupported, "call does not match the planned layout");
      const void* w = nullptr;
      const void* b = nullptr;
      if (s_.has_weight) {
        if (!args[wi].isTensor() || !args[wi].toTensor().defined() || !args[wi].toTensor().is_contiguous())
          return Status(Code::kUnsupported, "weight differs from the plan");
        w = args[wi].toTensor().data_ptr();
      }
      if (s_.has_bias) {
        if (!args[wi + 1].isTensor() || !args[wi + 1].toTensor().defined() || !args[wi + 1].toTensor().is_contiguous())
          return Status(Code::kUnsupported, "bias differs from the plan");
        b = args[wi + 1].toTensor().data_ptr();
      }
      const void* xp = x.data_ptr();
      void* yp = outs[0].data_ptr();
      void* mp = outs[1].data_ptr();
      void* rp = outs[2].data_ptr();
      const bool vec_affine = !s_.group;  // layer norm loads weight and bias as vectors too
      if (reinterpret_cast<uintptr_t>(xp) % align_ || reinterpret_cast<uintptr_t>(yp) % align_ ||
          (vec_affine && (reinterpret_cast<uintptr_t>(w) % align_ || reinterpret_cast<uintptr_t>(b) % align_)))
        return Status(Code::kUnsupported, "data not aligned for the vector width");
      auto d = driver();
      if (!d.ok()) return d.status();
      const DriverApi* api = d.value();
      at::Tensor ws;
      float* wsp = nullptr;
      if (launch_ == Launch::kTwoPhases) {
        ws = at::empty({triples_}, x.options().dtype(at::kFloat));
        wsp = ws.data_ptr<float>();
      }
      if (parts_ > 0 && resident_ < parts_)
        return Status(Code::kUnsupported, "the device keeps fewer blocks resident (" + std::to_string(resident_) +
                                              ") than a row has parts (" + std::to_string(parts_) + ")");
      if (launch_ == Launch::kCooperative) {
        ws = at::empty({triples_ + counters_}, x.options().dtype(at::kFloat));
        wsp = ws.data_ptr<float>();
        return launch_grid(api, xp, w, b, yp, mp, rp, wsp, stream);
      }
      if (launch_ == Launch::kHeldClusters) return launch_held_rows(xp, w, b, yp, mp, rp, stream);
      const unsigned g = grid_dim(grid_);
      for (int phase = launch_ == Launch::kTwoPhases ? 0 : 1; phase <= 1; ++phase) {
        void* params[] = {&xp, &w, &b, &yp, &mp, &rp, &wsp, &phase};
        const CUresult r = api->cuLaunchKernel(module_->function(), g, 1, 1, static_cast<unsigned>(block_), 1, 1, 0,
                                               stream, params, nullptr);
        if (r != CUDA_SUCCESS) return cu_status(r, "cuLaunchKernel", __FILE__, __LINE__);
      }
      return Status();
    } catch (const std::exception& e) {
      return Status(Code::kInternal, std::string("norm launch raised: ") + e.what());
    }
  }

 private:
  /// Launches where the kernel was configured for the technique (configure, below).
  enum class Launch {
    kPlain,         ///< one launch of grid_ blocks
    kTwoPhases,     ///< SplitRow: phase 0 then phase 1, grid_ blocks each, with triples_ floats of workspace
    kCooperative,   ///< launch_grid
    kHeldClusters,  ///< launch_held_rows
  };

  void configure(const RowPerWarp&) { grid_ = (s_.rows + block_ / 32 - 1) / (block_ / 32); }
  void configure(const RowPerBlock&) { grid_ = s_.rows; }
  void configure(const SplitRow& k) {
    launch_ = Launch::kTwoPhases;
    grid_ = s_.rows * k.splits;
    triples_ = s_.rows * k.splits * 3;
  }
  void configure(const HeldCluster& k) {
    launch_ = Launch::kHeldClusters;
    cluster_ = k.cluster;
    smem_ = k.smem_bytes(s_);
    threads_ = static_cast<unsigned>(k.threads(s_));
  }
  void configure(const HeldGrid& k) {
    // Note [Norm held], mode 8: as many rows at once as the device's SMs hold groups of the row's parts (one
    // block an SM: the ring takes most of its shared memory); none: declined at the call.
    launch_ = Launch::kCooperative;
    const int64_t at_once = std::min<int64_t>(s_.rows, module_->sm_count() / k.parts);
    parts_ = k.parts;
    resident_ = int64_t{module_->sm_count()};
    group_grid_ = static_cast<unsigned>(std::max<int64_t>(1, at_once) * k.parts);
    counters_ = s_.rows;
    triples_ = s_.rows * k.parts * 3;
    smem_ = k.smem_bytes(s_);
    threads_ = static_cast<unsigned>(k.threads(s_));
  }

  /// HeldGrid (Note [Norm held], mode 8): opts in to its ring's shared memory, zeroes the row counters behind the
  /// triples, then one cooperative launch. A grid the device cannot keep resident now (e.g. under MPS limits) and a
  /// stream being captured into a graph (no cooperative nodes): Unsupported, so ATen serves the call.
  Status launch_grid(const DriverApi* api, const void* xp, const void* w, const void* b, void* yp, void* mp, void* rp,
                     float* wsp, CUstream stream) const {
    CUstreamCaptureStatus capture = CU_STREAM_CAPTURE_STATUS_NONE;
    CUDAL1_CU_TRY(api->cuStreamIsCapturing(stream, &capture));
    if (capture != CU_STREAM_CAPTURE_STATUS_NONE) return Status(Code::kUnsupported, "stream is being captured");
    if (smem_ > 0) CUDAL1_RETURN_IF_ERROR(module_->prepare_shared_memory(static_cast<unsigned>(smem_)));
    CUDAL1_CU_TRY(api->cuMemsetD32Async(reinterpret_cast<CUdeviceptr>(wsp + triples_), 0,
                                        static_cast<size_t>(counters_), stream));
    int phase = 1;
    void* params[] = {&xp, &w, &b, &yp, &mp, &rp, &wsp, &phase};
    const CUresult r =
        api->cuLaunchCooperativeKernel(module_->function(), group_grid_, 1, 1, threads_ ? threads_ : block_, 1, 1,
                                       static_cast<unsigned>(smem_), stream, params);
    if (r == CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE || r == CUDA_ERROR_NOT_SUPPORTED)
      return Status(Code::kUnsupported, "cooperative grid cannot be resident: " + cu_error_text(r));
    if (r != CUDA_SUCCESS) return cu_status(r, "cuLaunchCooperativeKernel", __FILE__, __LINE__);
    return Status();
  }

  /// HeldCluster (Note [Norm held]): once, opts the kernel in to its ring's shared memory and cluster size and
  /// asks how many clusters the device holds; then launches that many (at most one a row), looping over rows.
  /// None held, or any failure: Unsupported, so ATen serves the call.
  Status launch_held_rows(const void* xp, const void* w, const void* b, void* yp, void* mp, void* rp,
                          CUstream stream) {
    const unsigned smem = static_cast<unsigned>(smem_), threads = threads_, cluster = static_cast<unsigned>(cluster_);
    std::call_once(held_once_, [&] {
      held_ready_ = module_->prepare_clusters(threads, cluster, smem);
      if (held_ready_.ok()) held_clusters_ = module_->max_active_clusters(threads, cluster, smem);
      if (held_ready_.ok() && held_clusters_ < 1)
        held_ready_ = Status(Code::kUnsupported, "the device holds no cluster of this variant");
    });
    if (!held_ready_.ok()) return Status(Code::kUnsupported, "held rows: " + held_ready_.to_string());
    const int64_t clusters = std::min<int64_t>(s_.rows, held_clusters_);
    float* wsp = nullptr;
    int phase = 1;
    void* params[] = {&xp, &w, &b, &yp, &mp, &rp, &wsp, &phase};
    const Status st = module_->launch_clusters(static_cast<unsigned>(clusters * cluster_), threads, cluster, smem,
                                               stream, params);
    if (!st.ok()) return Status(Code::kUnsupported, "cluster launch failed: " + st.to_string());
    return Status();
  }

  NormShape s_;
  std::shared_ptr<LoadedModule> module_;
  std::vector<OutputSpec> outputs_;
  Launch launch_ = Launch::kPlain;
  int block_ = 1;            ///< threads per block (the held rows: consumers)
  uintptr_t align_ = 1;      ///< bytes of one vector: x, y (and layer norm's w and b) must be aligned to it
  int64_t grid_ = 1;         ///< kPlain, kTwoPhases: blocks of a launch
  int cluster_ = 1;          ///< kHeldClusters: blocks a cluster
  unsigned group_grid_ = 1;  ///< kCooperative: blocks of the launch
  unsigned threads_ = 0;     ///< the held rows: threads a block (consumers and their warps), else 0: block_
  int64_t counters_ = 0;     ///< kCooperative: zeroed counters after the triples (a row's)
  int64_t triples_ = 0;      ///< workspace floats before the counters (kTwoPhases: the whole workspace)
  int64_t smem_ = 0;         ///< the held rows: dynamic shared memory per block
  int64_t parts_ = 0, resident_ = 0;  ///< HeldGrid: a row's parts, the blocks the device keeps resident
  std::once_flag held_once_;          ///< HeldCluster: the opt-in and the occupancy query, once
  Status held_ready_;
  int held_clusters_ = 0;             ///< HeldCluster: clusters the device holds at once
};

}  // namespace

std::unique_ptr<BoundKernel> make_norm_kernel(const NormShape& s, const NormTechnique& t,
                                              std::shared_ptr<LoadedModule> module) {
  return std::make_unique<NormKernel>(s, t, std::move(module));
}

}  // namespace cudal1::optimizer::norm
