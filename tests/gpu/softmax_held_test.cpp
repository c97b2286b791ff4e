/// @brief Held slabs of the softmax family (Note [Softmax held slabs]) on the device: every held variant of a few
/// column signatures is compiled, bound and verified against ATen (fresh inputs, some with NaN and +-Inf, poisoned
/// and guarded outputs; Note [Verification]). The shapes reach what the fuzz test's random sizes almost never give
/// (slabs of 512 KB or more): the benchmark row, a last part shorter than the others, rows of 64 and 512 bytes, an
/// odd n, four dims, both ops and both 16-bit dtypes.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cstdio>

#include "gpu/gpu_env.h"
#include "gpu/variant_sweep.h"
#include "optimizer/problems.h"

namespace cudal1::optimizer {
namespace {

TEST(SoftmaxHeld, EveryHeldVariantMatchesAten) {
  CUDAL1_REQUIRE_GPU();
  const int sm = testing::device_sm();
  ASSERT_GT(sm, 0);
  if (sm < 90) GTEST_SKIP() << "held slabs use bulk copies, offered from sm_90 (this device is sm_" << sm << ")";
  using testing::contiguous;
  using testing::softmax_problem;
  const std::vector<Problem> problems = {
      // The benchmark row: 32 slabs of 4 MB.
      softmax_problem("_log_softmax", at::kBFloat16, {32, 32000, 64}, contiguous({32, 32000, 64}), 1, false, sm),
      // 40000 rows: the last part is shorter than the others on a 132-SM part.
      softmax_problem("_softmax", at::kHalf, {3, 40000, 64}, contiguous({3, 40000, 64}), 1, false, sm),
      // Rows of 512 and of 64 bytes.
      softmax_problem("_log_softmax", at::kBFloat16, {4, 4096, 256}, contiguous({4, 4096, 256}), 1, false, sm),
      softmax_problem("_softmax", at::kHalf, {2, 16384, 32}, contiguous({2, 16384, 32}), 1, false, sm),
      // An odd n, and four dims (outer 6 = 2 x 3).
      softmax_problem("_softmax", at::kBFloat16, {5, 8191, 64}, contiguous({5, 8191, 64}), 1, false, sm),
      softmax_problem("_log_softmax", at::kHalf, {2, 3, 5000, 64}, contiguous({2, 3, 5000, 64}), 2, false, sm),
  };
  const auto is_held = [](const Variant& v) { return v.get("tile", 0) == 3; };
  const int offered = testing::count_variants(problems, is_held);
  const int verified = testing::verify_variants(problems, is_held);
  std::printf("[softmax held] %d of %d held-slab variants verified\n", verified, offered);
  EXPECT_EQ(verified, offered);
  EXPECT_EQ(offered, 24);  // four variants of each of the six signatures
}

}  // namespace
}  // namespace cudal1::optimizer
