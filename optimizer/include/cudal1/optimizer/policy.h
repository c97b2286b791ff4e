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
///
/// Note [Cross-family policy]
/// Why (issue 39 item 4): a family policy's features name that family's own knobs, so nothing it learns reaches
/// another family, and a new family starts blind. What: a second Policy of the same kind (linear Bradley-Terry
/// scores, learn() from each signature's contrastive pairs) over the shared features (Note [Shared features] in
/// shared_features.h: where a variant's vector width, block and work per thread sit in its space, and whether it
/// splits, clusters, rings, loops over a grid or stages in shared memory, crossed with the problem's class), one a
/// device in the process, learning from every tuned signature of every family, stored per GPU architecture and
/// shared feature layout (shared_policy_state_name; KernelCache::put_arch_state). Where none is stored yet, sm 90
/// (H100, H200) starts from the shipped prior (shipped_shared_prior), taught offline by every recorded landscape of
/// bench/replay (learn_landscapes: 200 full-batch logistic steps over the pairs of a variant within 80% of the
/// best's speedup and a variant below that, each landscape weighing the same, weight decay 0.1;
/// `bench_tuner_replay bench/replay --write-prior` writes it). With CUDAL1_TUNE_PRIOR=on
/// (TunerOptions::shared_prior; off by default, see below) its scores over the space, standardised (prior_scores),
/// are added to the family policy's in round 1 (the greedy pick, each stratum's pick, the samples); later rounds
/// stay the similarity model's (SimilarityModel::prior_weight could move its prior means too; 0: replayed at 0.25
/// it did a little worse).
/// Measured (bench_tuner_replay bench/replay gp+shared 64 4 24, CPU, on the GPU-measured landscapes; whole families
/// left out: the prior taught by the other families' landscapes only, each row tuned from a fresh family policy):
/// 10.4 trials to a kernel within 95% of the best's speed, against 12.9 for the search without it and 19.7 for
/// random picks (docs/PERF.md, "Tuner replay"); the target, a third of random's, is not met. The gain is
/// uneven: the small sum finds a near-best kernel in round 1 (1.0 trials against 12.6) and the vector norm columns
/// need 38.0 against 54.2, while gelu, group norm f16, the max-pool, the scan and argmax need 0.5-1.5 more. Chosen
/// on those same landscapes, with no nested hold-out: the schema (six were replayed: 10.4-12.9) and the teaching
/// constants; five families are little evidence that it carries to a sixth. Chosen honestly, it does not pay:
/// over a grid of 15 teaching constants (near-best threshold 0.6-0.95 x weight decay 0.03-0.3) the shipped pair is
/// the single best cell (10.4; most cells give 13.8-14.6), and choosing the pair by nested leave-one-family-out
/// (on the other families only) gives 14.8, worse than the search without a prior (bench/probes/
/// prior_nested_replay.cpp). So the prior is off by default; it still learns. Learning online from each row of
/// the family left out in turn, as the tuner's does (`gp+shared+carry`): 10.5 at kSharedPolicyLearningRate, 11.8 at a
/// family policy's 0.2 (a row then mostly teaches the next of its family: silu, group norm f16 gain, the vector norm
/// columns lose what the other reductions taught).
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "cudal1/core/status.h"

namespace cudal1::optimizer {

/// The name the cross-family policy (Note [Cross-family policy]) is stored under for the shared feature layout
/// `version` (kSharedFeaturesVersion): "policy.shared.s1".
std::string shared_policy_state_name(int version);

/// The cross-family policy's step size when it learns from a tuned signature (Policy::learning_rate; Note
/// [Cross-family policy]): a tenth of a family policy's, so that one signature's trials move what every family
/// taught less.
constexpr double kSharedPolicyLearningRate = 0.02;

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
  /// `prior` (empty, or one a variant) is added to each variant's score: the cross-family policy's prior_scores
  /// (Note [Cross-family policy]).
  std::vector<size_t> choose(const std::vector<std::vector<float>>& features, size_t k,
                             const std::vector<int>& strata = {}, const std::vector<size_t>& tried = {},
                             const std::vector<double>& prior = {});

  /// Learns from one signature: `speedups[i]` is variant i's measured speedup over ATen (<= 0: it failed).
  /// Pairs whose speedups differ by less than `min_gap` (relative) are treated as ties and skipped.
  void learn(const std::vector<std::vector<float>>& features, const std::vector<double>& speedups,
             double min_gap = 0.02);

  /// A copy for one signature's later rounds: this policy's weights after `epochs` further learn() passes over
  /// the signature's measurements so far (`features[i]`, `speedups[i]` as in learn()), drawing from its own
  /// random stream `seed`. This policy is unchanged.
  Policy adapted(const std::vector<std::vector<float>>& features, const std::vector<double>& speedups, uint64_t seed,
                 int epochs = 3) const;

  /// One signature's whole landscape: every variant's features and speedup (as in learn()).
  struct Landscape {
    const std::vector<std::vector<float>>* features;
    const std::vector<double>* speedups;
  };
  /// Learns from whole landscapes at once, as the shipped prior is taught (Note [Cross-family policy]): `epochs`
  /// full-batch logistic steps, each over every landscape's pairs (a variant within 80% of the best's speedup, a
  /// variant below that and 5% slower than it; each landscape's pairs weighing one landscape in all), with weight
  /// decay.
  void learn_landscapes(const std::vector<Landscape>& landscapes, int epochs);

  size_t dim() const { return w_.size(); }
  int64_t updates() const { return updates_; }
  double temperature = 0.5;
  double learning_rate = 0.2;

  /// JSON round trip ({"dim":..,"updates":..,"w":[..]}); from_json rejects a dimension mismatch.
  std::string to_json() const;
  static Result<Policy> from_json(const std::string& text, size_t expect_dim, uint64_t seed);

 private:
  friend std::vector<double> prior_scores(const Policy& shared, const std::vector<std::vector<float>>& features);
  std::vector<double> w_;
  int64_t updates_ = 0;
  std::mt19937_64 rng_;
};

/// The cross-family policy's view of one space: its scores of `features` (one a variant, shared features)
/// standardised over the space (mean 0, standard deviation 1), higher = expected faster; all 0 when the scores do
/// not vary (an untrained policy) or the dimensions differ.
std::vector<double> prior_scores(const Policy& shared, const std::vector<std::vector<float>>& features);

}  // namespace cudal1::optimizer
