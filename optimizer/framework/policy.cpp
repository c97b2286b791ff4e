/// @brief Contrastive policy (Note [Contrastive policy] in policy.h).
#include "cudal1/optimizer/policy.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>

namespace cudal1::optimizer {

namespace {
// Note [Cross-family policy]: what learn_landscapes contrasts (variants within this fraction of the best's speedup
// against clearly slower ones) and its weight decay a pass; chosen on the recorded landscapes themselves.
constexpr double kNearBest = 0.8;
constexpr double kDecay = 0.1;
}  // namespace

std::string shared_policy_state_name(int version) { return "policy.shared.s" + std::to_string(version); }

std::vector<double> prior_scores(const Policy& shared, const std::vector<std::vector<float>>& features) {
  std::vector<double> z(features.size(), 0.0);
  if (features.empty()) return z;
  double mean = 0, var = 0;
  for (size_t i = 0; i < features.size(); ++i) {
    if (features[i].size() != shared.dim()) return std::vector<double>(features.size(), 0.0);
    z[i] = shared.score(features[i]);
    mean += z[i] / static_cast<double>(z.size());
  }
  for (double x : z) var += (x - mean) * (x - mean) / static_cast<double>(z.size());
  if (!(var > 1e-12)) return std::vector<double>(features.size(), 0.0);
  for (double& x : z) x = (x - mean) / std::sqrt(var);
  return z;
}

std::string policy_state_name(const std::string& family, int features_version) {
  return "policy." + family + ".f" + std::to_string(features_version);
}

Policy::Policy(size_t dim, uint64_t seed) : w_(dim, 0.0), rng_(seed) {}

double Policy::score(const std::vector<float>& f) const {
  double s = 0;
  const size_t n = std::min(f.size(), w_.size());
  for (size_t i = 0; i < n; ++i) s += w_[i] * f[i];
  return s;
}

std::vector<size_t> Policy::choose(const std::vector<std::vector<float>>& features, size_t k,
                                   const std::vector<int>& strata, const std::vector<size_t>& tried,
                                   const std::vector<double>& prior) {
  std::vector<char> was_tried(features.size(), 0);
  for (size_t i : tried)
    if (i < was_tried.size()) was_tried[i] = 1;
  std::vector<size_t> left;
  for (size_t i = 0; i < features.size(); ++i)
    if (!was_tried[i]) left.push_back(i);
  std::vector<double> s(features.size());
  for (size_t i = 0; i < features.size(); ++i) s[i] = score(features[i]) + (prior.size() == s.size() ? prior[i] : 0.0);
  std::vector<size_t> out;
  if (left.empty() || k == 0) return out;
  // Greedy first pick (ties broken at random so that an untrained policy explores).
  std::shuffle(left.begin(), left.end(), rng_);
  auto best = std::max_element(left.begin(), left.end(), [&](size_t a, size_t b) { return s[a] < s[b]; });
  out.push_back(*best);
  left.erase(best);
  if (strata.size() == features.size()) {
    // Strata already covered: the greedy pick's and those of earlier rounds' variants.
    std::vector<int> covered = {strata[out.front()]};
    for (size_t i = 0; i < features.size(); ++i)
      if (was_tried[i]) covered.push_back(strata[i]);
    std::vector<int> todo;
    for (int st : strata)
      if (std::find(todo.begin(), todo.end(), st) == todo.end() &&
          std::find(covered.begin(), covered.end(), st) == covered.end())
        todo.push_back(st);
    std::shuffle(todo.begin(), todo.end(), rng_);
    for (int st : todo) {
      if (out.size() >= k) break;
      auto it = left.end();
      for (auto i = left.begin(); i != left.end(); ++i)
        if (strata[*i] == st && (it == left.end() || s[*i] > s[*it])) it = i;
      if (it == left.end()) continue;
      out.push_back(*it);
      left.erase(it);
    }
  }
  while (out.size() < k && !left.empty()) {
    double mx = -1e300;
    for (size_t i : left) mx = std::max(mx, s[i]);
    std::vector<double> p;
    for (size_t i : left) p.push_back(std::exp((s[i] - mx) / std::max(temperature, 1e-3)));
    std::discrete_distribution<size_t> pick(p.begin(), p.end());
    const size_t j = pick(rng_);
    out.push_back(left[j]);
    left.erase(left.begin() + static_cast<std::ptrdiff_t>(j));
  }
  return out;
}

void Policy::learn(const std::vector<std::vector<float>>& features, const std::vector<double>& speedups,
                   double min_gap) {
  const size_t n = std::min(features.size(), speedups.size());
  for (size_t a = 0; a < n; ++a)
    for (size_t b = 0; b < n; ++b) {
      const bool a_ok = speedups[a] > 0, b_ok = speedups[b] > 0;
      const bool a_better = a_ok && (!b_ok || speedups[a] > speedups[b] * (1 + min_gap));
      if (!a_better) continue;
      const double margin = score(features[a]) - score(features[b]);
      const double g = learning_rate * (1.0 - 1.0 / (1.0 + std::exp(-margin)));
      for (size_t i = 0; i < w_.size() && i < features[a].size() && i < features[b].size(); ++i)
        w_[i] += g * (features[a][i] - features[b][i]);
    }
  ++updates_;
}

void Policy::learn_landscapes(const std::vector<Landscape>& landscapes, int epochs) {
  struct Pairs {
    const std::vector<std::vector<float>>* f;
    std::vector<std::pair<size_t, size_t>> ab;  // (near the best, clearly slower)
  };
  std::vector<Pairs> sets;
  for (const Landscape& l : landscapes) {
    const auto& sp = *l.speedups;
    const size_t n = std::min(l.features->size(), sp.size());
    double best = 0;
    for (size_t i = 0; i < n; ++i) best = std::max(best, sp[i]);
    Pairs p{l.features, {}};
    for (size_t a = 0; a < n; ++a) {
      if (!(best > 0) || sp[a] < kNearBest * best) continue;
      for (size_t b = 0; b < n; ++b)
        if (sp[b] < kNearBest * best && sp[b] * 1.05 < sp[a]) p.ab.emplace_back(a, b);
    }
    if (!p.ab.empty()) sets.push_back(std::move(p));
  }
  if (sets.empty()) return;
  std::vector<double> g(w_.size());
  for (int e = 0; e < epochs; ++e) {
    std::fill(g.begin(), g.end(), 0.0);
    for (const Pairs& p : sets) {
      const double weight = 1.0 / static_cast<double>(p.ab.size() * sets.size());
      for (const auto& [a, b] : p.ab) {
        const auto &fa = (*p.f)[a], &fb = (*p.f)[b];
        const double d = weight * (1.0 - 1.0 / (1.0 + std::exp(-(score(fa) - score(fb)))));
        for (size_t i = 0; i < w_.size() && i < fa.size() && i < fb.size(); ++i) g[i] += d * (fa[i] - fb[i]);
      }
    }
    for (size_t i = 0; i < w_.size(); ++i) w_[i] += g[i] - kDecay * w_[i];
  }
  ++updates_;
}

Policy Policy::adapted(const std::vector<std::vector<float>>& features, const std::vector<double>& speedups,
                       uint64_t seed, int epochs) const {
  Policy p = *this;
  p.rng_.seed(seed);
  for (int e = 0; e < epochs; ++e) p.learn(features, speedups);
  return p;
}

std::string Policy::to_json() const {
  return nlohmann::json{{"dim", w_.size()}, {"updates", updates_}, {"w", w_}}.dump();
}

Result<Policy> Policy::from_json(const std::string& text, size_t expect_dim, uint64_t seed) {
  const auto j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return Status(Code::kCorrupt, "policy is not a JSON object");
  try {
    Policy p(expect_dim, seed);
    if (j.at("dim").get<size_t>() != expect_dim) return Status(Code::kMismatch, "policy has another feature size");
    p.w_ = j.at("w").get<std::vector<double>>();
    if (p.w_.size() != expect_dim) return Status(Code::kCorrupt, "policy weights have the wrong length");
    for (double x : p.w_)
      if (!std::isfinite(x)) return Status(Code::kCorrupt, "policy weight is not finite");
    p.updates_ = j.at("updates").get<int64_t>();
    return p;
  } catch (const nlohmann::json::exception& e) {
    return Status(Code::kCorrupt, std::string("policy JSON: ") + e.what());
  }
}

}  // namespace cudal1::optimizer
