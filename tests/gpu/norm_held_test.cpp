/// @brief Modes 7 and 8 of the norm family (Note [Norm held]) on the device: every mode-7 and every mode-8 variant
/// of a few signatures is compiled, bound and verified against ATen (fresh inputs, poisoned and guarded outputs;
/// Note [Verification]).
/// The shapes reach what the fuzz test's random sizes rarely give together: whole slices in registers and
/// slices half reread (clusters of 16, 8, 4, 2 and 1, the last without an exchange), rows over 2 to 128 grid
/// blocks (mode 8), a last chunk and a last block's slice shorter than the others, fewer rows than clusters or
/// groups of blocks, group norm with rounded 16-bit statistics, and 16-bit vectors without affine parameters.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cstdio>

#include "gpu/gpu_env.h"
#include "gpu/variant_sweep.h"
#include "optimizer/problems.h"

namespace cudal1::optimizer {
namespace {

/// Verifies every variant of `mode` of the problems; `planned` is counted from the planner's rules (Note [Norm
/// held]): fewer means the space changed.
void verify_mode(int mode, const std::vector<Problem>& problems, int planned) {
  auto pick = [mode](const Variant& v) { return v.get("mode") == mode; };
  const int count = testing::count_variants(problems, pick);
  const int verified = testing::verify_variants(problems, pick);
  std::printf("[norm held] %d of %d mode-%d variants verified\n", verified, count, mode);
  EXPECT_EQ(count, planned);
  EXPECT_EQ(verified, count);
}

TEST(NormHeld, EveryHeldVariantMatchesAten) {
  CUDAL1_REQUIRE_GPU();
  const int sm = testing::device_sm();
  ASSERT_GT(sm, 0);
  if (sm < 90) GTEST_SKIP() << "mode 7 needs sm_90+ (thread-block clusters, bulk copies); this device is sm_" << sm;
  verify_mode(7, {
      // 2 MB fp32 rows (16 of them): clusters of 16 keep them, clusters of 8 reread half. 10 variants.
      testing::group_norm_problem(at::kFloat, {2, 64, 256, 256}, 8, true, sm),
      // 75002 float4 a row: the last chunk and the last block's slice are short. 10 variants.
      testing::layer_norm_problem(at::kFloat, {3, 300008}, 1, true, true, sm),
      // 4 MB fp32 rows, fewer than the clusters the device holds: half of each slice reread. 2 variants.
      testing::layer_norm_problem(at::kFloat, {5, 1048576}, 1, true, false, sm),
      // bf16 rows of 512 KB without weight or bias: clusters of 4 and 8 keep them, of 2 reread. 14 variants.
      testing::layer_norm_problem(at::kBFloat16, {7, 262144}, 1, false, false, sm),
      // fp16 group norm (statistics rounded to fp16, the fused affine form), 256 KB rows: clusters of 1 (no
      // exchange) reread half, clusters of 2 and 4 keep them. 14 variants.
      testing::group_norm_problem(at::kHalf, {3, 32, 128, 128}, 4, true, sm),
  }, 50);
}

TEST(NormHeld, EveryGridHeldVariantMatchesAten) {
  CUDAL1_REQUIRE_GPU();
  const int sm = testing::device_sm();
  ASSERT_GT(sm, 0);
  if (sm < 90) GTEST_SKIP() << "mode 8 needs sm_90+ (bulk copies, mbarriers); this device is sm_" << sm;
  // Every signature: 8 variants (blocks 256 and 512, 16 and 32 KB chunks, tight and deep rings).
  verify_mode(8, {
      // 16 MB fp32 rows over 128 blocks, one row at a time: each group of blocks walks all three rows.
      testing::layer_norm_problem(at::kFloat, {3, 4194304}, 1, true, true, sm),
      // 75002 float4 a row over 10 blocks: the last block's slice and the last chunks are short.
      testing::layer_norm_problem(at::kFloat, {3, 300008}, 1, true, true, sm),
      // 2 MB fp32 group-norm rows over 16 blocks, 8 rows at once, two rows a group.
      testing::group_norm_problem(at::kFloat, {2, 64, 256, 256}, 8, true, sm),
      // bf16 rows of 512 KB without weight or bias over 4 blocks: fewer rows than groups of blocks.
      testing::layer_norm_problem(at::kBFloat16, {7, 262144}, 1, false, false, sm),
      // fp16 group norm (statistics rounded to fp16, the fused affine form), 256 KB rows over 2 blocks.
      testing::group_norm_problem(at::kHalf, {3, 32, 128, 128}, 4, true, sm),
  }, 40);
}

}  // namespace
}  // namespace cudal1::optimizer
