/// @brief Round selection of the tuner (search.h): the contrastive policy, the knob model (Note [Knob model]) and
/// the dispatch to the similarity model (gp_search.cpp, Note [Similarity model]).
#include "cudal1/optimizer/search.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <utility>

namespace cudal1::optimizer {
namespace {

/// Solves a x = b in place for a symmetric positive definite `a` (Gauss-Jordan without pivoting); returns x.
std::vector<double> solve_spd(std::vector<std::vector<double>> a, std::vector<double> b) {
  const size_t d = b.size();
  for (size_t p = 0; p < d; ++p)
    for (size_t r = 0; r < d; ++r) {
      if (r == p) continue;
      const double m = a[r][p] / a[p][p];
      for (size_t q = p; q < d; ++q) a[r][q] -= m * a[p][q];
      b[r] -= m * b[p];
    }
  for (size_t p = 0; p < d; ++p) b[p] /= a[p][p];
  return b;
}

}  // namespace

std::vector<size_t> knob_model_picks(const std::vector<Variant>& space, const std::vector<size_t>& tried,
                                     const std::vector<double>& speedups, size_t k, double lambda, double beta) {
  if (tried.size() != speedups.size()) return {};
  // Targets: -log(speedup) of the timed trials; a failed one twice as slow as the slowest timed.
  double worst = -1e300;
  bool any = false;
  for (double s : speedups)
    if (s > 0) worst = std::max(worst, -std::log(s)), any = true;
  if (!any) return {};
  std::map<std::string, size_t> col;  // one column per knob=value of the space
  for (const auto& v : space)
    for (const auto& [knob, value] : v.knobs) col.emplace(knob + "=" + std::to_string(value), col.size());
  const size_t d = col.size() + 1;  // + the intercept, last
  const auto row = [&](size_t i) {
    std::vector<size_t> on;
    for (const auto& [knob, value] : space[i].knobs) on.push_back(col.at(knob + "=" + std::to_string(value)));
    on.push_back(d - 1);
    return on;
  };
  std::vector<std::vector<double>> a(d, std::vector<double>(d, 0.0));
  std::vector<double> b(d, 0.0), y(tried.size());
  for (size_t n = 0; n < tried.size(); ++n) {
    y[n] = speedups[n] > 0 ? -std::log(speedups[n]) : worst + std::log(2.0);
    const auto on = row(tried[n]);
    for (size_t p : on) {
      b[p] += y[n];
      for (size_t q : on) a[p][q] += 1.0;
    }
  }
  for (size_t p = 0; p + 1 < d; ++p) a[p][p] += lambda;  // the intercept is free: its diagonal is >= 1
  // The uncertainty of a prediction x'w: s2 x' A^-1 x, s2 the mean squared residual of the fit.
  std::vector<std::vector<double>> a_inv;  // column q of A^-1 (A is symmetric: also row q)
  if (beta > 0)
    for (size_t q = 0; q < d; ++q) {
      std::vector<double> e(d, 0.0);
      e[q] = 1.0;
      a_inv.push_back(solve_spd(a, std::move(e)));
    }
  const std::vector<double> w = solve_spd(std::move(a), std::move(b));
  double s2 = 0;
  for (size_t n = 0; beta > 0 && n < tried.size(); ++n) {
    double fit = 0;
    for (size_t p : row(tried[n])) fit += w[p];
    s2 += (y[n] - fit) * (y[n] - fit) / static_cast<double>(tried.size());
  }
  std::vector<char> was_tried(space.size(), 0);
  for (size_t i : tried)
    if (i < space.size()) was_tried[i] = 1;
  std::vector<std::pair<double, size_t>> pred;
  for (size_t i = 0; i < space.size(); ++i) {
    if (was_tried[i]) continue;
    const auto on = row(i);
    double mean = 0, var = 0;
    for (size_t p : on) mean += w[p];
    for (size_t p = 0; beta > 0 && p < on.size(); ++p)
      for (size_t q : on) var += a_inv[q][on[p]];
    pred.emplace_back(mean - beta * std::sqrt(std::max(0.0, var * s2)), i);  // the lower confidence bound
  }
  std::stable_sort(pred.begin(), pred.end(), [](const auto& l, const auto& r) { return l.first < r.first; });
  std::vector<size_t> out;
  for (size_t j = 0; j < k && j < pred.size(); ++j) out.push_back(pred[j].second);
  return out;
}

std::vector<size_t> next_round(Policy& policy, TuneSearch search, const std::vector<Variant>& space,
                               const std::vector<std::vector<float>>& feats, const std::vector<int>& strata,
                               const Trials& done, size_t k, uint64_t seed, const std::vector<double>& prior) {
  if (done.index.empty()) return policy.choose(feats, k, strata, {}, prior);
  if (search == TuneSearch::kGp && done.size() <= kSimilarityMaxTrials) {
    auto picks = similarity_model_picks(space, done.index, done.speedups, k, SimilarityModel{}, prior);
    if (!picks.empty()) return picks;
  }
  if (search == TuneSearch::kGp || search == TuneSearch::kKnobs || search == TuneSearch::kKnobsMean) {
    const double beta = search == TuneSearch::kKnobsMean ? 0.0 : kKnobModelBeta;
    auto picks = knob_model_picks(space, done.index, done.speedups, k, kKnobModelLambda, beta);
    if (!picks.empty()) return picks;
  }
  return policy.adapted(done.features, done.speedups, seed).choose(feats, k, strata, done.index, prior);
}

}  // namespace cudal1::optimizer
