/// @brief The bound kernel of the gemm family, on the call's stream: pads the weight, runs cuBLAS through at::mm
/// and launches the unpadding copy (Note [Padded GEMM]); or runs one aligned cuBLAS GEMM a residue of rows into
/// the result in place and launches the remainder kernel (Note [Residue rows]).
#include <ATen/ATen.h>

#include "codegen_common.h"
#include "cudal1/core/cuda_driver.h"
#include "cudal1/dispatcher/cuda_glue.h"
#include "gemm_family.h"
#include "grid.h"

namespace cudal1::optimizer::gemm {
namespace {

class GemmKernel final : public BoundKernel {
 public:
  GemmKernel(GemmShape s, const GemmTechnique& t, std::shared_ptr<LoadedModule> m)
      : s_(std::move(s)), t_(t), module_(std::move(m)) {
    outputs_.push_back(OutputSpec{s_.dtype, {s_.m, s_.n}, {s_.n, 1}});  // mm's result: contiguous
    if (const auto* r = std::get_if<ResidueRows>(&t_)) {
      remainder_tasks_ = s_.m * r->slots(s_);
      align_ = 16;
    } else {
      align_ = 2 * static_cast<uintptr_t>(std::get<PaddedGemm>(t_).vec);
    }
  }

  const std::vector<OutputSpec>& outputs() const override { return outputs_; }

  OutputTolerance output_tolerance(size_t) const override {
    // Note [Padded GEMM]: fp32 accumulation in another order (up to K fp32 ulps of the largest output), and
    // split-K partial sums that cuBLAS may reduce in the output's dtype (ATen allows it by default: one ulp of
    // the dtype at the largest output, for either side). In units of fp32 eps x max|output|.
    OutputTolerance t;
    const double dtype_ulps = s_.dtype == c10::ScalarType::Half ? 8192.0 : 65536.0;  // eps(dtype) / eps(fp32)
    t.output_scaled = static_cast<double>(s_.k) + 2 * dtype_ulps;
    t.nonfinite_equivalent = true;  // Inf + -Inf meeting in one order, Inf * 0 in another
    t.overflow_equivalent = true;   // a split-K partial sum reduced in fp16 may overflow where the sum does not
    t.overflow_edge = 1.0 / 16;
    t.arbitrate_in_double = true;   // where ATen's fp16 partial sums lost the answer, the exact one is right
    return t;
  }

  int64_t scratch_bytes() const override {  // the padded weight, bias and [M, NP] result, 2-byte elements
    const auto* padded = std::get_if<PaddedGemm>(&t_);
    if (!padded) return 0;  // residue rows: the GEMMs write the result in place
    const int64_t np = padded->padded_n(s_.n);
    return 2 * (np * s_.k + s_.m * np + (s_.bias ? np : 0));
  }

  Status launch(const c10::IValue* args, size_t nargs, at::Tensor* outs, CUstream stream) noexcept override {
    try {
      const size_t first = s_.bias ? 1 : 0;  // addmm(bias, a, b, beta, alpha) or mm(a, b)
      if (nargs != (s_.bias ? 5u : 2u) || !args[first].isTensor() || !args[first + 1].isTensor() ||
          (s_.bias && !args[0].isTensor()))
        return Status(Code::kUnsupported, "unexpected arguments");
      const at::Tensor& a = args[first].toTensor();
      const at::Tensor& b = args[first + 1].toTensor();
      at::Tensor bias;
      if (s_.bias) {
        bias = args[0].toTensor();
        if (!bias.defined() || bias.scalar_type() != s_.dtype || bias.sizes() != c10::IntArrayRef({s_.n}) ||
            !bias.is_contiguous())
          return Status(Code::kUnsupported, "bias does not match the planned shape");
      }
      if (!a.defined() || !b.defined() || a.scalar_type() != s_.dtype || b.scalar_type() != s_.dtype ||
          a.sizes() != c10::IntArrayRef({s_.m, s_.k}) || b.sizes() != c10::IntArrayRef({s_.k, s_.n}) ||
          a.strides() != c10::IntArrayRef(s_.a_strides) || b.strides() != c10::IntArrayRef(s_.b_strides))
        return Status(Code::kUnsupported, "call does not match the planned shape");
      at::Tensor& out = outs[0];
      if (reinterpret_cast<uintptr_t>(out.data_ptr()) % align_ != 0)
        return Status(Code::kUnsupported, "result not aligned for the copy's vector width");
      // at::mm below runs on torch's current stream: it must be the one this launch was given.
      auto current = dispatcher::current_stream(static_cast<int>(a.get_device()));
      if (!current.ok() || current.value() != stream)
        return Status(Code::kUnsupported, "the launch stream is not torch's current stream");
      const auto* residue = std::get_if<ResidueRows>(&t_);
      if (residue) return launch_residue(*residue, a, b, out, stream);
      const PaddedGemm& k = std::get<PaddedGemm>(t_);
      const int64_t np = k.padded_n(s_.n);
      at::Tensor w;
      if (k.orient == 0) {  // [NP, K], its extra rows zero, used transposed
        at::Tensor rows = at::empty({np, s_.k}, b.options());
        rows.narrow(0, s_.n, np - s_.n).zero_();
        rows.narrow(0, 0, s_.n).copy_(b.t());
        w = rows.t();
      } else {  // [K, NP], its extra columns zero
        w = at::empty({s_.k, np}, b.options());
        w.narrow(1, s_.n, np - s_.n).zero_();
        w.narrow(1, 0, s_.n).copy_(b);
      }
      at::Tensor scratch;
      if (s_.bias) {  // the bias padded with zeros too; cuBLAS adds it in its epilogue, as ATen's addmm does
        at::Tensor padded_bias = at::zeros({np}, bias.options());
        padded_bias.narrow(0, 0, s_.n).copy_(bias);
        scratch = at::addmm(padded_bias, a, w);
      } else {
        scratch = at::mm(a, w);
      }
      if (!scratch.is_contiguous() || scratch.sizes() != c10::IntArrayRef({s_.m, np}))
        return Status(Code::kInternal, "at::mm gave an unexpected scratch layout");
      auto d = driver();
      if (!d.ok()) return d.status();
      const void* src = scratch.data_ptr();
      void* dst = out.data_ptr();
      void* params[] = {&src, &dst};
      const CUresult r = d.value()->cuLaunchKernel(module_->function(), grid_dim(k.grid(s_)), 1, 1,
                                                   static_cast<unsigned>(k.block), 1, 1, 0, stream, params, nullptr);
      if (r != CUDA_SUCCESS) return cu_status(r, "cuLaunchKernel", __FILE__, __LINE__);
      // scratch and the padded weight go back to the caching allocator here: it reuses them only for work
      // queued later on this stream, after the copy.
      return Status();
    } catch (const std::exception& e) {
      return Status(Code::kInternal, std::string("gemm launch raised: ") + e.what());
    }
  }

 private:
  /// Note [Residue rows]: an aligned GEMM per residue of rows into the result's strided view, then the remainder.
  Status launch_residue(const ResidueRows& k, const at::Tensor& a, const at::Tensor& b, at::Tensor& out,
                        CUstream stream) {
    const auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
    if (!aligned(a.data_ptr()) || !aligned(b.data_ptr()) || !aligned(out.data_ptr()) || !out.is_contiguous())
      return Status(Code::kUnsupported, "an operand or the result is not 16-byte aligned");
    const int64_t tasks = remainder_tasks_;
    if ((tasks + k.warps - 1) / k.warps > (int64_t{1} << 31) - 1)  // the kernel has no grid-stride loop
      return Status(Code::kUnsupported, "too many remainder elements for one grid");
    const int64_t rows = kResidueRows, lda = s_.a_strides[0];
    for (int j = 0; j < kResidueRows && j < s_.m; ++j) {
      const int64_t mj = (s_.m - j + rows - 1) / rows;
      const ResidueSplit split = residue_split(s_.n, kResidueRows, j);
      if (split.width == 0) continue;
      at::Tensor ov =
          out.as_strided({mj, split.width}, {rows * s_.n, 1}, out.storage_offset() + j * s_.n + split.shift);
      const at::Tensor av = a.as_strided({mj, s_.k}, {rows * lda, 1}, a.storage_offset() + j * lda);
      at::mm_out(ov, av, b.narrow(1, split.shift, split.width));
    }
    if (tasks == 0) return Status();
    auto d = driver();
    if (!d.ok()) return d.status();
    const void* ap = a.data_ptr();
    const void* wp = b.data_ptr();
    void* op = out.data_ptr();
    void* params[] = {&ap, &wp, &op};
    const CUresult r = d.value()->cuLaunchKernel(module_->function(), grid_dim((tasks + k.warps - 1) / k.warps), 1,
                                                 1, static_cast<unsigned>(32 * k.warps), 1, 1, 0, stream, params,
                                                 nullptr);
    if (r != CUDA_SUCCESS) return cu_status(r, "cuLaunchKernel", __FILE__, __LINE__);
    return Status();
  }

  GemmShape s_;
  GemmTechnique t_;
  std::shared_ptr<LoadedModule> module_;
  std::vector<OutputSpec> outputs_;
  uintptr_t align_ = 16;         ///< bytes the result must be aligned to: the copy's vectors, or 16 (residue rows)
  int64_t remainder_tasks_ = 0;  ///< residue rows: the remainder kernel's warps (a row's slots x M)
};

}  // namespace

std::unique_ptr<BoundKernel> make_gemm_kernel(const GemmShape& s, const GemmTechnique& t,
                                              std::shared_ptr<LoadedModule> module) {
  return std::make_unique<GemmKernel>(s, t, std::move(module));
}

}  // namespace cudal1::optimizer::gemm
