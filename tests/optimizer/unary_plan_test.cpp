/// @brief What the unary family accepts and declines, and the shape of its technique space.
#include <gtest/gtest.h>

#include "cudal1/optimizer/family.h"
#include "optimizer/problems.h"

namespace cudal1::optimizer {
namespace {

Problem problem(const std::string& op, c10::ScalarType dt, std::vector<int64_t> sizes, std::vector<int64_t> strides,
                int sm = 90, int64_t offset = 0) {
  return testing::unary_problem(op, dt, std::move(sizes), std::move(strides), sm, offset);
}

const Family& unary() { return *family_for("relu", ""); }

TEST(UnaryPlan, CoversTheRequiredOps) {
  for (const char* op : {"relu", "gelu", "sigmoid", "tanh", "silu", "exp", "neg", "abs"}) {
    const Family* f = family_for(op, "");
    ASSERT_NE(f, nullptr) << op;
    EXPECT_STREQ(f->name(), "unary_elementwise");
    EXPECT_TRUE(f->plan(problem(op, at::kFloat, {8, 8}, {8, 1})).ok()) << op;
  }
  EXPECT_EQ(family_for("relu", "out"), nullptr);
  EXPECT_EQ(generators_fingerprint(),
            "unary_elementwise:1,softmax:6,norm:4,pool:5,scan:2,reduce:4,binary_elementwise:1,batchnorm:1");
}

TEST(UnaryPlan, DeclinesWhatItCannotDoExactly) {
  EXPECT_EQ(unary().plan(problem("relu", at::kInt, {8}, {1})).status().code(), Code::kUnsupported);
  EXPECT_EQ(unary().plan(problem("relu", at::kDouble, {8}, {1})).status().code(), Code::kUnsupported);
  EXPECT_EQ(unary().plan(problem("relu", at::kBFloat16, {8}, {1}, 75)).status().code(), Code::kUnsupported);
  EXPECT_EQ(unary().plan(problem("relu", at::kFloat, {0, 8}, {8, 1})).status().code(), Code::kUnsupported);
  EXPECT_EQ(unary().plan(problem("relu", at::kFloat, {2, 2, 2, 2, 2, 2, 2, 2, 2}, {256, 128, 64, 32, 16, 8, 4, 2, 1}))
                .status()
                .code(),
            Code::kUnsupported);
  Problem g = problem("gelu", at::kFloat, {8}, {1});
  g.args[1].value = std::string("erf");
  EXPECT_EQ(unary().plan(g).status().code(), Code::kUnsupported);
  Problem overload = problem("relu", at::kFloat, {8}, {1});
  overload.overload = "out";
  EXPECT_EQ(unary().plan(overload).status().code(), Code::kUnsupported);
}

TEST(UnaryPlan, VectorWidthFollowsDtypeAndLayout) {
  auto max_vec = [](const Problem& p) {
    auto plan = unary().plan(p);
    EXPECT_TRUE(plan.ok()) << plan.status().to_string();
    int m = 0;
    for (const auto& v : plan.value()->space()) m = std::max(m, v.get("vec"));
    return m;
  };
  EXPECT_EQ(max_vec(problem("exp", at::kFloat, {1024}, {1})), 4);
  EXPECT_EQ(max_vec(problem("exp", at::kHalf, {1024}, {1})), 8);
  EXPECT_EQ(max_vec(problem("exp", at::kBFloat16, {64, 16}, {32, 1})), 8);  // sliced rows, inner contiguous
  EXPECT_EQ(max_vec(problem("exp", at::kFloat, {64, 6}, {12, 1})), 2);      // inner 6: width 2 divides
  EXPECT_EQ(max_vec(problem("exp", at::kFloat, {64, 16}, {1, 64})), 4);     // transposed, dense
  EXPECT_EQ(max_vec(problem("exp", at::kFloat, {16, 64}, {1, 17})), 1);     // inner dim strided
  auto plan = unary().plan(problem("exp", at::kFloat, {1024}, {1}));
  EXPECT_EQ(plan.value()->space().size(), 3u * 4 * 4 * 2);
  // A view's storage offset limits the vector width to the data's alignment.
  EXPECT_EQ(max_vec(problem("exp", at::kFloat, {1023}, {1}, 90, 1)), 1);
  EXPECT_EQ(max_vec(problem("exp", at::kFloat, {1022}, {1}, 90, 2)), 2);
  EXPECT_EQ(max_vec(problem("exp", at::kHalf, {1020}, {1}, 90, 4)), 4);
  EXPECT_EQ(max_vec(problem("exp", at::kBFloat16, {64, 16}, {32, 1}, 90, 16)), 8);
}

TEST(UnaryPlan, SourceIsSpecialisedAndRejectsForeignVariants) {
  auto plan = unary().plan(problem("gelu", at::kHalf, {33, 7}, {8, 1}));
  ASSERT_TRUE(plan.ok());
  const auto space = plan.value()->space();
  auto src = plan.value()->source(space.front());
  ASSERT_TRUE(src.ok());
  EXPECT_NE(src->code.find("tanhf"), std::string::npos);
  EXPECT_NE(src->code.find("N = 231"), std::string::npos);
  EXPECT_EQ(src->kernel_name, "cudal1_unary");
  Variant bad{{{"vec", 8}, {"block", 256}, {"unroll", 1}, {"grid", 0}}};  // inner 7 forbids vec 8
  EXPECT_FALSE(plan.value()->source(bad).ok());
  for (const auto& v : space) EXPECT_EQ(plan.value()->features(v).size(), plan.value()->features(space[0]).size());
}

}  // namespace
}  // namespace cudal1::optimizer
