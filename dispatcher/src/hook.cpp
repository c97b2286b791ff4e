/// @brief The BackendSelect hook (Note [Hook carrier], [Hook firewall], [Nested calls] in hook.h).
#include "cudal1/dispatcher/hook.h"

#include <torch/library.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <mutex>
#include <optional>

#include "cudal1/core/log.h"
#include "cudal1/dispatcher/signature_of.h"
#include "gpu_sampler.h"

namespace cudal1::dispatcher {
namespace {

constexpr int kMaxDevices = 64;

struct HookState {
  HookOptions opts;
  HookCallbacks cb;
  std::vector<std::string> ops;
  std::mutex registration_mu;
  torch::Library* lib = nullptr;  // null while suspended
  std::array<std::atomic<SigTable*>, kMaxDevices + 1> tables{};  // [0] CPU, [d+1] CUDA device d
  std::array<std::once_flag, kMaxDevices + 1> device_once;
  std::atomic<uint64_t> signatures{0}, replaced_calls{0}, fallbacks{0};
  detail::GpuSampler sampler;
};

std::atomic<HookState*> g_state{nullptr};  // leaked on purpose (hooks stay registered until exit)
thread_local int t_depth = 0;
thread_local int t_bypass = 0;
thread_local uint64_t t_nested = 0;  // hooked calls passed through because they ran under another one
thread_local SigRecord* t_last = nullptr;  // this thread's last record: repeated calls skip the table's lock

struct DepthGuard {
  DepthGuard() { ++t_depth; }
  ~DepthGuard() { --t_depth; }
};

SigTable& table_for(HookState& st, int device_index) {
  auto& slot = st.tables[device_index + 1];
  SigTable* t = slot.load(std::memory_order_acquire);
  if (t) return *t;
  std::call_once(st.device_once[device_index + 1], [&] {
    if (device_index >= 0 && st.cb.on_device) st.cb.on_device(device_index);
    slot.store(new SigTable(), std::memory_order_release);
  });
  return *slot.load(std::memory_order_acquire);
}

/// Finds or creates the record of this call; null when the call is not profiled.
SigRecord* observe(HookState& st, const c10::OperatorHandle& op, const torch::jit::Stack& stack, size_t nargs) {
  SigKey key;
  if (!encode_call(op, stack, nargs, &key)) return nullptr;
  const bool cuda = key.device_type == c10::DeviceType::CUDA;
  if (!cuda && !(st.opts.profile_cpu && key.device_type == c10::DeviceType::CPU)) return nullptr;
  if (cuda && (key.device_index < 0 || key.device_index >= kMaxDevices)) return nullptr;
  const int device = cuda ? key.device_index : -1;
  if (SigRecord* last = t_last; last && last->sig.hash == key.hash && last->device_index == device &&
                                last->sig.words.size() == key.words.size() &&
                                std::equal(key.words.begin(), key.words.end(), last->sig.words.begin()))
    return last;
  SigTable& table = table_for(st, device);
  SigRecord* rec = table.find(key);
  if (!rec) {
    auto [r, fresh] = table.insert(key, [&] {
      Signature sig;
      sig.words.assign(key.words.begin(), key.words.end());
      sig.hash = key.hash;
      sig.text = describe_call(op, stack, nargs);
      return std::make_unique<SigRecord>(op, std::move(sig), cuda ? key.device_index : -1,
                                         arg_specs(stack, nargs));
    });
    rec = r;
    if (fresh) {
      st.signatures.fetch_add(1, std::memory_order_relaxed);
      if (st.cb.on_new_record) st.cb.on_new_record(*rec);
    }
  }
  t_last = rec;
  return rec;
}

void note_hot(HookState& st, SigRecord& rec, uint64_t calls) {
  if (calls != static_cast<uint64_t>(st.opts.hot_calls) || st.opts.mode != Mode::kTune) return;
  SigState expected = SigState::kCold;
  if (rec.state.compare_exchange_strong(expected, SigState::kQueued) && st.cb.on_hot) st.cb.on_hot(rec);
}

/// Times one call: GPU events for CUDA records, the host clock for CPU records (tests).
class Sample {
 public:
  Sample(HookState& st, SigRecord& rec, uint64_t calls) : st_(st) {
    // Every Nth call, never the first: a first launch includes lazy module loading, not the op's time.
    if (calls < 2 || calls % static_cast<uint64_t>(st.opts.sample_every) != 0) return;
    if (rec.device_index >= 0) {
      token_ = st.sampler.begin(rec);
    } else {
      cpu_rec_ = &rec;
      t0_ = std::chrono::steady_clock::now();
    }
  }
  void finish() noexcept {
    if (token_) st_.sampler.end(token_);
    if (cpu_rec_) {
      const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0_);
      cpu_rec_->sampled_ns.fetch_add(static_cast<uint64_t>(ns.count()), std::memory_order_relaxed);
      cpu_rec_->samples.fetch_add(1, std::memory_order_relaxed);
      cpu_rec_ = nullptr;
    }
  }
  ~Sample() { st_.sampler.abandon(token_); }  // the call threw: return the events

 private:
  HookState& st_;
  detail::GpuSampler::Token token_;
  SigRecord* cpu_rec_ = nullptr;
  std::chrono::steady_clock::time_point t0_;
};

void report_internal_error(HookState& st, SigRecord* rec, const std::string& what) {
  st.fallbacks.fetch_add(1, std::memory_order_relaxed);
  if (rec) rec->fail(what);
  if (first_time("hook-error:" + (rec ? rec->sig.text : what)))
    CUDAL1_LOG(kWarn, "internal error on " << (rec ? rec->sig.text : std::string("a call")) << " (" << what
                                         << "); this signature stays on ATen");
}

void hook_kernel(const c10::OperatorHandle& op, c10::DispatchKeySet ks, torch::jit::Stack* stack) {
  static const c10::DispatchKeySet kAfter(c10::DispatchKeySet::FULL_AFTER, c10::DispatchKey::BackendSelect);
  const c10::DispatchKeySet next = ks & kAfter;
  HookState* st = g_state.load(std::memory_order_acquire);
  if (t_depth > 0 || t_bypass > 0 || !st) {
    t_nested += t_depth > 0;
    op.redispatchBoxed(next, stack);
    return;
  }
  DepthGuard depth;
  SigRecord* rec = nullptr;
  std::optional<Sample> sample;
  try {
    const size_t nargs = op.schema().arguments().size();
    rec = observe(*st, op, *stack, nargs);
    if (rec) {
      const uint64_t calls = rec->calls.fetch_add(1, std::memory_order_relaxed) + 1;
      sample.emplace(*st, *rec, calls);  // device time is accounted for replaced calls too
      if (Replacement* r = rec->replacement.load(std::memory_order_acquire)) {
        const Status s = r->run(stack, nargs);
        if (s.ok()) {
          rec->replaced_calls.fetch_add(1, std::memory_order_relaxed);
          st->replaced_calls.fetch_add(1, std::memory_order_relaxed);
          sample->finish();
          return;
        }
        if (s.code() != Code::kUnsupported) report_internal_error(*st, rec, s.to_string());
      }
      note_hot(*st, *rec, calls);
    }
  } catch (const std::exception& e) {
    report_internal_error(*st, rec, e.what());
  } catch (...) {
    report_internal_error(*st, rec, "unknown exception");
  }
  op.redispatchBoxed(next, stack);  // ATen's own errors propagate to the app unchanged
  if (sample) sample->finish();
}

bool returns_tensor(const c10::FunctionSchema& schema) {
  for (const auto& r : schema.returns())
    if (r.type()->kind() == c10::TypeKind::TensorType) return true;
  return false;
}

/// Registers the hook for st.ops in a new torch::Library (kept until suspend_hooks; otherwise leaked on purpose:
/// deregistering at exit could run after the dispatcher is gone).
Status register_kernels(HookState& st) {
  std::lock_guard<std::mutex> lock(st.registration_mu);
  if (st.lib) return Status();
  auto lib = std::make_unique<torch::Library>(torch::Library::IMPL, "aten", c10::DispatchKey::BackendSelect,
                                               __FILE__, __LINE__);
  try {
    for (const auto& spec : st.ops) lib->impl(spec.c_str(), torch::CppFunction::makeFromBoxedFunction<&hook_kernel>());
  } catch (const std::exception& e) {
    return Status(Code::kInternal, std::string("registering the hook failed: ") + e.what());
  }
  st.lib = lib.release();
  return Status();
}

}  // namespace

bool is_functional(const c10::FunctionSchema& schema) {
  if (schema.is_mutable() || schema.is_vararg() || schema.is_varret()) return false;
  for (const auto& a : schema.arguments())
    if (a.alias_info()) return false;
  for (const auto& r : schema.returns())
    if (r.alias_info()) return false;
  return returns_tensor(schema);
}

Status install_hooks(const HookOptions& opts, HookCallbacks callbacks) {
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  if (g_state.load()) return Status(Code::kInvalidArgument, "cudal1 hooks are already installed");
  if (opts.hot_calls < 1 || opts.sample_every < 1) return Status(Code::kInvalidArgument, "bad hook options");
  auto& dispatcher = c10::Dispatcher::singleton();

  std::vector<c10::OperatorName> names;
  if (opts.ops.empty()) {
    for (const auto& n : dispatcher.getAllOpNames()) {
      if (n.name.rfind("aten::", 0) != 0) continue;
      auto h = dispatcher.findOp(n);
      if (!h || !h->hasSchema() || h->hasKernelForDispatchKey(c10::DispatchKey::BackendSelect)) continue;
      if (is_functional(h->schema())) names.push_back(n);
    }
  } else {
    for (const auto& spec : opts.ops) {
      const auto dot = spec.find('.');
      c10::OperatorName n("aten::" + spec.substr(0, dot), dot == std::string::npos ? "" : spec.substr(dot + 1));
      auto h = dispatcher.findSchema(n);
      if (!h) return Status(Code::kNotFound, "no ATen operator " + spec);
      if (!is_functional(h->schema()))
        return Status(Code::kInvalidArgument, spec + " is a view, in-place, out= or mutable op; not hooked");
      if (h->hasKernelForDispatchKey(c10::DispatchKey::BackendSelect))
        return Status(Code::kInvalidArgument, spec + " already has a BackendSelect kernel (a factory op)");
      names.push_back(n);
    }
  }

  auto* st = new HookState();
  st->opts = opts;
  st->cb = std::move(callbacks);
  for (const auto& n : names) {
    std::string spec = n.name.substr(6);
    if (!n.overload_name.empty()) spec += "." + n.overload_name;
    st->ops.push_back(spec);
  }
  CUDAL1_RETURN_IF_ERROR(register_kernels(*st));
  g_state.store(st, std::memory_order_release);
  return Status();
}

Status suspend_hooks() {
  HookState* st = g_state.load();
  if (!st) return Status(Code::kInvalidArgument, "hooks are not installed");
  std::lock_guard<std::mutex> lock(st->registration_mu);
  delete st->lib;  // deregisters every kernel it registered
  st->lib = nullptr;
  return Status();
}

Status resume_hooks() {
  HookState* st = g_state.load();
  if (!st) return Status(Code::kInvalidArgument, "hooks are not installed");
  return register_kernels(*st);
}

bool hooks_installed() noexcept { return g_state.load() != nullptr; }

std::vector<std::string> hooked_ops() {
  HookState* st = g_state.load();
  return st ? st->ops : std::vector<std::string>{};
}

void for_each_record(const std::function<void(SigRecord&)>& fn) {
  HookState* st = g_state.load();
  if (!st) return;
  for (auto& slot : st->tables)
    if (SigTable* t = slot.load(std::memory_order_acquire)) t->for_each(fn);
}

HookCounters hook_counters() noexcept {
  HookCounters c;
  if (HookState* st = g_state.load()) {
    for_each_record([&](SigRecord& r) { c.hooked_calls += r.calls.load(std::memory_order_relaxed); });
    c.signatures = st->signatures.load();
    c.replaced_calls = st->replaced_calls.load();
    c.fallbacks = st->fallbacks.load();
  }
  return c;
}

void collect_samples() noexcept {
  if (HookState* st = g_state.load()) st->sampler.collect();
}

uint64_t nested_calls_on_this_thread() noexcept { return t_nested; }

void push_bypass() noexcept { ++t_bypass; }
void pop_bypass() noexcept {
  if (t_bypass > 0) --t_bypass;
}

}  // namespace cudal1::dispatcher
