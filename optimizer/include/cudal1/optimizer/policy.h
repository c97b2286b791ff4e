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
/// The weights persist per GPU fingerprint and family in the cache, so learning carries across runs.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "cudal1/core/status.h"

namespace cudal1::optimizer {

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
  std::vector<size_t> choose(const std::vector<std::vector<float>>& features, size_t k,
                             const std::vector<int>& strata = {});

  /// Learns from one signature: `speedups[i]` is variant i's measured speedup over ATen (<= 0: it failed).
  /// Pairs whose speedups differ by less than `min_gap` (relative) are treated as ties and skipped.
  void learn(const std::vector<std::vector<float>>& features, const std::vector<double>& speedups,
             double min_gap = 0.02);

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
