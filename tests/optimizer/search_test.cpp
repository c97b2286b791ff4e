/// @brief Round selection (optimizer/search.h): the similarity model's picks (Note [Similarity model]), the knob
/// model's (Note [Knob model]) and next_round's choice between the policy and the models.
#include "cudal1/optimizer/search.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <utility>
#include <vector>

namespace cudal1::optimizer {
namespace {

/// Every combination of knob values 0..n-1 of the named knobs {name, n}, the last knob fastest.
std::vector<Variant> knob_grid(const std::vector<std::pair<std::string, int>>& knobs) {
  std::vector<Variant> out = {Variant{}};
  for (const auto& [name, n] : knobs) {
    std::vector<Variant> next;
    for (const Variant& v : out)
      for (int x = 0; x < n; ++x) {
        next.push_back(v);
        next.back().knobs.emplace_back(name, x);
      }
    out = std::move(next);
  }
  return out;
}

/// 3 x 4 x 2 variants of knobs a, b, c; the true log kernel time is additive: a + 2 b - c / 2 (scaled), so the
/// best variant is a=0, b=0, c=1.
std::vector<Variant> grid() { return knob_grid({{"a", 3}, {"b", 4}, {"c", 2}}); }

double true_log_time(const Variant& v) { return 0.1 * v.get("a") + 0.2 * v.get("b") - 0.05 * v.get("c"); }

size_t index_of(const std::vector<Variant>& space, int a, int b, int c) {
  for (size_t i = 0; i < space.size(); ++i)
    if (space[i].get("a") == a && space[i].get("b") == b && space[i].get("c") == c) return i;
  return space.size();
}

TEST(SearchModels, PredictTheUntriedBestOfAnAdditiveLandscape) {
  const auto space = grid();
  // Eight trials that vary every knob but never a=0 with b=0 together.
  const std::vector<size_t> tried = {index_of(space, 0, 1, 0), index_of(space, 0, 2, 1), index_of(space, 1, 0, 0),
                                     index_of(space, 2, 0, 1), index_of(space, 1, 3, 1), index_of(space, 2, 2, 0),
                                     index_of(space, 1, 1, 1), index_of(space, 2, 3, 0)};
  std::vector<double> speedups;
  for (size_t i : tried) speedups.push_back(std::exp(-true_log_time(space[i])));
  const auto picks = knob_model_picks(space, tried, speedups, 3, kKnobModelLambda, 0.0);  // the predictions alone
  ASSERT_EQ(picks.size(), 3u);
  EXPECT_EQ(picks[0], index_of(space, 0, 0, 1));  // the true best, never measured
  for (size_t p : picks) EXPECT_EQ(space[p].get("b"), 0) << space[p].id();  // the strongest knob's best value
  for (size_t p : picks) EXPECT_EQ(std::count(tried.begin(), tried.end(), p), 0) << p;
  // The similarity model's predictions alone find it too (its covariance has the additive part).
  SimilarityModel means_only;
  means_only.beta = 0;
  const auto gp = similarity_model_picks(space, tried, speedups, 1, means_only);
  ASSERT_EQ(gp.size(), 1u);
  EXPECT_EQ(gp[0], index_of(space, 0, 0, 1)) << space[gp[0]].id();
}

TEST(KnobModel, TheBoundFavoursTheKnobValueLeastMeasured) {
  // Only b matters (0.1 a step), timings carry +-2% noise. a=0 and a=1 were measured 5 times each, a=2 once (at
  // the slowest b). The predictions of the b=0 variants are about equal over a; a=2's is the least certain, so the
  // lower confidence bound tries it first, while the predictions alone take the space's first (a=0).
  const auto space = grid();
  std::vector<size_t> tried;
  for (int a = 0; a < 2; ++a)
    for (int b = 0; b < 4; ++b) tried.push_back(index_of(space, a, b, (a + b) % 2));
  tried.push_back(index_of(space, 0, 2, 1));
  tried.push_back(index_of(space, 1, 2, 0));
  tried.push_back(index_of(space, 2, 3, 1));
  std::vector<double> speedups;
  for (size_t n = 0; n < tried.size(); ++n)
    speedups.push_back(std::exp(-0.1 * space[tried[n]].get("b") + (n % 2 ? 0.02 : -0.02)));
  const auto mean_only = knob_model_picks(space, tried, speedups, 1, kKnobModelLambda, 0.0);
  const auto bound = knob_model_picks(space, tried, speedups, 1);
  ASSERT_EQ(mean_only.size(), 1u);
  ASSERT_EQ(bound.size(), 1u);
  EXPECT_EQ(space[mean_only[0]].get("b"), 0) << space[mean_only[0]].id();
  EXPECT_NE(space[mean_only[0]].get("a"), 2) << space[mean_only[0]].id();
  EXPECT_EQ(space[bound[0]].get("b"), 0) << space[bound[0]].id();
  EXPECT_EQ(space[bound[0]].get("a"), 2) << space[bound[0]].id();
}

TEST(KnobModel, FailedTrialsCountAsSlowAndNothingTimedGivesNothing) {
  const auto space = grid();
  // b=0 only ever failed; the timed trials (b=1..3) are equally fast: the model must not prefer b=0.
  const std::vector<size_t> tried = {index_of(space, 0, 0, 0), index_of(space, 1, 0, 1), index_of(space, 0, 1, 0),
                                     index_of(space, 1, 2, 1), index_of(space, 2, 3, 0)};
  const std::vector<double> speedups = {0.0, 0.0, 1.5, 1.5, 1.5};
  const auto picks = knob_model_picks(space, tried, speedups, 4);
  ASSERT_EQ(picks.size(), 4u);
  for (size_t p : picks) EXPECT_NE(space[p].get("b"), 0) << space[p].id();
  EXPECT_TRUE(knob_model_picks(space, tried, {0.0, 0.0, 0.0, 0.0, -1.0}, 4).empty());  // no timed trial
  EXPECT_TRUE(knob_model_picks(space, tried, {1.0}, 4).empty());                       // sizes differ
  std::vector<size_t> all(space.size());
  for (size_t i = 0; i < all.size(); ++i) all[i] = i;
  EXPECT_TRUE(knob_model_picks(space, all, std::vector<double>(all.size(), 1.0), 4).empty());  // all tried
}

/// 4 x 4 x 2 x 2 x 2 variants of knobs a, b, c, d, e whose true log time is additive (0.1 a + 0.1 b + 0.05 (c +
/// d + e)) except a pocket: a=3, b=3, c=0 runs three times faster than anything else, as a cluster tile's own
/// sizes do while the same knob values are slow on plain tiles (Note [Similarity model]).
std::vector<Variant> pocket_space() { return knob_grid({{"a", 4}, {"b", 4}, {"c", 2}, {"d", 2}, {"e", 2}}); }

double pocket_log_time(const Variant& v) {
  const bool pocket = v.get("a") == 3 && v.get("b") == 3 && v.get("c") == 0;
  return (pocket ? -1.0 : 0.1 * v.get("a") + 0.1 * v.get("b") + 0.05 * v.get("c")) +
         0.05 * (v.get("d") + v.get("e"));
}

/// Knob values in which `x` and `y` differ.
int knobs_apart(const Variant& x, const Variant& y) {
  int d = 0;
  for (const auto& kv : x.knobs) d += kv.second != y.get(kv.first);
  return d;
}

TEST(SimilarityModel, ExploitsTheNeighbourhoodOfAFastTrial) {
  const auto space = pocket_space();
  const auto at = [&](int a, int b, int c, int d, int e) {
    for (size_t i = 0; i < space.size(); ++i)
      if (space[i].get("a") == a && space[i].get("b") == b && space[i].get("c") == c && space[i].get("d") == d &&
          space[i].get("e") == e)
        return i;
    return space.size();
  };
  // Ten trials; one of them, (3,3,0,1,1), in the pocket; the other a=3 or b=3 trials are slow.
  const std::vector<size_t> tried = {at(0, 0, 1, 0, 1), at(1, 2, 0, 1, 0), at(2, 1, 1, 1, 1), at(3, 0, 1, 0, 0),
                                     at(0, 3, 0, 0, 1), at(3, 3, 0, 1, 1), at(1, 1, 0, 0, 0), at(2, 3, 1, 1, 0),
                                     at(3, 2, 1, 1, 1), at(0, 2, 1, 0, 0)};
  std::vector<double> speedups;
  for (size_t i : tried) speedups.push_back(std::exp(-pocket_log_time(space[i])));
  // The predictions alone: the fast trial lifts its own neighbourhood (variants one knob value away).
  SimilarityModel means_only;
  means_only.beta = 0;
  const auto picks = similarity_model_picks(space, tried, speedups, 3, means_only);
  ASSERT_EQ(picks.size(), 3u);
  for (size_t p : picks) EXPECT_EQ(knobs_apart(space[p], space[at(3, 3, 0, 1, 1)]), 1) << space[p].id();
  // With the default bound, a whole round: distinct, untried, deterministic.
  const auto round = similarity_model_picks(space, tried, speedups, 6);
  ASSERT_EQ(round.size(), 6u);
  for (size_t p : round) {
    EXPECT_EQ(std::count(tried.begin(), tried.end(), p), 0) << p;
    EXPECT_EQ(std::count(round.begin(), round.end(), p), 1) << p;
  }
  EXPECT_EQ(round, similarity_model_picks(space, tried, speedups, 6));
}

TEST(SimilarityModel, TheRoundSpreadsOverNeighbourhoods) {
  // Every trial equally fast: with the bound, the round's picks go where the trials are fewest. Without the
  // kriging believer all picks would be the variants farthest from the trials, one neighbourhood; with it, a
  // pick's own neighbours become less uncertain, so the next pick is elsewhere: no two picks one knob apart
  // while a variant two or more knobs from all earlier picks is left.
  const auto space = grid();
  const std::vector<size_t> tried = {index_of(space, 0, 0, 0), index_of(space, 1, 1, 1), index_of(space, 2, 2, 0)};
  const auto round = similarity_model_picks(space, tried, {1.0, 1.0, 1.0}, 3);
  ASSERT_EQ(round.size(), 3u);
  const auto apart = [&](size_t x, size_t y) {
    return (space[x].get("a") != space[y].get("a")) + (space[x].get("b") != space[y].get("b")) +
           (space[x].get("c") != space[y].get("c"));
  };
  for (size_t i = 0; i < round.size(); ++i)
    for (size_t j = i + 1; j < round.size(); ++j)
      EXPECT_GE(apart(round[i], round[j]), 2) << space[round[i]].id() << " " << space[round[j]].id();
}

TEST(SimilarityModel, FailedTrialsCountAsSlowAndBadInputGivesNothing) {
  const auto space = grid();
  // b=0 only ever failed; the timed trials (b=1..3) are equally fast: the model must not prefer b=0.
  const std::vector<size_t> tried = {index_of(space, 0, 0, 0), index_of(space, 1, 0, 1), index_of(space, 0, 1, 0),
                                     index_of(space, 1, 2, 1), index_of(space, 2, 3, 0)};
  const std::vector<double> speedups = {0.0, 0.0, 1.5, 1.5, 1.5};
  SimilarityModel means_only;
  means_only.beta = 0;
  const auto picks = similarity_model_picks(space, tried, speedups, 4, means_only);
  ASSERT_EQ(picks.size(), 4u);
  for (size_t p : picks) EXPECT_NE(space[p].get("b"), 0) << space[p].id();
  EXPECT_TRUE(similarity_model_picks(space, tried, {0.0, 0.0, 0.0, 0.0, -1.0}, 4).empty());  // no timed trial
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  EXPECT_TRUE(similarity_model_picks(space, tried, {inf, nan, 0.0, 0.0, 0.0}, 4).empty());  // none finite
  EXPECT_EQ(similarity_model_picks(space, tried, {inf, nan, 1.5, 1.5, 1.5}, 4, means_only), picks);  // as failed
  EXPECT_TRUE(similarity_model_picks(space, tried, {1.0}, 4).empty());                       // sizes differ
  EXPECT_TRUE(similarity_model_picks(space, {space.size()}, {1.0}, 4).empty());              // out of range
  EXPECT_TRUE(similarity_model_picks({}, {}, {}, 4).empty());                                // no space
  std::vector<size_t> all(space.size());
  for (size_t i = 0; i < all.size(); ++i) all[i] = i;
  EXPECT_TRUE(similarity_model_picks(space, all, std::vector<double>(all.size(), 1.0), 4).empty());  // all tried
  std::vector<size_t> most(all.begin(), all.end() - 2);
  EXPECT_EQ(similarity_model_picks(space, most, std::vector<double>(most.size(), 1.0), 4).size(), 2u);
}

TEST(NextRound, RoundOneIsThePolicysAndLaterRoundsFollowTheSearch) {
  const auto space = grid();
  std::vector<std::vector<float>> feats;
  std::vector<int> strata;
  for (const auto& v : space) {
    feats.push_back({1.f, float(v.get("a") == 0), float(v.get("b") == 0), float(v.get("c") == 1)});
    strata.push_back(v.get("a"));
  }
  Policy a(4, 7), b(4, 7);
  const Trials none;
  EXPECT_EQ(next_round(a, TuneSearch::kGp, space, feats, strata, none, 4, 5), b.choose(feats, 4, strata));

  Trials done;
  for (size_t i : {index_of(space, 0, 1, 0), index_of(space, 1, 0, 1), index_of(space, 2, 2, 0)}) {
    done.add(i, feats[i], std::exp(-true_log_time(space[i])));
  }
  const Policy base(4, 9);
  Policy p1 = base, p2 = base;
  EXPECT_EQ(next_round(p1, TuneSearch::kGp, space, feats, strata, done, 4, 11),
            similarity_model_picks(space, done.index, done.speedups, 4));
  EXPECT_EQ(next_round(p1, TuneSearch::kKnobs, space, feats, strata, done, 4, 11),
            knob_model_picks(space, done.index, done.speedups, 4));
  EXPECT_EQ(next_round(p1, TuneSearch::kKnobsMean, space, feats, strata, done, 4, 11),
            knob_model_picks(space, done.index, done.speedups, 4, kKnobModelLambda, 0.0));
  EXPECT_EQ(next_round(p1, TuneSearch::kPolicy, space, feats, strata, done, 4, 11),
            p2.adapted(done.features, done.speedups, 11).choose(feats, 4, strata, done.index));
  // Past kSimilarityMaxTrials trials the similarity model hands over to the knob model (its cost grows with the
  // cube of the trials): a space of 4^4 x 2 variants, every one but each 40th tried, their time with an interaction
  // (b == c is faster) that the additive model cannot fit, so the two models pick differently.
  const std::vector<Variant> big = knob_grid({{"a", 4}, {"b", 4}, {"c", 4}, {"d", 4}, {"e", 2}});
  std::vector<std::vector<float>> big_feats(big.size(), std::vector<float>(4, 0.f));
  std::vector<int> big_strata(big.size(), 0);
  Trials many;
  for (size_t i = 0; i < big.size(); ++i)
    if (i % 40 != 7)
      many.add(i, big_feats[i], std::exp(-0.1 * big[i].get("a") - 0.3 * (big[i].get("b") == big[i].get("c"))));
  ASSERT_GT(many.size(), kSimilarityMaxTrials);
  const auto knob_picks = knob_model_picks(big, many.index, many.speedups, 4);
  EXPECT_EQ(next_round(p1, TuneSearch::kGp, big, big_feats, big_strata, many, 4, 11), knob_picks);
  EXPECT_NE(similarity_model_picks(big, many.index, many.speedups, 4), knob_picks);  // the two models differ here
  // With nothing timed the knob model has nothing to fit: the adapted policy picks.
  Trials failed = done;
  std::fill(failed.speedups.begin(), failed.speedups.end(), 0.0);
  EXPECT_EQ(next_round(p1, TuneSearch::kKnobs, space, feats, strata, failed, 4, 11),
            p2.adapted(failed.features, failed.speedups, 11).choose(feats, 4, strata, failed.index));
  EXPECT_EQ(next_round(p1, TuneSearch::kGp, space, feats, strata, failed, 4, 11),
            p2.adapted(failed.features, failed.speedups, 11).choose(feats, 4, strata, failed.index));
}

}  // namespace
}  // namespace cudal1::optimizer
