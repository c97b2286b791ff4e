/// @brief The norm family's cache hints (Note [Norm hints]) on the device: every hinted variant (mode 3 row
/// groups, mode 2 with `reverse`) of a few long-row signatures is compiled, bound and verified against ATen
/// (fresh inputs, poisoned and guarded outputs; Note [Verification]; mode 2 at blocks of 256): 16-, 8-, 4- and
/// 2-byte vectors through ld.global.cs / st.global.cs, group norm's fused affine form, and a row group of one
/// 16 MB row.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cstdio>

#include "gpu/gpu_env.h"
#include "gpu/variant_sweep.h"
#include "optimizer/problems.h"

namespace cudal1::optimizer {
namespace {

TEST(NormHints, EveryHintedVariantMatchesAten) {
  CUDAL1_REQUIRE_GPU();
  const int sm = testing::device_sm();
  ASSERT_GT(sm, 0);
  const std::vector<Problem> problems = {
      // 4 MB rows: groups of 2 and 4 rows, 16-byte vectors.
      testing::layer_norm_problem(at::kFloat, {8, 1048576}, 1, true, true, sm),
      // One 16 MB row a group (the KernelBench rows), two rows.
      testing::layer_norm_problem(at::kFloat, {2, 64, 256, 256}, 3, false, false, sm),
      // Group norm, 2 MB groups, the fused affine form.
      testing::group_norm_problem(at::kFloat, {2, 64, 256, 256}, 8, true, sm),
      // bf16 rows of 2 elements a vector (4 bytes), fp16 odd rows (2-byte vectors, mode 2 only).
      testing::layer_norm_problem(at::kBFloat16, {6, 1048574}, 1, true, true, sm),
      testing::layer_norm_problem(at::kHalf, {3, 4099}, 1, true, true, sm),
  };
  // Every hinted mode-3 variant; mode 2's at blocks of 256 (its hint does not depend on the block).
  const int verified = testing::verify_variants(problems, [](const Variant& v) {
    return v.get("hint") == 1 && (v.get("mode") == 3 || v.get("block") == 256);
  });
  std::printf("[norm hints] %d hinted variants verified\n", verified);
  EXPECT_GE(verified, 40);  // fewer means the space lost its hints
}

}  // namespace
}  // namespace cudal1::optimizer
