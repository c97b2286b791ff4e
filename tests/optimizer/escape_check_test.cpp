/// @brief The timing guard's rule for work that escaped the stream (Note [Timing], check_escape): systematic
/// extra time after the end event rejects a candidate, extra time that comes and goes (the host's wake-up, an
/// application or another process using the device meanwhile) does not.
#include <gtest/gtest.h>

#include <vector>

#include "cudal1/optimizer/measure.h"

namespace cudal1::optimizer {
namespace {

/// `n` repetitions of `base` us, every `every`-th (from the first) `spike` us more.
std::vector<double> reps(int n, double base, int every = 0, double spike = 0) {
  std::vector<double> v;
  for (int i = 0; i < n; ++i) v.push_back(base + (every > 0 && i % every == 0 ? spike : 0.0));
  return v;
}

TEST(EscapeCheck, WorkOnASideStreamInEveryRepetitionIsCaught) {
  const EscapeCheck c = check_escape(reps(60, 8.0 + 50.0), reps(60, 8.0));
  EXPECT_TRUE(c.escaped);
  EXPECT_NEAR(c.escaped_us, 50.0, 1e-9);
}

TEST(EscapeCheck, SpikesInSomeRepetitionsAreNotEscapedWork) {
  // A third of the candidate's repetitions 300 us late (a busy host or device), ATen's none: its median would
  // say 300 us, its 25th percentile says 0.
  const EscapeCheck c = check_escape(reps(60, 8.0, 3, 300.0), reps(60, 8.0));
  EXPECT_FALSE(c.escaped) << c.escaped_us;
  EXPECT_NEAR(c.escaped_us, 0.0, 1e-9);
  // The same spikes on both sides.
  EXPECT_FALSE(check_escape(reps(60, 8.0, 2, 300.0), reps(60, 8.0, 2, 300.0)).escaped);
}

TEST(EscapeCheck, TheSlackScalesWithAtensOwnExtraTime) {
  // Extra time within 20 us + ATen's median of ATen's passes; past it fails.
  EXPECT_FALSE(check_escape(reps(40, 30.0 + 25.0), reps(40, 30.0)).escaped);
  EXPECT_TRUE(check_escape(reps(40, 30.0 + 55.0), reps(40, 30.0)).escaped);
  // Work shorter than the slack is not seen (Note [Timing]: a side stream buys at most that much).
  EXPECT_FALSE(check_escape(reps(40, 5.0 + 15.0), reps(40, 5.0)).escaped);
}

TEST(EscapeCheck, NoRepetitionsMeanNoEscape) {
  const EscapeCheck c = check_escape({}, {});
  EXPECT_FALSE(c.escaped);
  EXPECT_EQ(c.escaped_us, 0.0);
}

}  // namespace
}  // namespace cudal1::optimizer
