/// @brief The packed-pair max pooling (Note [Pooling packed pairs]) on the device: every pair variant of a few
/// max_pool2d signatures is compiled, bound and verified against ATen bit for bit (fresh inputs with NaN and
/// infinities, poisoned and guarded outputs; Note [Verification]). The shapes reach what the fuzz test's random
/// draws rarely give together: the ResNet stem's window, rows of several warps whose edge lanes load their own
/// halo words, halos on both sides, none, dilated rows, ceil mode's overhanging last window, an odd OW (scalar
/// stores), a sliced input with a wider row pitch and an offset, a 3-d input.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cstdio>

#include "gpu/gpu_env.h"
#include "gpu/variant_sweep.h"
#include "optimizer/problems.h"

namespace cudal1::optimizer {
namespace {

TEST(PoolPairs, EveryPackedPairVariantMatchesAten) {
  CUDAL1_REQUIRE_GPU();
  const int sm = testing::device_sm();
  ASSERT_GT(sm, 0);
  if (sm < 80) GTEST_SKIP() << "the bf16 rows are planned on sm_80+ only (device: sm_" << sm << ")";
  using testing::max_pool_problem;
  Problem sliced = max_pool_problem(at::kHalf, {2, 6, 40, 64}, {6 * 40 * 72, 40 * 72, 72, 1}, {3, 3}, {2, 2}, {1, 1},
                                    {1, 1}, false, true, sm);
  sliced.args[0].tensor.storage_offset = 8;  // 16 bytes: the 8-byte loads stay aligned
  const std::vector<Problem> problems = {
      // The benchmark's window: fp16 k3 s2 p1 with indices, 28 lanes a row, a left halo.
      max_pool_problem(at::kHalf, {2, 8, 112, 112}, {}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, false, true, sm),
      // bf16 rows of 66 lanes (3 warps), halos on both sides, dilated rows, ceil mode, no indices.
      max_pool_problem(at::kBFloat16, {3, 10, 264}, {}, {3, 4}, {1, 2}, {1, 1}, {2, 1}, true, false, sm),
      // 2 x 2 windows without padding (no halo), a 9-row plane.
      max_pool_problem(at::kHalf, {1, 4, 9, 12}, {}, {2, 2}, {2, 2}, {0, 0}, {1, 1}, false, true, sm),
      // OW = 9 (scalar stores of the last pair's low half), a right halo, row stride 3.
      max_pool_problem(at::kBFloat16, {2, 3, 7, 20}, {}, {3, 3}, {3, 2}, {0, 0}, {1, 1}, false, true, sm),
      // 34 lanes (2 warps): the edge lanes load both halo words; k4 p1.
      max_pool_problem(at::kHalf, {1, 2, 6, 136}, {}, {4, 4}, {2, 2}, {1, 1}, {1, 1}, false, true, sm),
      sliced,
      // 3-d, rows dilated by 3.
      max_pool_problem(at::kHalf, {5, 33, 128}, {}, {3, 3}, {2, 2}, {1, 1}, {3, 1}, false, true, sm),
  };
  const auto pair = [](const Variant& v) { return v.get("pair", 0) > 0; };
  const int offered = testing::count_variants(problems, pair);
  const int verified = testing::verify_variants(problems, pair);
  std::printf("[pool pairs] %d of %d packed-pair variants verified\n", verified, offered);
  EXPECT_EQ(verified, offered);
  EXPECT_EQ(offered, 22);  // 4 segment/block pairs a plan, 2 where the plane has at most 4 output rows
}

}  // namespace
}  // namespace cudal1::optimizer
