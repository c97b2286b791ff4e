/// @brief What the unary family accepts and declines, and the shape of its technique space.
#include <gtest/gtest.h>

#include "cudal1/cache/kernel_cache.h"
#include "cudal1/optimizer/chain_tuner.h"
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
            "unary_elementwise:5,softmax:18,norm:12,pool:12,scan:5,reduce:8,binary_elementwise:2,batchnorm:2,gemm:3,chains:7");
}

// Note [Generator versions]: a record is served only while its family's generator is the one that made it.
TEST(UnaryPlan, RecordsOfAnOlderGeneratorAreStaleFamilyByFamily) {
  EXPECT_EQ(generator_version("unary_elementwise"), unary().version());
  EXPECT_EQ(generator_version("norm"), family_for("native_layer_norm", "")->version());
  EXPECT_EQ(generator_version("chain"), kChainGeneratorVersion);
  EXPECT_EQ(generator_version("no_such_family"), -1);
  cache::KernelEntry unary_now, norm_old, chain_now, unknown;
  unary_now.family = "unary_elementwise";
  unary_now.generator_version = unary().version();
  norm_old.family = "norm";
  norm_old.generator_version = generator_version("norm") - 1;  // as if the norm family had just been bumped
  chain_now.family = "chain";
  chain_now.generator_version = kChainGeneratorVersion;
  unknown.family = "no_such_family";
  EXPECT_TRUE(check_generator(unary_now).ok());
  EXPECT_TRUE(check_generator(chain_now).ok());
  const Status stale = check_generator(norm_old);
  EXPECT_EQ(stale.code(), Code::kMismatch);
  EXPECT_NE(stale.message().find("stale"), std::string::npos) << stale.message();
  EXPECT_EQ(check_generator(unknown).code(), Code::kMismatch);
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

// Note [Unary math for 16-bit outputs]: fp16 and bf16 outputs take the short forms of the gelus, sigmoid and silu;
// fp32 keeps ATen's functions, and the other ops are the same for every dtype.
TEST(UnaryPlan, ShortFormsOnlyForSixteenBitOutputs) {
  const auto source = [](const std::string& op, c10::ScalarType dt, const std::string& approximate = "") {
    auto plan = unary().plan(testing::unary_problem(op, dt, {1024}, {1}, 90, 0, approximate));
    EXPECT_TRUE(plan.ok()) << plan.status().to_string();
    if (!plan.ok()) return std::string();
    auto src = plan.value()->source(plan.value()->space().front());
    EXPECT_TRUE(src.ok()) << src.status().to_string();
    return src.ok() ? src.value().code : std::string();
  };
  const auto has = [](const std::string& code, const std::string& what) {
    return code.find(what) != std::string::npos;
  };
  for (auto dt : {at::kHalf, at::kBFloat16}) {
    SCOPED_TRACE(c10::toString(dt));
    const std::string erf_gelu = source("gelu", dt, "none"), tanh_gelu = source("gelu", dt, "tanh");
    EXPECT_FALSE(has(erf_gelu, "erff("));
    EXPECT_TRUE(has(erf_gelu, "ex2_approx((x * -0.72134752044448170368f) * x)"));
    EXPECT_FALSE(has(tanh_gelu, "tanhf("));
    EXPECT_TRUE(has(tanh_gelu, "x * rcp_approx(1.f + ex2_approx(u * -2.88539008177792681472f))"));
    EXPECT_TRUE(has(source("sigmoid", dt), "return rcp_approx(1.f + ex2_approx(x * -1.44269504088896340736f))"));
    EXPECT_TRUE(has(source("silu", dt), "return x * rcp_approx(1.f + ex2_approx(x * -1.44269504088896340736f))"));
    EXPECT_TRUE(has(source("tanh", dt), "return tanhf(x);"));
    EXPECT_TRUE(has(source("exp", dt), "return expf(x);"));
  }
  EXPECT_TRUE(has(source("gelu", at::kFloat, "none"), "return x * 0.5f * (1.f + erff(x * 0.70710678118654752440f))"));
  EXPECT_TRUE(has(source("gelu", at::kFloat, "tanh"), "tanhf("));
  EXPECT_TRUE(has(source("sigmoid", at::kFloat), "return 1.f / (1.f + expf(-x));"));
  EXPECT_TRUE(has(source("silu", at::kFloat), "return x / (1.f + expf(-x));"));
  EXPECT_FALSE(has(source("silu", at::kFloat), "ex2_approx(x"));
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

// Note [Unary picked vectors]: every second element along the innermost dim is read as one aligned load of 2v
// elements, v picked; v is limited by 16 bytes a load, the inner size, the outer strides and the storage offset.
TEST(UnaryPlan, EverySecondElementIsPickedFromWiderLoads) {
  auto plan_of = [](const Problem& p) {
    auto plan = unary().plan(p);
    EXPECT_TRUE(plan.ok()) << plan.status().to_string();
    return plan.ok() ? std::move(plan).value() : nullptr;
  };
  auto max_vec = [](const Plan& plan) {
    int m = 0;
    for (const auto& v : plan.space()) m = std::max(m, v.get("vec"));
    return m;
  };
  auto half_cols = plan_of(problem("neg", at::kBFloat16, {8192, 2048}, {4096, 2}));  // x[:, ::2]
  ASSERT_NE(half_cols, nullptr);
  EXPECT_EQ(max_vec(*half_cols), 4);  // 8 bf16 = 16 bytes a load
  const Variant v4{{{"vec", 4}, {"block", 256}, {"unroll", 1}, {"grid", 0}}};
  auto src = half_cols->source(v4);
  ASSERT_TRUE(src.ok());
  EXPECT_NE(src->code.find("kPick = true"), std::string::npos);
  EXPECT_NE(src->code.find("r[u].v[e] = w.v[2 * e]"), std::string::npos);
  // The scalar variant keeps the plain strided load.
  auto scalar = half_cols->source(Variant{{{"vec", 1}, {"block", 256}, {"unroll", 1}, {"grid", 0}}});
  ASSERT_TRUE(scalar.ok());
  EXPECT_NE(scalar->code.find("kPick = false"), std::string::npos);
  auto f32 = plan_of(problem("neg", at::kFloat, {64, 16}, {32, 2}));
  ASSERT_NE(f32, nullptr);
  EXPECT_EQ(max_vec(*f32), 2);
  auto flat = plan_of(problem("neg", at::kFloat, {64, 15}, {30, 2}));  // one uniform stride: 960 picked
  ASSERT_NE(flat, nullptr);
  EXPECT_EQ(max_vec(*flat), 2);
  auto odd = plan_of(problem("neg", at::kFloat, {64, 15}, {32, 2}));  // inner 15: no width divides
  ASSERT_NE(odd, nullptr);
  EXPECT_EQ(max_vec(*odd), 1);
  auto shifted = plan_of(problem("neg", at::kHalf, {64, 16}, {32, 2}, 90, 1));  // x[:, 1::2]: odd offset
  ASSERT_NE(shifted, nullptr);
  EXPECT_EQ(max_vec(*shifted), 1);
  auto stride3 = plan_of(problem("neg", at::kHalf, {64, 16}, {48, 3}));
  ASSERT_NE(stride3, nullptr);
  EXPECT_EQ(max_vec(*stride3), 1);
}

TEST(UnaryPlan, SourceIsSpecialisedAndRejectsForeignVariants) {
  auto plan = unary().plan(problem("gelu", at::kHalf, {33, 7}, {8, 1}));
  ASSERT_TRUE(plan.ok());
  const auto space = plan.value()->space();
  auto src = plan.value()->source(space.front());
  ASSERT_TRUE(src.ok());
  EXPECT_NE(src->code.find("ex2_approx(u * -2.88539008177792681472f)"), std::string::npos);  // the tanh gelu, fp16 form
  EXPECT_NE(src->code.find("N = 231"), std::string::npos);
  EXPECT_EQ(src->kernel_name, "cudal1_unary");
  Variant bad{{{"vec", 8}, {"block", 256}, {"unroll", 1}, {"grid", 0}}};  // inner 7 forbids vec 8
  EXPECT_FALSE(plan.value()->source(bad).ok());
  for (const auto& v : space) EXPECT_EQ(plan.value()->features(v).size(), plan.value()->features(space[0]).size());
}

}  // namespace
}  // namespace cudal1::optimizer
