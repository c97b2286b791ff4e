/// @brief The tuner's search against uniform random picks on GPU-measured landscapes it never learned from
/// (bench/replay: ten benchmark rows of six families, each replayed with a fresh policy, so every row is held
/// out), CPU only (bench/search_replay.h). The measure is the issue's: trials until a variant within 95% of the
/// best's speed has been tried, averaged over seeds and rows (a seed that never finds one counts trials + 1).
/// The test fails when the default search (round 1 by the contrastive policy with strata, later rounds by the
/// similarity model: CUDAL1_TUNE_SEARCH=gp) is not better than random; it prints both and their ratio.
#include <gtest/gtest.h>

#include <cstdio>

#include "bench/search_replay.h"

namespace cudal1::bench {
namespace {

double mean_trials95(const std::vector<Landscape>& rows, const std::string& strategy, std::vector<double>* per_row) {
  Options o;
  o.strategy = strategy;
  o.trials = 64;
  o.round = 4;
  o.seeds = 24;
  const std::vector<Outcome> out = replay(rows, o);
  double mean = 0;
  for (const Outcome& x : out) {
    mean += x.mean_trials95 / static_cast<double>(out.size());
    if (per_row) per_row->push_back(x.mean_trials95);
  }
  return mean;
}

TEST(SearchReplay, TheDefaultSearchFindsA95PercentKernelInFewerTrialsThanRandom) {
  std::vector<std::string> skipped;
  const std::vector<Landscape> rows = load_landscapes(CUDAL1_REPLAY_DIR, &skipped);
  for (const auto& s : skipped) std::printf("skipped: %s\n", s.c_str());
  ASSERT_GE(rows.size(), 8u) << "the recorded landscapes no longer plan: re-record them (bench/tuner_replay.cpp)";
  std::vector<double> gp_rows, random_rows;
  const double gp = mean_trials95(rows, "gp", &gp_rows);
  const double random = mean_trials95(rows, "random", &random_rows);
  for (size_t r = 0; r < rows.size(); ++r)
    std::printf("%-42s default %5.1f  random %5.1f trials to 95%%\n", rows[r].name.c_str(), gp_rows[r],
                random_rows[r]);
  std::printf("mean over %zu rows: default %.1f, random %.1f trials (ratio %.2f)\n", rows.size(), gp, random,
              gp / random);
  EXPECT_LT(gp, random);
}

}  // namespace
}  // namespace cudal1::bench
