/// @brief SigRecord state changes.
#include "cudal1/dispatcher/sig_record.h"

#include "cudal1/dispatcher/forward_graphs.h"

namespace cudal1::dispatcher {
namespace {
std::atomic<int> g_open_trials{0};
}  // namespace

int open_trials() noexcept { return g_open_trials.load(std::memory_order_relaxed); }

const char* state_name(SigState s) noexcept {
  switch (s) {
    case SigState::kCold: return "cold";
    case SigState::kQueued: return "queued";
    case SigState::kTuning: return "tuning";
    case SigState::kReplaced: return "replaced";
    case SigState::kAten: return "aten";
    case SigState::kFailed: return "failed";
  }
  return "?";
}

SigRecord::Outcome SigRecord::outcome() const {
  std::lock_guard<std::mutex> lock(mu_);
  return outcome_;
}

void SigRecord::set_outcome(Outcome o) {
  std::lock_guard<std::mutex> lock(mu_);
  outcome_ = std::move(o);
}

void SigRecord::install(std::unique_ptr<Replacement> r, Outcome o, int calls_per_arm) {
  std::lock_guard<std::mutex> lock(mu_);
  if (state.load() == SigState::kFailed) return;
  outcome_ = std::move(o);
  if (calls_per_arm > 0) {  // the trial is in place before the first call can see the replacement
    if (!trial.load()) g_open_trials.fetch_add(1);
    trials_.push_back(std::make_unique<Trial>(calls_per_arm, 8 * calls_per_arm));
    trial.store(trials_.back().get(), std::memory_order_release);
    outcome_.verdict = "on trial";
  }
  owned_.push_back(std::move(r));
  replacement.store(owned_.back().get(), std::memory_order_release);
  state.store(SigState::kReplaced, std::memory_order_release);
  note_dispatch_change();  // Note [Forward graphs]: a graph captured before runs what ran before
}

bool SigRecord::conclude_trial(Verdict v, const TrialStats& stats) {
  if (v == Verdict::kPending) return false;
  std::lock_guard<std::mutex> lock(mu_);
  if (!trial.load() || state.load() != SigState::kReplaced) return false;
  trial.store(nullptr, std::memory_order_release);
  g_open_trials.fetch_sub(1);
  outcome_.in_app = stats.ratio;
  outcome_.verdict = verdict_name(v);
  outcome_.note = stats.text() + (v == Verdict::kPromote ? ": kept" : ": back to ATen");
  note_dispatch_change();
  if (v == Verdict::kDemote) {
    replacement.store(nullptr, std::memory_order_release);
    state.store(SigState::kAten, std::memory_order_release);
  }
  return true;
}

void SigRecord::fail(const std::string& why) {
  std::lock_guard<std::mutex> lock(mu_);
  replacement.store(nullptr, std::memory_order_release);
  if (trial.exchange(nullptr, std::memory_order_acq_rel)) g_open_trials.fetch_sub(1);
  state.store(SigState::kFailed, std::memory_order_release);
  outcome_.note = why;
  note_dispatch_change();
}

double SigRecord::mean_us() const {
  const uint64_t n = samples.load(std::memory_order_relaxed);
  return n ? static_cast<double>(sampled_ns.load(std::memory_order_relaxed)) / n / 1000.0 : 0.0;
}

}  // namespace cudal1::dispatcher
