/// @brief Pair tiles and fast tiles of the softmax family (Note [Softmax pair tiles], Note [Softmax fast tiles])
/// on the device: every such variant of a few column signatures is compiled, bound and verified against ATen
/// (fresh inputs, poisoned and guarded outputs; Note [Verification]). The shapes reach the edges the fuzz test's
/// random sizes rarely give: the benchmark's 32000 rows over clusters of up to 16 blocks, a last cluster rank
/// with fewer rows than the others, rows too few for kept registers, a strided and offset input, and vec 2
/// (8-byte lane vectors) in fp16.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cstdio>

#include "gpu/gpu_env.h"
#include "gpu/variant_sweep.h"
#include "optimizer/problems.h"

namespace cudal1::optimizer {
namespace {

TEST(SoftmaxPairs, EveryPairAndFastVariantMatchesAten) {
  CUDAL1_REQUIRE_GPU();
  const int sm = testing::device_sm();
  ASSERT_GT(sm, 0);
  if (sm < 90) GTEST_SKIP() << "pair tiles are shared tiles, offered from sm_90 (this device is sm_" << sm << ")";
  using testing::contiguous;
  using testing::softmax_problem;
  const std::vector<Problem> problems = {
      // The benchmark row: 2048 columns of 32000 rows, bf16.
      softmax_problem("_log_softmax", at::kBFloat16, {32, 32000, 64}, contiguous({32, 32000, 64}), 1, false, sm),
      // 4099 rows: every cluster size leaves the last rank fewer rows than the others.
      softmax_problem("_softmax", at::kHalf, {3, 4099, 64}, contiguous({3, 4099, 64}), 1, false, sm),
      // 37 rows (no kept registers), three tiles of 32 columns.
      softmax_problem("_log_softmax", at::kBFloat16, {2, 37, 96}, contiguous({2, 37, 96}), 1, false, sm),
      // Every second 64 columns of a [4, 300, 128] buffer, 128 bytes into it.
      softmax_problem("_softmax", at::kBFloat16, {4, 300, 64}, {300 * 128, 128, 1}, 1, false, sm, 64),
      // 256 columns: vec 2 pairs (8 bytes a lane) too.
      softmax_problem("_log_softmax", at::kHalf, {2, 4, 2048, 256}, contiguous({2, 4, 2048, 256}), 2, false, sm),
  };
  const auto is_pair = [](const Variant& v) { return v.get("pair", 0) == 1 || v.get("fast", 0) == 1; };
  const int offered = testing::count_variants(problems, is_pair);
  const int verified = testing::verify_variants(problems, is_pair);
  std::printf("[softmax pairs] %d of %d pair and fast variants verified\n", verified, offered);
  EXPECT_EQ(verified, offered);
  EXPECT_GE(offered, 130);  // 156 on sm_90 (a count of the plans; fewer means the space lost them)
}

}  // namespace
}  // namespace cudal1::optimizer
