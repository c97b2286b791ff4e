/// @brief How the tuner picks each round's variants (Note [Tuning rounds] in tuner.h): the contrastive policy for
/// round 1, then the similarity model, the knob model or an adapted policy. Shared by the Tuner and
/// bench_tuner_replay.
///
/// Note [Knob model]
/// Why (bench_tuner_replay on GPU-measured variant times): on the column reductions' landscapes (167 variants, many
/// within 5% of one another) the adapted policy's later rounds do no better than uniform random picks: the kept
/// variant is 4.5% (argmax) and 6.4% (var) slower than the best on average. What: before each round after
/// the first, a ridge regression of this signature's measured log kernel times (-log speedup; ATen's time is one
/// constant, absorbed by the free intercept) on one-hot knob values (one column per knob=value seen in the space:
/// additive knob effects, a handful of weights, fitted from 8-16 trials) predicts every untried variant; the round
/// takes the `k` lowest bounds (the lower confidence bound below; ties: space order). A trial that failed (no source,
/// compile, load, verification or timing) counts as twice as slow as the slowest one timed, so the model steers away
/// from its knob values; with no trial timed yet the adapted policy chooses instead. Penalty lambda = 10 on the knob
/// weights (not the intercept): a knob value not yet measured adds nothing to the mean. Replayed (400 seeds, 24
/// trials in rounds of 8, 1.5% timing noise), the kept variant's time over the best's is 1.029 on argmax (1.045
/// with the adapted policy) and 1.029 on var (1.064), the group norm and max-pool rows equal or better. The
/// persistent policy still picks round 1 and learns from every trial.
/// Known miss (replay of every variant of sum f32 [16,256,256] dim 1): the additive model keeps a variant ~1.09x
/// the best's time at 24 trials (within 5% in 56% of seeds), a cluster tile where a plain pipelined tile is ~20%
/// faster; Note [Similarity model] narrows that. Not kept (replayed offline): a first round with one variant of
/// every stratum, pairwise knob interactions, random picks for part of each round, and rounds around the best
/// trial's one-knob neighbours; each trades some rows against others.
/// The lower confidence bound. Why: taking the lowest predictions exploits what the first trials happened to
/// measure: uniform random picks beat the pure model on the small sum (1.033 against 1.093). What: a round ranks
/// the untried variants by mu - beta * sigma, mu the prediction, sigma^2 = s^2 x' A^-1 x its variance under the
/// ridge fit (A = X'X + lambda on the knob columns, x the variant's one-hot row, s^2 the fit's mean squared
/// residual), beta = 4: a knob value measured rarely, or only beside slow ones, gets tried while its estimate is
/// loose; measured ones are ranked by their mean. Replayed (9 rows, 400 seeds, 24 trials in rounds of 8), the
/// bound takes argmax to 1.003 of the best's time (1.029 without; within 5% in 98% of seeds), var to 1.002
/// (1.029), the small sum to 1.072 (1.093), and moves the other rows by about 1% or less; 32 and 48 trials gain
/// as much or more; 16 trials (one model round) gain on the column reductions and lose 1-3.5% on the group norms.
/// beta 3 and 6 are close; a last round without the bound (pure exploitation) is worse than the bound throughout.
///
/// Note [Similarity model]
/// Why (bench_tuner_replay on the GPU-measured landscapes of ten rows, 400 seeds, 24 trials in rounds of 8, kept
/// variant's true time over the best's): the knob model is additive, and where knob values interact it keeps
/// exploiting the wrong neighbourhood. On sum f32 [16,256,256] dim 1, a cluster tile's `splits` is a cluster size
/// and a plain tile's a launch split; the cluster tiles measure better than round 1's split or 256-thread plain
/// tiles, so later rounds stay among them (6.4-7.6 us) and leave the unsplit 512-1024 thread plain tiles (5.2-5.5
/// us) untried: 1.062 of the best on average, 39% of seeds more than 5% off. Strata columns, optional-knob columns
/// and pairwise interactions in the ridge trade that row against others (Note [Knob model]).
/// What (TuneSearch::kGp, the default): a Gaussian process over the space. Two variants' prior covariance is sf2 x (mix
/// x s / K + (1 - mix) x exp(-(K - s) / length)), s the knob values they share of the space's K knob names (a knob a
/// variant lacks counts as value 0): the first term is the additive model's (a kernel of shared one-hot values), the
/// second says that variants one or two knob values apart run alike, whatever the knobs' effects elsewhere, so a fast
/// trial lifts its own neighbourhood. sf2 is the spread of the measured log times, the noise variance noise x sf2, the
/// prior mean their mean; a failed trial counts as twice as slow as the slowest timed (as the knob model). A round
/// takes the untried variant of lowest mu - beta x sigma, appends it with its predicted mean as if measured (the
/// kriging believer: its neighbours' sigma shrinks, so one round does not spend itself on one neighbourhood) and
/// repeats. Constants (SimilarityModel) from a grid over the replay (mix 0.3-0.9, length 0.5-6, beta 1-7, noise
/// 0.02-0.1): a plateau at mix 0.3-0.5, length 0.5-0.85, beta 5-7 (mean over the rows 1.012-1.016 against the knob
/// model's 1.019); the middle is taken. Replayed (24 trials in rounds of 8, knob model -> this): small sum 1.062 ->
/// 1.025 (within 5% of the best in 61% -> 82% of seeds), var 1.015 -> 1.004, argmax 1.007 -> 1.002, gelu 1.016 ->
/// 1.011, the other six rows equal or better (vector_norm dim 0 1.057 -> 1.056); 16 and 32 trials gain as well (mean
/// 1.040 -> 1.028, 1.012 -> 1.010). In rounds of 4 the model steers sooner: 24 trials 1.011 (small sum 1.011, 95%
/// within 5%), 16 trials 1.020 (Note [Tuning rounds]).
/// Cost: a Cholesky factor of at most trials + k square a pick, well under a millisecond a round at the default
/// trials; the work grows with the cube of the trials, so past kSimilarityMaxTrials timed trials (a sweep of a
/// whole space) the knob model picks instead.
#pragma once

#include <cstdint>
#include <vector>

#include "cudal1/core/config.h"
#include "cudal1/optimizer/family.h"
#include "cudal1/optimizer/policy.h"

namespace cudal1::optimizer {

/// The knob model's ridge penalty and the width of its confidence bound (Note [Knob model]).
constexpr double kKnobModelLambda = 10.0;
constexpr double kKnobModelBeta = 4.0;

/// Up to `k` indices of `space` not in `tried`, lowest bound on the log kernel time first: the prediction less
/// `beta` of its standard error (Note [Knob model]; beta = 0: the prediction alone).
/// `tried` holds indices of `space`; `speedups[i]` is the measured speedup of variant `tried[i]` (<= 0: it
/// failed); the sizes must match.
/// Returns an empty vector when no trial has a speedup > 0 (nothing to fit) or every variant was tried.
std::vector<size_t> knob_model_picks(const std::vector<Variant>& space, const std::vector<size_t>& tried,
                                     const std::vector<double>& speedups, size_t k,
                                     double lambda = kKnobModelLambda, double beta = kKnobModelBeta);

/// Trials beyond which next_round leaves the similarity model for the knob model (Note [Similarity model]).
constexpr size_t kSimilarityMaxTrials = 256;

/// Constants of the similarity model (Note [Similarity model]).
struct SimilarityModel {
  double mix = 0.5;     ///< weight of the additive part of the covariance (shared knob values)
  double length = 0.6;  ///< knob values apart at which the neighbourhood part falls by e
  double beta = 6.0;    ///< width of the lower confidence bound, in posterior standard deviations
  double noise = 0.1;   ///< noise variance as a fraction of the prior variance
  /// With a cross-family prior (Note [Cross-family policy]): how many prior standard deviations of log time one
  /// standard deviation of the prior's score moves a variant's prior mean. 0: the prior steers round 1 only
  /// (replayed with families left out, 0.25 needed 10.7 trials to 95% against 10.4 with 0).
  double prior_weight = 0;
};

/// Up to `k` indices of `space` not in `tried`, in pick order: each the lowest bound mu - beta x sigma of the
/// Gaussian process (Note [Similarity model]) fitted to the trials and to the round's earlier picks at their
/// predicted means. `tried` holds indices of `space` (any out of range: empty result); `speedups[i]` is the
/// measured speedup of variant `tried[i]` (<= 0 or not finite: it failed); the sizes must match.
/// Returns an empty vector when no
/// trial has a speedup > 0 (nothing to fit); fewer than `k` when fewer are untried. Deterministic.
/// `prior` (empty, or one a variant of `space`: prior_scores of the cross-family policy, higher = expected
/// faster) shifts each variant's prior mean by -m.prior_weight x prior x the prior standard deviation; empty: the
/// constant prior mean.
std::vector<size_t> similarity_model_picks(const std::vector<Variant>& space, const std::vector<size_t>& tried,
                                           const std::vector<double>& speedups, size_t k,
                                           const SimilarityModel& m = {}, const std::vector<double>& prior = {});

/// One signature's trials so far, in trial order: indices into the space, their features and speedups (<= 0:
/// failed). All three have the same length.
struct Trials {
  std::vector<size_t> index;
  std::vector<std::vector<float>> features;
  std::vector<double> speedups;  ///< 0 for a trial that failed or has no timing yet
  size_t size() const { return index.size(); }
  /// Records trial `i` of the space with its features `f` and speedup `speedup`.
  void add(size_t i, const std::vector<float>& f, double speedup) {
    index.push_back(i);
    features.push_back(f);
    speedups.push_back(speedup);
  }
};

/// The next round's picks (up to `k` untried indices, in trial order). Round 1 (`done` empty): `policy.choose`
/// with `strata`. Later rounds: the similarity model (TuneSearch::kGp; past kSimilarityMaxTrials trials the knob
/// model with its bound), the knob model (kKnobs with its confidence bound, kKnobsMean without,
/// where it has a timed trial to fit) or a copy of `policy` adapted to `done` with random stream `seed`
/// (TuneSearch::kPolicy, and the models' fallback when no trial was timed).
/// `feats` and `strata` are per variant of `space`.
/// `prior` (empty, or one a variant: prior_scores of the cross-family policy, Note [Cross-family policy]) is added
/// to the policy's scores in round 1 and, in later rounds, moves the similarity model's prior means.
std::vector<size_t> next_round(Policy& policy, TuneSearch search, const std::vector<Variant>& space,
                               const std::vector<std::vector<float>>& feats, const std::vector<int>& strata,
                               const Trials& done, size_t k, uint64_t seed, const std::vector<double>& prior = {});

}  // namespace cudal1::optimizer
