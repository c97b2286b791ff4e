/// @brief The Tuner: the background optimizer. For each hot signature it plans the family's technique space,
/// lets the contrastive policy pick variants, compiles them with NVRTC, loads them with the Driver API,
/// verifies and times them against ATen, swaps in a verified winner and records the outcome in the cache.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "cudal1/cache/kernel_cache.h"
#include "cudal1/core/config.h"
#include "cudal1/core/status.h"
#include "cudal1/dispatcher/sig_record.h"
#include "cudal1/optimizer/policy.h"

namespace cudal1::optimizer {

class Family;  // family.h
struct Variant;
struct Trials;  // search.h

/// Note [Tuning rounds]
/// A signature's `trials` variants are tried in rounds of `round`. Round 1 is the persistent family policy's
/// choice (greedy best, uncovered strata, samples; Note [Contrastive policy]). Each later round is picked from
/// every (variant, speedup) this signature measured so far, among the variants not yet tried: by default by the
/// similarity model (Note [Similarity model] in search.h: a Gaussian process over shared knob values), with
/// `search` = kKnobs by the knob model (Note [Knob model]: a ridge regression of the measured log times on knob
/// values), with kPolicy by an adapted copy of the policy (strata already tried counting as covered). Either way the
/// search moves towards what won on this very shape (e.g. a pooling segment length or a softmax tile) instead of
/// sampling all trials blind, which can make a benchmark row differ by 15-20% between runs. The persistent
/// policy learns once, at the end, from all of the signature's trials, as with one round; `round >= trials` is
/// exactly the one-round search.
/// Within a round the sources are generated and compiled with NVRTC on up to min(round, cores, `compile_threads`)
/// threads (on one thread NVRTC dominates tuning time, ~0.5 s a variant; Note [Concurrent NVRTC] in
/// parallel_compile.cpp); loading, verification and timing stay serial on the tuner thread, in pick order, on its one
/// stream. Picks are deterministic for a given seed whatever the thread count.
/// On the GPU, 24 trials in rounds of 8 against one round of 24 keep spatial softmax ~11% and avg_pool2d f16 k3 s1
/// ~14% faster variants (other rows unchanged) for the same tuning time (~10 s a row on the big rows, spent on
/// verification and timing, not NVRTC).
/// Defaults: 16 trials in rounds of 4. Replayed on ten GPU-measured landscapes (bench_tuner_replay, 400 seeds), the
/// kept variant's time over the best's averages 1.020 over the rows, against 1.100 for 8 trials in one round (the
/// policy's picks alone: 1.12-1.19 on the column reductions and group norms); rounds of 4 let the model steer sooner
/// (16 trials in rounds of 8: 1.028).
struct TunerOptions {
  int64_t trials = 16;
  int64_t round = 4;            ///< variants per round (Note [Tuning rounds]); CUDAL1_TUNE_ROUND
  TuneSearch search = TuneSearch::kGp;  ///< how rounds after the first are picked; CUDAL1_TUNE_SEARCH
  /// The cross-family policy's prior steers round 1 and the similarity model (Note [Cross-family policy] in
  /// policy.h); CUDAL1_TUNE_PRIOR, off by default: with its teaching constants chosen honestly it does not beat
  /// the search without it. It learns from every tuned signature either way.
  bool shared_prior = false;
  int64_t compile_threads = 8;  ///< most NVRTC threads of one round (also bounded by the cores and `round`)
  int64_t verify_trials = 5;
  int64_t timing_reps = 40;
  double min_speedup = 1.03;
  uint64_t seed = 1;
  /// Test-only (no variable): when false, any verified variant is swapped in whatever its speed, so that GPU
  /// tests can check the correctness of swapped kernels on signatures where ATen is faster.
  bool require_faster = true;
  /// Calls of each arm before a swapped kernel's in-app verdict (Note [In-app confirmation]); 0: swapped in
  /// without a trial. CUDAL1_CONFIRM_CALLS.
  int64_t confirm_calls = 0;
  /// Bench-only (no variable): when non-empty, only variants that match it (Variant::matches: the id contains
  /// it; a trailing '$' anchors it at the id's end) are tried, so one technique can be timed or profiled on its
  /// own (a signature with none of them stays on ATen).
  std::string only_variant;
};

/// What tuning one signature found (also stored in the record's Outcome and the cache).
struct TuneResult {
  bool replaced = false;
  std::string best_variant;
  double speedup = 0, aten_us = 0, kernel_us = 0;
  int64_t tried = 0, compiled = 0, verified = 0;
  std::string note;
};

/// How often the background thread (the tuner's, or serve mode's chain server) ticks: samples collected, chains
/// turned hot and fused (Note [Cached chains turn hot early] in csrc/runtime/src/runtime.cpp).
inline constexpr int kTickMs = 50;

class Tuner {
 public:
  /// `cache` may be null (no persistence). The tuner does not own it; it must outlive the tuner.
  Tuner(TunerOptions opts, cache::KernelCache* cache);
  ~Tuner();
  Tuner(const Tuner&) = delete;
  Tuner& operator=(const Tuner&) = delete;

  /// Starts the background thread; `on_tick` runs on it about every kTickMs (housekeeping).
  void start(std::function<void()> on_tick = {});
  /// Stops the thread after the signature in progress; queued records go back to kCold. Retries cache writes
  /// that could not be made earlier. Idempotent, noexcept.
  void stop() noexcept;

  /// Queues a hot record (app thread: returns at once). False when stopped; the caller restores the state.
  bool enqueue(dispatcher::SigRecord* rec);
  /// True once nothing is queued or running; false if `timeout_s` passed first.
  bool wait_idle(double timeout_s);

  /// Tunes `rec` on the calling thread (the worker, tests and the CLI use it). Moves the record to kReplaced
  /// or kAten, fills its Outcome, writes the cache. Returns the result, or the error that stopped tuning (the
  /// record is then kAten with the error as its note).
  Result<TuneResult> tune(dispatcher::SigRecord& rec);

  uint64_t tuned() const;
  /// Cache writes still waiting for the database (another process held it).
  size_t pending_writes() const;

 private:
  void loop(std::function<void()> on_tick);
  Result<TuneResult> tune_unlocked(dispatcher::SigRecord& rec);
  Policy& policy_for(const Family& family, size_t dim, int device, int sm);
  void save_policy(const Family& family, int device, int sm);
  Policy& shared_policy_for(int device, int sm);
  void save_shared_policy(int device, int sm);
  void put_trials(int device, const std::string& family, const std::string& signature,
                  const std::vector<Variant>& space, const Trials& done);
  void put_entry(int device, const cache::KernelEntry& e);
  void retry_writes();

  TunerOptions opts_;
  cache::KernelCache* cache_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<dispatcher::SigRecord*> queue_;
  bool busy_ = false, stopping_ = false;
  std::thread thread_;
  uint64_t tuned_ = 0;
  std::mutex tune_mu_;  // one signature at a time (GPU timing must not overlap)
  std::map<std::string, Policy> policies_;  ///< by "family@device": each GPU learns its own (stored per fingerprint)
  std::map<int, Policy> shared_;            ///< the cross-family policy by device (Note [Cross-family policy])
  std::vector<std::pair<int, cache::KernelEntry>> pending_writes_;
  uint64_t seq_ = 0;
};

/// Verification trials of a kernel tuned under another fingerprint before it serves (Note [Cache transfer]): one
/// per input scale of make_inputs, fresh inputs each.
constexpr int kTransferVerifyTrials = 6;

/// Attaches a cached winner to a freshly created record on its first use: plans the signature, loads the
/// stored cubin, binds it and installs it; a winner tuned under another fingerprint (KernelEntry::transferred_from)
/// is verified against ATen first, on the calling thread's current stream. A no-winner entry moves the record to
/// kAten. Returns Mismatch or Unsupported (and leaves the record cold) when the entry does not fit this
/// signature, VerifyFailed when a transferred kernel does not verify here. With `confirm_calls` > 0 a winner
/// not yet judged in an app (KernelEntry::in_app == 0) goes on trial (Note [In-app confirmation]).
Status attach_cached(dispatcher::SigRecord& rec, const cache::KernelEntry& e, int confirm_calls = 0);

}  // namespace cudal1::optimizer
