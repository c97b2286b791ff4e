/// @brief The bound kernel of the reduction family: its outputs as ATen allocates them, per-output tolerances,
/// and one or two launches on the call's stream (Note [Reductions]).
#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>

#include "codegen_common.h"
#include "cudal1/core/cuda_driver.h"
#include "grid.h"
#include "cudal1/optimizer/layout.h"
#include "reduce_family.h"

namespace cudal1::optimizer::reduce {
namespace {

class ReduceKernel final : public BoundKernel {
 public:
  ReduceKernel(ReduceShape s, const ReduceTechnique& t, std::shared_ptr<LoadedModule> m)
      : s_(std::move(s)), module_(std::move(m)) {
    const auto strides = contiguous_strides(s_.out_sizes);
    if (s_.has_values()) outputs_.push_back(OutputSpec{s_.out_dtype, s_.out_sizes, strides});
    if (s_.has_indices()) outputs_.push_back(OutputSpec{c10::ScalarType::Long, s_.out_sizes, strides});
    std::visit(
        [&](const auto& k) {
          block_ = static_cast<unsigned>(k.block);
          align_ = static_cast<uintptr_t>(k.vec) * static_cast<uintptr_t>(elem_size(s_.dtype));
          grid_ = k.grid(s_);
        },
        t);
  }

  const std::vector<OutputSpec>& outputs() const override { return outputs_; }

  OutputTolerance output_tolerance(size_t /*output*/) const override {
    // Note [Verification]. Max/min values and all indices are exact (Note [Reductions]): no extra tolerance,
    // and integer outputs compare exactly. Sums differ from ATen's only in fp32 rounding order. Both sides
    // accumulate partial sums of up to K terms of zero-mean random inputs; a chain of L additions errs by about
    // 0.2 * eps * L * sigma (a random walk of roundings of partial sums ~ sqrt(i) sigma), and max|input| is a
    // few sigma, so (16 + K) eps max|input| is ~20x the error of the worst (fully serial) order and still far
    // below one input element's worth for the verification's sizes. mean is that divided by K (plus the
    // factor's rounding); var/std (Welford on both sides) the same bound relative to the result's magnitude.
    // Non-finite results (Inf/NaN in a row; fp16 overflow exactly at the boundary) match each other.
    // Norms of ord 1, 2 and p sum non-negative terms: each side's sum errs by at most (K - 1) u of itself in any
    // order, and by a random walk of ~eps sqrt(K) / 6 of itself for a serial chain of K (partial sums i/K of the
    // total, each rounded by up to u), so min(K, 4 sqrt(K)) + 16 eps (~24 standard deviations of the longest,
    // fully serial chain; both sides' trees have far shorter chains) bounds both sides' difference relative to
    // the sum, tight enough that losing 0.2% of a 2^26-element reduction (or one element of a 2^14 one) shows;
    // sqrtf halves it, powf(s, 1/p) scales it
    // by 1/|p| and adds a few ulp of powf on each side (the per-element powf terms too, if the two libdevice
    // builds differ). Ord 0 counts exactly (planned below 2^24), inf/-inf pick an element: no extra tolerance.
    OutputTolerance t;
    const double k = static_cast<double>(s_.length);
    const double sum_rel = std::min(k, 4 * std::sqrt(k)) + 16;
    switch (s_.op) {
      case Reduction::kSum: t.input_scaled = 16 + k; break;
      case Reduction::kMean: t.input_scaled = 2 + (16 + k) / k; break;
      case Reduction::kVar: case Reduction::kStd: t.output_scaled = 16 + k; break;
      case Reduction::kNorm:
        switch (s_.ord) {
          case NormOrd::kOne: t.output_scaled = sum_rel; break;
          case NormOrd::kTwo: t.output_scaled = sum_rel / 2 + 4; break;
          case NormOrd::kP: t.output_scaled = (sum_rel + 16) / std::fabs(s_.norm_p) + 16; break;
          default: return t;
        }
        break;
      default: return t;
    }
    t.nonfinite_equivalent = true;
    return t;
  }

  Status launch(const c10::IValue* args, size_t nargs, at::Tensor* outs, CUstream stream) noexcept override {
    try {
      if (nargs < 1 || !args[0].isTensor()) return Status(Code::kUnsupported, "unexpected arguments");
      const at::Tensor& x = args[0].toTensor();
      if (!x.defined() || x.sizes() != c10::IntArrayRef(s_.sizes) || x.strides() != c10::IntArrayRef(s_.strides))
        return Status(Code::kUnsupported, "call does not match the planned layout");
      const void* xp = x.data_ptr();
      void* yp = s_.has_values() ? outs[0].data_ptr() : nullptr;
      void* ip = s_.has_indices() ? outs[s_.has_values() ? 1 : 0].data_ptr() : nullptr;
      if (reinterpret_cast<uintptr_t>(xp) % align_)
        return Status(Code::kUnsupported, "input not aligned for the vector width");
      if (grid_.cluster > 0) return launch_cluster_tiles(xp, yp, ip, stream);
      CUDAL1_ASSIGN_OR_RETURN(const DriverApi* api, driver());
      // PipelinedTile merges its splits in the same launch behind counters zeroed here (Note [Column tiles in
      // flight]); SplitRow and the other split column techniques run a second pass.
      at::Tensor ws;
      void* wsp = nullptr;
      if (grid_.workspace > 0) {
        ws = at::empty({grid_.workspace}, x.options().dtype(at::kByte));
        wsp = ws.data_ptr();
      }
      if (grid_.counters > 0)
        CUDAL1_CU_TRY(api->cuMemsetD32Async(reinterpret_cast<CUdeviceptr>(wsp), 0,
                                            static_cast<size_t>(grid_.counters / 4), stream));
      for (int phase = 0; phase < (grid_.second_x > 0 ? 2 : 1); ++phase) {  // phase 1: the second pass
        const unsigned gx = grid_dim(phase == 0 ? grid_.x : grid_.second_x);
        const unsigned gy = phase == 0 ? static_cast<unsigned>(grid_.y) : 1u;
        void* params[] = {&xp, &yp, &ip, &wsp, &phase};
        const CUresult r =
            api->cuLaunchKernel(module_->function(), gx, gy, 1, block_, 1, 1, 0, stream, params, nullptr);
        if (r != CUDA_SUCCESS) return cu_status(r, "cuLaunchKernel", __FILE__, __LINE__);
      }
      return Status();
    } catch (const std::exception& e) {
      return Status(Code::kInternal, std::string("reduce launch raised: ") + e.what());
    }
  }

 private:
  /// ClusterTile (Note [Column tiles in clusters]): one launch of tiles x S blocks in clusters of S along x, no
  /// workspace; a ring's stages in dynamic shared memory (Note [Column tiles in rings]). The opt-in to clusters of
  /// 16 and the check that one cluster fits run once per module; a device that cannot hold one leaves the call on
  /// ATen.
  Status launch_cluster_tiles(const void* xp, void* yp, void* ip, CUstream stream) {
    const unsigned block = block_, cluster = static_cast<unsigned>(grid_.cluster);
    const auto smem = static_cast<unsigned>(grid_.smem);  // Note [Column tiles in rings]
    const Status ready = module_->prepare_clusters(block, cluster, smem);
    if (!ready.ok()) return Status(Code::kUnsupported, "cluster tiles: " + ready.to_string());
    void* wsp = nullptr;
    int phase = 0;
    void* params[] = {&xp, &yp, &ip, &wsp, &phase};
    const Status st = module_->launch_clusters(grid_dim(grid_.x), block, cluster, smem, stream, params);
    if (!st.ok()) return Status(Code::kUnsupported, "cluster launch failed: " + st.to_string());
    return Status();
  }

  ReduceShape s_;
  std::shared_ptr<LoadedModule> module_;
  std::vector<OutputSpec> outputs_;
  unsigned block_ = 256;
  uintptr_t align_ = 1;
  ReduceGrid grid_;  ///< the technique's launches on s_
};

}  // namespace

std::unique_ptr<BoundKernel> make_reduce_kernel(const ReduceShape& s, const ReduceTechnique& t,
                                                std::shared_ptr<LoadedModule> module) {
  return std::make_unique<ReduceKernel>(s, t, std::move(module));
}

}  // namespace cudal1::optimizer::reduce
