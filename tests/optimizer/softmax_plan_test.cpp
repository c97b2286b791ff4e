/// @brief What the softmax family accepts and declines, how it reads rows, and its technique space.
#include <gtest/gtest.h>

#include "cudal1/optimizer/family.h"
#include "optimizer/problems.h"

namespace cudal1::optimizer {
namespace {

using testing::softmax_problem;

const Family& family() { return *family_for("_softmax", ""); }

int max_vec(const Problem& p) {
  auto plan = family().plan(p);
  EXPECT_TRUE(plan.ok()) << plan.status().to_string();
  if (!plan.ok()) return 0;
  int m = 0;
  for (const auto& v : plan.value()->space()) m = std::max(m, v.get("vec"));
  return m;
}

TEST(SoftmaxPlan, ServesBothOpsOverTheLastDimension) {
  ASSERT_EQ(family_for("_log_softmax", ""), &family());
  EXPECT_STREQ(family().name(), "softmax");
  EXPECT_TRUE(family().plan(softmax_problem("_softmax", at::kFloat, {8, 32000}, {32000, 1})).ok());
  EXPECT_TRUE(family().plan(softmax_problem("_log_softmax", at::kBFloat16, {2, 3, 4096}, {12288, 4096, 1}, 2)).ok());
  EXPECT_TRUE(family().plan(softmax_problem("_softmax", at::kHalf, {1, 1}, {1, 1})).ok());
  // Rows with a stride larger than the row (a slice of a wider tensor) are fine.
  EXPECT_TRUE(family().plan(softmax_problem("_softmax", at::kFloat, {64, 1000}, {1024, 1})).ok());
}

TEST(SoftmaxPlan, DeclinesWhatItCannotDoExactly) {
  auto code = [&](const Problem& p) { return family().plan(p).status().code(); };
  EXPECT_EQ(code(softmax_problem("_softmax", at::kFloat, {8, 16}, {16, 1}, 0)), Code::kUnsupported);
  EXPECT_EQ(code(softmax_problem("_softmax", at::kHalf, {8, 16}, {16, 1}, -1, true)), Code::kUnsupported);
  EXPECT_EQ(code(softmax_problem("_softmax", at::kDouble, {8, 16}, {16, 1})), Code::kUnsupported);
  EXPECT_EQ(code(softmax_problem("_softmax", at::kFloat, {16, 8}, {1, 16})), Code::kUnsupported);  // transposed
  EXPECT_EQ(code(softmax_problem("_softmax", at::kFloat, {4, 5, 16}, {160, 16, 1})), Code::kUnsupported);  // 2 strides
  EXPECT_EQ(code(softmax_problem("_softmax", at::kFloat, {0, 16}, {16, 1})), Code::kUnsupported);
  EXPECT_EQ(code(softmax_problem("_softmax", at::kBFloat16, {8, 16}, {16, 1}, -1, false, 75)), Code::kUnsupported);
  EXPECT_EQ(code(softmax_problem("relu", at::kFloat, {8, 16}, {16, 1})), Code::kUnsupported);
}

TEST(SoftmaxPlan, VectorWidthFollowsRowsAndAlignment) {
  EXPECT_EQ(max_vec(softmax_problem("_softmax", at::kFloat, {8, 4096}, {4096, 1})), 4);
  EXPECT_EQ(max_vec(softmax_problem("_softmax", at::kBFloat16, {8, 4096}, {4096, 1})), 8);
  EXPECT_EQ(max_vec(softmax_problem("_softmax", at::kFloat, {8, 4098}, {4098, 1})), 2);
  EXPECT_EQ(max_vec(softmax_problem("_softmax", at::kFloat, {8, 1000}, {1002, 1})), 2);
  EXPECT_EQ(max_vec(softmax_problem("_softmax", at::kHalf, {8, 4096}, {4096, 1}, -1, false, 90, 3)), 1);
}

TEST(SoftmaxPlan, CachingIsOfferedOnlyWhereRowsFitInRegisters) {
  auto plan = family().plan(softmax_problem("_softmax", at::kFloat, {4, 32768}, {32768, 1}));
  ASSERT_TRUE(plan.ok());
  int cached = 0;
  for (const auto& v : plan.value()->space()) {
    if (!v.get("cache")) continue;
    ++cached;
    EXPECT_EQ(v.get("warp"), 0) << v.id();  // a warp cannot hold 32768 floats in registers
    EXPECT_GE(v.get("block"), 512) << v.id();
  }
  EXPECT_GT(cached, 0);
  auto src = plan.value()->source(plan.value()->space().front());
  ASSERT_TRUE(src.ok());
  EXPECT_NE(src->code.find("D = 32768"), std::string::npos);
}

}  // namespace
}  // namespace cudal1::optimizer
