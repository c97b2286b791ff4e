/// @brief What the gemm family accepts and declines (Note [Padded GEMM]), the output it promises (mm's
/// contiguous result) and its space, the unpadding copy's source, and how residue rows (Note [Residue rows])
/// cover the result.
#include <gtest/gtest.h>

#include <set>

#include "cudal1/optimizer/family.h"
#include "cudal1/optimizer/measure.h"
#include "gemm/gemm_family.h"
#include "optimizer/problems.h"

namespace cudal1::optimizer {
namespace {

using testing::mm_problem;

const Family& family() { return *family_for("mm", ""); }
Code code(const Problem& p) { return family().plan(p).status().code(); }

TEST(GemmPlan, ServesUnalignedRowsInHalfPrecision) {
  EXPECT_STREQ(family().name(), "gemm");
  EXPECT_TRUE(family().plan(mm_problem(at::kHalf, 4096, 768, 50257)).ok());  // GPT-2's lm_head
  EXPECT_TRUE(family().plan(mm_problem(at::kBFloat16, 4096, 768, 50257)).ok());
  EXPECT_TRUE(family().plan(mm_problem(at::kHalf, 4096, 1024, 32001, 80, {32001, 1})).ok());  // contiguous b
  EXPECT_TRUE(family().plan(mm_problem(at::kHalf, 7, 16, 3, 90, {1, 16}, {1, 7})).ok());     // transposed a
}

TEST(GemmPlan, ServesAddmmWithAVectorBiasAndUnitScalars) {
  ASSERT_EQ(family_for("addmm", ""), &family());
  EXPECT_TRUE(family().plan(testing::addmm_problem(at::kHalf, 4096, 768, 50257)).ok());
  EXPECT_TRUE(family().plan(testing::addmm_problem(at::kBFloat16, 8, 64, 1001, 90, c10::IValue(1.0))).ok());
  auto shape = gemm::parse_mm(testing::addmm_problem(at::kHalf, 4, 8, 3));
  ASSERT_TRUE(shape.ok());
  EXPECT_TRUE(shape->bias);
  EXPECT_EQ(gemm::make_gemm_kernel(shape.value(), gemm::GemmTechnique{}, nullptr)->outputs()[0].strides,
            (std::vector<int64_t>{3, 1}));
  EXPECT_EQ(code(testing::addmm_problem(at::kHalf, 64, 64, 63, 90, c10::IValue(0.5))), Code::kUnsupported);
  EXPECT_EQ(code(testing::addmm_problem(at::kHalf, 64, 64, 63, 90, c10::IValue(int64_t{1}), c10::IValue(2.0))),
            Code::kUnsupported);
  auto full_bias = testing::addmm_problem(at::kHalf, 64, 64, 63);
  full_bias.args[0] = testing::tensor_arg(at::kHalf, {64, 63}, {63, 1});  // a [M, N] "bias": not nn.Linear's
  EXPECT_EQ(code(full_bias), Code::kUnsupported);
  auto f32_bias = testing::addmm_problem(at::kHalf, 64, 64, 63);
  f32_bias.args[0].tensor.dtype = at::kFloat;
  EXPECT_EQ(code(f32_bias), Code::kUnsupported);
  EXPECT_EQ(code(testing::addmm_problem(at::kHalf, 64, 64, 64)), Code::kUnsupported);  // aligned N
}

TEST(GemmPlan, DeclinesWhatPaddingDoesNotMend) {
  EXPECT_EQ(code(mm_problem(at::kHalf, 4096, 768, 50264)), Code::kUnsupported);   // N aligned already
  EXPECT_EQ(code(mm_problem(at::kHalf, 4096, 1001, 4096)), Code::kUnsupported);   // K unaligned
  EXPECT_EQ(code(mm_problem(at::kHalf, 4096, 1001, 4097)), Code::kUnsupported);
  EXPECT_EQ(code(mm_problem(at::kFloat, 4096, 768, 50257)), Code::kUnsupported);  // fp32: no gain measured
  EXPECT_EQ(code(mm_problem(at::kHalf, 4096, 768, 50257, 75)), Code::kUnsupported);
  EXPECT_EQ(code(mm_problem(at::kHalf, 0, 768, 50257)), Code::kUnsupported);
  auto mixed = mm_problem(at::kHalf, 64, 64, 63);
  mixed.args[1].tensor.dtype = at::kBFloat16;
  EXPECT_EQ(code(mixed), Code::kUnsupported);
  auto inner = mm_problem(at::kHalf, 64, 64, 63);
  inner.args[1].tensor.sizes = {32, 63};
  EXPECT_EQ(code(inner), Code::kUnsupported);
  auto batched = mm_problem(at::kHalf, 64, 64, 63);
  batched.args[0] = testing::tensor_arg(at::kHalf, {2, 64, 64}, {4096, 64, 1});
  EXPECT_EQ(code(batched), Code::kUnsupported);
  auto other = mm_problem(at::kHalf, 64, 64, 63);
  other.op = "bmm";
  EXPECT_EQ(code(other), Code::kUnsupported);
}

TEST(GemmPlan, PromisesMmsContiguousResultAndEveryTechnique) {
  const Problem p = mm_problem(at::kHalf, 40, 64, 50257);
  auto plan = family().plan(p);
  ASSERT_TRUE(plan.ok());
  const auto space = plan.value()->space();
  // pad 8/64 x orient 0/1 x vec 2/4/8 x block 256/512, and residue rows with 4 or 8 warps (b is W^T)
  EXPECT_EQ(space.size(), 26u);
  std::set<std::string> ids;
  for (const auto& v : space) {
    ids.insert(v.id());
    EXPECT_EQ(plan.value()->features(v).size(), plan.value()->features(space.front()).size());
  }
  EXPECT_EQ(ids.size(), space.size());
  auto shape = gemm::parse_mm(p);
  ASSERT_TRUE(shape.ok());
  const auto kernel = gemm::make_gemm_kernel(shape.value(), gemm::GemmTechnique{}, nullptr);
  ASSERT_EQ(kernel->outputs().size(), 1u);
  EXPECT_EQ(kernel->outputs()[0].sizes, (std::vector<int64_t>{40, 50257}));
  EXPECT_EQ(kernel->outputs()[0].strides, (std::vector<int64_t>{50257, 1}));
  EXPECT_EQ(kernel->outputs()[0].dtype, at::kHalf);
  // The copy reads padded rows of NP = 50264 (pad 8) or 50304 (pad 64) and writes rows of N.
  auto src = plan.value()->source(Variant{{{"pad", 64}, {"orient", 1}, {"vec", 8}, {"block", 256}}});
  ASSERT_TRUE(src.ok());
  EXPECT_NE(src->code.find("kNP = 50304LL"), std::string::npos) << src->code;
  EXPECT_NE(src->code.find("kN = 50257LL"), std::string::npos);
  EXPECT_EQ(src->kernel_name, "cudal1_gemm_unpad");
  EXPECT_FALSE(plan.value()->source(Variant{{{"pad", 16}, {"orient", 0}, {"vec", 8}, {"block", 256}}}).ok());
  EXPECT_EQ(gemm::PaddedGemm{}.padded_n(50257), 50264);
}

TEST(GemmPlan, ResidueRowsCoverEveryElementOnceWithAlignedGemms) {  // Note [Residue rows]
  for (int64_t n : {int64_t{1}, int64_t{3}, int64_t{7}, int64_t{9}, int64_t{63}, int64_t{50257}, int64_t{32001}}) {
    for (int j = 0; j < 8; ++j) {
      const gemm::ResidueSplit r = gemm::residue_split(n, 8, j);
      if (r.width > 0) EXPECT_EQ((j * n + r.shift) % 8, 0) << n << " " << j;  // the GEMM starts 16-byte aligned
      EXPECT_EQ(r.width % 8, 0);
      EXPECT_LT(r.shift, 8);
      EXPECT_LE(r.shift, n);
      EXPECT_LE(r.shift + r.width, n);
      EXPECT_LT(n - r.shift - r.width, 8 + 8);  // the remainder: under 8 columns a side
    }
  }
  // Every column of every residue is the GEMM's or a remainder slot's, exactly once.
  const Problem p = mm_problem(at::kHalf, 19, 64, 50257);
  auto shape = gemm::parse_mm(p);
  ASSERT_TRUE(shape.ok());
  ASSERT_TRUE(gemm::residue_layout(shape.value()));
  const gemm::ResidueRows k;
  const int slots = k.slots(shape.value());
  for (int j = 0; j < 8; ++j) {
    const gemm::ResidueSplit r = gemm::residue_split(50257, 8, j);
    EXPECT_LE(50257 - r.width, slots);
  }
  auto src = k.source(shape.value());
  EXPECT_EQ(src.kernel_name, "cudal1_gemm_remainder");
  EXPECT_NE(src.code.find("kSlots = " + std::to_string(slots)), std::string::npos) << src.code;
  EXPECT_EQ(gemm::make_gemm_kernel(shape.value(), k, nullptr)->scratch_bytes(), 0);
}

TEST(GemmPlan, ResidueRowsNeedTheLinearLayout) {  // Note [Residue rows]
  const auto offered = [](const Problem& p) {
    auto plan = family().plan(p);
    if (!plan.ok()) return false;
    for (const auto& v : plan.value()->space())
      if (v.get("rows") > 0) return true;
    return false;
  };
  EXPECT_TRUE(offered(mm_problem(at::kHalf, 4096, 768, 50257)));
  EXPECT_TRUE(offered(mm_problem(at::kBFloat16, 5, 64, 1001)));
  EXPECT_FALSE(offered(mm_problem(at::kHalf, 4096, 1024, 32001, 80, {32001, 1})));  // b row-major, ld unaligned
  EXPECT_FALSE(offered(mm_problem(at::kHalf, 7, 16, 3, 90, {1, 16}, {1, 7})));      // a transposed
  EXPECT_FALSE(offered(mm_problem(at::kHalf, 7, 16, 3, 90, {1, 20}, {20, 1})));     // row strides not multiples of 8
  EXPECT_FALSE(offered(testing::addmm_problem(at::kHalf, 4096, 768, 50257)));      // a bias: the padded GEMM only
  auto plan = family().plan(mm_problem(at::kHalf, 64, 64, 63));
  ASSERT_TRUE(plan.ok());
  auto src = plan.value()->source(Variant{{{"rows", 8}, {"warps", 8}}});
  ASSERT_TRUE(src.ok());
  EXPECT_EQ(src->kernel_name, "cudal1_gemm_remainder");
  EXPECT_FALSE(plan.value()->source(Variant{{{"rows", 8}, {"warps", 2}}}).ok());
}

// Notes [Padded GEMM] and [Residue rows]: a technique's variant keeps the knobs that caches, policy data and
// replay fixtures know.
TEST(GemmPlan, TechniquesKeepTheirVariants) {
  const auto padded = gemm::variant_of(gemm::PaddedGemm{64, 1, 4, 512});
  EXPECT_EQ(padded.id(), "pad64.orient1.vec4.block512");
  EXPECT_EQ(padded.to_json(), (Variant{{{"pad", 64}, {"orient", 1}, {"vec", 4}, {"block", 512}}}.to_json()));
  EXPECT_EQ(gemm::variant_of(gemm::ResidueRows{8}).id(), "rows8.warps8");
  EXPECT_EQ(gemm::variant_of(gemm::GemmTechnique{}).id(), "pad8.orient0.vec8.block256");
}

TEST(GemmPlan, TuningMemoryCountsTheScratch) {  // Note [Tuning memory]
  const Problem p = mm_problem(at::kHalf, 4096, 768, 50257);
  auto shape = gemm::parse_mm(p);
  ASSERT_TRUE(shape.ok());
  const auto k = gemm::make_gemm_kernel(shape.value(), gemm::GemmTechnique{}, nullptr);
  const int64_t inputs = 2 * (4096 * 768 + 768 * 50257), out = int64_t{2} * 4096 * 50257;
  EXPECT_EQ(k->scratch_bytes(), 2 * (50264 * 768 + 4096 * int64_t{50264}));
  EXPECT_EQ(tuning_bytes(p, *k), inputs + 3 * out + 4 * 8 * (out / 2) + (int64_t{256} << 20) + k->scratch_bytes());
}

}  // namespace
}  // namespace cudal1::optimizer
