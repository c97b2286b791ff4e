/// @brief What the softmax family accepts and declines, how it reads rows and columns, and its technique spaces.
#include <gtest/gtest.h>

#include <set>

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
  EXPECT_EQ(code(softmax_problem("_softmax", at::kHalf, {8, 16}, {16, 1}, -1, true)), Code::kUnsupported);
  EXPECT_EQ(code(softmax_problem("_softmax", at::kDouble, {8, 16}, {16, 1})), Code::kUnsupported);
  EXPECT_EQ(code(softmax_problem("_softmax", at::kFloat, {16, 8}, {1, 16})), Code::kUnsupported);  // transposed
  EXPECT_EQ(code(softmax_problem("_softmax", at::kFloat, {4, 5, 16}, {160, 16, 1})), Code::kUnsupported);  // 2 strides
  EXPECT_EQ(code(softmax_problem("_softmax", at::kFloat, {0, 16}, {16, 1})), Code::kUnsupported);
  EXPECT_EQ(code(softmax_problem("_softmax", at::kBFloat16, {8, 16}, {16, 1}, -1, false, 75)), Code::kUnsupported);
  EXPECT_EQ(code(softmax_problem("relu", at::kFloat, {8, 16}, {16, 1})), Code::kUnsupported);
  EXPECT_EQ(code(softmax_problem("_softmax", at::kFloat, {8, 16}, {16, 1}, 2)), Code::kUnsupported);   // no dim 2
  EXPECT_EQ(code(softmax_problem("_softmax", at::kFloat, {8, 16}, {16, 1}, -3)), Code::kUnsupported);
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

namespace cudal1::optimizer {
namespace {

using testing::contiguous;
using testing::softmax_problem;

const Family& softmax() { return *family_for("_softmax", ""); }

std::unique_ptr<Plan> plan_of(const Problem& p) {
  auto plan = softmax().plan(p);
  EXPECT_TRUE(plan.ok()) << plan.status().to_string();
  return plan.ok() ? std::move(plan).value() : nullptr;
}

/// Softmax over `dim` of a contiguous tensor.
Problem over(c10::ScalarType dt, std::vector<int64_t> sizes, int64_t dim, const char* op = "_softmax") {
  auto st = contiguous(sizes);
  return softmax_problem(op, dt, std::move(sizes), std::move(st), dim);
}

bool is_column_plan(const Plan& plan) { return plan.space().front().get("split", 0) > 0; }

TEST(SoftmaxPlan, ServesEveryOuterDimOfContiguousInputs) {
  const std::vector<int64_t> sizes = {3, 4, 5, 6};
  for (int64_t dim = -4; dim < 3; ++dim) {
    if (dim == -1) continue;
    for (const char* op : {"_softmax", "_log_softmax"}) {
      auto plan = plan_of(over(at::kFloat, sizes, dim, op));
      ASSERT_NE(plan, nullptr) << dim;
      EXPECT_TRUE(is_column_plan(*plan)) << dim;
      auto src = plan->source(plan->space().front());
      ASSERT_TRUE(src.ok());
      const int64_t n = sizes[(dim + 4) % 4];
      EXPECT_NE(src->code.find("N = " + std::to_string(n) + ";"), std::string::npos) << src->code;
      EXPECT_NE(src->code.find("LOG " + std::string(op[1] == 'l' ? "1" : "0")), std::string::npos);
    }
  }
  for (auto dt : {at::kFloat, at::kHalf, at::kBFloat16}) {
    EXPECT_NE(plan_of(over(dt, {64, 1000, 56, 56}, 1)), nullptr);
    EXPECT_NE(plan_of(over(dt, {32, 32000, 64}, -2)), nullptr);
    EXPECT_NE(plan_of(over(dt, {8, 16, 2048, 2048}, 2)), nullptr);
  }
  // A softmax dim followed only by size-1 dims is a row softmax (as in ATen: inner size 1).
  auto rows = plan_of(over(at::kFloat, {8, 1000, 1, 1}, 1));
  ASSERT_NE(rows, nullptr);
  EXPECT_FALSE(is_column_plan(*rows));
  EXPECT_EQ(rows->space().front().get("warp", -1), 1);
  // Size-1 softmax dim, size-1 outer dims.
  EXPECT_TRUE(is_column_plan(*plan_of(over(at::kHalf, {8, 1, 16}, 1))));
  EXPECT_TRUE(is_column_plan(*plan_of(over(at::kHalf, {1, 7, 1, 16}, 1))));
}

TEST(SoftmaxPlan, ServesColumnsOfExactlyMappedLayouts) {
  // A slice along the softmax dim: n stride larger than inner.
  auto sliced = plan_of(softmax_problem("_softmax", at::kFloat, {8, 10, 16}, {320, 16, 1}, 1));
  ASSERT_NE(sliced, nullptr);
  auto src = sliced->source(sliced->space().front());
  ASSERT_TRUE(src.ok());
  EXPECT_NE(src->code.find("OSV = 320, NSV = 16;"), std::string::npos) << src->code;  // vec 1 is first
  // A slice of the outer dim, and a transposed pair of outer dims that still has one uniform stride.
  EXPECT_NE(plan_of(softmax_problem("_softmax", at::kFloat, {4, 5, 16}, {160, 16, 1}, 1)), nullptr);
  EXPECT_NE(plan_of(softmax_problem("_softmax", at::kFloat, {4, 1, 5, 16}, {80, 3, 16, 1}, 2)), nullptr);
}

TEST(SoftmaxPlan, DeclinesColumnLayoutsItDoesNotMapExactly) {
  auto code = [&](const Problem& p) { return softmax().plan(p).status().code(); };
  // Transposed: the dim after the softmax dim is not dense.
  EXPECT_EQ(code(softmax_problem("_softmax", at::kFloat, {16, 8}, {1, 16}, 0)), Code::kUnsupported);
  EXPECT_EQ(code(softmax_problem("_softmax", at::kFloat, {4, 5, 16}, {160, 32, 2}, 1)), Code::kUnsupported);
  // Inner dims dense only up to a gap.
  EXPECT_EQ(code(softmax_problem("_softmax", at::kFloat, {4, 5, 6, 8}, {480, 96, 16, 1}, 1)), Code::kUnsupported);
  // Outer dims without one uniform stride.
  EXPECT_EQ(code(softmax_problem("_softmax", at::kFloat, {3, 4, 5, 16}, {640, 80, 16, 1}, 2)), Code::kUnsupported);
  // Overlapping (expanded) columns and outer slices.
  EXPECT_EQ(code(softmax_problem("_softmax", at::kFloat, {4, 5, 16}, {80, 0, 1}, 1)), Code::kUnsupported);
  EXPECT_EQ(code(softmax_problem("_softmax", at::kFloat, {4, 5, 16}, {0, 16, 1}, 1)), Code::kUnsupported);
  // What the row case declines, over an outer dim.
  EXPECT_EQ(code(softmax_problem("_softmax", at::kHalf, {8, 16, 4}, {64, 4, 1}, 1, true)), Code::kUnsupported);
  EXPECT_EQ(code(softmax_problem("_log_softmax", at::kDouble, {8, 16, 4}, {64, 4, 1}, 0)), Code::kUnsupported);
  EXPECT_EQ(code(softmax_problem("_softmax", at::kFloat, {8, 0, 4}, {4, 4, 1}, 0)), Code::kUnsupported);
  EXPECT_EQ(code(softmax_problem("_softmax", at::kFloat, {8, 16, 0}, {16, 1, 1}, 1)), Code::kUnsupported);
  EXPECT_EQ(code(softmax_problem("_softmax", at::kBFloat16, {8, 16, 4}, {64, 4, 1}, 1, false, 75)),
            Code::kUnsupported);
}

int column_max_vec(const Problem& p) {
  auto plan = plan_of(p);
  int m = 0;
  if (plan)
    for (const auto& v : plan->space()) m = std::max(m, v.get("vec"));
  return m;
}

TEST(SoftmaxPlan, ColumnVectorWidthFollowsInnerStridesAndAlignment) {
  EXPECT_EQ(column_max_vec(over(at::kFloat, {32, 100, 64}, 1)), 4);
  EXPECT_EQ(column_max_vec(over(at::kBFloat16, {32, 100, 64}, 1)), 8);
  EXPECT_EQ(column_max_vec(over(at::kHalf, {32, 100, 7}, 1)), 1);  // odd inner
  EXPECT_EQ(column_max_vec(over(at::kFloat, {32, 100, 6}, 1)), 2);
  EXPECT_EQ(column_max_vec(softmax_problem("_softmax", at::kFloat, {8, 10, 16}, {330, 33, 1}, 1)), 1);
  EXPECT_EQ(column_max_vec(softmax_problem("_softmax", at::kHalf, {8, 10, 16}, {160, 16, 1}, 1, false, 90, 2)), 2);
}

TEST(SoftmaxPlan, ColumnSpaceSplitsAndCachesOnlyWhereUseful) {
  auto wide = plan_of(over(at::kFloat, {4, 16, 3136}, 1));  // n = 16: every split caches
  ASSERT_NE(wide, nullptr);
  std::set<int> splits;
  int cached = 0;
  for (const auto& v : wide->space()) {
    splits.insert(v.get("split"));
    cached += v.get("cache");
  }
  EXPECT_EQ(2 * cached, static_cast<int>(wide->space().size()));
  EXPECT_EQ(splits, (std::set<int>{1, 4}));  // split 32 > n = 16 would leave threads idle
  auto tiny = plan_of(over(at::kFloat, {4, 3, 3136}, 1));
  ASSERT_NE(tiny, nullptr);
  for (const auto& v : tiny->space()) EXPECT_EQ(v.get("split"), 1) << v.id();
  auto tall = plan_of(over(at::kFloat, {32, 32000, 64}, 1));  // no column part fits in registers
  ASSERT_NE(tall, nullptr);
  cached = 0;
  for (const auto& v : tall->space()) cached += v.get("cache");
  EXPECT_EQ(cached, 0);
  auto mid = plan_of(over(at::kHalf, {32, 256, 64}, 1));  // caches 256 / split x vec <= 64 elements
  ASSERT_NE(mid, nullptr);
  std::set<std::pair<int, int>> cached_at;  // (split, vec)
  for (const auto& v : mid->space())
    if (v.get("cache")) cached_at.insert({v.get("split"), v.get("vec")});
  EXPECT_EQ(cached_at, (std::set<std::pair<int, int>>{{4, 1}, {32, 1}, {32, 2}, {32, 4}, {32, 8}}));
  // Variants of another plan kind are rejected.
  EXPECT_FALSE(mid->source(Variant{{{"vec", 1}, {"block", 128}, {"warp", 1}, {"cache", 0}}}).ok());
  EXPECT_FALSE(mid->source(Variant{{{"vec", 1}, {"block", 128}, {"split", 8}, {"cache", 0}}}).ok());
  EXPECT_FALSE(mid->source(Variant{{{"vec", 16}, {"block", 128}, {"split", 1}, {"cache", 0}}}).ok());
}

TEST(SoftmaxPlan, RowAndColumnPlansShareOneFeatureLengthAndDistinctStrata) {
  std::vector<std::unique_ptr<Plan>> rows, cols;
  rows.push_back(plan_of(softmax_problem("_softmax", at::kFloat, {8, 32000}, {32000, 1})));
  rows.push_back(plan_of(softmax_problem("_log_softmax", at::kHalf, {8, 100}, {100, 1})));
  cols.push_back(plan_of(over(at::kFloat, {32, 32000, 64}, 1)));
  cols.push_back(plan_of(over(at::kBFloat16, {4, 16, 3136}, 1, "_log_softmax")));
  size_t len = 0;
  std::set<int> row_strata, col_strata;
  auto check = [&](const Plan& plan, std::set<int>* strata) {
    std::set<std::string> ids;
    for (const auto& v : plan.space()) {
      const auto f = plan.features(v);
      if (len == 0) len = f.size();
      EXPECT_EQ(f.size(), len) << v.id();
      for (float x : f) EXPECT_TRUE(x >= 0.f && x <= 1.f);
      strata->insert(plan.stratum(v));
      EXPECT_TRUE(ids.insert(v.id()).second) << v.id();
    }
  };
  for (const auto& p : rows) {
    ASSERT_NE(p, nullptr);
    check(*p, &row_strata);
  }
  for (const auto& p : cols) {
    ASSERT_NE(p, nullptr);
    check(*p, &col_strata);
  }
  EXPECT_GT(len, 0u);
  for (int s : row_strata) EXPECT_TRUE(s >= 0 && s < 4) << s;
  for (int s : col_strata) EXPECT_TRUE(s >= 4 && s < 10) << s;
  EXPECT_GE(col_strata.size(), 4u);  // split 1 / 4 / 32, cached or not
}

}  // namespace
}  // namespace cudal1::optimizer
