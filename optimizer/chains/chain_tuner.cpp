/// @brief Chain kernels and their tuning (Note [Chain tuning] in chain_tuner.h): the pointwise chain kernel,
/// its verification against the ATen chain, and its timing.
#include "cudal1/optimizer/chain_tuner.h"

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <random>
#include <thread>

#if defined(CUDAL1_TORCH_CUDA)
#include <ATen/cuda/CUDAGeneratorImpl.h>
#endif

#include "chain_causal.h"
#include "chain_library.h"
#include "chain_plan.h"
#include "chain_program.h"
#include "chain_tuning.h"
#include "cudal1/cache/kernel_cache.h"
#include "cudal1/core/cuda_driver.h"
#include "cudal1/core/log.h"
#include "cudal1/dispatcher/capture_gate.h"
#include "cudal1/dispatcher/cuda_glue.h"
#include "cudal1/dispatcher/hook.h"
#include "cudal1/optimizer/compiler.h"
#include "cudal1/optimizer/device_info.h"
#include "cudal1/optimizer/family.h"
#include "cudal1/optimizer/measure.h"

namespace cudal1::optimizer {
namespace {

using chains::ChainPlan;
using chains::ChainVariant;

int64_t elem_size(c10::ScalarType t) { return static_cast<int64_t>(c10::elementSize(t)); }

/// One compiled variant of a pointwise or row chain.
class GeneratedChainKernel final : public dispatcher::ChainKernel {
 public:
  GeneratedChainKernel(ChainPlan plan, ChainVariant v, std::shared_ptr<LoadedModule> m, int device)
      : plan_(std::move(plan)), v_(v), module_(std::move(m)), device_(device) {}

  Status run(const std::vector<at::Tensor>& ext, const std::vector<std::vector<at::Tensor>>& outs) noexcept override {
    try {
      if (ext.size() != plan_.externals.size()) return Status(Code::kUnsupported, "chain kernel: operand count");
      const bool pooled = plan_.pool.active();
      if (pooled && wants_more_than_pooled(outs))  // Note [Pooled chains]
        return Status(Code::kUnavailable, "pooled chain: the app kept a value other than the pooled one");
      const int64_t align = v_.vec;
      std::vector<const void*> eptr(ext.size());
      std::vector<void*> optr(plan_.outputs.size(), nullptr);
      for (size_t e = 0; e < ext.size(); ++e) {
        const at::Tensor& t = ext[e];
        const chains::External& x = plan_.externals[e];
        if (!t.defined() || !t.is_cuda() || t.get_device() != device_ || t.scalar_type() != x.dtype)
          return Status(Code::kUnsupported, "chain kernel: an external differs from the plan");
        if (!matches_strides(t, x)) return Status(Code::kUnsupported, "chain kernel: an external's strides differ");
        eptr[e] = t.data_ptr();
        const bool packs = plan_.rows ? chains::packed(x, v_.vec) : x.contiguous;
        if (packs && reinterpret_cast<uintptr_t>(eptr[e]) % (align * elem_size(x.dtype)) != 0)
          return Status(Code::kUnsupported, "chain kernel: a misaligned external");
      }
      for (size_t k = 0; k < plan_.outputs.size(); ++k) {
        const chains::OutputSlot& slot = plan_.outputs[k];
        const size_t node = static_cast<size_t>(slot.node), out = static_cast<size_t>(slot.out);
        if (node >= outs.size() || out >= outs[node].size() || !outs[node][out].defined()) continue;
        const at::Tensor& o = outs[node][out];
        const chains::Step& s = plan_.steps[static_cast<size_t>(slot.step)];
        if (!o.is_cuda() || o.get_device() != device_ || o.scalar_type() != s.dtype ||
            o.numel() != (s.row ? plan_.nrows : s.pooled ? plan_.pool.numel(plan_.shape) : plan_.numel) ||
            !o.is_contiguous())
          return Status(Code::kUnsupported, "chain kernel: an output differs from the plan");
        optr[k] = o.data_ptr();
        if (!s.row && reinterpret_cast<uintptr_t>(optr[k]) % (align * elem_size(o.scalar_type())) != 0)
          return Status(Code::kUnsupported, "chain kernel: a misaligned output");
      }
      long long n = plan_.rows ? plan_.nrows : plan_.numel;
      if (pooled)  // Note [Pooled chains]: a thread's outputs down a column
        n = plan_.shape[0] * plan_.shape[1] * ((plan_.pool.oh + v_.pool_rows - 1) / v_.pool_rows) * plan_.pool.ow;
      std::vector<void*> params;
      params.reserve(1 + eptr.size() + optr.size());
      params.push_back(&n);
      for (auto& p : eptr) params.push_back(&p);
      for (auto& p : optr) params.push_back(&p);
      dispatcher::ContextScope ctx(device_);
      CUDAL1_RETURN_IF_ERROR(ctx.status());
      CUDAL1_ASSIGN_OR_RETURN(CUstream stream, dispatcher::current_stream(device_));
      CUDAL1_ASSIGN_OR_RETURN(const DriverApi* api, driver());
      int64_t grid = 0;
      if (plan_.rows) {
        const int64_t per_block = v_.block / v_.group;  // rows a block
        grid = (n + per_block - 1) / per_block;
      } else if (pooled) {
        grid = (n + v_.block - 1) / v_.block;
      } else {
        const int64_t chunks = n / v_.vec;
        grid = (chunks + v_.block - 1) / v_.block;
        if (v_.looped) grid = std::min<int64_t>(grid, int64_t{8} * module_->sm_count());
      }
      if (grid > 0x7fffffff) return Status(Code::kUnsupported, "chain kernel: too many rows");
      grid = std::max<int64_t>(grid, 1);
      CUDAL1_CU_TRY(api->cuLaunchKernel(module_->function(), static_cast<unsigned>(grid), 1, 1,
                                        static_cast<unsigned>(v_.block), 1, 1, 0, stream, params.data(), nullptr));
      return Status();
    } catch (const std::exception& e) {
      return Status(Code::kInternal, std::string("chain kernel: ") + e.what());
    }
  }
  std::string describe() const override {
    return (plan_.rows ? "row chain " : plan_.pool.active() ? "pooled chain " : "pointwise ") + v_.id();
  }

 private:
  /// Whether `outs` holds a non-empty tensor other than the pooled value (Note [Pooled chains]).
  bool wants_more_than_pooled(const std::vector<std::vector<at::Tensor>>& outs) const {
    const chains::OutputSlot& pooled = plan_.outputs.at(0);
    for (size_t n = 0; n < outs.size(); ++n)
      for (size_t i = 0; i < outs[n].size(); ++i)
        if (outs[n][i].defined() && outs[n][i].numel() > 0 &&
            !(static_cast<int>(n) == pooled.node && static_cast<int>(i) == pooled.out))
          return true;
    return false;
  }

  bool matches_strides(const at::Tensor& t, const chains::External& x) const {
    const auto sizes = t.sizes(), strides = t.strides();
    if (x.channel) {  // Note [Batch norm in chains]: [C] along dim 1
      if (sizes.size() != 1 || plan_.shape.size() < 2 || sizes[0] != plan_.shape[1]) return false;
      for (size_t d = 0; d < plan_.shape.size(); ++d)
        if (x.strides[d] != (d == 1 && plan_.shape[1] != 1 ? strides[0] : 0)) return false;
      return true;
    }
    const size_t R = plan_.shape.size(), r = sizes.size();
    if (r > R) return false;
    for (size_t d = 0; d < R; ++d) {
      int64_t s = 0;
      if (d >= R - r) {
        const size_t e = d - (R - r);
        if (sizes[e] == plan_.shape[d]) s = plan_.shape[d] == 1 ? 0 : strides[e];
        else if (sizes[e] != 1) return false;
      }
      if (s != x.strides[d]) return false;
    }
    return true;
  }

  ChainPlan plan_;
  ChainVariant v_;
  std::shared_ptr<LoadedModule> module_;
  int device_;
};

/// A generator of its own on `device` (the app's default generator stays untouched).
at::Generator device_generator(int device, uint64_t seed) {
#if defined(CUDAL1_TORCH_CUDA)
  at::Generator gen = at::cuda::detail::createCUDAGenerator(static_cast<c10::DeviceIndex>(device));
  gen.set_current_seed(seed);
  return gen;
#else
  (void)device;
  (void)seed;
  throw std::runtime_error("chain tuning needs a CUDA build of LibTorch");
#endif
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}
double quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(q * static_cast<double>(v.size() - 1))];
}

double eps_of(c10::ScalarType t) {
  switch (t) {
    case c10::ScalarType::Half: return 9.765625e-4;
    case c10::ScalarType::BFloat16: return 7.8125e-3;
    default: return 1.1920929e-7;
  }
}

/// Fresh inputs at the externals' exact sizes and strides (Note [Chain tuning]).
std::vector<at::Tensor> make_externals(const ChainPlan& plan, int device, int trial, at::Generator& gen) {
  static const double kScales[] = {1, 4, 0.01, 30, 1000};
  const double scale = kScales[trial % 5];
  std::vector<at::Tensor> out;
  for (const chains::External& s : plan.externals) {
    int64_t extent = 1;
    for (size_t d = 0; d < s.sizes.size(); ++d) extent += (s.sizes[d] - 1) * s.arg_strides[d];
    const auto opts = at::TensorOptions().dtype(at::kFloat).device(at::Device(at::kCUDA, static_cast<int8_t>(device)));
    at::Tensor base = at::randn({std::max<int64_t>(extent, 1)}, gen, opts).mul_(scale);
    if (s.positive) base.abs_();  // a running variance
    if (trial > 0 && extent > 8) {  // specials at a few places
      const float specials[] = {NAN, INFINITY, -INFINITY, 0.0f, -0.0f};
      for (int i = 0; i < 5; ++i) base[(trial * 7919 + i * 104729) % extent].fill_(specials[i]);
    }
    out.push_back(base.to(s.dtype).as_strided(s.sizes, s.arg_strides, 0));
  }
  return out;
}

std::vector<std::vector<at::Tensor>> make_outputs(const dispatcher::ChainRecord& c, int device, bool poison,
                                                  bool last_only) {
  std::vector<std::vector<at::Tensor>> outs(c.nodes.size());
  for (size_t k = 0; k < c.nodes.size(); ++k) {
    if (last_only && k + 1 != c.nodes.size()) continue;
    for (const auto& s : c.nodes[k].outputs) {
      if (last_only && !outs[k].empty()) {  // the app's view: the last node's first output only (a layer norm's
        outs[k].emplace_back();             // statistics are dropped)
        continue;
      }
      at::Tensor t = at::empty_strided(s.sizes, s.strides,
                                       at::TensorOptions().dtype(s.dtype).device(at::Device(at::kCUDA, static_cast<int8_t>(device))));
      if (poison) t.fill_(at::isFloatingType(s.dtype) ? NAN : 1.0);  // a cudnn batch norm's uint8 reserve too
      outs[k].push_back(t);
    }
  }
  return outs;
}

/// Note [Attention rewrite]: `got` against the exact value (plan.exact), within 2x the ATen chain's (`ref`) own
/// largest error + 2 ulps of the largest exact value, NaN where it is NaN; where the ATen chain overflowed
/// (non-finite where the exact value is finite), non-finite values where the exact value has them and every finite
/// one within its bounds.
bool close_to_exact(const ChainPlan& plan, const std::vector<at::Tensor>& ext, const at::Tensor& got,
                    const at::Tensor& ref, std::string* why) {
  const std::vector<at::Tensor> e = plan.exact(ext);
  const at::Tensor x = e.at(0), o = got.to(at::kDouble), r = ref.to(at::kDouble);
  const at::Tensor xf = at::isfinite(x), rf = at::isfinite(r), of = at::isfinite(o);
  const double eps = eps_of(ref.scalar_type());
  const double xmax = xf.any().item<bool>() ? x.masked_select(xf).abs().max().item<double>() : 0.0;
  // Non-finite exactly where the exact value is: NaN for NaN, an infinity of the same sign for an infinity.
  const at::Tensor nonfinite_ok = ~xf & ((at::isnan(x) & at::isnan(o)) | (at::isinf(x) & o.eq(x)));
  const bool overflowed = (xf & ~rf).any().item<bool>();
  at::Tensor ok;
  std::string how;
  if (!overflowed) {
    const at::Tensor both = xf & rf;
    const double aten_err = both.any().item<bool>() ? (r - x).abs().masked_select(both).max().item<double>() : 0.0;
    const double atol = 2 * aten_err + 2 * eps * xmax;
    ok = nonfinite_ok | (xf & of & ((o - x).abs() <= atol + 2 * eps * x.abs()));
    how = "within " + std::to_string(atol) + " of the exact value (ATen's largest error " + std::to_string(aten_err) + ")";
  } else {  // ATen's chain overflowed: only what is still defined
    const at::Tensor lo = e.at(1).expand_as(x), hi = e.at(2).expand_as(x);
    const at::Tensor slack = (hi - lo).abs() * eps + eps * xmax;
    ok = nonfinite_ok | (xf & of & (o >= lo - slack) & (o <= hi + slack));
    how = "within v's range (the ATen chain overflowed)";
  }
  if (ok.all().item<bool>()) return true;
  *why = std::to_string((~ok).sum().item<int64_t>()) + " elements not " + how;
  return false;
}

/// Compares every output the kernel stored with the reference, each within its dtype's tolerance times the
/// rounding steps behind it (the plan's depth); `why` names the first that differs.
bool close_enough(const ChainPlan& plan, const std::vector<at::Tensor>& ext,
                  const std::vector<std::vector<at::Tensor>>& got, const std::vector<std::vector<at::Tensor>>& ref,
                  std::string* why) {
  // The reference value of a reduction's input, where the chain has it (an external or a node's output).
  auto input_of = [&](const chains::Step& s) -> at::Tensor {
    const chains::Operand& a = s.args.at(0);
    if (a.kind == chains::Operand::kExternal) return ext.at(static_cast<size_t>(a.index));
    if (a.kind == chains::Operand::kStep)
      for (const chains::OutputSlot& o : plan.outputs)
        if (o.step == a.index) return ref.at(static_cast<size_t>(o.node)).at(static_cast<size_t>(o.out));
    return at::Tensor();
  };
  for (const chains::OutputSlot& slot : plan.outputs) {
    const size_t n = static_cast<size_t>(slot.node), i = static_cast<size_t>(slot.out);
    if (n >= got.size() || i >= got[n].size() || !got[n][i].defined()) continue;
    if (plan.exact && n + 1 == got.size() && i == 0) {  // Note [Attention rewrite]: against the exact value
      if (!close_to_exact(plan, ext, got[n][i], ref[n][i], why)) {
        *why = "output 0 of node " + std::to_string(n) + ": " + *why;
        return false;
      }
      continue;
    }
    const at::Tensor o = got[n][i].to(at::kDouble), r = ref[n][i].to(at::kDouble);
    const auto [rtol0, atol0] = tolerance(ref[n][i].scalar_type());
    const double steps = plan.steps[static_cast<size_t>(slot.step)].depth;
    const at::Tensor finite = at::isfinite(r);
    const double maxabs = finite.any().item<bool>() ? r.masked_select(finite).abs().max().item<double>() : 0.0;
    const double rtol = rtol0 * steps, atol = atol0 + steps * eps_of(ref[n][i].scalar_type()) * maxabs;
    at::Tensor ok = at::isclose(o, r, rtol, atol, /*equal_nan=*/true);
    const chains::Step& step = plan.steps[static_cast<size_t>(slot.step)];
    if (step.any_nonfinite) ok = ok | (~finite & ~at::isfinite(o));
    if (step.gemm_k > 0) {  // Note [Library chains]: a GEMM's order of accumulation, and its edge of overflow
      const double eps = eps_of(ref[n][i].scalar_type()), eps32 = eps_of(c10::ScalarType::Float);
      const double gemm_atol = atol + (static_cast<double>(step.gemm_k) * eps32 + 2 * eps) * maxabs;
      ok = ok | at::isclose(o, r, rtol, gemm_atol, /*equal_nan=*/true);
      const double edge = dtype_max(ref[n][i].scalar_type()) / 16;
      const at::Tensor inf_o = at::isinf(o), inf_r = at::isinf(r);
      ok = ok | (inf_r & ~inf_o & (o * at::sign(r) >= edge)) | (inf_o & finite & (r * at::sign(o) >= edge));
    }
    if (step.overflow_node >= 0 && static_cast<size_t>(step.overflow_node) < ref.size() &&
        !ref[static_cast<size_t>(step.overflow_node)].empty()) {
      // Note [Library chains]: where ATen's GEMM value overflowed, its activation is an artefact of that.
      const at::Tensor g = ref[static_cast<size_t>(step.overflow_node)][0].to(at::kDouble).reshape(o.sizes());
      const at::Tensor inf_g = at::isinf(g);
      ok = ok | (inf_g & (at::isnan(o) | (at::isinf(o) & (o * g > 0)) | (at::isfinite(o) & (o.abs() <= 1))));
    }
    if (step.op == chains::StepOp::kRowSum || step.op == chains::StepOp::kRowMean) {
      // A float sum in another order differs by up to ~log2(C) eps of the sum of |x| (not of the result, which
      // cancellation can make small): each row's bound, from the reference's own input.
      const at::Tensor in = input_of(step);
      if (in.defined()) {
        at::Tensor mag = in.to(at::kDouble).abs().sum({-1}, /*keepdim=*/true);
        if (step.op == chains::StepOp::kRowMean) mag = mag / static_cast<double>(plan.cols);
        const double k = 2.0 * (std::log2(static_cast<double>(plan.cols)) + 2.0) * eps_of(c10::ScalarType::Float);
        ok = ok | ((o - r).abs() <= mag * k + rtol * r.abs() + atol);  // mag broadcasts like the input
      }
    }
    if (!ok.all().item<bool>()) {
      const int64_t bad = (~ok).sum().item<int64_t>();
      *why = "output " + std::to_string(i) + " of node " + std::to_string(n) + ": " + std::to_string(bad) +
             " elements differ (rtol " + std::to_string(rtol) + ", atol " + std::to_string(atol) + ")";
      return false;
    }
  }
  return true;
}

/// `last_only`: a kernel that computes only the last output and leaves a region whose intermediate is wanted to
/// ATen (a library chain, Note [Library chains]; a pooled chain, Note [Pooled chains]): the first trial stores every
/// output, every later one (each with NaN/Inf injected) the last output only.
Status verify_variant(const dispatcher::ChainRecord& c, const ChainPlan& plan, dispatcher::ChainKernel& k,
                      int device, int trials, uint64_t seed, bool last_only = false) {
  at::Generator gen = device_generator(device, seed);
  // Note [Attention rewrite]: two more trials whose mask is causal (its masked scores, with the specials in every
  // operand): the general path (a mask seen once), then the causal path (Note [Causal attention]).
  const int extra = plan.causal_mask >= 0 ? 2 : 0;
  for (int t = 0; t <= trials + extra; ++t) {
    const bool only_last = last_only ? t > 0 : t >= trials;  // one more trial storing the other way
    std::vector<at::Tensor> ext = make_externals(plan, device, t, gen);
    if (t > trials) {
      at::Tensor& m = ext.at(static_cast<size_t>(plan.causal_mask));
      m = at::full(m.sizes(), -std::numeric_limits<double>::infinity(), m.options()).triu(1);
    }
    std::optional<chains::CausalMaskProbeScope> probe;
    if (t > trials + 1) probe.emplace();
    auto ref = make_outputs(c, device, /*poison=*/true, /*last_only=*/false);
    CUDAL1_RETURN_IF_ERROR(dispatcher::replay_chain(c, c.nodes.size(), ext, ref));
    auto got = make_outputs(c, device, /*poison=*/true, only_last);
    Status s = k.run(ext, got);
    if (s.code() == Code::kUnavailable) s = dispatcher::replay_chain(c, c.nodes.size(), ext, got);  // as a region
    if (!s.ok()) return Status(Code::kVerifyFailed, "trial " + std::to_string(t) + ": " + s.to_string());
    std::string why;
    if (!close_enough(plan, ext, got, ref, &why)) return Status(Code::kVerifyFailed, "trial " + std::to_string(t) + ": " + why);
  }
  return Status();
}

using chain_tuning::ChainTiming;

/// Times `k` against the ATen chain on externals `ext` (Note [Timing]).
Result<ChainTiming> time_kernel(const dispatcher::ChainRecord& c, const std::vector<at::Tensor>& ext,
                                dispatcher::ChainKernel& k, int device, int reps, uint64_t seed) {
  CUDAL1_ASSIGN_OR_RETURN(const DriverApi* api, driver());
  CUDAL1_ASSIGN_OR_RETURN(CUstream stream, dispatcher::current_stream(device));
  const auto none = std::vector<std::vector<at::Tensor>>(c.nodes.size());
  const auto last = make_outputs(c, device, /*poison=*/false, /*last_only=*/true);
  const at::Tensor flush = at::zeros({int64_t{64} << 20}, at::TensorOptions().dtype(at::kInt).device(
                                                                at::Device(at::kCUDA, static_cast<int8_t>(device))));
  CUevent ev[3];
  for (auto& e : ev) CUDAL1_CU_TRY(api->cuEventCreate(&e, CU_EVENT_DEFAULT));
  struct Destroy {
    const DriverApi* api;
    CUevent* ev;
    ~Destroy() {
      for (int i = 0; i < 3; ++i) api->cuEventDestroy(ev[i]);
    }
  } destroy{api, ev};
  auto once = [&](bool kernel, double* us, double* extra) -> Status {
    (void)flush.amax();  // L2 flush: reads 256 MB on the stream (Note [Timing])
    CUDAL1_CU_TRY(api->cuEventRecord(ev[0], stream));
    if (kernel) {
      CUDAL1_RETURN_IF_ERROR(k.run(ext, last));
    } else {
      CUDAL1_RETURN_IF_ERROR(dispatcher::replay_chain(c, c.nodes.size(), ext, none));
    }
    CUDAL1_CU_TRY(api->cuEventRecord(ev[1], stream));
    {  // catches work that left the stream; never while a capture runs (Note [Captures and context synchronisation])
      const dispatcher::SyncPermit permit;
      if (!permit.ok()) return Status(Code::kUnavailable, "a CUDA graph capture stayed in progress for 10 s");
      CUDAL1_CU_TRY(api->cuCtxSynchronize());
    }
    CUDAL1_CU_TRY(api->cuEventRecord(ev[2], stream));
    CUDAL1_CU_TRY(api->cuEventSynchronize(ev[2]));
    float a = 0, b = 0;
    CUDAL1_CU_TRY(api->cuEventElapsedTime(&a, ev[0], ev[1]));
    CUDAL1_CU_TRY(api->cuEventElapsedTime(&b, ev[1], ev[2]));
    *us = a * 1000.0;
    *extra = b * 1000.0;
    return Status();
  };
  double u = 0, x = 0;
  for (int i = 0; i < 3; ++i) {
    CUDAL1_RETURN_IF_ERROR(once(false, &u, &x));
    CUDAL1_RETURN_IF_ERROR(once(true, &u, &x));
  }
  std::mt19937_64 rng(seed);
  std::vector<double> ta, tk, ratio, xa, xk;
  for (int r = 0; r < reps; ++r) {
    double a = 0, b = 0, ax = 0, bx = 0;
    if (rng() & 1) {
      CUDAL1_RETURN_IF_ERROR(once(false, &a, &ax));
      CUDAL1_RETURN_IF_ERROR(once(true, &b, &bx));
    } else {
      CUDAL1_RETURN_IF_ERROR(once(true, &b, &bx));
      CUDAL1_RETURN_IF_ERROR(once(false, &a, &ax));
    }
    ta.push_back(a);
    tk.push_back(b);
    xa.push_back(ax);
    xk.push_back(bx);
    ratio.push_back(a / std::max(b, 1e-3));
  }
  if (check_escape(xk, xa).escaped) return Status(Code::kVerifyFailed, "chain kernel: work escaped the stream");
  return ChainTiming{median(ta), median(tk), median(ratio), quantile(ratio, 0.25)};
}

Result<ChainTiming> time_variant(const dispatcher::ChainRecord& c, const ChainPlan& plan, dispatcher::ChainKernel& k,
                                 int device, int reps, uint64_t seed) {
  at::Generator gen = device_generator(device, seed);
  return time_kernel(c, make_externals(plan, device, 0, gen), k, device, reps, seed);
}

std::string launch_json_of(const ChainPlan& plan, const ChainVariant& v) {
  nlohmann::json j{{"vec", v.vec}, {"block", v.block}, {"looped", v.looped}, {"group", v.group}, {"plan", plan.text}};
  if (v.pool_rows) j["pool_rows"] = v.pool_rows;
  return j.dump();
}

/// Records the winner's timing in `rep`; NotFound when it does not beat the ATen chain by the margin (its median
/// speedup at least `o.min_speedup` and its 25th percentile at least 1).
Status judge_timing(const ChainTiming& t, const ChainTuneOptions& o, ChainTuneReport& rep) {
  rep.aten_us = t.aten_us;
  rep.kernel_us = t.kernel_us;
  rep.speedup = t.speedup;
  rep.speedup_p25 = t.p25;
  if (t.speedup < o.min_speedup || t.p25 < 1.0) {
    rep.note = "no variant beat the ATen chain by the margin";
    return Status(Code::kNotFound, rep.note);
  }
  return Status();
}

/// `causal`: the chain carries the kernels of its causal path (Note [Causal attention]) as its code.
std::string library_launch_json(const chains::LibraryPlan& p, bool causal) {
  nlohmann::json j{{"library", p.call()}, {"plan", p.check.text}};
  if (causal) j["causal"] = true;
  return j.dump();
}

/// The causal path of an attention plan that can take one, compiled for `device` (its cubin in `*cubin`); null
/// for any other plan, or with a warning where it does not build (the mask then runs the general path).
std::shared_ptr<chains::CausalPath> causal_path(const chains::LibraryPlan& p, int device, std::string* cubin) {
  if (p.kind != chains::LibraryPlan::Kind::kAttention || !chains::causal_capable(p.attention)) return nullptr;
  Result<DeviceInfo> info = device_info(device);
  Result<CompiledKernel> k = info.ok() ? compile(KernelSource{chains::causal_source(p.dtype), "attention_specials"},
                                                 info.value().sm)
                                       : Result<CompiledKernel>(info.status());
  Result<std::shared_ptr<chains::CausalPath>> path =
      k.ok() ? chains::CausalPath::load(device, k.value().cubin) : Result<std::shared_ptr<chains::CausalPath>>(k.status());
  if (!path.ok()) {
    CUDAL1_LOG(kWarn, "causal attention's kernels did not build, its mask runs the general path: "
                          << path.status().to_string());
    return nullptr;
  }
  *cubin = k.value().cubin;
  return path.value();
}

/// tune_chain for a library chain (Note [Library chains]): its one kernel verified and timed like a variant.
Result<std::unique_ptr<dispatcher::ChainKernel>> tune_library(const dispatcher::ChainRecord& chain,
                                                              chains::LibraryPlan plan, const ChainTuneOptions& o,
                                                              ChainTuneReport& rep) {
  const int device = chain.nodes.front().rec->device_index;
  if (device < 0) return Status(Code::kUnsupported, rep.note = "chain: not on a CUDA device");
  dispatcher::BypassScope bypass;
  rep.plan = plan.check.text;
  rep.variants = 1;
  rep.kernel_name = cache::kLibraryKernel;
  const ChainPlan check = plan.check;
  std::string cubin;
  std::shared_ptr<chains::CausalPath> causal = causal_path(plan, device, &cubin);
  const std::string id = "library." + plan.call() + (causal ? ".causal" : ""),
                    launch = library_launch_json(plan, causal != nullptr);
  std::unique_ptr<dispatcher::ChainKernel> k = chains::library_chain_kernel(chain, std::move(plan), causal);
  if (causal) rep.kernel_name = "attention_specials";  // a record with code names an entry point of its cubin
  if (const Status v = verify_variant(chain, check, *k, device, o.verify_trials, o.seed, /*last_only=*/true); !v.ok()) {
    rep.note = "no variant verified (" + id + ": " + v.to_string() + ")";
    return Status(Code::kVerifyFailed, rep.note);
  }
  rep.verified = 1;
  rep.variant = id;
  if (o.reps <= 0) return k;
  CUDAL1_ASSIGN_OR_RETURN(ChainTiming t, time_variant(chain, check, *k, device, 2 * o.reps, o.seed + 7));
  rep.launch_json = launch;
  rep.cubin = cubin;
  CUDAL1_RETURN_IF_ERROR(judge_timing(t, o, rep));
  return k;
}

}  // namespace

namespace chain_tuning {

at::Generator generator(int device, uint64_t seed) { return device_generator(device, seed); }

std::vector<std::vector<at::Tensor>> outputs(const dispatcher::ChainRecord& c, int device, bool poison, bool last_only) {
  return make_outputs(c, device, poison, last_only);
}

Result<ChainTiming> time(const dispatcher::ChainRecord& c, const std::vector<at::Tensor>& ext,
                         dispatcher::ChainKernel& k, int device, int reps, uint64_t seed) {
  return time_kernel(c, ext, k, device, reps, seed);
}

Status judge(const ChainTiming& t, const ChainTuneOptions& o, ChainTuneReport& rep) {
  return judge_timing(t, o, rep);
}

}  // namespace chain_tuning

std::string chain_cache_key(const dispatcher::ChainRecord& chain) {
  std::string t = chain.text();
  std::string out = "chain ";
  for (char ch : t) out += ch == '\n' ? std::string(" | ") : std::string(1, ch);
  return out;
}

Result<std::unique_ptr<dispatcher::ChainKernel>> load_chain_kernel(const dispatcher::ChainRecord& chain,
                                                                   const std::string& launch_json,
                                                                   const std::string& cubin) {
  bool library = false;
  try {
    library = nlohmann::json::parse(launch_json).contains("library");
  } catch (const std::exception& e) {
    return Status(Code::kCorrupt, std::string("chain launch description: ") + e.what());
  }
  bool program = false, fused = false;
  std::string layers;
  try {
    const auto j = nlohmann::json::parse(launch_json);
    program = j.contains("program");
    fused = program && j.at("program").get<std::string>() == "fused";
    if (program && j.contains("layers")) layers = j.at("layers").get<std::string>();
  } catch (const std::exception& e) {
    return Status(Code::kCorrupt, std::string("chain launch description: ") + e.what());
  }
  if (program) {  // Note [Program chains]: no code, except a layer kernel's (Note [Skinny layers])
    CUDAL1_ASSIGN_OR_RETURN(chains::ProgramPlan plan, chains::plan_program(chain));
    chains::LayerVariant lv;
    if (!layers.empty()) {
      CUDAL1_ASSIGN_OR_RETURN(lv, chains::layer_variant_of(plan, layers));
    }
    if (launch_json != chain_tuning::program_launch_json(plan, fused, lv))
      return Status(Code::kMismatch, "the chain's program differs from the cached one's");
    if (cubin.empty() != (lv.warps == 0))
      return Status(Code::kCorrupt, lv.warps ? "a layer program without its code" : "a program chain with code");
    const int device = chain.nodes.front().rec->device_index;
    if (device < 0) return Status(Code::kUnsupported, "chain: not on a CUDA device");
    std::shared_ptr<LoadedModule> module;
    if (lv.warps) {
      CUDAL1_ASSIGN_OR_RETURN(module, LoadedModule::load(device, cubin, "layer_kernel"));
    }
    return chains::program_kernel(chain, std::move(plan), fused, lv, std::move(module));
  }
  if (library) {  // Note [Library chains]: no code but a causal path's (Note [Causal attention])
    CUDAL1_ASSIGN_OR_RETURN(chains::LibraryPlan plan, chains::plan_library_chain(chain));
    bool causal = false;
    try {
      causal = nlohmann::json::parse(launch_json).value("causal", false);
    } catch (const std::exception& e) {
      return Status(Code::kCorrupt, std::string("chain launch description: ") + e.what());
    }
    if (launch_json != library_launch_json(plan, causal))
      return Status(Code::kMismatch, "the chain's plan differs from the cached one's");
    if (cubin.empty() == causal) return Status(Code::kCorrupt, causal ? "a causal path without its code" : "a library chain with code");
    const int device = chain.nodes.front().rec->device_index;
    if (device < 0) return Status(Code::kUnsupported, "chain: not on a CUDA device");
    std::shared_ptr<chains::CausalPath> path;
    if (causal) {
      CUDAL1_ASSIGN_OR_RETURN(path, chains::CausalPath::load(device, cubin));
    }
    return chains::library_chain_kernel(chain, std::move(plan), std::move(path));
  }
  CUDAL1_ASSIGN_OR_RETURN(ChainPlan plan, chains::plan_chain(chain));
  ChainVariant v;
  std::string planned;
  try {
    const auto j = nlohmann::json::parse(launch_json);
    v.vec = j.at("vec").get<int>();
    v.block = j.at("block").get<int>();
    v.looped = j.at("looped").get<bool>();
    v.group = j.at("group").get<int>();
    v.pool_rows = j.value("pool_rows", 0);
    planned = j.at("plan").get<std::string>();
  } catch (const std::exception& e) {
    return Status(Code::kCorrupt, std::string("chain launch description: ") + e.what());
  }
  if (planned != plan.text) return Status(Code::kMismatch, "the chain's plan differs from the cached kernel's");
  bool known = false;
  for (const ChainVariant& c : chains::variants(plan)) known = known || c.id() == v.id();
  if (!known) return Status(Code::kMismatch, "variant " + v.id() + " is not one of the chain's");
  const int device = chain.nodes.front().rec->device_index;
  if (device < 0) return Status(Code::kUnsupported, "chain: not on a CUDA device");
  CUDAL1_ASSIGN_OR_RETURN(std::shared_ptr<LoadedModule> module, LoadedModule::load(device, cubin, "chain_kernel"));
  return std::unique_ptr<dispatcher::ChainKernel>(new GeneratedChainKernel(std::move(plan), v, module, device));
}

bool chain_plans(const dispatcher::ChainRecord& c) {
  return chains::plan_chain(c).ok() || chains::plan_library_chain(c).ok() || chains::plan_program(c).ok();
}

size_t fusable_suffix(const dispatcher::ChainRecord& chain, size_t from) {
  if (chain_plans(chain)) return 0;
  for (size_t s = std::max<size_t>(from, 1); s + 2 <= chain.nodes.size(); ++s) {
    int externals = 0;
    std::vector<dispatcher::ChainNode> nodes = dispatcher::suffix_nodes(chain, s, &externals);
    const dispatcher::ChainRecord suffix(0, {}, std::move(nodes), externals);
    if (chain_plans(suffix)) return s;
  }
  return 0;
}

std::vector<std::pair<size_t, size_t>> fusable_segments(const dispatcher::ChainRecord& chain) {
  std::vector<std::pair<size_t, size_t>> out;
  const size_t n = chain.nodes.size();
  if (chain_plans(chain)) return out;
  if (n > static_cast<size_t>(dispatcher::kMaxChainNodes)) {  // a program: its longest prefix and suffix
    const size_t m = fusable_prefix(chain);
    const size_t from = fusable_suffix(chain, m ? m : 1);
    if (m) out.emplace_back(0, m);
    if (from) out.emplace_back(from, n);
    return out;
  }
  for (size_t i = 0; i + 2 <= n;) {
    size_t end = 0;
    for (size_t j = n; j >= i + 2 && !end; --j) {
      int externals = 0;
      std::vector<dispatcher::ChainNode> nodes = dispatcher::segment_nodes(chain, i, j, &externals);
      const dispatcher::ChainRecord segment(0, {}, std::move(nodes), externals);
      if (chain_plans(segment)) end = j;
    }
    if (end) out.emplace_back(i, end);
    i = end ? end : i + 1;
  }
  return out;
}

size_t fusable_prefix(const dispatcher::ChainRecord& chain) {
  if (chain_plans(chain)) return 0;
  for (size_t m = chain.nodes.size(); m-- > 2;) {
    std::vector<dispatcher::ChainNode> nodes(chain.nodes.begin(), chain.nodes.begin() + static_cast<std::ptrdiff_t>(m));
    const int externals = dispatcher::externals_read(nodes);
    const dispatcher::ChainRecord prefix(0, {}, std::move(nodes), externals);
    if (chain_plans(prefix)) return m;
  }
  return 0;
}

Result<std::vector<std::pair<std::string, std::string>>> chain_sources(const dispatcher::ChainRecord& chain) {
  auto planned = chains::plan_chain(chain);
  if (!planned.ok()) {
    if (auto program = chains::plan_program(chain); program.ok()) {
      if (program->layers == 0)
        return Status(Code::kUnsupported, "a program chain (" + program.value().text +
                                              "): ATen and cuDNN calls, nothing is generated or compiled");
      std::vector<std::pair<std::string, std::string>> out;  // Note [Skinny layers]: its layer kernel
      for (const chains::LayerVariant& v : chains::layer_variants(program.value()))
        out.emplace_back("program.fused." + v.id(), chains::layer_source(program.value(), v));
      return out;
    }
    auto library = chains::plan_library_chain(chain);
    if (!library.ok()) return planned.status();
    return Status(Code::kUnsupported, "a library chain (" + library.value().check.text +
                                          "): one ATen call, nothing is generated or compiled");
  }
  const ChainPlan& plan = planned.value();
  std::vector<std::pair<std::string, std::string>> out;
  for (const ChainVariant& v : chains::variants(plan)) out.emplace_back(v.id(), chains::chain_source(plan, v));
  return out;
}

Result<std::unique_ptr<dispatcher::ChainKernel>> tune_chain(const dispatcher::ChainRecord& chain,
                                                            const ChainTuneOptions& o, ChainTuneReport* report) {
  ChainTuneReport local;
  ChainTuneReport& rep = report ? *report : local;
  rep = ChainTuneReport();
  auto planned = chains::plan_chain(chain);
  if (!planned.ok()) {
    auto library = chains::plan_library_chain(chain);
    if (auto program = chains::plan_program(chain); program.ok()) {
      try {
        auto k = chain_tuning::tune_program(chain, std::move(program).value(), o, rep);
        if (k.ok() || !library.ok()) return k;  // a layer program that lost: the library chain next
      } catch (const std::exception& e) {
        rep.note = std::string("program tuning raised: ") + e.what();
        return Status(Code::kInternal, rep.note);
      }
    }
    if (library.ok()) {
      try {
        return tune_library(chain, std::move(library).value(), o, rep);
      } catch (const std::exception& e) {
        rep.note = std::string("chain tuning raised: ") + e.what();
        return Status(Code::kInternal, rep.note);
      }
    }
    rep.note = planned.status().message();
    return planned.status();
  }
  const ChainPlan& plan = planned.value();
  rep.plan = plan.text;
  const int device = chain.nodes.front().rec->device_index;
  if (device < 0) return Status(Code::kUnsupported, rep.note = "chain: not on a CUDA device");
  try {
    dispatcher::BypassScope bypass;
    CUDAL1_ASSIGN_OR_RETURN(DeviceInfo info, device_info(device));
    std::unique_ptr<dispatcher::ChainKernel> best;
    ChainTiming best_t;
    ChainVariant best_v;
    std::vector<ChainVariant> vs = chains::variants(plan);
    if (o.max_variants > 0 && vs.size() > static_cast<size_t>(o.max_variants)) {  // a seeded sample
      std::mt19937_64 pick(o.seed);
      std::shuffle(vs.begin(), vs.end(), pick);
      vs.resize(static_cast<size_t>(o.max_variants));
    }
    rep.variants = static_cast<int>(vs.size());
    std::string last_failure;
    std::vector<std::string> cubins(vs.size());
    const std::vector<VariantBuild> builds = compile_concurrently(
        vs.size(), [&](size_t i) { return Result<KernelSource>(KernelSource{chains::chain_source(plan, vs[i]), "chain_kernel"}); },
        info.sm, std::max<size_t>(1, std::thread::hardware_concurrency()));
    for (size_t i = 0; i < vs.size(); ++i) {
      const Result<CompiledKernel>& compiled = builds[i].kernel;
      if (!compiled.ok()) {
        last_failure = compiled.status().to_string();
        continue;
      }
      auto module = LoadedModule::load(device, compiled.value().cubin, "chain_kernel");
      if (!module.ok()) {
        last_failure = module.status().to_string();
        continue;
      }
      auto k = std::make_unique<GeneratedChainKernel>(plan, vs[i], module.value(), device);
      cubins[i] = compiled.value().cubin;
      // Note [Pooled chains]: the kernel declines a region that keeps more than the pooled value, so every output
      // is stored in the first trial only (as for a library chain).
      const Status v = verify_variant(chain, plan, *k, device, o.verify_trials, o.seed + i, plan.pool.active());
      if (!v.ok()) {
        last_failure = vs[i].id() + ": " + v.to_string();
        continue;
      }
      ++rep.verified;
      if (o.reps <= 0) {  // correctness only: every variant verified, none timed
        if (!best) best = std::move(k), best_v = vs[i];
        continue;
      }
      auto t = time_variant(chain, plan, *k, device, o.reps, o.seed + 1000 + i);
      if (!t.ok()) {
        last_failure = vs[i].id() + ": " + t.status().to_string();
        continue;
      }
      if (!best || t.value().kernel_us < best_t.kernel_us) {
        best = std::move(k);
        best_t = t.value();
        best_v = vs[i];
        rep.cubin = cubins[i];
      }
    }
    if (!best) {
      rep.note = "no variant verified (" + last_failure + ")";
      return Status(Code::kVerifyFailed, rep.note);
    }
    if (o.reps <= 0) {
      rep.variant = best_v.id();
      return best;
    }
    auto again = time_variant(chain, plan, *best, device, 2 * o.reps, o.seed + 7);  // the winner, timed once more
    if (again.ok()) best_t = again.value();
    rep.variant = best_v.id();
    rep.launch_json = launch_json_of(plan, best_v);
    CUDAL1_RETURN_IF_ERROR(judge_timing(best_t, o, rep));
    return best;
  } catch (const std::exception& e) {
    rep.note = std::string("chain tuning raised: ") + e.what();
    return Status(Code::kInternal, rep.note);
  }
}

}  // namespace cudal1::optimizer
