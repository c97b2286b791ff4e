/// @brief The background optimizer (see tuner.h).
#include "cudal1/optimizer/tuner.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <thread>

#include <ATen/core/grad_mode.h>

#include "cudal1/core/log.h"
#include "cudal1/dispatcher/capture_gate.h"
#include "cudal1/dispatcher/cuda_glue.h"
#include "cudal1/dispatcher/hook.h"
#include "cudal1/dispatcher/regions.h"
#include "cudal1/optimizer/compiler.h"
#include "cudal1/optimizer/device_info.h"
#include "cudal1/optimizer/family.h"
#include "cudal1/optimizer/measure.h"
#include "cudal1/optimizer/replacement.h"
#include "cudal1/optimizer/search.h"
#include "cudal1/optimizer/shared_features.h"

#if defined(CUDAL1_TORCH_CUDA)
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace cudal1::optimizer {

using dispatcher::SigRecord;
using dispatcher::SigState;

Tuner::Tuner(TunerOptions opts, cache::KernelCache* cache) : opts_(opts), cache_(cache) {}

Tuner::~Tuner() { stop(); }

void Tuner::start(std::function<void()> on_tick) {
  std::lock_guard<std::mutex> lock(mu_);
  if (thread_.joinable()) return;
  stopping_ = false;
  thread_ = std::thread([this, on_tick] {
    const dispatcher::BackgroundWorkScope worker;  // its CUDA calls flush none of the app's regions
    const at::NoGradGuard no_grad;  // replays on the app's live weights record no autograd graph
    loop(on_tick);
  });
}

void Tuner::stop() noexcept {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    for (SigRecord* r : queue_) {
      SigState q = SigState::kQueued;
      r->state.compare_exchange_strong(q, SigState::kCold);
    }
    queue_.clear();
  }
  cv_.notify_all();
  if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) thread_.join();
  retry_writes();
}

bool Tuner::enqueue(SigRecord* rec) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_ || !thread_.joinable()) return false;
    queue_.push_back(rec);
  }
  cv_.notify_all();
  return true;
}

bool Tuner::wait_idle(double timeout_s) {
  std::unique_lock<std::mutex> lock(mu_);
  return cv_.wait_for(lock, std::chrono::duration<double>(timeout_s),
                      [&] { return (queue_.empty() && !busy_) || stopping_; });
}

uint64_t Tuner::tuned() const {
  std::lock_guard<std::mutex> lock(mu_);
  return tuned_;
}

size_t Tuner::pending_writes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return pending_writes_.size();
}

void Tuner::loop(std::function<void()> on_tick) {
  auto last_tick = std::chrono::steady_clock::now();
  for (;;) {
    SigRecord* rec = nullptr;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait_for(lock, std::chrono::milliseconds(kTickMs), [&] { return stopping_ || !queue_.empty(); });
      if (stopping_) break;
      if (!queue_.empty()) {
        rec = queue_.front();
        queue_.pop_front();
        busy_ = true;
      }
    }
    if (rec) {
      auto r = tune(*rec);
      if (!r.ok()) CUDAL1_LOG(kInfo, "tuning " << rec->sig.text << " stopped: " << r.status().to_string());
      std::lock_guard<std::mutex> lock(mu_);
      busy_ = false;
    }
    cv_.notify_all();
    if (on_tick && std::chrono::steady_clock::now() - last_tick >= std::chrono::milliseconds(kTickMs)) {
      last_tick = std::chrono::steady_clock::now();
      try {
        on_tick();
      } catch (...) {
      }
      retry_writes();
    }
  }
}

Result<TuneResult> Tuner::tune(SigRecord& rec) {
  std::lock_guard<std::mutex> lock(tune_mu_);
  SigState expected = SigState::kQueued;
  if (!rec.state.compare_exchange_strong(expected, SigState::kTuning)) {
    expected = SigState::kCold;  // direct calls (CLI, tests) tune cold records too
    if (!rec.state.compare_exchange_strong(expected, SigState::kTuning))
      return Status(Code::kInvalidArgument, std::string("record is ") + dispatcher::state_name(rec.state.load()));
  }
  Result<TuneResult> r = Status(Code::kInternal, "not run");
  try {
    r = tune_unlocked(rec);
  } catch (const std::exception& e) {
    r = Status(Code::kInternal, std::string("tuning raised: ") + e.what());
  }
  if (!r.ok()) {
    SigRecord::Outcome o = rec.outcome();
    o.note = r.status().to_string();
    rec.set_outcome(o);
  }
#if defined(CUDAL1_TORCH_CUDA)
  try {  // Note [Tuning memory]: what this signature's tuning left cached goes back to the app
    // Not while a capture runs (the allocator asserts that none does: Note [Captures and context synchronisation]).
    const dispatcher::SyncPermit permit;
    if (permit.ok()) c10::cuda::CUDACachingAllocator::emptyCache();
  } catch (...) {
  }
#endif
  SigState tuning = SigState::kTuning;
  rec.state.compare_exchange_strong(tuning, SigState::kAten);  // unless installed (kReplaced) or failed
  std::lock_guard<std::mutex> l2(mu_);
  ++tuned_;
  return r;
}

namespace {

/// A cache entry for `rec` made by `family` now: "stays on ATen" until a kernel is filled in.
cache::KernelEntry entry_of(const SigRecord& rec, const Family& family) {
  cache::KernelEntry e;
  e.signature = rec.sig.text;
  e.family = family.name();
  e.generator_version = family.version();
  e.created_unix = static_cast<int64_t>(std::time(nullptr));
  return e;
}

struct Candidate {
  size_t index = 0;
  CompiledKernel compiled;
  std::unique_ptr<BoundKernel> bound;
  Timing timing;
};

}  // namespace

Result<TuneResult> Tuner::tune_unlocked(SigRecord& rec) {
  const int device = rec.device_index;
  if (device < 0) return Status(Code::kUnsupported, "only CUDA signatures are tuned");
  if (!dispatcher::has_torch_cuda()) return Status(Code::kUnavailable, "this build has no torch-CUDA glue");
  CUDAL1_ASSIGN_OR_RETURN(DeviceInfo info, device_info(device));
  const auto& name = rec.op.operator_name();
  const std::string op = name.name.substr(name.name.rfind("::") + 2);
  const Family* family = family_for(op, name.overload_name);
  if (!family) return Status(Code::kUnsupported, "no generator family for " + name.name);
  const Problem problem = Problem::from_record(rec, info.sm, info.sm_count);
  Result<std::unique_ptr<Plan>> planned = family->plan(problem);
  if (!planned.ok()) {
    // Note [Family contract]: a family declines up front what it cannot do or where ATen's library already does
    // it (e.g. a GEMM whose rows cuBLAS stores aligned). That is an outcome for this signature on this GPU, not a
    // failure: cached as "stays on ATen" so that later processes (and `cudal1 warm`) do not plan it again.
    if (planned.status().code() == Code::kUnsupported) put_entry(device, entry_of(rec, *family));
    return planned.status();
  }
  std::unique_ptr<Plan> plan = std::move(planned).value();

  std::vector<Variant> space = plan->space();
  if (!opts_.only_variant.empty()) {
    space.erase(std::remove_if(space.begin(), space.end(),
                               [&](const Variant& v) { return !v.matches(opts_.only_variant); }),
                space.end());
    if (space.empty()) return Status(Code::kUnsupported, "no variant of the plan matches " + opts_.only_variant);
  }
  std::vector<std::vector<float>> feats;
  std::vector<int> strata;
  for (const auto& v : space) {
    feats.push_back(plan->features(v));
    strata.push_back(plan->stratum(v));
  }
  Policy& policy = policy_for(*family, feats.front().size(), device, info.sm);
  // Note [Cross-family policy]: the shared features of every variant, and the prior they give this space.
  const ProblemClass problem_cls = problem_class(problem);
  const SpaceRange range = space_range(space);
  std::vector<std::vector<float>> shared_feats;
  for (const auto& v : space) shared_feats.push_back(shared_features(v, problem_cls, range));
  Policy& shared = shared_policy_for(device, info.sm);
  const std::vector<double> prior = opts_.shared_prior ? prior_scores(shared, shared_feats) : std::vector<double>{};
  const size_t trials = static_cast<size_t>(std::max<int64_t>(opts_.trials, 0));
  const size_t round = static_cast<size_t>(std::max<int64_t>(opts_.round, 1));
  const size_t threads = std::min({round, static_cast<size_t>(std::max(1u, std::thread::hardware_concurrency())),
                                   static_cast<size_t>(std::max<int64_t>(opts_.compile_threads, 1))});

#if defined(CUDAL1_TORCH_CUDA)
  c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(device));
  c10::cuda::CUDAStreamGuard stream_guard(c10::cuda::getStreamFromPool(false, static_cast<c10::DeviceIndex>(device)));
#endif
  TuneResult result;
  bool budget_checked = false;
  Trials done;  // indices into `space`, in trial order, with their features and speedups
  std::unique_ptr<Candidate> best;
  const uint64_t seed = opts_.seed * 1000003ULL + (++seq_);
  // Note [Tuning rounds]: round 1 from the persistent policy, later ones from this signature's measurements
  // (Note [Knob model], or a copy of the policy adapted to them).
  while (done.size() < trials) {
    const size_t k = std::min(round, trials - done.size());
    const std::vector<size_t> picks = next_round(policy, opts_.search, space, feats, strata, done, k,
                                                 seed ^ (0x9E3779B97F4A7C15ULL * done.size()), prior);
    if (picks.empty()) break;  // every variant tried
    std::vector<VariantBuild> builds = compile_concurrently(
        picks.size(), [&](size_t i) { return plan->source(space[picks[i]]); }, info.sm, threads);
    for (size_t j = 0; j < picks.size(); ++j) {
      const size_t idx = picks[j];
      const Variant& v = space[idx];
      ++result.tried;
      done.add(idx, feats[idx], 0.0);
      if (!builds[j].has_source) continue;
      auto& compiled = builds[j].kernel;
      if (!compiled.ok()) {
        CUDAL1_LOG(kWarn,
                   rec.sig.text << ": variant " << v.id() << " did not compile: " << compiled.status().to_string());
        continue;
      }
      ++result.compiled;
      auto module = LoadedModule::load(device, compiled->cubin, compiled->kernel_name);
      if (!module.ok()) {
        CUDAL1_LOG(kWarn, rec.sig.text << ": variant " << v.id() << " did not load: " << module.status().to_string());
        continue;
      }
      auto bound = plan->bind(v, module.value());
      if (!bound.ok()) continue;
      if (!budget_checked) {  // Note [Tuning memory]: before anything of this signature's size is allocated
        budget_checked = true;
        const int64_t need = tuning_bytes(problem, *bound.value());
        auto budget = tuning_budget(device);
        if (budget.ok() && need > budget.value())
          return Status(Code::kUnavailable, "not tuned: it needs ~" + std::to_string(need >> 20) +
                                                " MiB of GPU memory, the budget allows " +
                                                std::to_string(budget.value() >> 20) + " MiB (CUDAL1_TUNE_MEMORY)");
      }
      const Status vs = verify(problem, rec.op, *bound.value(), device, static_cast<int>(opts_.verify_trials),
                               seed + idx, nullptr);
      if (!vs.ok()) {
        if (vs.code() == Code::kMismatch) return vs;  // the whole plan does not fit ATen's output layout
        CUDAL1_LOG(kWarn, rec.sig.text << ": variant " << v.id() << " failed verification: " << vs.to_string());
        continue;
      }
      ++result.verified;
      auto t = time_against_aten(problem, rec.op, *bound.value(), device, static_cast<int>(opts_.timing_reps),
                                 seed + idx);
      if (!t.ok()) {
        CUDAL1_LOG(kWarn, rec.sig.text << ": variant " << v.id() << " rejected by timing: " << t.status().to_string());
        continue;
      }
      done.speedups.back() = t->speedup;
      CUDAL1_LOG(kDebug, rec.sig.text << ": " << v.id() << " speedup " << t->speedup << " (p25 " << t->speedup_p25
                                       << ", ATen " << t->aten_us << " us, kernel " << t->kernel_us << " us)");
      if (!best || t->speedup > best->timing.speedup) {
        best = std::make_unique<Candidate>();
        best->index = idx;
        best->compiled = std::move(compiled).value();
        best->bound = std::move(bound).value();
        best->timing = t.value();
      }
    }
  }
  policy.learn(done.features, done.speedups);
  save_policy(*family, device, info.sm);
  std::vector<std::vector<float>> done_shared;
  for (size_t i : done.index) done_shared.push_back(shared_feats[i]);
  shared.learn(done_shared, done.speedups);
  save_shared_policy(device, info.sm);
  put_trials(device, family->name(), rec.sig.text, space, done);

  cache::KernelEntry entry = entry_of(rec, *family);
  entry.trials = result.tried;
  SigRecord::Outcome outcome;
  outcome.trials = result.tried;
  if (best) {
    result.best_variant = space[best->index].id();
    result.speedup = best->timing.speedup;
    result.aten_us = best->timing.aten_us;
    result.kernel_us = best->timing.kernel_us;
    outcome.variant = result.best_variant;
    outcome.speedup = result.speedup;
    outcome.aten_us = result.aten_us;
    outcome.kernel_us = result.kernel_us;
    entry.variant = result.best_variant;
    entry.speedup = result.speedup;
    entry.aten_us = result.aten_us;
    entry.kernel_us = result.kernel_us;
  }
  if (best && (best->timing.accepted(opts_.min_speedup) || !opts_.require_faster)) {
    result.replaced = true;
    entry.has_kernel = true;
    entry.launch_json = space[best->index].to_json();
    entry.kernel_name = best->compiled.kernel_name;
    entry.cubin = best->compiled.cubin;
    outcome.note = "verified on " + std::to_string(opts_.verify_trials) + " fresh inputs";
    rec.install(std::make_unique<KernelReplacement>(std::move(best->bound), device,
                                                    std::string(family->name()) + " " + result.best_variant),
                outcome, static_cast<int>(opts_.confirm_calls));
    CUDAL1_LOG(kInfo, rec.sig.text << ": replaced by " << result.best_variant << " (" << result.speedup
                                   << "x over ATen, " << result.aten_us << " -> " << result.kernel_us << " us)");
  } else {
    result.note = best ? "no variant beat ATen by the margin" : "no variant passed verification";
    outcome.note = result.note;
    rec.set_outcome(outcome);
    CUDAL1_LOG(kInfo, rec.sig.text << ": stays on ATen (" << result.note << "; best " << result.speedup << "x of "
                                    << result.tried << " tried)");
  }
  if (result.verified > 0 || result.replaced) put_entry(device, entry);  // never cache "all failed" outcomes
  return result;
}

// Note [Contrastive policy]: one policy a family and device in the process (two GPUs learn apart), stored per
// architecture, family and feature layout.
Policy& Tuner::policy_for(const Family& family, size_t dim, int device, int sm) {
  const std::string key = std::string(family.name()) + "@" + std::to_string(device);
  auto it = policies_.find(key);
  if (it != policies_.end() && it->second.dim() == dim) return it->second;
  Policy p(dim, opts_.seed);
  if (cache_) {
    auto stored = cache_->get_arch_state(sm, policy_state_name(family.name(), family.features_version()));
    if (stored.ok()) {
      auto loaded = Policy::from_json(stored.value(), dim, opts_.seed);
      if (loaded.ok()) p = std::move(loaded).value();
      else CUDAL1_LOG(kWarn, "ignoring stored policy for " << family.name() << ": " << loaded.status().to_string());
    }
  }
  return policies_.insert_or_assign(key, std::move(p)).first->second;
}

void Tuner::save_policy(const Family& family, int device, int sm) {
  if (!cache_) return;
  const auto it = policies_.find(std::string(family.name()) + "@" + std::to_string(device));
  if (it == policies_.end()) return;
  const Status s = cache_->put_arch_state(sm, policy_state_name(family.name(), family.features_version()),
                                          it->second.to_json());
  if (!s.ok()) CUDAL1_LOG(kDebug, "policy not saved: " << s.to_string());
}

// Note [Cross-family policy]: one a device in the process, stored per architecture and shared feature layout; the
// shipped prior where none is stored and one exists for the architecture.
Policy& Tuner::shared_policy_for(int device, int sm) {
  auto it = shared_.find(device);
  if (it != shared_.end()) return it->second;
  Policy p(shared_feature_dim(), opts_.seed);
  const auto from = [&](const std::string& json, const char* what) {
    auto loaded = Policy::from_json(json, shared_feature_dim(), opts_.seed);
    if (loaded.ok()) p = std::move(loaded).value();
    else CUDAL1_LOG(kWarn, "ignoring " << what << " cross-family policy: " << loaded.status().to_string());
    return loaded.ok();
  };
  auto stored = cache_ ? cache_->get_arch_state(sm, shared_policy_state_name(kSharedFeaturesVersion))
                       : Result<std::string>(Status(Code::kNotFound, "no cache"));
  if (!(stored.ok() && from(stored.value(), "stored")) && !shipped_shared_prior(sm).empty())
    from(std::string(shipped_shared_prior(sm)), "shipped");
  p.learning_rate = kSharedPolicyLearningRate;
  return shared_.insert_or_assign(device, std::move(p)).first->second;
}

void Tuner::save_shared_policy(int device, int sm) {
  const auto it = shared_.find(device);
  if (!cache_ || it == shared_.end()) return;
  const Status s = cache_->put_arch_state(sm, shared_policy_state_name(kSharedFeaturesVersion), it->second.to_json());
  if (!s.ok()) CUDAL1_LOG(kDebug, "cross-family policy not saved: " << s.to_string());
}

// Note [Technique insights] (csrc/cli/insights.cpp): every tuned signature's trials, for `cudal1 report --insights`.
void Tuner::put_trials(int device, const std::string& family, const std::string& signature,
                       const std::vector<Variant>& space, const Trials& done) {
  if (!cache_ || done.size() == 0) return;
  auto fp = fingerprint_for(device);
  if (!fp.ok()) return;
  std::string json = "{\"family\":\"" + family + "\",\"trials\":[";
  for (size_t i = 0; i < done.size(); ++i) {
    const double s = std::isfinite(done.speedups[i]) ? done.speedups[i] : 0.0;
    json += (i ? ",[\"" : "[\"") + space[done.index[i]].id() + "\"," + std::to_string(s) + "]";
  }
  json += "]}";
  const Status s = cache_->put_state(fp.value(), "trials/" + signature, json);
  if (!s.ok()) CUDAL1_LOG(kDebug, "trials not saved: " << s.to_string());
}

void Tuner::put_entry(int device, const cache::KernelEntry& e) {
  if (!cache_) return;
  auto fp = fingerprint_for(device);
  if (!fp.ok()) return;
  const Status s = cache_->put(fp.value(), e);
  if (s.ok()) return;
  CUDAL1_LOG(kWarn, "cache write for " << e.signature << " deferred: " << s.to_string());
  std::lock_guard<std::mutex> lock(mu_);
  pending_writes_.emplace_back(device, e);
}

void Tuner::retry_writes() {
  std::vector<std::pair<int, cache::KernelEntry>> work;
  {
    std::lock_guard<std::mutex> lock(mu_);
    work.swap(pending_writes_);
  }
  std::vector<std::pair<int, cache::KernelEntry>> failed;
  for (auto& [device, e] : work) {
    auto fp = fingerprint_for(device);
    if (!cache_ || !fp.ok() || !cache_->put(fp.value(), e).ok()) failed.emplace_back(device, std::move(e));
  }
  if (!failed.empty()) {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& f : failed) pending_writes_.push_back(std::move(f));
  }
}

Status attach_cached(SigRecord& rec, const cache::KernelEntry& e, int confirm_calls) {
  if (e.signature != rec.sig.text) return Status(Code::kMismatch, "entry is for another signature");
  SigRecord::Outcome o;
  o.from_cache = true;
  o.variant = e.variant;
  o.speedup = e.speedup;
  o.aten_us = e.aten_us;
  o.kernel_us = e.kernel_us;
  o.trials = e.trials;
  o.in_app = e.in_app;
  if (e.in_app > 0) o.verdict = e.has_kernel ? "promoted" : "demoted";
  if (!e.has_kernel) {
    o.note = e.in_app > 0    ? "cached outcome: slower in the app than ATen"
             : e.trials == 0 ? "cached outcome: its family declines it"
                             : "cached outcome: ATen was not beaten";
    rec.set_outcome(o);
    SigState cold = SigState::kCold;
    rec.state.compare_exchange_strong(cold, SigState::kAten);
    return Status();
  }
  const int device = rec.device_index;
  CUDAL1_ASSIGN_OR_RETURN(DeviceInfo info, device_info(device));
  const auto& name = rec.op.operator_name();
  const std::string op = name.name.substr(name.name.rfind("::") + 2);
  const Family* family = family_for(op, name.overload_name);
  if (!family || e.family != family->name()) return Status(Code::kMismatch, "entry is from another family");
  CUDAL1_RETURN_IF_ERROR(check_generator(e));  // Note [Generator versions]
  CUDAL1_ASSIGN_OR_RETURN(std::unique_ptr<Plan> plan, family->plan(Problem::from_record(rec, info.sm, info.sm_count)));
  CUDAL1_ASSIGN_OR_RETURN(Variant v, Variant::from_json(e.launch_json));
  CUDAL1_ASSIGN_OR_RETURN(std::shared_ptr<LoadedModule> module, LoadedModule::load(device, e.cubin, e.kernel_name));
  CUDAL1_ASSIGN_OR_RETURN(std::unique_ptr<BoundKernel> bound, plan->bind(v, std::move(module)));
  o.note = "from cache";
  if (!e.transferred_from.empty()) {  // Note [Cache transfer]: tuned under another fingerprint: verify it here
    const Problem p = Problem::from_record(rec, info.sm, info.sm_count);
    const Status ok = verify(p, rec.op, *bound, device, kTransferVerifyTrials, std::hash<std::string>()(e.signature),
                             nullptr);
    if (!ok.ok())
      return Status(Code::kVerifyFailed, "transferred from fingerprint " + e.transferred_from +
                                             ", failed verification here: " + ok.to_string());
    o.note = "from cache, fingerprint " + e.transferred_from + ", verified here";
  }
  rec.install(std::make_unique<KernelReplacement>(std::move(bound), device, e.family + " " + e.variant), o,
              e.in_app > 0 ? 0 : confirm_calls);
  return Status();
}

}  // namespace cudal1::optimizer
