/// @brief Held slabs of the softmax family (Note [Softmax held slabs]) on the device: every held variant of a few
/// column signatures is compiled, bound and verified against ATen (fresh inputs, some with NaN and +-Inf, poisoned
/// and guarded outputs; Note [Verification]). The shapes reach what the fuzz test's random sizes almost never give
/// (slabs of 512 KB or more): the benchmark row, a last part shorter than the others, rows of 64 and 512 bytes, an
/// odd n, four dims, both ops and both 16-bit dtypes.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <vector>

#include "cudal1/dispatcher/cuda_glue.h"
#include "cudal1/optimizer/compiler.h"
#include "cudal1/optimizer/device_info.h"
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

TEST(SoftmaxHeld, KernelSizedForAnotherSmCountDeclines) {
  CUDAL1_REQUIRE_GPU();
  auto info = device_info(0);
  ASSERT_TRUE(info.ok()) << info.status().to_string();
  if (info->sm < 90) GTEST_SKIP() << "held slabs are offered from sm_90 (this device is sm_" << info->sm << ")";
  // Its grid (parts, rows, slots) is compiled in for a device of one SM more: it must not run here.
  Problem p = testing::softmax_problem("_log_softmax", at::kBFloat16, {32, 32000, 64},
                                       testing::contiguous({32, 32000, 64}), 1, false, info->sm);
  p.sm_count = info->sm_count + 1;
  auto plan = family_for(p.op, "")->plan(p);
  ASSERT_TRUE(plan.ok()) << plan.status().to_string();
  const Variant v{{{"tile", 3}, {"stats", 8}, {"out", 8}, {"merge", 4}, {"pf", 0}}};
  auto src = plan.value()->source(v);
  ASSERT_TRUE(src.ok()) << src.status().to_string();
  auto compiled = compile(src.value(), info->sm);
  ASSERT_TRUE(compiled.ok()) << compiled.status().to_string();
  auto module = LoadedModule::load(0, compiled->cubin, compiled->kernel_name);
  ASSERT_TRUE(module.ok()) << module.status().to_string();
  auto bound = plan.value()->bind(v, module.value());
  ASSERT_TRUE(bound.ok()) << bound.status().to_string();
  auto stream = dispatcher::current_stream(0);
  ASSERT_TRUE(stream.ok()) << stream.status().to_string();
  const at::Tensor x = at::randn({32, 32000, 64}, at::TensorOptions().dtype(at::kBFloat16).device(at::kCUDA));
  at::Tensor out = at::full_like(x, 7.0);
  const std::vector<c10::IValue> args = {x, int64_t{1}, false};
  const Status st = bound.value()->launch(args.data(), args.size(), &out, stream.value());
  EXPECT_EQ(st.code(), Code::kUnsupported) << st.to_string();
  EXPECT_NE(st.message().find("compiled for " + std::to_string(info->sm_count + 1) + " SMs"), std::string::npos)
      << st.to_string();
  EXPECT_TRUE(out.eq(7.0).all().item<bool>());  // nothing was written
}

}  // namespace
}  // namespace cudal1::optimizer
