/// @brief What the batch-norm family accepts and declines, the outputs it promises for each op (ATen's layouts,
/// the empty cuDNN extras), its flat view of the input and its space (Note [Batch norm inference]).
#include <gtest/gtest.h>

#include <set>

#include "batchnorm/batchnorm_family.h"
#include "cudal1/optimizer/family.h"
#include "optimizer/problems.h"

namespace cudal1::optimizer {
namespace {

using testing::batch_norm_problem;
using testing::channels_last;

const Family& family() { return *family_for("native_batch_norm", ""); }

Code code(const Problem& p) { return family().plan(p).status().code(); }

std::vector<Variant> space(const Problem& p) { return testing::planned_space(family(), p); }

std::vector<OutputSpec> outputs(const Problem& p) {
  auto s = batchnorm::parse_batch_norm(p);
  EXPECT_TRUE(s.ok()) << s.status().to_string();
  if (!s.ok()) return {};
  return batchnorm::make_batchnorm_kernel(s.value(), batchnorm::BnTechnique{}, nullptr)->outputs();
}

TEST(BatchNormPlan, ServesBothOps) {
  ASSERT_EQ(family_for("cudnn_batch_norm", ""), &family());
  EXPECT_STREQ(family().name(), "batchnorm");
  const std::vector<int64_t> img = {64, 256, 56, 56};
  EXPECT_TRUE(family().plan(batch_norm_problem("cudnn_batch_norm", at::kFloat, at::kFloat, img)).ok());
  EXPECT_TRUE(family().plan(batch_norm_problem("cudnn_batch_norm", at::kHalf, at::kFloat, img)).ok());
  EXPECT_TRUE(family().plan(batch_norm_problem("cudnn_batch_norm", at::kFloat, at::kFloat, {8, 64, 100})).ok());
  EXPECT_TRUE(family().plan(batch_norm_problem("cudnn_batch_norm", at::kFloat, at::kFloat, {2, 16, 4, 8, 8})).ok());
  EXPECT_TRUE(family().plan(batch_norm_problem("native_batch_norm", at::kHalf, at::kHalf, img)).ok());
  EXPECT_TRUE(family()
                  .plan(batch_norm_problem("native_batch_norm", at::kBFloat16, at::kFloat, img, channels_last(img)))
                  .ok());
  EXPECT_TRUE(family().plan(batch_norm_problem("native_batch_norm", at::kFloat, at::kFloat, {8192, 4096})).ok());
  EXPECT_TRUE(family().plan(batch_norm_problem("native_batch_norm", at::kFloat, at::kFloat, img, {}, false)).ok());
  EXPECT_TRUE(family().plan(batch_norm_problem("native_batch_norm", at::kHalf, at::kFloat, {3, 1, 7})).ok());
}

TEST(BatchNormPlan, DeclinesWhatItCannotDoExactly) {
  const std::vector<int64_t> img = {4, 8, 5, 5};
  for (const char* op : {"cudnn_batch_norm", "native_batch_norm"}) {
    // Training, and eval without running statistics (which reaches the ops with training=true anyway).
    EXPECT_EQ(code(batch_norm_problem(op, at::kFloat, at::kFloat, img, {}, true, 90, 1e-5, true)), Code::kUnsupported);
    auto no_stats = batch_norm_problem(op, at::kFloat, at::kFloat, img);
    no_stats.args[3] = testing::none_arg();
    no_stats.args[4] = testing::none_arg();
    EXPECT_EQ(code(no_stats), Code::kUnsupported);
    EXPECT_EQ(code(batch_norm_problem(op, at::kDouble, at::kDouble, img)), Code::kUnsupported);
    EXPECT_EQ(code(batch_norm_problem(op, at::kFloat, at::kHalf, img)), Code::kUnsupported);  // ATen rejects
    EXPECT_EQ(code(batch_norm_problem(op, at::kFloat, at::kFloat, {0, 8, 5, 5})), Code::kUnsupported);
    EXPECT_EQ(code(batch_norm_problem(op, at::kFloat, at::kFloat, {8})), Code::kUnsupported);
    EXPECT_EQ(code(batch_norm_problem(op, at::kFloat, at::kFloat, {2, 2, 2, 2, 2, 2})), Code::kUnsupported);
    EXPECT_EQ(code(batch_norm_problem(op, at::kBFloat16, at::kBFloat16, img, {}, true, 75)), Code::kUnsupported);
    // A stepped (non-dense) input.
    EXPECT_EQ(code(batch_norm_problem(op, at::kFloat, at::kFloat, img, {400, 50, 10, 2})), Code::kUnsupported);
    auto mixed = batch_norm_problem(op, at::kHalf, at::kFloat, img);
    mixed.args[1].tensor.dtype = at::kHalf;
    EXPECT_EQ(code(mixed), Code::kUnsupported);
    auto strided_param = batch_norm_problem(op, at::kFloat, at::kFloat, img);
    strided_param.args[3].tensor.strides = {2};
    EXPECT_EQ(code(strided_param), Code::kUnsupported);
  }
  // cuDNN's own rules: weight and bias required, fp16 needs fp32 parameters, bf16 never seen there.
  EXPECT_EQ(code(batch_norm_problem("cudnn_batch_norm", at::kFloat, at::kFloat, img, {}, false)), Code::kUnsupported);
  EXPECT_EQ(code(batch_norm_problem("cudnn_batch_norm", at::kHalf, at::kHalf, img)), Code::kUnsupported);
  EXPECT_EQ(code(batch_norm_problem("cudnn_batch_norm", at::kBFloat16, at::kFloat, img)), Code::kUnsupported);
  // Dense but not contiguous in its suggested format: ATen's cudnn_batch_norm throws.
  EXPECT_EQ(code(batch_norm_problem("cudnn_batch_norm", at::kFloat, at::kFloat, {4, 8, 5}, {5, 20, 1})),
            Code::kUnsupported);
  EXPECT_TRUE(
      family().plan(batch_norm_problem("native_batch_norm", at::kFloat, at::kFloat, {4, 8, 5}, {5, 20, 1})).ok());
}

TEST(BatchNormPlan, OutputsAsAtenAllocatesThem) {
  const std::vector<int64_t> img = {2, 16, 7, 9};
  const auto cl = channels_last(img);
  auto cudnn = outputs(batch_norm_problem("cudnn_batch_norm", at::kHalf, at::kFloat, img, cl));
  ASSERT_EQ(cudnn.size(), 4u);
  EXPECT_EQ(cudnn[0].dtype, at::kHalf);
  EXPECT_EQ(cudnn[0].strides, cl);
  for (int i : {1, 2}) {
    EXPECT_EQ(cudnn[i].dtype, at::kFloat);  // the weight's dtype
    EXPECT_EQ(cudnn[i].sizes, std::vector<int64_t>{0});
    EXPECT_EQ(cudnn[i].strides, std::vector<int64_t>{1});
  }
  EXPECT_EQ(cudnn[3].dtype, at::kByte);
  // Note [Batch norm inference]: cuDNN's association is not ATen's native one.
  auto s = batchnorm::parse_batch_norm(batch_norm_problem("cudnn_batch_norm", at::kHalf, at::kFloat, img));
  ASSERT_TRUE(s.ok());
  const auto k = batchnorm::make_batchnorm_kernel(s.value(), batchnorm::BnTechnique{}, nullptr);
  EXPECT_TRUE(k->output_tolerance(0).nonfinite_equivalent);
  EXPECT_TRUE(k->output_tolerance(0).overflow_equivalent);
  EXPECT_GT(k->output_tolerance(0).output_scaled, 0);
  EXPECT_EQ(k->output_tolerance(1).output_scaled, 0);
  EXPECT_EQ(cudnn[3].sizes, std::vector<int64_t>{0});
  // A contiguous input with a size-1 dim at an odd stride: the output gets canonical strides.
  auto odd = outputs(batch_norm_problem("cudnn_batch_norm", at::kFloat, at::kFloat, {2, 16, 1, 9}, {144, 9, 1000, 1}));
  ASSERT_EQ(odd.size(), 4u);
  EXPECT_EQ(odd[0].strides, (std::vector<int64_t>{144, 9, 9, 1}));

  auto native = outputs(batch_norm_problem("native_batch_norm", at::kBFloat16, at::kBFloat16, {5, 3, 4}, {1, 5, 15}));
  ASSERT_EQ(native.size(), 3u);
  EXPECT_EQ(native[0].dtype, at::kBFloat16);
  EXPECT_EQ(native[0].strides, (std::vector<int64_t>{1, 5, 15}));  // empty_like keeps a dense input's strides
  for (int i : {1, 2}) {
    EXPECT_EQ(native[i].dtype, at::kFloat);  // the accumulation type
    EXPECT_EQ(native[i].sizes, std::vector<int64_t>{3});
    EXPECT_EQ(native[i].strides, std::vector<int64_t>{1});
  }
}

TEST(BatchNormPlan, FlatViewAndVectorWidth) {
  auto shape = [](const Problem& p) { return batchnorm::parse_batch_norm(p).value(); };
  const std::vector<int64_t> img = {2, 16, 7, 9};
  const auto nchw = shape(batch_norm_problem("native_batch_norm", at::kFloat, at::kFloat, img));
  EXPECT_EQ(nchw.inner, 63);
  EXPECT_EQ(nchw.max_vec, 1);  // odd planes
  const auto nchw8 = shape(batch_norm_problem("native_batch_norm", at::kHalf, at::kHalf, {2, 16, 8, 8}));
  EXPECT_EQ(nchw8.inner, 64);
  EXPECT_EQ(nchw8.max_vec, 8);
  const auto cl = shape(batch_norm_problem("native_batch_norm", at::kBFloat16, at::kFloat, img, channels_last(img)));
  EXPECT_EQ(cl.inner, 1);
  EXPECT_EQ(cl.max_vec, 8);  // 16 channels
  const auto rows = shape(batch_norm_problem("native_batch_norm", at::kFloat, at::kFloat, {8, 6}));
  EXPECT_EQ(rows.inner, 1);
  EXPECT_EQ(rows.max_vec, 2);
  EXPECT_EQ(rows.rows(), 8);
  const auto one = shape(batch_norm_problem("native_batch_norm", at::kFloat, at::kFloat, {4, 1, 6}));
  EXPECT_EQ(one.inner, 24);  // a single channel: one plane
  auto offset = batch_norm_problem("native_batch_norm", at::kFloat, at::kFloat, {2, 16, 8, 8});
  offset.args[0].tensor.storage_offset = 2;
  EXPECT_EQ(shape(offset).max_vec, 2);
}

TEST(BatchNormPlan, SpaceOffersEachTechniqueWhereItApplies) {
  auto modes = [](const std::vector<Variant>& vs) {
    std::set<int> m;
    for (const auto& v : vs) m.insert(v.get("mode"));
    return m;
  };
  const std::vector<int64_t> img = {64, 256, 56, 56};
  const auto planes = space(batch_norm_problem("cudnn_batch_norm", at::kFloat, at::kFloat, img));
  EXPECT_EQ(modes(planes), (std::set<int>{0, 1}));
  const auto cl = space(batch_norm_problem("native_batch_norm", at::kBFloat16, at::kFloat, img, channels_last(img)));
  EXPECT_EQ(modes(cl), (std::set<int>{0, 2}));
  const auto small = space(batch_norm_problem("native_batch_norm", at::kFloat, at::kFloat, {8, 64, 3, 3}));
  EXPECT_EQ(modes(small), (std::set<int>{0}));  // 9-element planes: flat only
  std::set<int> vecs, rpts;
  for (const auto& v : cl) vecs.insert(v.get("vec")), rpts.insert(v.get("rpt"));
  EXPECT_EQ(vecs, (std::set<int>{1, 2, 4, 8}));
  EXPECT_EQ(rpts, (std::set<int>{1, 4, 16}));
  auto plan = family().plan(batch_norm_problem("native_batch_norm", at::kFloat, at::kFloat, {8192, 4096}));
  ASSERT_TRUE(plan.ok());
  std::set<std::string> ids;
  size_t nf = 0;
  for (const auto& v : plan.value()->space()) {
    EXPECT_TRUE(ids.insert(v.id()).second) << v.id();
    const auto f = plan.value()->features(v);
    if (nf == 0) nf = f.size();
    EXPECT_EQ(f.size(), nf);
    auto src = plan.value()->source(v);
    ASSERT_TRUE(src.ok());
    EXPECT_EQ(src->kernel_name, "cudal1_bn");
  }
  EXPECT_FALSE(plan.value()->source(Variant{{{"mode", 1}, {"vec", 4}, {"block", 256}, {"rpt", 1}}}).ok());
}

// Note [Batch norm inference]: a technique's variant keeps the knobs {mode, vec, block, rpt} that caches,
// policy data and replay fixtures know.
TEST(BatchNormPlan, TechniquesKeepTheirVariants) {
  const auto flat = batchnorm::variant_of(batchnorm::FlatVectors{2, 128});
  EXPECT_EQ(flat.id(), "mode0.vec2.block128.rpt1");
  EXPECT_EQ(flat.to_json(), (Variant{{{"mode", 0}, {"vec", 2}, {"block", 128}, {"rpt", 1}}}.to_json()));
  EXPECT_EQ(batchnorm::variant_of(batchnorm::PlanePerBlock{4, 64}).id(), "mode1.vec4.block64.rpt1");
  EXPECT_EQ(batchnorm::variant_of(batchnorm::ChannelColumns{8, 256, 16}).id(), "mode2.vec8.block256.rpt16");
  EXPECT_EQ(batchnorm::variant_of(batchnorm::BnTechnique{}).id(), "mode0.vec1.block256.rpt1");
}

}  // namespace
}  // namespace cudal1::optimizer
