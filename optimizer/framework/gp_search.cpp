/// @brief The similarity model of the tuner's later rounds (Note [Similarity model] in search.h): a Gaussian
/// process over a signature's variants whose covariance is how many knob values two variants share.
#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <utility>

#include "cudal1/optimizer/search.h"

namespace cudal1::optimizer {
namespace {

/// Lower Cholesky factor of the symmetric positive definite `a`, in place (upper part zeroed); false when `a` is
/// not positive definite.
bool cholesky(std::vector<std::vector<double>>& a) {
  const size_t n = a.size();
  for (size_t j = 0; j < n; ++j) {
    double d = a[j][j];
    for (size_t k = 0; k < j; ++k) d -= a[j][k] * a[j][k];
    if (!(d > 0)) return false;
    a[j][j] = std::sqrt(d);
    for (size_t i = j + 1; i < n; ++i) {
      double v = a[i][j];
      for (size_t k = 0; k < j; ++k) v -= a[i][k] * a[j][k];
      a[i][j] = v / a[j][j];
    }
    for (size_t k = j + 1; k < n; ++k) a[j][k] = 0;
  }
  return true;
}

/// L^-1 b for the lower-triangular `l` (forward substitution).
std::vector<double> forward(const std::vector<std::vector<double>>& l, std::vector<double> b) {
  for (size_t i = 0; i < b.size(); ++i) {
    for (size_t k = 0; k < i; ++k) b[i] -= l[i][k] * b[k];
    b[i] /= l[i][i];
  }
  return b;
}

/// Every variant of `space` as its values over the union of the space's knob names (a knob it lacks: 0).
std::vector<std::vector<int>> knob_table(const std::vector<Variant>& space) {
  std::map<std::string, size_t> names;
  for (const auto& v : space)
    for (const auto& kv : v.knobs) names.emplace(kv.first, names.size());
  std::vector<std::vector<int>> x(space.size(), std::vector<int>(names.size(), 0));
  for (size_t i = 0; i < space.size(); ++i)
    for (const auto& [knob, value] : space[i].knobs) x[i][names.at(knob)] = value;
  return x;
}

}  // namespace

std::vector<size_t> similarity_model_picks(const std::vector<Variant>& space, const std::vector<size_t>& tried,
                                           const std::vector<double>& speedups, size_t k,
                                           const SimilarityModel& m, const std::vector<double>& prior) {
  if (tried.size() != speedups.size() || space.empty()) return {};
  for (size_t i : tried)
    if (i >= space.size()) return {};
  // Targets: -log(speedup) of the timed trials; a failed one (or a speedup that is not a finite positive number)
  // twice as slow as the slowest timed.
  const auto timed = [](double s) { return s > 0 && std::isfinite(s); };
  double worst = -1e300;
  bool any = false;
  for (double s : speedups)
    if (timed(s)) worst = std::max(worst, -std::log(s)), any = true;
  if (!any) return {};
  const std::vector<std::vector<int>> x = knob_table(space);
  const double knobs = static_cast<double>(x.front().size());
  const auto similarity = [&](size_t a, size_t b) {
    int d = 0;
    for (size_t j = 0; j < x[a].size(); ++j) d += x[a][j] != x[b][j];
    const double shared = knobs > 0 ? (knobs - d) / knobs : 1.0;
    return m.mix * shared + (1 - m.mix) * std::exp(-d / m.length);
  };
  std::vector<size_t> pts(tried);
  std::vector<double> y;
  for (double s : speedups) y.push_back(timed(s) ? -std::log(s) : worst + std::log(2.0));
  std::vector<char> taken(space.size(), 0);
  for (size_t i : tried) taken[i] = 1;
  std::vector<size_t> out;
  const bool with_prior = prior.size() == space.size() && m.prior_weight != 0;
  while (out.size() < k) {
    const size_t n = pts.size();
    double mean = 0, spread = 0;
    for (double v : y) mean += v / static_cast<double>(n);
    for (double v : y) spread += (v - mean) * (v - mean) / static_cast<double>(n);
    const double sf2 = std::max(spread, 1e-4);  // prior variance: the spread of what was measured
    // The prior mean of variant i: a constant, less the cross-family prior's say (Note [Cross-family policy]); the
    // constant is the mean of what was measured with the prior's part taken out.
    const double shift = with_prior ? m.prior_weight * std::sqrt(sf2) : 0.0;
    const auto offset = [&](size_t i) { return with_prior ? -shift * prior[i] : 0.0; };
    if (with_prior) {
      mean = 0;
      for (size_t a = 0; a < n; ++a) mean += (y[a] - offset(pts[a])) / static_cast<double>(n);
    }
    std::vector<std::vector<double>> l(n, std::vector<double>(n));
    for (size_t a = 0; a < n; ++a)
      for (size_t b = 0; b < n; ++b) l[a][b] = sf2 * similarity(pts[a], pts[b]) + (a == b ? m.noise * sf2 : 0.0);
    if (!cholesky(l)) break;  // not reached: the noise term keeps the matrix positive definite
    std::vector<double> r(n);
    for (size_t a = 0; a < n; ++a) r[a] = y[a] - mean - offset(pts[a]);
    const std::vector<double> z = forward(l, r);  // posterior mean: mean + (L^-1 k)' (L^-1 r)
    double best_bound = 1e300, best_mean = 0;
    size_t best = space.size();
    for (size_t i = 0; i < space.size(); ++i) {
      if (taken[i]) continue;
      std::vector<double> kx(n);
      for (size_t a = 0; a < n; ++a) kx[a] = sf2 * similarity(i, pts[a]);
      const std::vector<double> v = forward(l, kx);
      double mu = mean + offset(i), s2 = sf2;
      for (size_t a = 0; a < n; ++a) mu += v[a] * z[a], s2 -= v[a] * v[a];
      const double bound = mu - m.beta * std::sqrt(std::max(0.0, s2));
      if (bound < best_bound) best_bound = bound, best_mean = mu, best = i;  // ties: space order
    }
    if (best == space.size()) break;  // every variant tried
    out.push_back(best);
    taken[best] = 1;
    pts.push_back(best);  // the rest of the round believes this pick's prediction (kriging believer)
    y.push_back(best_mean);
  }
  return out;
}

}  // namespace cudal1::optimizer
