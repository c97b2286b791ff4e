/// @brief The hook's state and shared per-call logic (see hook_state.h).
#include "hook_state.h"

#include <algorithm>

#include "cudal1/core/log.h"

namespace cudal1::dispatcher::detail {

std::atomic<HookState*> g_state{nullptr};
thread_local int t_depth = 0;
thread_local int t_bypass = 0;
thread_local uint64_t t_nested = 0;
namespace {
thread_local SigRecord* t_last = nullptr;  // this thread's last record: repeated calls skip the table's lock

int device_of(const SigKey& key) {
  return key.device_type == c10::DeviceType::CUDA ? key.device_index : -1;
}

SigTable& table_for(HookState& st, int device_index) {
  auto& slot = st.tables[device_index + 1];
  if (SigTable* t = slot.load(std::memory_order_acquire)) return *t;
  std::call_once(st.device_once[device_index + 1], [&] {
    if (device_index >= 0 && st.cb.on_device) st.cb.on_device(device_index);
    slot.store(new SigTable(), std::memory_order_release);
  });
  return *slot.load(std::memory_order_acquire);
}

}  // namespace

bool accepted(const HookState& st, const SigKey& key) {
  if (key.device_type == c10::DeviceType::CUDA) return key.device_index >= 0 && key.device_index < kMaxDevices;
  return st.opts.profile_cpu && key.device_type == c10::DeviceType::CPU;
}

SigRecord* lookup(HookState& st, const SigKey& key) {
  const int device = device_of(key);
  if (SigRecord* last = t_last; last && last->sig.hash == key.hash && last->device_index == device &&
                                last->sig.words.size() == key.words.size() &&
                                std::equal(key.words.begin(), key.words.end(), last->sig.words.begin()))
    return last;
  SigRecord* rec = table_for(st, device).find(key);
  if (rec) t_last = rec;
  return rec;
}

SigRecord* create(HookState& st, const c10::OperatorHandle& op, const SigKey& key, const torch::jit::Stack& stack,
                  size_t nargs) {
  const int device = device_of(key);
  auto [rec, fresh] = table_for(st, device).insert(key, [&] {
    Signature sig;
    sig.words.assign(key.words.begin(), key.words.end());
    sig.hash = key.hash;
    sig.text = describe_call(op, stack, nargs);
    return std::make_unique<SigRecord>(op, std::move(sig), device, arg_specs(stack, nargs));
  });
  if (fresh) {
    st.signatures.fetch_add(1, std::memory_order_relaxed);
    if (st.cb.on_new_record) st.cb.on_new_record(*rec);
  }
  t_last = rec;
  return rec;
}

void note_hot(HookState& st, SigRecord& rec, uint64_t calls) {
  if (calls != static_cast<uint64_t>(st.opts.hot_calls) || st.opts.mode != Mode::kTune) return;
  SigState expected = SigState::kCold;
  if (rec.state.compare_exchange_strong(expected, SigState::kQueued) && st.cb.on_hot) st.cb.on_hot(rec);
}

Sample::Sample(HookState& st, SigRecord& rec, uint64_t calls, int arm) : st_(st) {
  // Every Nth call, never the first: a first launch includes lazy module loading, not the op's time.
  if (arm < 0 && (calls < 2 || calls % static_cast<uint64_t>(st.opts.sample_every) != 0)) return;
  if (rec.device_index >= 0) {
    token_ = st.sampler.begin(rec, arm);
  } else {
    cpu_rec_ = &rec;
    cpu_arm_ = arm;
    t0_ = std::chrono::steady_clock::now();
  }
}

void Sample::finish() noexcept {
  if (token_) st_.sampler.end(token_);
  if (cpu_rec_) {
    const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0_);
    cpu_rec_->sampled_ns.fetch_add(static_cast<uint64_t>(ns.count()), std::memory_order_relaxed);
    cpu_rec_->samples.fetch_add(1, std::memory_order_relaxed);
    if (cpu_arm_ >= 0) trial_sample(*cpu_rec_, cpu_arm_ == 1, static_cast<double>(ns.count()) / 1e3);
    cpu_rec_ = nullptr;
  }
}

void trial_sample(SigRecord& rec, bool kernel, double us) noexcept {
  try {
    Trial* t = rec.trial.load(std::memory_order_acquire);
    if (!t) return;  // concluded meanwhile
    TrialStats stats;
    const Verdict v = t->add(kernel, us, &stats);
    if (v == Verdict::kPending || !rec.conclude_trial(v, stats)) return;
    CUDAL1_LOG(kInfo, rec.sig.text << ": " << stats.text() << ", " << verdict_name(v));
    HookState* st = g_state.load(std::memory_order_acquire);
    if (st && st->cb.on_confirmed) st->cb.on_confirmed(rec, v, stats);
  } catch (...) {
  }
}

void report_internal_error(HookState& st, SigRecord* rec, const std::string& what) noexcept {
  try {
    st.fallbacks.fetch_add(1, std::memory_order_relaxed);
    if (rec) rec->fail(what);
    if (first_time("hook-error:" + (rec ? rec->sig.text : what)))
      CUDAL1_LOG(kWarn, "internal error on " << (rec ? rec->sig.text : std::string("a call")) << " (" << what
                                           << "); this signature stays on ATen");
  } catch (...) {
  }
}

}  // namespace cudal1::dispatcher::detail
