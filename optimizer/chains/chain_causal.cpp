/// @brief Causal attention (Note [Causal attention] in chain_causal.h): the causal mask recognised per tensor, flash
/// attention's causal path, and the exact rows of heads that hold special values.
#include "chain_causal.h"

#include <torch/version.h>

#include <algorithm>
#include <atomic>
#include <limits>
#include <sstream>

#include "attention_fixup.h"
#include "chain_library.h"
#include "codegen_common.h"
#include "cudal1/core/cuda_driver.h"
#include "cudal1/dispatcher/cuda_glue.h"

namespace cudal1::optimizer::chains {
namespace {

std::atomic<uint64_t> g_causal_calls{0};

/// attention_exact_rows keeps S doubles a warp in shared memory: up to 4 warps within the default 48 KB, and one
/// warp's row at most in what an sm_80 or sm_90 block may opt in to.
constexpr int64_t kExactRowsSmem = 48 << 10;
constexpr int64_t kMaxExactRowsSmem = 160 << 10;
thread_local int t_probe = 0;

uint32_t version_of(const at::Tensor& t) { return t.unsafeGetTensorImpl()->version_counter().current_version(); }

/// The kernels' view of one operand (attention_fixup.cuh's Operand; the same layout).
struct KernelOperand {
  const void* p;
  long long head, row, col;
  long long rows, cols;
  int flat;
};

KernelOperand operand_of(const at::Tensor& t) {
  KernelOperand o{t.data_ptr(), t.stride(0), t.stride(1), t.stride(2), t.size(1), t.size(2), 0};
  const int64_t e = static_cast<int64_t>(t.element_size()), per = o.rows * o.cols;
  const bool dense = (o.col == 1 && (o.row == o.cols || o.rows == 1)) || (o.row == 1 && (o.col == o.rows || o.cols == 1));
  o.flat = dense && reinterpret_cast<uintptr_t>(o.p) % 16 == 0 && (o.head * e) % 16 == 0 && (per * e) % 16 == 0;
  return o;
}

}  // namespace

bool causal_capable(const AttentionPlan& a) {
  return a.mask >= 0 && a.l == a.s && a.mask_sizes == std::vector<int64_t>{a.l, a.s} && a.s * 8 <= kMaxExactRowsSmem;
}

std::string causal_source(c10::ScalarType dtype) {
  std::ostringstream s;
  s << dtype_prelude(dtype) << "constexpr unsigned kExponent = "
    << (dtype == c10::ScalarType::Float ? "0x7f800000u" : dtype == c10::ScalarType::Half ? "0x7c00u" : "0x7f80u")
    << ";\n" << device_sources::kAttentionFixup;
  return s.str();
}

uint64_t causal_calls() noexcept { return g_causal_calls.load(std::memory_order_relaxed); }

CausalMaskProbeScope::CausalMaskProbeScope() noexcept { ++t_probe; }
CausalMaskProbeScope::~CausalMaskProbeScope() { --t_probe; }

Result<std::shared_ptr<CausalPath>> CausalPath::load(int device, const std::string& cubin) {
  std::shared_ptr<CausalPath> p(new CausalPath());
  CUDAL1_ASSIGN_OR_RETURN(p->specials_, LoadedModule::load(device, cubin, "attention_specials"));
  CUDAL1_ASSIGN_OR_RETURN(p->exact_, LoadedModule::load(device, cubin, "attention_exact_rows"));
  return p;
}

bool CausalPath::is_causal(const at::Tensor& mask) {
  if (!mask.defined() || mask.dim() != 2 || mask.size(0) != mask.size(1)) return false;
  c10::TensorImpl* impl = mask.unsafeGetTensorImpl();
  if (impl->is_inference()) return false;  // no version counter to tell an in-place change
  std::lock_guard<std::mutex> lock(mu_);
  const bool same = seen_ && !seen_->expired() && seen_->_unsafe_get_target() == impl && seen_data_ == mask.data_ptr() &&
                    seen_version_ == version_of(mask);
  if (same && checked_) return causal_;
  // No synchronisation while a graph is captured: only what was checked before it.
  if (dispatcher::stream_capturing(static_cast<int>(mask.get_device())) != 0) return false;
  if (!same) {
    seen_ = c10::weak_intrusive_ptr<c10::TensorImpl>(mask.getIntrusivePtr());
    seen_data_ = mask.data_ptr();
    seen_version_ = version_of(mask);
    checked_ = false;
    if (t_probe == 0) return false;  // first sight: the general path (an app's per-call mask never synchronises)
  }
  const at::Tensor causal =
      at::full(mask.sizes(), -std::numeric_limits<double>::infinity(), mask.options()).triu(1);
  causal_ = at::equal(mask, causal);
  checked_ = true;
  return causal_;
}

Status CausalPath::run(const AttentionPlan& a, const at::Tensor& q, const at::Tensor& kt, const at::Tensor& v,
                       at::Tensor& y) {
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 1)
  const int device = static_cast<int>(y.get_device());
  const at::Tensor out = at::scaled_dot_product_attention(q.unsqueeze(1), kt.transpose(1, 2).unsqueeze(1),
                                                          v.unsqueeze(1), std::nullopt, 0.0, /*is_causal=*/true,
                                                          a.scale)
                             .squeeze(1);
  if (dispatcher::stream_capturing(device) != 0 || !adopt_result(y, out)) y.copy_(out);
  CUDAL1_RETURN_IF_ERROR(fix_specials(a, q, kt, v, y, at::Tensor()));
  g_causal_calls.fetch_add(1, std::memory_order_relaxed);
  return Status();
#else
  (void)a, (void)q, (void)kt, (void)v, (void)y;
  return Status(Code::kUnavailable, "causal attention: this build's torch has no scaled_dot_product_attention");
#endif
}

Status CausalPath::fix_specials(const AttentionPlan& a, const at::Tensor& q, const at::Tensor& kt, const at::Tensor& v,
                                at::Tensor& y, const at::Tensor& mask) {
  const int device = static_cast<int>(y.get_device());
  if (mask.defined() && (mask.sizes() != at::IntArrayRef{a.l, a.s} || mask.scalar_type() != y.scalar_type() ||
                         mask.get_device() != device))
    return Status(Code::kUnsupported, "attention: the mask is not [L, S] of the result's dtype on its device");
  // Note [Causal attention]: the heads that hold a NaN or an infinity, rewritten as the exact value.
  const at::Tensor bad = at::zeros({a.bh}, y.options().dtype(at::kInt));
  KernelOperand oq = operand_of(q), ok = operand_of(kt), ov = operand_of(v);
  long long heads = a.bh, dv = a.dv;
  double scale = a.scale;
  void* bad_p = bad.data_ptr();
  void* y_p = y.data_ptr();
  const void* mask_p = mask.defined() ? mask.data_ptr() : nullptr;
  long long mask_row = mask.defined() ? mask.stride(0) : 0, mask_col = mask.defined() ? mask.stride(1) : 0;
  dispatcher::ContextScope ctx(device);
  CUDAL1_RETURN_IF_ERROR(ctx.status());
  CUDAL1_ASSIGN_OR_RETURN(CUstream stream, dispatcher::current_stream(device));
  CUDAL1_ASSIGN_OR_RETURN(const DriverApi* api, driver());
  {
    // About 8 blocks of 256 threads an SM in all: heads along y, the pieces of one along x.
    void* params[] = {&oq, &ok, &ov, &heads, &bad_p};
    const int64_t blocks = std::max<int64_t>(1, 8 * specials_->sm_count());
    const unsigned gy = static_cast<unsigned>(std::min<int64_t>(a.bh, 65535));
    const unsigned gx = static_cast<unsigned>(std::max<int64_t>(1, blocks / gy));
    CUDAL1_CU_TRY(api->cuLaunchKernel(specials_->function(), gx, gy, 1, 256, 1, 1, 0, stream, params, nullptr));
  }
  {
    const unsigned warps = static_cast<unsigned>(std::clamp<int64_t>(kExactRowsSmem / (a.s * 8), 1, 4));
    const unsigned smem = static_cast<unsigned>(warps * a.s * sizeof(double));
    CUDAL1_RETURN_IF_ERROR(exact_->prepare_shared_memory(smem));
    void* params[] = {&oq, &ok, &ov, &y_p, &bad_p, &heads, &dv, &scale, &mask_p, &mask_row, &mask_col};
    const unsigned grid = static_cast<unsigned>(std::max(1, 8 * exact_->sm_count()));
    CUDAL1_CU_TRY(api->cuLaunchKernel(exact_->function(), grid, 1, 1, 32 * warps, 1, 1, smem, stream, params, nullptr));
  }
  return Status();
}

}  // namespace cudal1::optimizer::chains
