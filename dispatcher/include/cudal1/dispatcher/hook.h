/// @brief The dispatcher hook: a boxed kernel on DispatchKey::BackendSelect for selected ATen ops, which
/// profiles every top-level call, marks hot signatures, and serves replaced ones with cudal1 kernels.
///
/// Note [Hook carrier]
/// The hook is a per-op boxed kernel registered at run time on BackendSelect (research in
/// shared/research/dispatcher-hooking.md, decision recorded in docs/ARCHITECTURE.md). BackendSelect is in
/// every thread's default TLS include set, so the hook sees calls from all threads and under InferenceMode,
/// and it sits below autograd, so a replaced op's output is still recorded by autograd with ATen's own
/// derivative formula. Everything not replaced is redispatched with `ks & FULL_AFTER(BackendSelect)`, which
/// is exactly the kernel ATen would have run. The families' ops get typed (unboxed) kernels, their C++ signature
/// taken from each op's generated schema, so that a cold call pays no boxing; arguments are keyed through the
/// same IValue conversions as the boxed form. Every other op (profile mode) gets one boxed kernel.
/// A TLS-included mode key (seen only by threads that opt in) and
/// overriding the CUDA kernel (no way to reach the previous kernel on 1.13) were rejected.
///
/// Note [Hook firewall]
/// Nothing thrown inside cudal1 reaches the application: the hook catches, logs once, marks the signature
/// failed (ATen from then on) and redispatches. Errors raised by ATen itself propagate unchanged.
///
/// Note [Nested calls]
/// A thread-local depth counter is raised while a hooked call runs; calls made underneath it (ATen ops that
/// call ops, cudal1's own allocations) pass straight through, uncounted.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "cudal1/core/config.h"
#include "cudal1/core/status.h"
#include "cudal1/dispatcher/sig_record.h"
#include "cudal1/dispatcher/sig_table.h"

namespace cudal1::dispatcher {

struct HookOptions {
  Mode mode = Mode::kTune;         ///< kProfile counts only; kTune/kServe also serve replacements
  std::vector<std::string> ops;    ///< "relu", "gelu", "add.Tensor"; empty: every functional aten op
  int64_t hot_calls = 50;          ///< calls before a signature is hot
  int64_t sample_every = 64;       ///< one call in N per signature is timed
  bool profile_cpu = false;        ///< also profile CPU tensors (tests); replacements run on any device
  bool chains = false;             ///< also record op chains (Note [Chain profiling] in chains.h)
};

struct HookCallbacks {
  /// A signature just became hot (exactly once per record, state already kQueued; tune mode only). Runs on the
  /// app thread: enqueue and return. If it cannot take the work it must set the state back to kCold or kAten.
  std::function<void(SigRecord&)> on_hot;
  /// First keyed call on a device (once per device, app thread, before that call's record exists).
  std::function<void(int device_index)> on_device;
  /// A record was just created (app thread, once per signature): e.g. attach a cached kernel.
  std::function<void(SigRecord&)> on_new_record;
  /// A replacement's trial reached its verdict (Note [In-app confirmation]; once per trial, the record already
  /// promoted or demoted). Runs on whichever thread collected the deciding sample: record it and return.
  std::function<void(SigRecord&, Verdict, const TrialStats&)> on_confirmed;
};

struct HookCounters {
  uint64_t hooked_calls = 0, signatures = 0, replaced_calls = 0, fallbacks = 0;
};

/// Registers the hook for `opts.ops` (once per process; later calls return InvalidArgument). Ops that are
/// views, in-place, out= or otherwise mutable or aliasing are refused (InvalidArgument naming them); in
/// "every op" mode they are skipped. Returns NotFound for an op name that does not exist.
Status install_hooks(const HookOptions& opts, HookCallbacks callbacks);

/// Unregisters the hook's kernels (calls go straight to ATen, as if cudal1 were off) / registers them again.
/// Records, kernels and counters are kept. Call only at quiescent points: no hooked call may be running on
/// any thread (the dispatcher's registration is locked, but a call in flight may still hold the old kernel).
Status suspend_hooks();
Status resume_hooks();

/// True once install_hooks succeeded.
bool hooks_installed() noexcept;

/// The operator names actually hooked.
std::vector<std::string> hooked_ops();

/// Visits every record of every device.
void for_each_record(const std::function<void(SigRecord&)>& fn);

/// Counters since install (hooked_calls is summed over the records: cheap, but not for a hot loop).
HookCounters hook_counters() noexcept;

/// Folds finished GPU timing samples into their records. Never blocks; call it from a background thread.
void collect_samples() noexcept;

/// Hooked calls this thread passed through because they ran inside another hooked call (Note [Nested calls]).
uint64_t nested_calls_on_this_thread() noexcept;

/// Raise / lower this thread's bypass level: while above zero, its calls pass straight to ATen.
void push_bypass() noexcept;
void pop_bypass() noexcept;

/// While alive, calls from this thread pass straight to ATen: the optimizer's own reference calls.
class BypassScope {
 public:
  BypassScope() noexcept { push_bypass(); }
  ~BypassScope() { pop_bypass(); }
  BypassScope(const BypassScope&) = delete;
  BypassScope& operator=(const BypassScope&) = delete;
};

/// True when `schema` is a candidate for replacement: no alias annotations on arguments or returns (so no
/// views, in-place or out= variants), not mutable, returns at least one tensor.
bool is_functional(const c10::FunctionSchema& schema);

/// True when `schema` is an in-place op of the kind chains fuse (Note [In-place nodes] in chains.h): its first
/// argument `self` is written, its one return is that same tensor, nothing else is written or aliased
/// (`relu_`, `add_.Tensor`; not `out=` overloads, not views).
bool is_inplace(const c10::FunctionSchema& schema);

/// True when `schema` is a view op: it writes nothing (no argument annotated as written, not mutable) and every
/// return aliases an argument (`t`, `view`, `transpose.int`, `expand`, `select.int`; not `split`, whose list
/// return carries no annotation of its own). Such an op reads no values, only sizes and strides (Note [Views in
/// regions] in regions.h).
bool is_view_op(const c10::FunctionSchema& schema);

}  // namespace cudal1::dispatcher
