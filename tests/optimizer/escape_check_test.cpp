/// @brief The timing guard's rule for work that escaped the stream (Note [Timing], check_escape): systematic
/// extra time after the end event rejects a candidate, extra time that comes and goes (the host's wake-up, an
/// application or another process using the device meanwhile) does not.
#include <gtest/gtest.h>

#include <vector>

#include "cudal1/optimizer/measure.h"

namespace cudal1::optimizer {
namespace {

/// `n` repetitions of `base` us; in each run of `m` of them the first `k` are `spike` us more.
std::vector<double> reps(int n, double base, int k = 0, int m = 1, double spike = 0) {
  std::vector<double> v;
  for (int i = 0; i < n; ++i) v.push_back(base + (i % m < k ? spike : 0.0));
  return v;
}

TEST(EscapeCheck, WorkOnASideStreamInEveryRepetitionIsCaught) {
  const EscapeCheck c = check_escape(reps(60, 8.0 + 50.0), reps(60, 8.0));
  EXPECT_TRUE(c.escaped);
  EXPECT_NEAR(c.escaped_us, 50.0, 1e-9);
}

TEST(EscapeCheck, SpikesInSomeRepetitionsAreNotEscapedWork) {
  // Three in five of the candidate's repetitions 300 us late (a busy host or device), ATen's none: the median
  // (the old rule) says 300 us, the 25th percentile 0.
  const EscapeCheck c = check_escape(reps(60, 8.0, 3, 5, 300.0), reps(60, 8.0));
  EXPECT_FALSE(c.escaped) << c.escaped_us;
  EXPECT_NEAR(c.escaped_us, 0.0, 1e-9);
  // The same spikes on both sides.
  EXPECT_FALSE(check_escape(reps(60, 8.0, 1, 2, 300.0), reps(60, 8.0, 1, 2, 300.0)).escaped);
  // Late in four of every five: that is no longer "now and then".
  EXPECT_TRUE(check_escape(reps(60, 8.0, 4, 5, 300.0), reps(60, 8.0)).escaped);
}

TEST(EscapeCheck, TheSlackScalesWithAtensOwnExtraTime) {
  // Extra time within 20 us + ATen's median of ATen's passes; past it fails.
  EXPECT_FALSE(check_escape(reps(40, 30.0 + 25.0), reps(40, 30.0)).escaped);
  EXPECT_TRUE(check_escape(reps(40, 30.0 + 55.0), reps(40, 30.0)).escaped);
  // Work shorter than the slack is not seen (Note [Timing]: it buys at most that much).
  EXPECT_FALSE(check_escape(reps(40, 5.0 + 15.0), reps(40, 5.0)).escaped);
}

TEST(EscapeCheck, NoRepetitionsMeanNoEscape) {
  const EscapeCheck c = check_escape({}, {});
  EXPECT_FALSE(c.escaped);
  EXPECT_EQ(c.escaped_us, 0.0);
}

}  // namespace
}  // namespace cudal1::optimizer
