/// @brief Private: the hook's process-wide state and the per-call logic shared by its two carriers, the boxed
/// kernel (boxed_hook.cpp, any op) and the typed kernels (typed_hook.cpp, the families' ops; no boxing on the
/// cold path). See Note [Hook carrier], [Hook firewall] and [Nested calls] in hook.h.
#pragma once

#include <torch/library.h>

#include <array>
#include <atomic>
#include <chrono>
#include <mutex>
#include <optional>

#include "cudal1/dispatcher/chains.h"
#include "cudal1/dispatcher/hook.h"
#include "cudal1/dispatcher/signature_of.h"
#include "gpu_sampler.h"

namespace cudal1::dispatcher::detail {

constexpr int kMaxDevices = 64;

struct HookState {
  HookOptions opts;
  HookCallbacks cb;
  std::vector<std::string> ops;
  std::vector<std::string> typed_ops;  ///< the ops with a typed kernel (they reach the region code)
  std::mutex registration_mu;
  torch::Library* lib = nullptr;  // null while suspended
  std::array<std::atomic<SigTable*>, kMaxDevices + 1> tables{};  // [0] CPU, [d+1] CUDA device d
  std::array<std::once_flag, kMaxDevices + 1> device_once;
  std::atomic<uint64_t> signatures{0}, replaced_calls{0}, fallbacks{0};
  GpuSampler sampler;
  std::unique_ptr<ChainTable> chains;  ///< null unless opts.chains
  std::atomic<bool> chains_on{true};   ///< set_chain_recording
};

extern std::atomic<HookState*> g_state;  // leaked on purpose (hooks stay registered until exit)
extern thread_local int t_depth;
extern thread_local int t_bypass;
extern thread_local uint64_t t_nested;

/// The key set that reaches the kernel ATen would have run.
inline c10::DispatchKeySet after_hook(c10::DispatchKeySet ks) {
  static const c10::DispatchKeySet kAfter(c10::DispatchKeySet::FULL_AFTER, c10::DispatchKey::BackendSelect);
  return ks & kAfter;
}

/// The state when this call should be handled; null when it passes straight through (nested, bypassed, or
/// hooks not installed). Counts nested pass-throughs.
inline HookState* active_state() {
  HookState* st = g_state.load(std::memory_order_acquire);
  if (t_depth > 0 || t_bypass > 0 || !st) {
    t_nested += t_depth > 0;
    return nullptr;
  }
  return st;
}

struct DepthGuard {
  DepthGuard() { ++t_depth; }
  ~DepthGuard() { --t_depth; }
};

/// Times one call: GPU events for CUDA records, the host clock for CPU records (tests). Every Nth call, and every
/// call of a trial (`arm` 0: ATen, 1: the kernel; Note [In-app confirmation]).
class Sample {
 public:
  Sample(HookState& st, SigRecord& rec, uint64_t calls, int arm = -1);
  void finish() noexcept;
  /// Counts the call as an ordinary sample, not a trial arm's (the kernel declined it).
  void leave_trial() noexcept {
    token_.arm = -1;
    cpu_arm_ = -1;
  }
  ~Sample() { st_.sampler.abandon(token_); }  // the call threw: return the events

 private:
  HookState& st_;
  GpuSampler::Token token_;
  SigRecord* cpu_rec_ = nullptr;
  int cpu_arm_ = -1;
  std::chrono::steady_clock::time_point t0_;
};

/// One timed trial call of `rec` (Note [In-app confirmation]): adds it to the record's trial, and when that
/// reaches its verdict concludes the trial and calls HookCallbacks::on_confirmed. Never throws.
void trial_sample(SigRecord& rec, bool kernel, double us) noexcept;

/// What the hook decided before running ATen: the record (null: not profiled), whether a cudal1 kernel already
/// served the call, and the sample to finish after ATen ran.
struct Visit {
  SigRecord* rec = nullptr;
  bool served = false;
  std::optional<Sample> sample;
};

/// The record of `key` if this thread or the table knows it (no locking when it was this thread's last).
SigRecord* lookup(HookState& st, const SigKey& key);
/// Creates (or finds) the record of `key` from the call's stack; null for calls on devices not profiled.
SigRecord* create(HookState& st, const c10::OperatorHandle& op, const SigKey& key, const torch::jit::Stack& stack,
                  size_t nargs);
/// Counts the call, starts its sample, serves it with the signature's replacement if there is one, marks the
/// signature hot. `stack_of()` returns the call's argument stack (made on demand by the typed carrier); when
/// `v->served`, that stack holds the outputs. Never throws (Note [Hook firewall]).
template <typename StackOf>
void visit_call(HookState& st, const c10::OperatorHandle& op, const SigKey& key, size_t nargs, StackOf&& stack_of,
           Visit* v) noexcept;
/// Counts an internal failure, retires the signature, logs once.
void report_internal_error(HookState& st, SigRecord* rec, const std::string& what) noexcept;
/// Hot-threshold bookkeeping: queues the record exactly once.
void note_hot(HookState& st, SigRecord& rec, uint64_t calls);
/// True when records of this key's device are kept.
bool accepted(const HookState& st, const SigKey& key);

template <typename StackOf>
void visit_call(HookState& st, const c10::OperatorHandle& op, const SigKey& key, size_t nargs, StackOf&& stack_of,
           Visit* v) noexcept {
  try {
    if (!accepted(st, key)) return;
    v->rec = lookup(st, key);
    if (!v->rec) v->rec = create(st, op, key, *stack_of(), nargs);
    SigRecord& rec = *v->rec;
    const uint64_t calls = rec.calls.fetch_add(1, std::memory_order_relaxed) + 1;
    Replacement* r = rec.replacement.load(std::memory_order_acquire);
    int arm = -1;  // Note [In-app confirmation]: a trial's calls alternate, ATen (0) and the kernel (1)
    if (Trial* t = r ? rec.trial.load(std::memory_order_acquire) : nullptr) arm = t->kernel_turn() ? 1 : 0;
    v->sample.emplace(st, rec, calls, arm);  // device time is accounted for replaced calls too
    if (arm == 0) return;                    // this call is ATen's
    if (r) {
      const Status s = r->run(stack_of(), nargs);
      if (s.ok()) {
        rec.replaced_calls.fetch_add(1, std::memory_order_relaxed);
        st.replaced_calls.fetch_add(1, std::memory_order_relaxed);
        v->served = true;
        return;
      }
      if (s.code() != Code::kUnsupported) report_internal_error(st, &rec, s.to_string());
      v->sample->leave_trial();  // ATen runs this call: no sample of the kernel's
    }
    note_hot(st, rec, calls);
  } catch (const std::exception& e) {
    report_internal_error(st, v->rec, e.what());
  } catch (...) {
    report_internal_error(st, v->rec, "unknown exception");
  }
}

/// True when this call's chain should be recorded (Note [Chain profiling]).
inline bool recording_chains(const HookState& st) {
  return st.chains && st.chains_on.load(std::memory_order_relaxed);
}
/// True once program chains are recorded (a convolution was seen: Note [Program chains]). Calls deferred into a
/// region are then recorded too, so that a program chain stays whole around fused ordinary chains.
bool recording_programs() noexcept;
/// Hands one observed call to this thread's chain builder (st.chains must be set). Never throws.
void observe_chain(HookState& st, const ChainBuilder::Call& call) noexcept;
/// The boxed carrier's tensor arguments (an undefined tensor for a None optional tensor), taken before ATen
/// consumes the stack; empty on any failure.
void boxed_chain_inputs(const c10::OperatorHandle& op, const torch::jit::Stack& stack, size_t nargs,
                        c10::SmallVector<at::Tensor, 6>* out) noexcept;
/// The boxed carrier's call, its outputs on top of `stack`, handed to observe_chain.
void observe_boxed_chain(HookState& st, SigRecord* rec, const c10::OperatorHandle& op,
                         const c10::SmallVector<at::Tensor, 6>& inputs, const torch::jit::Stack& stack) noexcept;

/// The boxed carrier (any op).
void boxed_hook(const c10::OperatorHandle& op, c10::DispatchKeySet ks, torch::jit::Stack* stack);
/// Registers `spec` on `lib` with a typed kernel when one exists for it; false otherwise.
bool register_typed(torch::Library& lib, const std::string& spec);

}  // namespace cudal1::dispatcher::detail
