/// @brief The tuner's search against uniform random picks on GPU-measured landscapes it never learned from
/// (bench/replay: ten benchmark rows of six families, each replayed with a fresh policy, so every row is held
/// out), CPU only (bench/search_replay.h). The measure is the issue's: trials until a variant within 95% of the
/// best's speed has been tried, averaged over seeds and rows (a seed that never finds one counts trials + 1).
/// The test fails when the search (round 1 by the contrastive policy with strata, later rounds by the similarity
/// model: CUDAL1_TUNE_SEARCH=gp; "default" below, without the cross-family prior) is not better than random; it
/// prints both and their ratio. With whole families left out, the cross-family prior (Note [Cross-family policy])
/// must beat random too, and must be at least as good as the search without it if the tuner uses it by default.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>

#include "bench/search_replay.h"
#include "cudal1/optimizer/tuner.h"

namespace cudal1::bench {
namespace {

/// The issue's replay: 64 trials in rounds of 4, 24 seeds.
Options issue_options(const std::string& strategy = "gp") {
  Options o;
  o.strategy = strategy;
  o.trials = 64;
  o.round = 4;
  o.seeds = 24;
  return o;
}

double mean_trials95(const std::vector<Landscape>& rows, const std::string& strategy, std::vector<double>* per_row) {
  const Options o = issue_options(strategy);
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

/// Mean trials to 95% over the rows where `use[r]`, from replay outcomes.
double mean_over(const std::vector<Outcome>& out, const std::vector<bool>& use) {
  double sum = 0;
  int n = 0;
  for (size_t r = 0; r < out.size(); ++r)
    if (use[r]) sum += out[r].mean_trials95, ++n;
  return n ? sum / n : 0;
}

// Note [Contrastive policy], measured on its own: the policy a row starts with has learned only from the other rows
// of its family (held out), as a persistent policy has when a new signature of a known family turns hot. Against
// random picks and against the same search with an untrained policy, on the rows whose family has another row.
TEST(SearchReplay, APolicyTaughtByTheFamilysOtherRowsBeatsRandomOnTheRowHeldOut) {
  const std::vector<Landscape> rows = load_landscapes(CUDAL1_REPLAY_DIR, nullptr);
  ASSERT_GE(rows.size(), 8u);
  const Options o = issue_options();
  std::vector<int> taught_by;
  const std::vector<Outcome> taught = replay_held_out(rows, o, &taught_by);
  Options policy_only = o;
  policy_only.strategy = "policy";
  const std::vector<Outcome> taught_policy = replay_held_out(rows, policy_only, nullptr);
  const std::vector<Outcome> fresh = replay(rows, o);
  const std::vector<Outcome> rand = replay(rows, issue_options("random"));
  std::vector<bool> held(rows.size());
  for (size_t r = 0; r < rows.size(); ++r) {
    held[r] = taught_by[r] > 0;
    std::printf("%-42s taught by %d: default %5.1f  policy only %5.1f  untrained %5.1f  random %5.1f\n",
                rows[r].name.c_str(), taught_by[r], taught[r].mean_trials95, taught_policy[r].mean_trials95,
                fresh[r].mean_trials95, rand[r].mean_trials95);
  }
  const double t = mean_over(taught, held), p = mean_over(taught_policy, held), f = mean_over(fresh, held),
               x = mean_over(rand, held);
  std::printf("held-out rows: taught default %.1f, taught policy only %.1f, untrained default %.1f, random %.1f "
              "trials to 95%% (taught/random %.2f; the issue's target is 1/3)\n", t, p, f, x, t / x);
  ASSERT_GE(std::count(held.begin(), held.end(), true), 6);
  EXPECT_LT(t, x) << "the taught policy's search must beat random on rows it never saw";
}

// Note [Cross-family policy], the issue's measure: leave one family out. The cross-family prior is taught by the other
// families' recorded landscapes only (never the family tuned), then each row of the family left out is tuned from a
// fresh family policy with that prior; against the default search (fresh policy, no prior) and random picks.
TEST(SearchReplay, ACrossFamilyPriorBeatsRandomAndTheDefaultOnFamiliesItNeverSaw) {
  const std::vector<Landscape> rows = load_landscapes(CUDAL1_REPLAY_DIR, nullptr);
  ASSERT_GE(rows.size(), 8u);
  const Options o = issue_options();
  const std::vector<Outcome> shared = replay_family_out(rows, o);
  const std::vector<Outcome> fresh = replay(rows, o);
  const std::vector<Outcome> rand = replay(rows, issue_options("random"));
  const std::vector<bool> all(rows.size(), true);
  for (size_t r = 0; r < rows.size(); ++r)
    std::printf("%-42s %-18s random %5.1f  default %5.1f  cross-family prior %5.1f\n", rows[r].name.c_str(),
                rows[r].family.c_str(), rand[r].mean_trials95, fresh[r].mean_trials95, shared[r].mean_trials95);
  const double s = mean_over(shared, all), f = mean_over(fresh, all), x = mean_over(rand, all);
  std::printf("families left out: random %.1f, default %.1f, cross-family prior %.1f trials to 95%% (prior/random "
              "%.2f; the issue's target is 1/3)\n", x, f, s, s / x);
  EXPECT_LT(s, x) << "the cross-family prior's search must beat random on families it never saw";
  // Issue 39 item 4: the prior may steer the tuner by default only where it is at least as good as the search
  // without it on families it never saw. Here it is, but with teaching constants fitted on these same landscapes;
  // chosen by nested leave-one-family-out it trails (bench/probes/prior_nested_replay.cpp), so it is off by
  // default (CUDAL1_TUNE_PRIOR=on turns it on).
  if (optimizer::TunerOptions{}.shared_prior) EXPECT_LE(s, f) << "the default uses a prior that does not pay";
  else
    std::printf("the default search stays without the prior (with its fitted constants the prior %s it here)\n",
                s <= f ? "beats" : "trails");
}

}  // namespace
}  // namespace cudal1::bench
