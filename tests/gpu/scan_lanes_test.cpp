/// @brief The lane-tile scans (kRowLanes, Note [Scans]) with vector loads on the device: every such variant of a
/// few signatures is compiled, bound and verified against ATen (fresh inputs, poisoned and guarded outputs; Note
/// [Verification]). The shapes reach the edges the fuzz test's random sizes rarely give: the benchmark's row
/// length, rows not a whole number of steps, rows shorter than one step, fp32 products.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cstdio>

#include "gpu/gpu_env.h"
#include "gpu/variant_sweep.h"
#include "optimizer/problems.h"

namespace cudal1::optimizer {
namespace {

TEST(ScanLanes, EveryVectorLaneVariantMatchesAten) {
  CUDAL1_REQUIRE_GPU();
  const int sm = testing::device_sm();
  ASSERT_GT(sm, 0);
  if (sm < 80) GTEST_SKIP() << "bf16 scans are planned on sm_80+ only (device: sm_" << sm << ")";
  using testing::contiguous;
  using testing::scan_problem;
  // ATen's tiles of 16 threads (the order these variants keep) need about as many rows as the row length.
  const std::vector<Problem> problems = {
      scan_problem("cumsum", at::kBFloat16, {4096, 4096}, contiguous({4096, 4096}), 1, sm),  // the bench's rows
      scan_problem("cumsum", at::kHalf, {1000, 1000}, contiguous({1000, 1000}), 1, sm),  // a part-filled last step
      scan_problem("cumsum", at::kBFloat16, {3, 200, 72}, contiguous({3, 200, 72}), 2, sm),  // under one step
      scan_problem("cumprod", at::kFloat, {1024, 780}, contiguous({1024, 780}), -1, sm),  // fp32, 4-wide vectors
  };
  const auto pick = [](const Variant& v) { return v.get("mode") == 6 && v.get("vec") > 1; };
  const int offered = testing::count_variants(problems, pick);
  const int verified = testing::verify_variants(problems, pick);
  std::printf("[scan lanes] %d of %d vector lane variants verified\n", verified, offered);
  EXPECT_EQ(verified, offered);
  EXPECT_GE(offered, 126);  // 36 + 36 + 36 + 18: a third each ahead 1, ahead 2, staged stores (a count of the
                            // plans; fewer means the space lost them)
}

}  // namespace
}  // namespace cudal1::optimizer
