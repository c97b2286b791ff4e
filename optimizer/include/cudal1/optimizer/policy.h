/// @brief The contrastive policy that picks which variants of a technique space to try.
///
/// Note [Contrastive policy]
/// After CUDA-L1 (shared/research/cuda-l1-and-peers.md): the learner is shown earlier variants together with
/// their measured speedups and is trained to tell effective techniques from useless ones. Here the "model" is
/// a linear score over a family's variant features (knobs crossed with the problem's class); each tuned
/// signature yields contrastive pairs (faster variant, slower variant) and a Bradley-Terry/logistic step
/// w += lr * (1 - sigmoid(s_fast - s_slow)) * (phi_fast - phi_slow). Failed variants (compile error,
/// verification mismatch) rank below every working one. Selection takes the greedy best first, then the
/// best-scored variant of each structural class (Plan::stratum) not yet covered, then samples without
/// replacement from softmax(score / temperature), so early signatures explore and later ones exploit, and what
/// was learned on one shape class cannot starve another of a structure that only it needs.
/// Within one signature the tuner works in rounds (Note [Tuning rounds] in tuner.h): the first round is chosen by
/// the persistent policy; each later round by the similarity model (Note [Similarity model] in search.h, the
/// default), the knob model (Note [Knob model], CUDAL1_TUNE_SEARCH=knobs) or, with
/// CUDAL1_TUNE_SEARCH=policy, by an adapted copy (same weights, its own random stream) that learns a few passes
/// over everything this signature measured so far and chooses among the variants not yet tried, a stratum
/// already tried counting as covered. So a technique that won in round 1 on this shape is exploited in round 2
/// even when earlier signatures taught otherwise. Only the persistent policy's single learn() at the end of the
/// signature carries over to other signatures, as before rounds existed.
/// The weights persist in the cache per GPU architecture (compute capability), family and feature layout
/// (policy_state_name; KernelCache::put_arch_state), so learning carries across runs and across upgrades of the
/// driver, torch or cudal1 that leave a family's features as they were; in a process, one policy a family and
/// device. What it carries to a shape it has not seen is small: measured on recorded landscapes with each row held
/// out (docs/PERF.md, "Tuner replay"), a taught policy's search needs about as many trials as an untrained one's;
/// the similarity model's later rounds do most of the work.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "cudal1/core/status.h"

namespace cudal1::optimizer {

/// The name a family's policy is stored under for its feature layout (Family::features_version): e.g.
/// "policy.norm.f1".
std::string policy_state_name(const std::string& family, int features_version);

class Policy {
 public:
  /// A fresh policy (all weights zero: uniform exploration) for `dim` features.
  Policy(size_t dim, uint64_t seed);

  /// Score of one feature vector (higher = expected faster). `f.size()` must equal dim().
  double score(const std::vector<float>& f) const;

  /// Indices of up to `k` distinct variants to try, in trial order: the best-scored first; then, when `strata`
  /// (one id per variant, e.g. the kernel's structure: row per warp / per block / split) is given, the
  /// best-scored variant of every stratum not yet covered, so that no structure goes untried because of what
  /// earlier signatures taught; then samples from softmax(score / temperature) over the rest.
  /// Indices in `tried` (earlier rounds of the same signature) are never returned and their strata count as
  /// covered; with `tried` empty the picks (and the random stream) are exactly those of a call without it.
  std::vector<size_t> choose(const std::vector<std::vector<float>>& features, size_t k,
                             const std::vector<int>& strata = {}, const std::vector<size_t>& tried = {});

  /// Learns from one signature: `speedups[i]` is variant i's measured speedup over ATen (<= 0: it failed).
  /// Pairs whose speedups differ by less than `min_gap` (relative) are treated as ties and skipped.
  void learn(const std::vector<std::vector<float>>& features, const std::vector<double>& speedups,
             double min_gap = 0.02);

  /// A copy for one signature's later rounds: this policy's weights after `epochs` further learn() passes over
  /// the signature's measurements so far (`features[i]`, `speedups[i]` as in learn()), drawing from its own
  /// random stream `seed`. This policy is unchanged.
  Policy adapted(const std::vector<std::vector<float>>& features, const std::vector<double>& speedups, uint64_t seed,
                 int epochs = 3) const;

  size_t dim() const { return w_.size(); }
  int64_t updates() const { return updates_; }
  double temperature = 0.5;
  double learning_rate = 0.2;

  /// JSON round trip ({"dim":..,"updates":..,"w":[..]}); from_json rejects a dimension mismatch.
  std::string to_json() const;
  static Result<Policy> from_json(const std::string& text, size_t expect_dim, uint64_t seed);

 private:
  std::vector<double> w_;
  int64_t updates_ = 0;
  std::mt19937_64 rng_;
};

}  // namespace cudal1::optimizer
