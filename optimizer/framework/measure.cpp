/// @brief Verification and timing against ATen (Note [Verification], Note [Timing] in measure.h). Needs
/// torch's CUDA side; CPU-only builds report Unavailable.
#include "cudal1/optimizer/measure.h"

#include <algorithm>
#include <limits>
#include <random>

#include "cudal1/core/config.h"
#include "cudal1/core/stats.h"
#include "cudal1/core/cuda_driver.h"
#include "cudal1/dispatcher/capture_gate.h"
#include "cudal1/dispatcher/cuda_glue.h"
#include "cudal1/dispatcher/hook.h"

#if defined(CUDAL1_TORCH_CUDA)
#include <ATen/ATen.h>
#include <ATen/cuda/CUDAGeneratorImpl.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace cudal1::optimizer {

std::pair<double, double> tolerance(c10::ScalarType dtype) {
  if (c10::isIntegralType(dtype, /*includeBool=*/true)) return {0.0, 0.0};  // indices, counts: exact
  switch (dtype) {
    case c10::ScalarType::Half: return {2e-3, 1e-5};
    case c10::ScalarType::BFloat16: return {1.6e-2, 1e-5};
    case c10::ScalarType::Double: return {1e-12, 1e-14};
    default: return {1e-5, 1e-6};
  }
}

namespace {

double quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double pos = q * static_cast<double>(v.size() - 1);
  const size_t lo = static_cast<size_t>(pos);
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (pos - static_cast<double>(lo)) * (v[hi] - v[lo]);
}

}  // namespace

EscapeCheck check_escape(const std::vector<double>& kernel_extra_us, const std::vector<double>& aten_extra_us) {
  EscapeCheck c;
  const double base = median(aten_extra_us);
  c.escaped_us = quantile(kernel_extra_us, 0.25) - base;
  c.escaped = c.escaped_us > kEscapeSlackUs + base;
  return c;
}

#if defined(CUDAL1_TORCH_CUDA)
namespace {

constexpr int64_t kGuard = 256;  // elements of guard before and after each candidate output

/// Tensor options of `dtype` on CUDA device `device`.
at::TensorOptions on_device(c10::ScalarType dtype, int device) {
  return at::TensorOptions().dtype(dtype).device(at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(device)));
}

/// Inputs for one call: tensor arguments as views of fresh random storage, other arguments as recorded.
struct CallArgs {
  std::vector<c10::IValue> values;
};

int64_t storage_extent(const dispatcher::TensorSpec& t) {
  int64_t e = t.storage_offset + 1;
  for (size_t d = 0; d < t.sizes.size(); ++d) {
    if (t.sizes[d] == 0) return t.storage_offset;
    e += (t.sizes[d] - 1) * t.strides[d];
  }
  return e;
}

/// Whether argument `i` of `op` has a non-negative domain in ATen's contract (a running variance): drawn as
/// |x|, else about half of batch norm's channels would be NaN on both sides and compare nothing.
bool nonnegative_domain(const c10::OperatorHandle& op, size_t i) {
  const auto& args = op.schema().arguments();
  return i < args.size() && args[i].name() == "running_var";
}

/// Fresh random inputs. `trial` selects the scale and whether specials (NaN, +-Inf, +-0) are injected.
CallArgs make_inputs(const Problem& p, const c10::OperatorHandle& op, int device, int trial, at::Generator& gen) {
  static const double kScales[] = {1.0, 4.0, 0.01, 30.0, 1000.0, 0.5};
  const double scale = kScales[trial % 6];
  CallArgs a;
  for (size_t i = 0; i < p.args.size(); ++i) {
    const auto& arg = p.args[i];
    if (!arg.is_tensor) {
      a.values.push_back(arg.value);
      continue;
    }
    if (!arg.tensor.defined) {
      a.values.emplace_back(at::Tensor());
      continue;
    }
    const auto& t = arg.tensor;
    const auto opts = on_device(t.dtype, device);
    at::Tensor base = at::empty({std::max<int64_t>(storage_extent(t), 1)}, opts);
    if (c10::isIntegralType(t.dtype, /*includeBool=*/true)) {  // bool masks, wrapped ints: no normal_ or NaN
      base.random_(t.dtype == c10::ScalarType::Bool ? 0 : -100, t.dtype == c10::ScalarType::Bool ? 2 : 100, gen);
      a.values.emplace_back(base.as_strided(t.sizes, t.strides, t.storage_offset));
      continue;
    }
    base.normal_(0.0, scale, gen);
    if (trial % 3 != 0) {  // most trials: specials at random places
      at::Tensor u = at::empty({base.numel()}, opts.dtype(at::kFloat)).uniform_(0.0, 1.0, gen);
      base.masked_fill_(u < 0.002, std::numeric_limits<double>::quiet_NaN());
      base.masked_fill_((u >= 0.002) & (u < 0.004), std::numeric_limits<double>::infinity());
      base.masked_fill_((u >= 0.004) & (u < 0.006), -std::numeric_limits<double>::infinity());
      base.masked_fill_((u >= 0.006) & (u < 0.008), 0.0);
      base.masked_fill_((u >= 0.008) & (u < 0.010), -0.0);
    }
    if (nonnegative_domain(op, i)) base.abs_();
    a.values.emplace_back(base.as_strided(t.sizes, t.strides, t.storage_offset));
  }
  return a;
}

std::vector<at::Tensor> run_aten(const c10::OperatorHandle& op, const CallArgs& a) {
  torch::jit::Stack stack(a.values.begin(), a.values.end());
  op.callBoxed(&stack);
  std::vector<at::Tensor> outs;
  for (auto& v : stack)
    if (v.isTensor()) outs.push_back(v.toTensor());
  return outs;
}

double poison_value(c10::ScalarType t, int trial) {
  if (t == c10::ScalarType::Bool) return trial % 2;
  if (t == c10::ScalarType::Byte) return trial % 2 ? 0xa5 : 0x5a;  // representable 8-bit sentinels
  if (t == c10::ScalarType::Char) return trial % 2 ? -91 : 90;
  if (c10::isIntegralType(t, /*includeBool=*/false)) return trial % 2 ? -1.0 : 1234567.0;  // no NaN in ints
  if (trial % 2 == 0) return std::numeric_limits<double>::quiet_NaN();
  return t == c10::ScalarType::Half ? 60000.0 : 3.0e38;  // finite sentinels
}

/// An output framed by guards: buffer = [guard | storage | guard].
struct GuardedOutput {
  at::Tensor buffer, view, guard_bits;
  int64_t storage = 0;
};

GuardedOutput make_output(const OutputSpec& s, int device, int trial) {
  GuardedOutput g;
  int64_t extent = 1;
  for (size_t d = 0; d < s.sizes.size(); ++d) extent += (s.sizes[d] - 1) * s.strides[d];
  g.storage = extent;
  const auto opts = on_device(s.dtype, device);
  g.buffer = at::empty({extent + 2 * kGuard}, opts);
  g.buffer.fill_(poison_value(s.dtype, trial));
  g.view = g.buffer.as_strided(s.sizes, s.strides, kGuard);
  return g;
}

at::Tensor bits(const at::Tensor& t) {
  switch (t.element_size()) {
    case 1: return t.view(at::kByte);
    case 2: return t.view(at::kShort);
    case 4: return t.view(at::kInt);
    default: return t.view(at::kLong);
  }
}

bool guards_intact(const GuardedOutput& g, const OutputSpec& s, int trial) {
  at::Tensor pattern = at::empty({kGuard}, g.buffer.options()).fill_(poison_value(s.dtype, trial));
  return at::equal(bits(g.buffer.narrow(0, 0, kGuard)), bits(pattern)) &&
         at::equal(bits(g.buffer.narrow(0, kGuard + g.storage, kGuard)), bits(pattern));
}

double eps(c10::ScalarType t) {
  switch (t) {
    case c10::ScalarType::Half: return 9.765625e-4;
    case c10::ScalarType::BFloat16: return 7.8125e-3;
    case c10::ScalarType::Double: return 2.220446049250313e-16;
    default: return 1.1920928955078125e-7;
  }
}



/// The largest finite magnitude of `t` (0 when it has none).
double max_finite(const at::Tensor& t) {
  if (!t.defined() || t.numel() == 0) return 0;
  const at::Tensor d = t.to(at::kDouble);
  return at::where(at::isfinite(d), d.abs(), at::zeros_like(d)).max().item<double>();
}

/// The largest finite magnitude among the call's tensor arguments.
double max_finite_input(const CallArgs& a) {
  double m = 0;
  for (const auto& v : a.values)
    if (v.isTensor()) m = std::max(m, max_finite(v.toTensor()));
  return m;
}

/// Which elements of `o` (the kernel's output in double) match `r` (a reference of dtype `t`, in double).
at::Tensor close_mask(const at::Tensor& o, const at::Tensor& r, c10::ScalarType t, double rtol, double atol,
                      const OutputTolerance& tol) {
  at::Tensor close = at::isclose(o, r, rtol, atol, /*equal_nan=*/true);
  if (tol.nonfinite_equivalent) close = close | (~at::isfinite(o) & ~at::isfinite(r));
  if (tol.overflow_equivalent) {
    const double edge = dtype_max(t) * (tol.overflow_edge > 0 ? tol.overflow_edge : 1.0 - rtol);
    // A finite value at the edge against an infinity of its sign (two finite values are held to rtol above).
    close = close | ((o.abs() >= edge) & (r.abs() >= edge) & (at::sign(o) == at::sign(r)) &
                     (at::isinf(o) | at::isinf(r)));
  }
  return close;
}

/// Compares `out` with ATen's `ref`; "" when they match, else what differs. `truth` (optional, same dtype as
/// `ref`): the call computed in double and rounded to the output's dtype; an element that differs from ATen's
/// but matches it is accepted (OutputTolerance::arbitrate_in_double).
std::string compare(const at::Tensor& out, const at::Tensor& ref, double extra_atol, const OutputTolerance& tol,
                    double* max_abs, const at::Tensor& truth = at::Tensor()) {
  if (out.scalar_type() != ref.scalar_type())
    return std::string("dtype ") + c10::toString(out.scalar_type()) + " vs ATen " + c10::toString(ref.scalar_type());
  if (out.sizes() != ref.sizes()) return "sizes differ from ATen's";
  if (out.numel() == 0) return "";
  const auto [rtol, base_atol] = tolerance(ref.scalar_type());
  const double atol = base_atol + extra_atol;
  const at::Tensor o = out.to(at::kDouble), r = ref.to(at::kDouble);
  // Integer outputs (indices) must be identical; floating ones close.
  const bool exact = c10::isIntegralType(ref.scalar_type(), /*includeBool=*/true);
  at::Tensor close = exact ? at::eq(out, ref) : close_mask(o, r, ref.scalar_type(), rtol, atol, tol);
  if (!exact && truth.defined() && !close.all().item<bool>())
    close = close | close_mask(o, truth.to(at::kDouble), ref.scalar_type(), rtol, atol, tol);
  const bool finite_any = at::isfinite(r).any().item<bool>();
  if (finite_any) {
    const at::Tensor both = at::isfinite(o) & at::isfinite(r);
    const double m = at::where(both, (o - r).abs(), at::zeros_like(o)).max().item<double>();
    *max_abs = std::max(*max_abs, m);
  }
  if (!close.all().item<bool>()) {
    const int64_t bad = (~close).sum().item<int64_t>();
    const int64_t first = (~close).flatten().nonzero().flatten()[0].item<int64_t>();
    return std::to_string(bad) + " of " + std::to_string(out.numel()) + " elements differ (first at flat index " +
           std::to_string(first) + ": got " + std::to_string(o.flatten()[first].item<double>()) + ", ATen " +
           std::to_string(r.flatten()[first].item<double>()) +
           (truth.defined() ? ", in double " + std::to_string(truth.to(at::kDouble).flatten()[first].item<double>())
                            : std::string()) +
           ")";
  }
  return "";
}

/// The call computed by ATen with every floating tensor argument in double, each output rounded back to
/// `like`'s dtype (OutputTolerance::arbitrate_in_double).
std::vector<at::Tensor> run_aten_in_double(const c10::OperatorHandle& op, const CallArgs& a,
                                           const std::vector<at::Tensor>& like) {
  CallArgs d;
  for (const auto& v : a.values) {
    if (v.isTensor() && v.toTensor().defined() && at::isFloatingType(v.toTensor().scalar_type()))
      d.values.emplace_back(v.toTensor().to(at::kDouble));
    else
      d.values.push_back(v);
  }
  std::vector<at::Tensor> outs = run_aten(op, d);
  for (size_t i = 0; i < outs.size() && i < like.size(); ++i) outs[i] = outs[i].to(like[i].scalar_type());
  return outs;
}

Status check_layouts(const std::vector<at::Tensor>& ref, const std::vector<OutputSpec>& specs) {
  if (ref.size() != specs.size()) return Status(Code::kMismatch, "ATen returns another number of outputs");
  for (size_t i = 0; i < ref.size(); ++i)
    if (ref[i].scalar_type() != specs[i].dtype || ref[i].sizes() != c10::IntArrayRef(specs[i].sizes) ||
        ref[i].strides() != c10::IntArrayRef(specs[i].strides))
      return Status(Code::kMismatch, "ATen's output layout differs from the planned one");
  return Status();
}

/// Three events around one run; see Note [Timing].
struct EventTriple {
  CUevent e[3] = {nullptr, nullptr, nullptr};
  const DriverApi* api = nullptr;
  explicit EventTriple(const DriverApi* a) : api(a) {
    for (auto& x : e) api->cuEventCreate(&x, CU_EVENT_DEFAULT);
  }
  ~EventTriple() {
    for (auto& x : e)
      if (x) api->cuEventDestroy(x);
  }
  EventTriple(const EventTriple&) = delete;
  EventTriple& operator=(const EventTriple&) = delete;
};

/// 256 MB touched before each timed repetition, so that no input is still in the 50 MB L2 (cold caches, as
/// a model's activations arrive). Read (the default, Note [Timing]): L2 ends holding clean lines of the
/// buffer, and the lines the last repetition left dirty are written back here, before the start event. Write (a
/// memset, as Triton's do_bench and nvbench flush): L2 ends dirty, and the timed work pays for writing it back.
struct L2Flush {
  static constexpr size_t kBytes = size_t{256} << 20;
  at::Tensor buffer;
  L2FlushKind kind;
  explicit L2Flush(int device)
      : buffer(at::zeros({static_cast<int64_t>(kBytes / 4)}, on_device(at::kInt, device))),
        kind(config().l2_flush) {}
  Status issue(const DriverApi* api, CUstream stream) const {
    if (kind == L2FlushKind::kWrite) {
      CUDAL1_CU_TRY(
          api->cuMemsetD32Async(reinterpret_cast<CUdeviceptr>(buffer.data_ptr()), 0x5a5a5a5a, kBytes / 4, stream));
    } else {
      (void)buffer.amax();  // reads every byte on the current stream (the caller's `stream`); no host sync
    }
    return Status();
  }
};

}  // namespace

Status verify(const Problem& p, const c10::OperatorHandle& op, BoundKernel& kernel, int device, int trials,
              uint64_t seed, VerifyReport* report) {
  try {
    dispatcher::BypassScope bypass;
    dispatcher::ContextScope ctx(device);
    CUDAL1_RETURN_IF_ERROR(ctx.status());
    at::Generator gen = at::cuda::detail::createCUDAGenerator(static_cast<c10::DeviceIndex>(device));
    gen.set_current_seed(seed);
    const CUstream stream = c10::cuda::getCurrentCUDAStream(static_cast<c10::DeviceIndex>(device)).stream();
    VerifyReport local;
    for (int trial = 0; trial < trials; ++trial) {
      CallArgs args = make_inputs(p, op, device, trial, gen);
      const std::vector<at::Tensor> ref = run_aten(op, args);
      CUDAL1_RETURN_IF_ERROR(check_layouts(ref, kernel.outputs()));
      std::vector<GuardedOutput> outs;
      std::vector<at::Tensor> views;
      for (const auto& s : kernel.outputs()) {
        outs.push_back(make_output(s, device, trial));
        views.push_back(outs.back().view);
      }
      const Status st = kernel.launch(args.values.data(), args.values.size(), views.data(), stream);
      if (!st.ok()) return Status(st.code() == Code::kUnsupported ? Code::kUnsupported : Code::kVerifyFailed,
                                  "trial " + std::to_string(trial) + ": launch: " + st.to_string());
      auto api = driver();
      if (!api.ok()) return api.status();
      CUDAL1_CU_TRY(api.value()->cuStreamSynchronize(stream));
      const double max_in = max_finite_input(args);
      const double extra_atol = kernel.input_scaled_atol() * eps(ref.front().scalar_type()) * max_in;
      std::vector<at::Tensor> truth;  // made on demand (OutputTolerance::arbitrate_in_double)
      for (size_t i = 0; i < outs.size(); ++i) {
        const OutputTolerance tol = kernel.output_tolerance(i);
        const double eps32 = eps(c10::ScalarType::Float);
        const double atol_i = extra_atol + tol.input_scaled * eps32 * max_in +
                              (tol.output_scaled > 0 ? tol.output_scaled * eps32 * max_finite(ref[i]) : 0.0);
        std::string diff = compare(outs[i].view, ref[i], atol_i, tol, &local.max_abs_error);
        if (!diff.empty() && tol.arbitrate_in_double) {
          if (truth.empty()) truth = run_aten_in_double(op, args, ref);
          if (i < truth.size()) diff = compare(outs[i].view, ref[i], atol_i, tol, &local.max_abs_error, truth[i]);
        }
        if (!diff.empty())
          return Status(Code::kVerifyFailed,
                        "trial " + std::to_string(trial) + ", output " + std::to_string(i) + ": " + diff);
        if (!guards_intact(outs[i], kernel.outputs()[i], trial))
          return Status(Code::kVerifyFailed, "trial " + std::to_string(trial) + ": wrote outside its output");
      }
      ++local.trials_passed;
    }
    if (report) *report = local;
    return Status();
  } catch (const std::exception& e) {
    return Status(Code::kVerifyFailed, std::string("verification raised: ") + e.what());
  }
}

Result<Timing> time_against_aten(const Problem& p, const c10::OperatorHandle& op, BoundKernel& kernel, int device,
                                 int reps, uint64_t seed) {
  try {
    dispatcher::BypassScope bypass;
    dispatcher::ContextScope ctx(device);
    CUDAL1_RETURN_IF_ERROR(ctx.status());
    CUDAL1_ASSIGN_OR_RETURN(const DriverApi* api, driver());
    at::Generator gen = at::cuda::detail::createCUDAGenerator(static_cast<c10::DeviceIndex>(device));
    gen.set_current_seed(seed);
    const CUstream stream = c10::cuda::getCurrentCUDAStream(static_cast<c10::DeviceIndex>(device)).stream();
    CallArgs args = make_inputs(p, op, device, /*trial=*/0, gen);
    std::vector<at::Tensor> outs;
    for (const auto& s : kernel.outputs())
      outs.push_back(at::empty_strided(s.sizes, s.strides, on_device(s.dtype, device)));
    const L2Flush flush(device);

    EventTriple ev(api);
    auto run_once = [&](bool candidate, double* fast_us, double* extra_us) -> Status {
      CUDAL1_RETURN_IF_ERROR(flush.issue(api, stream));
      CUDAL1_CU_TRY(api->cuEventRecord(ev.e[0], stream));
      if (candidate) {
        CUDAL1_RETURN_IF_ERROR(kernel.launch(args.values.data(), args.values.size(), outs.data(), stream));
      } else {
        run_aten(op, args);
      }
      CUDAL1_CU_TRY(api->cuEventRecord(ev.e[1], stream));
      {  // catches work that left the stream; never while a capture runs (Note [Captures and context synchronisation])
        const dispatcher::SyncPermit permit;
        if (!permit.ok()) return Status(Code::kUnavailable, "a CUDA graph capture stayed in progress for 10 s");
        CUDAL1_CU_TRY(api->cuCtxSynchronize());
      }
      CUDAL1_CU_TRY(api->cuEventRecord(ev.e[2], stream));
      CUDAL1_CU_TRY(api->cuEventSynchronize(ev.e[2]));
      float a = 0, b = 0;
      CUDAL1_CU_TRY(api->cuEventElapsedTime(&a, ev.e[0], ev.e[1]));
      CUDAL1_CU_TRY(api->cuEventElapsedTime(&b, ev.e[1], ev.e[2]));
      *fast_us = a * 1000.0;
      *extra_us = b * 1000.0;
      return Status();
    };
    // Warm-up: module and ATen kernels loaded, allocator primed.
    double f = 0, x = 0;
    for (int i = 0; i < 3; ++i) {
      CUDAL1_RETURN_IF_ERROR(run_once(false, &f, &x));
      CUDAL1_RETURN_IF_ERROR(run_once(true, &f, &x));
    }
    // One round of `reps` interleaved repetitions; its escape check is left to the caller.
    auto round = [&](uint64_t round_seed, Timing* t, EscapeCheck* esc) -> Status {
      std::mt19937_64 rng(round_seed);
      std::vector<double> ta, tk, ratio, xa, xk;
      for (int r = 0; r < reps; ++r) {
        double a_us = 0, k_us = 0, a_x = 0, k_x = 0;
        if (rng() & 1) {
          CUDAL1_RETURN_IF_ERROR(run_once(false, &a_us, &a_x));
          CUDAL1_RETURN_IF_ERROR(run_once(true, &k_us, &k_x));
        } else {
          CUDAL1_RETURN_IF_ERROR(run_once(true, &k_us, &k_x));
          CUDAL1_RETURN_IF_ERROR(run_once(false, &a_us, &a_x));
        }
        ta.push_back(a_us);
        tk.push_back(k_us);
        xa.push_back(a_x);
        xk.push_back(k_x);
        ratio.push_back(a_us / std::max(k_us, 1e-3));
      }
      t->reps = reps;
      t->aten_us = median(ta);
      t->kernel_us = median(tk);
      t->speedup = median(ratio);
      t->speedup_p25 = quantile(ratio, 0.25);
      *esc = check_escape(xk, xa);
      t->escaped_us = esc->escaped_us;
      return Status();
    };
    Timing t;
    EscapeCheck esc;
    CUDAL1_RETURN_IF_ERROR(round(seed, &t, &esc));
    // Note [Timing]: a second round before rejecting; other work on the device comes and goes, escaped work
    // shows in every round.
    if (esc.escaped) CUDAL1_RETURN_IF_ERROR(round(seed ^ 0x9e3779b97f4a7c15ull, &t, &esc));
    if (esc.escaped)
      return Status(Code::kVerifyFailed, "work escaped the stream: " + std::to_string(t.escaped_us) +
                                             " us after the end event, in two rounds");
    return t;
  } catch (const std::exception& e) {
    return Status(Code::kInternal, std::string("timing raised: ") + e.what());
  }
}

Result<double> time_device_copy(int64_t bytes, int device, int reps) {
  if (bytes < 2 || reps < 1) return Status(Code::kInvalidArgument, "time_device_copy: bytes >= 2 and reps >= 1");
  try {
    dispatcher::BypassScope bypass;
    dispatcher::ContextScope ctx(device);
    CUDAL1_RETURN_IF_ERROR(ctx.status());
    CUDAL1_ASSIGN_OR_RETURN(const DriverApi* api, driver());
    const CUstream stream = c10::cuda::getCurrentCUDAStream(static_cast<c10::DeviceIndex>(device)).stream();
    const auto opts = on_device(at::kByte, device);
    at::Tensor src = at::ones({bytes / 2}, opts), dst = at::empty({bytes / 2}, opts);
    const L2Flush flush(device);
    EventTriple ev(api);
    std::vector<double> ts;
    for (int r = -3; r < reps; ++r) {  // three warm-up copies
      CUDAL1_RETURN_IF_ERROR(flush.issue(api, stream));
      CUDAL1_CU_TRY(api->cuEventRecord(ev.e[0], stream));
      dst.copy_(src);
      CUDAL1_CU_TRY(api->cuEventRecord(ev.e[1], stream));
      CUDAL1_CU_TRY(api->cuEventSynchronize(ev.e[1]));
      float ms = 0;
      CUDAL1_CU_TRY(api->cuEventElapsedTime(&ms, ev.e[0], ev.e[1]));
      if (r >= 0) ts.push_back(ms * 1000.0);
    }
    return median(ts);
  } catch (const std::exception& e) {
    return Status(Code::kInternal, std::string("copy timing raised: ") + e.what());
  }
}

#else  // CPU-only LibTorch

Status verify(const Problem&, const c10::OperatorHandle&, BoundKernel&, int, int, uint64_t, VerifyReport*) {
  return Status(Code::kUnavailable, "verification needs a CUDA build of LibTorch");
}
Result<Timing> time_against_aten(const Problem&, const c10::OperatorHandle&, BoundKernel&, int, int, uint64_t) {
  return Status(Code::kUnavailable, "timing needs a CUDA build of LibTorch");
}
Result<double> time_device_copy(int64_t, int, int) {
  return Status(Code::kUnavailable, "timing needs a CUDA build of LibTorch");
}

#endif

double dtype_max(c10::ScalarType t) {
  switch (t) {
    case c10::ScalarType::Half: return 65504.0;
    case c10::ScalarType::BFloat16: return 3.3895313892515355e38;
    case c10::ScalarType::Double: return std::numeric_limits<double>::max();
    default: return 3.4028234663852886e38;
  }
}

}  // namespace cudal1::optimizer
