/// @brief Note [In-app confirmation]: the verdict rule on synthetic samples, and a trial's bookkeeping.
#include <gtest/gtest.h>

#include <random>

#include "cudal1/dispatcher/confirm.h"
#include "cudal1/dispatcher/sig_record.h"

namespace cudal1::dispatcher {
namespace {

std::vector<double> draw(double median, double spread, int n, uint32_t seed) {
  std::mt19937 g(seed);
  std::lognormal_distribution<double> d(std::log(median), spread);
  std::vector<double> v(n);
  for (auto& x : v) x = d(g);
  return v;
}

TEST(Confirm, AClearlyFasterKernelIsPromotedAtTheFirstCheck) {
  TrialStats s;
  EXPECT_EQ(judge(draw(10, 0.1, 32, 1), draw(7, 0.1, 32, 2), 32, 256, &s), Verdict::kPromote);
  EXPECT_NEAR(s.ratio, 10.0 / 7, 0.1);
  EXPECT_GT(s.superiority, 0.9);
  EXPECT_EQ(s.aten_n, 32);
}

TEST(Confirm, ASlowerKernelIsDemoted) {
  EXPECT_EQ(judge(draw(10, 0.1, 32, 3), draw(12, 0.1, 32, 4), 32, 256, nullptr), Verdict::kDemote);
}

TEST(Confirm, TooFewSamplesArePending) {
  EXPECT_EQ(judge(draw(10, 0.1, 31, 5), draw(5, 0.1, 64, 6), 32, 256, nullptr), Verdict::kPending);
}

TEST(Confirm, EqualTimesAreAlmostNeverPromoted) {
  // Noise alone: the same distribution for both arms. The rule's margin (2 standard errors) keeps promotions rare.
  int promoted = 0;
  for (uint32_t seed = 0; seed < 400; ++seed)
    promoted += judge(draw(10, 0.3, 64, 2 * seed), draw(10, 0.3, 64, 2 * seed + 1), 64, 64, nullptr) ==
                Verdict::kPromote;
  EXPECT_LT(promoted, 400 * 0.05);
}

TEST(Confirm, AnUndecidedTrialSamplesOnThenDemotesAtItsLimit) {
  // 3% faster under 30% noise: not decided at 32 a side; at the limit, still undecided -> demoted.
  Trial t(32, 64);
  const auto a = draw(10, 0.3, 64, 7), k = draw(9.7, 0.3, 64, 8);
  TrialStats s;
  Verdict last = Verdict::kPending;
  int verdicts = 0;
  for (int i = 0; i < 64; ++i) {
    for (bool kernel : {false, true}) {
      const Verdict v = t.add(kernel, kernel ? k[i] : a[i], &s);
      if (v != Verdict::kPending) {
        last = v;
        ++verdicts;
      }
    }
  }
  EXPECT_EQ(verdicts, 1);  // exactly once
  EXPECT_NE(last, Verdict::kPending);
  EXPECT_EQ(t.add(true, 1.0, &s), Verdict::kPending);  // decided: later samples change nothing
}

TEST(Confirm, CallsAlternateAtenFirst) {
  Trial t(4, 8);
  EXPECT_FALSE(t.kernel_turn());
  EXPECT_TRUE(t.kernel_turn());
  EXPECT_FALSE(t.kernel_turn());
}

TEST(Confirm, ATrialsConclusionPromotesOrDemotesTheRecordOnce) {
  class Nothing final : public Replacement {
    Status run(torch::jit::Stack*, size_t) noexcept override { return Status(Code::kUnsupported, "no"); }
    std::string describe() const override { return "nothing"; }
  };
  const auto op = c10::Dispatcher::singleton().findSchemaOrThrow("aten::relu", "");
  TrialStats s;
  s.ratio = 1.4;
  SigRecord kept(op, Signature{}, 0, {});
  kept.install(std::make_unique<Nothing>(), SigRecord::Outcome{}, 8);
  ASSERT_NE(kept.trial.load(), nullptr);
  EXPECT_EQ(kept.outcome().verdict, "on trial");
  EXPECT_TRUE(kept.conclude_trial(Verdict::kPromote, s));
  EXPECT_FALSE(kept.conclude_trial(Verdict::kDemote, s));  // once
  EXPECT_EQ(kept.trial.load(), nullptr);
  EXPECT_NE(kept.replacement.load(), nullptr);
  EXPECT_EQ(kept.state.load(), SigState::kReplaced);
  EXPECT_DOUBLE_EQ(kept.outcome().in_app, 1.4);
  EXPECT_EQ(kept.outcome().verdict, "promoted");

  s.ratio = 0.8;
  SigRecord dropped(op, Signature{}, 0, {});
  dropped.install(std::make_unique<Nothing>(), SigRecord::Outcome{}, 8);
  EXPECT_TRUE(dropped.conclude_trial(Verdict::kDemote, s));
  EXPECT_EQ(dropped.replacement.load(), nullptr);
  EXPECT_EQ(dropped.state.load(), SigState::kAten);
  EXPECT_EQ(dropped.outcome().verdict, "demoted");

  SigRecord untried(op, Signature{}, 0, {});
  untried.install(std::make_unique<Nothing>(), SigRecord::Outcome{});  // no trial asked for
  EXPECT_EQ(untried.trial.load(), nullptr);
  EXPECT_FALSE(untried.conclude_trial(Verdict::kDemote, s));
  EXPECT_NE(untried.replacement.load(), nullptr);
}

}  // namespace
}  // namespace cudal1::dispatcher
