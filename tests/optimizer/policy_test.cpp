/// @brief The contrastive policy learns which techniques work from measured pairs: on a synthetic technique
/// space with a known speed model it finds near-best variants in few trials, far more often than random
/// picking does, and its state round-trips through JSON.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "cudal1/optimizer/policy.h"

namespace cudal1::optimizer {
namespace {

/// 4 knobs x 4 values, one-hot features; speed is a product of per-knob factors plus noise, as real kernels'
/// technique effects roughly are. Different "signatures" rescale the factors a little.
struct Synthetic {
  std::vector<std::vector<float>> feats;
  std::vector<std::array<int, 4>> knobs;
  Synthetic() {
    for (int a = 0; a < 4; ++a)
      for (int b = 0; b < 4; ++b)
        for (int c = 0; c < 4; ++c)
          for (int d = 0; d < 4; ++d) {
            std::vector<float> f(16, 0.f);
            f[a] = f[4 + b] = f[8 + c] = f[12 + d] = 1.f;
            feats.push_back(f);
            knobs.push_back({a, b, c, d});
          }
  }
  double speedup(size_t i, std::mt19937_64& rng) const {
    static const double fa[] = {0.6, 0.8, 1.0, 0.9}, fb[] = {0.85, 1.0, 0.95, 0.8}, fc[] = {0.9, 1.0, 0.97, 0.7},
                        fd[] = {0.92, 1.0, 1.0, 1.0};
    std::normal_distribution<double> noise(1.0, 0.02);
    const auto& k = knobs[i];
    return 1.3 * fa[k[0]] * fb[k[1]] * fc[k[2]] * fd[k[3]] * noise(rng);
  }
  double best() const { return 1.3; }
};

double found_fraction(bool learn, uint64_t seed) {
  Synthetic s;
  Policy p(16, seed);
  std::mt19937_64 rng(seed);
  double total = 0;
  const int signatures = 40, trials = 6;
  int counted = 0;
  for (int sig = 0; sig < signatures; ++sig) {
    const auto picks = p.choose(s.feats, trials);
    std::vector<std::vector<float>> f;
    std::vector<double> sp;
    double best = 0;
    for (size_t i : picks) {
      f.push_back(s.feats[i]);
      sp.push_back(s.speedup(i, rng));
      best = std::max(best, sp.back());
    }
    if (learn) p.learn(f, sp);
    if (sig >= 20) {  // judge after a warm-up of 20 signatures
      total += best / s.best();
      ++counted;
    }
  }
  return total / counted;
}

TEST(Policy, LearnsToPickFastVariantsInFewTrials) {
  double learned = 0, random = 0;
  for (uint64_t seed = 1; seed <= 5; ++seed) {
    learned += found_fraction(true, seed) / 5;
    random += found_fraction(false, seed) / 5;
  }
  // With 6 of 256 variants per signature, random picking reaches ~80% of the best speed; the trained policy
  // gets within a few percent of it.
  EXPECT_GT(learned, 0.95) << "learned " << learned << " random " << random;
  EXPECT_GT(learned, random + 0.08) << "learned " << learned << " random " << random;
}

TEST(Policy, FailedVariantsRankBelowWorkingOnes) {
  Policy p(2, 1);
  for (int i = 0; i < 20; ++i) p.learn({{1, 0}, {0, 1}}, {0.0, 0.9});
  EXPECT_GT(p.score({0, 1}), p.score({1, 0}));
}

TEST(Policy, ChooseReturnsDistinctIndicesBestFirst) {
  Policy p(2, 3);
  for (int i = 0; i < 30; ++i) p.learn({{1, 0}, {0, 1}}, {2.0, 1.0});
  const auto picks = p.choose({{0, 1}, {1, 0}, {0, 1}}, 3);
  ASSERT_EQ(picks.size(), 3u);
  EXPECT_EQ(picks[0], 1u);
  EXPECT_NE(picks[1], picks[2]);
  EXPECT_EQ(p.choose({{1, 0}}, 5).size(), 1u);
}

TEST(Policy, ChooseTriesEveryStratumOnceEvenWhenTaughtAgainstIt) {
  Policy p(2, 5);
  for (int i = 0; i < 50; ++i) p.learn({{1, 0}, {0, 1}}, {3.0, 1.0});  // feature 0 ("split") always won
  // Six variants: four of stratum 0 (feature 0 set), two of stratum 1 (feature 1 set), three picks.
  const std::vector<std::vector<float>> f = {{1, 0}, {1, 0}, {1, 0}, {1, 0}, {0, 1}, {0, 1}};
  const std::vector<int> strata = {0, 0, 0, 0, 1, 1};
  for (int round = 0; round < 20; ++round) {
    const auto picks = p.choose(f, 3, strata);
    ASSERT_EQ(picks.size(), 3u);
    EXPECT_EQ(strata[picks[0]], 0);  // the best-scored first
    EXPECT_EQ(strata[picks[1]], 1);  // then the uncovered stratum's best
  }
  // Without strata the taught policy almost never leaves stratum 0 in three picks.
  int other = 0;
  for (int round = 0; round < 20; ++round)
    for (size_t i : p.choose(f, 3)) other += strata[i] == 1;
  EXPECT_LT(other, 5);
}

TEST(Policy, JsonRoundTripAndValidation) {
  Policy p(3, 1);
  p.learn({{1, 0, 0}, {0, 0, 1}}, {1.5, 1.0});
  auto back = Policy::from_json(p.to_json(), 3, 1);
  ASSERT_TRUE(back.ok());
  EXPECT_DOUBLE_EQ(back->score({1, 0, 0}), p.score({1, 0, 0}));
  EXPECT_EQ(back->updates(), 1);
  EXPECT_EQ(Policy::from_json(p.to_json(), 4, 1).status().code(), Code::kMismatch);
  EXPECT_EQ(Policy::from_json("[]", 3, 1).status().code(), Code::kCorrupt);
}

}  // namespace
}  // namespace cudal1::optimizer
