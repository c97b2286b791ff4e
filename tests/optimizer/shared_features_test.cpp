/// @brief The shared feature schema (Note [Shared features]) and the cross-family policy's pieces (Note
/// [Cross-family policy]): features read from knob names and the problem's class, the prior's standardised scores,
/// a policy taught from a landscape ranking its best variants first, and round 1 following the prior. CPU only.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "cudal1/optimizer/policy.h"
#include "cudal1/optimizer/shared_features.h"
#include "optimizer/problems.h"

namespace cudal1::optimizer {
namespace {

std::set<std::string> names_of(const std::vector<float>& f) {
  std::set<std::string> out;
  for (size_t i = 0; i < f.size(); ++i)
    if (f[i] != 0) out.insert(shared_feature_name(i));
  return out;
}

Variant variant(std::vector<std::pair<std::string, int>> knobs) { return Variant{std::move(knobs)}; }

TEST(SharedFeatures, AreReadFromKnobNamesAndTheProblemsClass) {
  const Problem p = cudal1::testing::unary_problem("gelu", at::kHalf, {4096, 11008}, {11008, 1});
  const ProblemClass c = problem_class(p);
  EXPECT_EQ(c.elem_bytes, 2);
  EXPECT_EQ(c.elements, int64_t{4096} * 11008);
  EXPECT_EQ(c.inner, 11008);
  EXPECT_FALSE(c.compute_bound);
  const std::vector<Variant> space = {variant({{"vec", 8}, {"block", 128}, {"unroll", 2}, {"grid", 0}}),
                                      variant({{"vec", 1}, {"block", 1024}, {"unroll", 1}, {"grid", 1}})};
  const auto f = shared_features(space[0], c, space_range(space));
  ASSERT_EQ(f.size(), shared_feature_dim());
  EXPECT_EQ(names_of(f), (std::set<std::string>{"widest-vec", "smallest-block", "most-work", "widest-vec x 2-byte",
                                                "smallest-block x 2-byte", "most-work x 2-byte"}));
  EXPECT_TRUE(names_of(shared_features(space[1], c, space_range(space))).count("gridloop x 2-byte"));
  // Pooling variants: no vector knob (one element each, so no vector extreme), work from the output tile, shared
  // memory staging.
  const std::vector<Variant> pool = {variant({{"opw", 2}, {"oph", 2}, {"block", 256}, {"smem", 1}}),
                                     variant({{"opw", 1}, {"oph", 1}, {"block", 128}, {"smem", 0}})};
  const ProblemClass large{4, int64_t{1} << 24, 4096, false};  // 4-byte, 2^24 elements, rows of 4096
  EXPECT_EQ(names_of(shared_features(pool[0], large, space_range(pool))),
            (std::set<std::string>{"largest-block", "most-work", "staged"}));
}

TEST(CrossFamilyPolicy, AnUntrainedPolicyGivesNoPrior) {
  const Policy fresh(shared_feature_dim(), 1);
  const std::vector<Variant> space = {variant({{"vec", 1}}), variant({{"vec", 4}})};
  const std::vector<std::vector<float>> f = {shared_features(space[0], ProblemClass{}, space_range(space)),
                                             shared_features(space[1], ProblemClass{}, space_range(space))};
  EXPECT_EQ(prior_scores(fresh, f), (std::vector<double>{0, 0}));
  EXPECT_EQ(prior_scores(Policy(3, 1), f), (std::vector<double>{0, 0})) << "another dimension: no prior";
}

TEST(CrossFamilyPolicy, ALandscapeTeachesItsBestTechniquesAndRoundOneFollowsThePrior) {
  std::vector<Variant> space;
  std::vector<double> speedups;
  for (int vec : {1, 2, 4})
    for (int block : {128, 256, 512, 1024}) {
      space.push_back(variant({{"vec", vec}, {"block", block}}));
      // The widest vector with the largest block wins by far; either alone helps a little.
      speedups.push_back(vec == 4 && block == 1024 ? 2.0 : 1.0 + 0.1 * (vec == 4) + 0.1 * (block == 1024));
    }
  std::vector<std::vector<float>> f;
  for (const Variant& v : space) f.push_back(shared_features(v, ProblemClass{}, space_range(space)));
  Policy shared(shared_feature_dim(), 1);
  shared.learn_landscapes({{&f, &speedups}}, 200);
  const std::vector<double> prior = prior_scores(shared, f);
  const size_t top = static_cast<size_t>(std::max_element(prior.begin(), prior.end()) - prior.begin());
  EXPECT_EQ(space[top].id(), "vec4.block1024");
  Policy family(4, 7);  // untrained: alone it picks at random
  EXPECT_EQ(family.choose(std::vector<std::vector<float>>(space.size(), std::vector<float>(4, 0.f)), 1, {}, {},
                          prior),
            std::vector<size_t>{top});
  auto back = Policy::from_json(shared.to_json(), shared_feature_dim(), 1);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(prior_scores(back.value(), f), prior);
}

TEST(CrossFamilyPolicy, TheShippedPriorForSm90Loads) {
  ASSERT_FALSE(shipped_shared_prior(90).empty());
  EXPECT_TRUE(shipped_shared_prior(80).empty());
  auto p = Policy::from_json(std::string(shipped_shared_prior(90)), shared_feature_dim(), 1);
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  EXPECT_GT(p.value().updates(), 0);
}

}  // namespace
}  // namespace cudal1::optimizer
