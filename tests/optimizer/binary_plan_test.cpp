/// @brief What the binary family accepts and declines: PyTorch's promotion table, broadcasting and the output
/// layout TensorIterator allocates (checked against ATen on CPU), scalars and 0-dim operands, its space.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "binary/binary_family.h"
#include "cudal1/optimizer/family.h"
#include "optimizer/problems.h"

namespace cudal1::optimizer {
namespace {

using testing::binary_problem;
using testing::contiguous;
using testing::tensor_arg;
using testing::value_arg;
using testing::zero_dim_arg;

dispatcher::ArgSpec dense(c10::ScalarType dt, std::vector<int64_t> sizes) {
  auto st = contiguous(sizes);
  return tensor_arg(dt, std::move(sizes), std::move(st));
}

dispatcher::ArgSpec like(const at::Tensor& t, c10::ScalarType dt) {
  return tensor_arg(dt, t.sizes().vec(), t.strides().vec(), t.storage_offset());
}

Problem add(dispatcher::ArgSpec a, dispatcher::ArgSpec b, c10::IValue alpha = int64_t{1}) {
  return binary_problem("add", "Tensor", {std::move(a), std::move(b), value_arg(std::move(alpha))});
}

const Family& binary() { return *family_for("add", "Tensor"); }

c10::ScalarType result(const Problem& p) {
  auto s = binary::plan_binary(p);
  EXPECT_TRUE(s.ok()) << s.status().to_string();
  return s.ok() ? s->out_dtype : c10::ScalarType::Undefined;
}

Code declined(const Problem& p) { return binary().plan(p).status().code(); }

TEST(BinaryPlan, CoversTheRequiredOps) {
  for (const char* spec : {"add.Tensor", "sub.Tensor", "mul.Tensor", "div.Tensor", "maximum", "minimum",
                           "pow.Tensor_Tensor", "where.self", "add.Scalar", "sub.Scalar", "mul.Scalar",
                           "div.Scalar"}) {
    const std::string s = spec;
    const auto dot = s.find('.');
    const Family* f = family_for(s.substr(0, dot), dot == std::string::npos ? "" : s.substr(dot + 1));
    ASSERT_NE(f, nullptr) << spec;
    EXPECT_STREQ(f->name(), "binary_elementwise");
  }
  EXPECT_EQ(family_for("div", "Tensor_mode"), nullptr);
  EXPECT_EQ(family_for("add", "out"), nullptr);
}

TEST(BinaryPlan, PromotesLikeTorchResultType) {
  EXPECT_EQ(result(add(dense(at::kBFloat16, {4, 8}), dense(at::kHalf, {4, 8}))), at::kFloat);
  EXPECT_EQ(result(add(dense(at::kHalf, {4, 8}), dense(at::kFloat, {8}))), at::kFloat);
  EXPECT_EQ(result(add(dense(at::kBFloat16, {4, 8}), dense(at::kBFloat16, {8}))), at::kBFloat16);
  // 0-dim tensors and scalars do not promote a floating dimensioned operand.
  EXPECT_EQ(result(add(dense(at::kHalf, {4, 8}), zero_dim_arg(at::kFloat))), at::kHalf);
  EXPECT_EQ(result(add(zero_dim_arg(at::kDouble), dense(at::kBFloat16, {4, 8}))), at::kBFloat16);
  EXPECT_EQ(result(add(dense(at::kHalf, {4, 8}), zero_dim_arg(at::kLong))), at::kHalf);
  EXPECT_EQ(result(binary_problem("add", "Scalar", {dense(at::kHalf, {4, 8}), value_arg(2.0), value_arg(1.0)})),
            at::kHalf);
  EXPECT_EQ(result(binary_problem("mul", "Scalar", {dense(at::kBFloat16, {4, 8}), value_arg(int64_t{3})})),
            at::kBFloat16);
  EXPECT_EQ(result(binary_problem("where", "self",
                                  {dense(at::kBool, {8}), dense(at::kHalf, {4, 8}), dense(at::kBFloat16, {4, 1})})),
            at::kFloat);
  EXPECT_EQ(result(binary_problem("where", "self",
                                  {dense(at::kBool, {4, 8}), dense(at::kHalf, {4, 8}), zero_dim_arg(at::kFloat)})),
            at::kHalf);
  // Only 0-dim values (an attention mask made additive, as GPT-2's traced layers do): 0-dim fp32/fp16/bf16 are
  // never wrapped numbers, so they promote among themselves; a float64 or integer one may be wrapped: declined.
  const auto mask = testing::tensor_arg(at::kBool, {8, 1, 512, 512}, {262144, 262144, 512, 1});
  EXPECT_EQ(result(binary_problem("where", "self", {mask, zero_dim_arg(at::kHalf), zero_dim_arg(at::kHalf)})),
            at::kHalf);
  EXPECT_EQ(result(binary_problem("where", "self", {mask, zero_dim_arg(at::kHalf), zero_dim_arg(at::kFloat)})),
            at::kFloat);
  EXPECT_EQ(declined(binary_problem("where", "self", {mask, zero_dim_arg(at::kHalf), zero_dim_arg(at::kDouble)})),
            Code::kUnsupported);
  EXPECT_EQ(declined(binary_problem("where", "self", {mask, zero_dim_arg(at::kLong), zero_dim_arg(at::kHalf)})),
            Code::kUnsupported);
}

TEST(BinaryPlan, OutputLayoutIsTensorIterators) {
  const at::Tensor m = at::randn({16, 32}), cl = at::randn({2, 8, 4, 4}).contiguous(at::MemoryFormat::ChannelsLast);
  const std::vector<std::pair<at::Tensor, at::Tensor>> cases = {
      {m, at::randn({32})},          {m, at::randn({16, 1})},  {m.t(), at::randn({16})},
      {cl, at::randn({2, 8, 1, 1})}, {cl, at::randn({8, 1, 1})}, {at::randn({8, 1, 1}), cl},
      {m.t(), m.t()},                {m.narrow(1, 0, 8), at::randn({8})}};
  for (const auto& [a, b] : cases) {
    auto s = binary::plan_binary(add(like(a, at::kFloat), like(b, at::kFloat)));
    ASSERT_TRUE(s.ok()) << s.status().to_string();
    const at::Tensor ref = at::add(a, b);
    EXPECT_EQ(s->shape, ref.sizes().vec());
    EXPECT_EQ(s->out_strides, ref.strides().vec()) << a.sizes() << a.strides() << " + " << b.sizes() << b.strides();
  }
  // A scalar operand makes the shapes differ (no fast setup); the layout still follows the tensor.
  auto s = binary::plan_binary(
      binary_problem("mul", "Scalar", {like(cl, at::kFloat), value_arg(2.0)}));
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->out_strides, at::mul(cl, 2.0).strides().vec());
}

TEST(BinaryPlan, CoalescesAndVectorises) {
  // Row broadcast [M, N] + [N]: the bias repeats along the outer dim (stride 0).
  auto row = binary::plan_binary(add(dense(at::kBFloat16, {64, 128}), dense(at::kBFloat16, {128})));
  ASSERT_TRUE(row.ok());
  EXPECT_EQ(row->it_sizes, (std::vector<int64_t>{128, 64}));
  EXPECT_EQ(row->ins[1].it_strides, (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(row->max_vec, 8);
  EXPECT_TRUE(binary::vector_readable(row.value(), 1, 8));
  // Same shape, contiguous: one linear dim.
  auto same = binary::plan_binary(add(dense(at::kFloat, {64, 128}), dense(at::kFloat, {64, 128})));
  ASSERT_TRUE(same.ok());
  EXPECT_EQ(same->it_sizes, (std::vector<int64_t>{64 * 128}));
  EXPECT_EQ(same->max_vec, 4);
  // Column broadcast [M, N] + [M, 1]: inner stride 0 for the column.
  auto col = binary::plan_binary(add(dense(at::kFloat, {64, 12}), dense(at::kFloat, {64, 1})));
  ASSERT_TRUE(col.ok());
  EXPECT_EQ(col->ins[1].it_strides, (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(col->max_vec, 4);
  // Inner size 6 limits the width to 2; a misaligned storage offset forbids vector reads of that input.
  auto odd = binary::plan_binary(add(tensor_arg(at::kFloat, {64, 6}, {6, 1}, 1), dense(at::kFloat, {6})));
  ASSERT_TRUE(odd.ok());
  EXPECT_EQ(odd->max_vec, 2);
  EXPECT_FALSE(binary::vector_readable(odd.value(), 0, 2));
  EXPECT_TRUE(binary::vector_readable(odd.value(), 1, 2));
}

TEST(BinaryPlan, DeclinesWhatItCannotDoExactly) {
  EXPECT_EQ(declined(add(dense(at::kDouble, {8}), dense(at::kDouble, {8}))), Code::kUnsupported);
  EXPECT_EQ(declined(add(dense(at::kInt, {8}), dense(at::kFloat, {8}))), Code::kUnsupported);
  EXPECT_EQ(declined(add(dense(at::kFloat, {8}), dense(at::kDouble, {8}))), Code::kUnsupported);
  EXPECT_TRUE(binary().plan(add(dense(at::kBFloat16, {8}), dense(at::kFloat, {8}))).ok());  // -> fp32
  EXPECT_EQ(declined(binary_problem("add", "Tensor", {dense(at::kBFloat16, {8}), dense(at::kBFloat16, {8}),
                                                      value_arg(int64_t{1})}, 75)),
            Code::kUnsupported);
  EXPECT_EQ(declined(add(zero_dim_arg(at::kFloat), zero_dim_arg(at::kFloat))), Code::kUnsupported);  // 0-dim result
  EXPECT_EQ(declined(add(dense(at::kFloat, {3, 4}), dense(at::kFloat, {5}))), Code::kUnsupported);    // no broadcast
  EXPECT_EQ(declined(add(dense(at::kFloat, {0, 4}), dense(at::kFloat, {4}))), Code::kUnsupported);    // empty
  EXPECT_EQ(declined(add(tensor_arg(at::kFloat, {4}, {-1}, 3), dense(at::kFloat, {4}))), Code::kUnsupported);
  EXPECT_EQ(declined(add(dense(at::kHalf, {8}), dense(at::kHalf, {8}), 0.1)), Code::kUnsupported);  // alpha inexact
  EXPECT_EQ(declined(add(dense(at::kHalf, {8}), dense(at::kHalf, {8}), c10::complex<double>(1, 1))),
            Code::kUnsupported);
  EXPECT_EQ(declined(binary_problem("div", "Scalar", {dense(at::kHalf, {8}), value_arg(0.1)})),
            Code::kUnsupported);  // 0.1 is not a half: torch versions disagree on rounding it first
  EXPECT_TRUE(binary().plan(binary_problem("div", "Scalar", {dense(at::kHalf, {8}), value_arg(0.25)})).ok());
  EXPECT_EQ(declined(binary_problem("pow", "Tensor_Tensor", {dense(at::kFloat, {8}), zero_dim_arg(at::kFloat)})),
            Code::kUnsupported);
  EXPECT_EQ(declined(binary_problem("where", "self", {dense(at::kFloat, {8}), dense(at::kFloat, {8}),
                                                      dense(at::kFloat, {8})})),
            Code::kUnsupported);  // non-bool condition
  EXPECT_EQ(declined(binary_problem("where", "self", {dense(at::kBool, {8, 8}),
                                                      tensor_arg(at::kHalf, {8, 8}, {16, 1}),
                                                      dense(at::kFloat, {8, 8})})),
            Code::kUnsupported);  // where would cast a non-dense operand
  EXPECT_EQ(declined(binary_problem("add", "out", {dense(at::kFloat, {8}), dense(at::kFloat, {8})})),
            Code::kUnsupported);
  EXPECT_EQ(declined(binary_problem("div", "Tensor_mode", {dense(at::kFloat, {8}), dense(at::kFloat, {8}),
                                                           value_arg(std::string("floor"))})),
            Code::kUnsupported);
}

TEST(BinaryPlan, SpaceFeaturesAndSource) {
  auto plan = binary().plan(add(dense(at::kHalf, {64, 128}), dense(at::kHalf, {128})));
  ASSERT_TRUE(plan.ok());
  const auto space = plan.value()->space();
  ASSERT_FALSE(space.empty());
  EXPECT_EQ(space.size(), 4u * 3 * 3 * 2);
  const size_t len = plan.value()->features(space.front()).size();
  auto other = binary().plan(binary_problem("where", "self", {dense(at::kBool, {7}), dense(at::kFloat, {3, 7}),
                                                              zero_dim_arg(at::kFloat)}));
  ASSERT_TRUE(other.ok());
  EXPECT_EQ(other.value()->space().size(), 3u * 3 * 2);  // inner 7: vec 1 only
  for (const auto& v : other.value()->space()) EXPECT_EQ(other.value()->features(v).size(), len);
  for (const auto& v : space) {
    const auto f = plan.value()->features(v);
    EXPECT_EQ(f.size(), len);
    for (float x : f) EXPECT_TRUE(x >= 0.f && x <= 1.f);
  }
  auto src = plan.value()->source(space.back());
  ASSERT_TRUE(src.ok());
  EXPECT_EQ(src->kernel_name, "cudal1_binary");
  EXPECT_EQ(plan.value()->source(Variant{{{"vec", 16}, {"block", 256}, {"unroll", 1}, {"grid", 0}}}).status().code(),
            Code::kInvalidArgument);
  EXPECT_EQ(plan.value()->source(Variant{{{"rows", 4}}}).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(other.value()->source(Variant{{{"vec", 2}, {"block", 256}, {"unroll", 1}, {"grid", 0}}}).status().code(),
            Code::kInvalidArgument);
}

}  // namespace
}  // namespace cudal1::optimizer
