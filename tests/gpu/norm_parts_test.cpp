/// @brief Mode 6 of the norm family (Note [Norm parts]) on the device: every mode-6 variant (one part at a time
/// and `ahead`) of a few long-row signatures is compiled, bound and verified against ATen (fresh inputs,
/// poisoned and guarded outputs; Note [Verification]). The shapes reach the tickets' edge cases, which the
/// fuzz test's random sizes rarely give: a row of nearly as many parts as the grid holds blocks (so a block's
/// next ticket often shares its current one's row), a last part shorter than the others, many rows a block,
/// group norm, and 16-bit vectors.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cstdio>

#include "gpu/gpu_env.h"
#include "gpu/variant_sweep.h"
#include "optimizer/problems.h"

namespace cudal1::optimizer {
namespace {

TEST(NormParts, EveryPartsVariantMatchesAten) {
  CUDAL1_REQUIRE_GPU();
  const int sm = testing::device_sm();
  ASSERT_GT(sm, 0);
  const std::vector<Problem> problems = {
      // 256 parts of 256 x 4 vectors a row; 8 rows.
      testing::layer_norm_problem(at::kFloat, {8, 1048576}, 1, true, true, sm),
      // 519 parts of 256 x 4 (the last one short): close to the 528 blocks a 132-SM part keeps resident.
      testing::layer_norm_problem(at::kFloat, {3, 2125000}, 1, true, true, sm),
      // Group norm: 2 MB groups, 16 rows of 128 parts.
      testing::group_norm_problem(at::kFloat, {2, 64, 256, 256}, 8, true, sm),
      // bf16, 8 elements a vector, no affine.
      testing::layer_norm_problem(at::kBFloat16, {5, 3, 1048576}, 1, false, false, sm),
  };
  const int verified = testing::verify_variants(problems, [](const Variant& v) { return v.get("mode") == 6; });
  std::printf("[norm parts] %d mode-6 variants verified\n", verified);
  EXPECT_GE(verified, 20);  // 6-8 a signature on a 132-SM part; fewer means the space lost mode 6
}

}  // namespace
}  // namespace cudal1::optimizer
