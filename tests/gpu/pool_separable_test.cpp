/// @brief The separable channels-last walks (Note [Pooling separable sums]) on the device: every sep=1 variant
/// of a few avg_pool2d signatures is compiled, bound and verified against ATen within the tolerance it states
/// (fresh inputs, poisoned and guarded outputs; Note [Verification]). The shapes reach what the fuzz test's
/// random draws rarely give together: the benchmark's image, border windows with and without the padding
/// counted, a divisor_override smaller than the window (the tolerance scales with it), a 5 x 3 window, fp32.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cstdio>

#include "gpu/gpu_env.h"
#include "gpu/variant_sweep.h"
#include "optimizer/problems.h"

namespace cudal1::optimizer {
namespace {

TEST(PoolSeparable, EverySeparableWalkMatchesAten) {
  CUDAL1_REQUIRE_GPU();
  const int sm = testing::device_sm();
  ASSERT_GT(sm, 0);
  if (sm < 80) GTEST_SKIP() << "the bf16 rows are planned on sm_80+ only (device: sm_" << sm << ")";
  using testing::avg_pool_problem;
  using testing::channels_last;
  const std::vector<int64_t> bench = {4, 512, 28, 28}, odd = {3, 64, 19, 13}, wide = {2, 32, 40, 33};
  const std::vector<Problem> problems = {
      // The benchmark's image and window (count_include_pad=False: border windows divide by their cells).
      avg_pool_problem(at::kBFloat16, bench, channels_last(bench), {3, 3}, {1, 1}, {1, 1}, false, false, {}, sm),
      // Odd sizes, the padding counted, ceil mode.
      avg_pool_problem(at::kHalf, odd, channels_last(odd), {3, 3}, {1, 1}, {1, 1}, true, true, {}, sm),
      // A divisor smaller than the window's 15 cells; a 5 x 3 window, padding 2 x 1.
      avg_pool_problem(at::kFloat, wide, channels_last(wide), {5, 3}, {1, 1}, {2, 1}, false, true, 4, sm),
      // No padding, fp32 sums of 9 cells.
      avg_pool_problem(at::kFloat, odd, channels_last(odd), {3, 3}, {1, 1}, {0, 0}, false, true, {}, sm),
  };
  const auto sep = [](const Variant& v) { return v.get("sep", 0) == 1; };
  const int offered = testing::count_variants(problems, sep);
  const int verified = testing::verify_variants(problems, sep);
  std::printf("[pool separable] %d of %d separable walk variants verified\n", verified, offered);
  EXPECT_EQ(verified, offered);
  EXPECT_GE(offered, 40);  // a count of the plans; fewer means the space lost them
}

}  // namespace
}  // namespace cudal1::optimizer
