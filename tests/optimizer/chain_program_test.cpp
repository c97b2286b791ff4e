/// @brief Program chains on the CPU (Note [Program chains]): a residual block's convolutions, batch norms, ReLUs and
/// residual add are recorded as one program chain (ordinary chains never hold a convolution), planned as conv
/// groups with folded batch norms, and the program kernel (its separate variant: the fused one is cuDNN's) computes
/// what the ATen chain does, declines a region whose group value the app kept, follows weights changed in place,
/// and runs through a deferred region whole or flushed early. Shares the hook of chain_plan_test.cpp.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <functional>
#include <set>
#include <string>
#include <vector>

#include "bench/chain_suite.h"
#include "cudal1/dispatcher/chains.h"
#include "cudal1/dispatcher/hook.h"
#include "cudal1/dispatcher/regions.h"
#include "optimizer/chains/chain_plan.h"
#include "optimizer/chains/chain_program.h"

namespace cudal1::optimizer {
namespace {

/// A torchvision-style basic block (eval mode) and a max-pool after it, written as eager code writes it.
struct Block {
  at::Tensor w1 = at::randn({8, 8, 3, 3}).mul_(0.2), w2 = at::randn({8, 8, 3, 3}).mul_(0.2);
  at::Tensor g1 = at::rand({8}).add_(0.5), b1 = at::randn({8}), m1 = at::randn({8}), v1 = at::rand({8}).add_(0.5);
  at::Tensor g2 = at::rand({8}).add_(0.5), b2 = at::randn({8}), m2 = at::randn({8}), v2 = at::rand({8}).add_(0.5);

  at::Tensor operator()(const at::Tensor& x) const {
    at::Tensor y = at::conv2d(x, w1, {}, 1, 1);
    y = at::batch_norm(y, g1, b1, m1, v1, false, 0.1, 1e-5, true);
    y.relu_();
    at::Tensor z = at::conv2d(y, w2, {}, 1, 1);
    z = at::batch_norm(z, g2, b2, m2, v2, false, 0.1, 1e-5, true);
    z.add_(x);
    z.relu_();
    return at::max_pool2d(z, {2, 2});
  }
};

at::Tensor aten(const std::function<at::Tensor()>& f) {
  dispatcher::BypassScope aten_only;
  return f();
}

/// The block's program chain, recorded from two calls on inputs of `x`'s shape.
dispatcher::ChainRecord* record_block(const Block& b, const at::Tensor& x) {
  return bench::record_chain([&] { b(x); }, 2);
}

bool has_conv(const dispatcher::ChainRecord& c) {
  for (const auto& n : c.nodes)
    if (chains::functional_op(n) == "aten::_convolution") return true;
  return false;
}

TEST(ProgramChains, AResidualBlockIsOneProgramOfFoldedConvGroups) {
  const Block b;
  const at::Tensor x = at::randn({2, 8, 10, 10});
  std::set<const dispatcher::ChainRecord*> before;  // other tests' chains (a stem's program holds a convolution)
  dispatcher::for_each_chain([&](dispatcher::ChainRecord& r) { before.insert(&r); });
  dispatcher::ChainRecord* c = record_block(b, x);
  ASSERT_NE(c, nullptr);
  ASSERT_TRUE(has_conv(*c)) << c->text();
  ASSERT_EQ(c->nodes.size(), 8u) << c->text();
  auto p = chains::plan_program(*c);
  ASSERT_TRUE(p.ok()) << p.status().to_string() << "\n" << c->text();
  EXPECT_EQ(p->convs, 2);
  EXPECT_EQ(p->folded, 2);
  EXPECT_EQ(p->fused_epilogues, 2);
  ASSERT_EQ(p->groups.size(), 3u) << p->text;
  EXPECT_TRUE(p->groups[0].conv);
  EXPECT_EQ(p->groups[0].last, 2u) << "conv, batch norm, relu_";
  EXPECT_EQ(p->groups[1].add, 5);
  EXPECT_EQ(p->groups[1].residual, (dispatcher::ChainInput{-1, 0})) << "the block's input, external slot 0";
  EXPECT_FALSE(p->groups[2].conv) << "the max-pool runs as its ATen op";
  EXPECT_EQ(p->max_k, 72);
  // Ordinary chains saw the same calls without the convolutions.
  int ordinary = 0;
  dispatcher::for_each_chain([&](dispatcher::ChainRecord& r) {
    if (&r != c && r.count.load() > 0 && !before.count(&r)) {
      ++ordinary;
      EXPECT_FALSE(has_conv(r)) << r.text();
    }
  });
  EXPECT_GT(ordinary, 0);
  EXPECT_FALSE(chains::plan_program(*dispatcher::suffix_chain(*c, 3)).ok() &&
               chains::plan_program(*dispatcher::suffix_chain(*c, 6)).ok())
      << "a tail without a convolution is no program";
}

TEST(ProgramChains, TheProgramComputesTheATenChainAndDeclinesAKeptGroupValue) {
  const Block b;
  const at::Tensor x = at::randn({2, 8, 12, 12});
  dispatcher::ChainRecord* c = record_block(b, x);
  ASSERT_NE(c, nullptr);
  auto p = chains::plan_program(*c);
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  const std::vector<at::Tensor> ext = c->last_externals();
  ASSERT_EQ(ext.size(), 11u);
  for (const auto& t : ext) ASSERT_TRUE(t.defined());
  auto kernel = chains::program_kernel(*c, p.value(), /*fused=*/true);  // on the CPU: the separate epilogue
  EXPECT_EQ(kernel->describe(), "program fused (2 convolutions): 0 regions, 0 declined, 0 convolutions with the "
                                "fused epilogue, 0 without, 0 folds");
  auto got = bench::last_output_only(*c);
  ASSERT_TRUE(kernel->run(ext, got).ok());
  auto again = bench::last_output_only(*c);
  ASSERT_TRUE(kernel->run(ext, again).ok());
  EXPECT_EQ(kernel->describe(), "program fused (2 convolutions): 2 regions, 0 declined, 0 convolutions with the "
                                "fused epilogue, 4 without, 2 folds")
      << "each group folds once while its tensors are unchanged; the CPU has no cuDNN epilogue";
  const at::Tensor ref = aten([&] { return b(ext[0]); });
  ASSERT_EQ(got.back()[0].sizes(), ref.sizes());
  EXPECT_TRUE(at::allclose(got.back()[0], ref, 1e-4, 1e-4)) << (got.back()[0] - ref).abs().max();
  EXPECT_TRUE(got.back()[0].is_contiguous()) << "the app's tensor keeps its layout";

  auto kept = bench::last_output_only(*c);
  kept[1][0] = at::full(c->nodes[1].outputs[0].sizes, NAN);  // the first batch norm's result, inside group 0
  EXPECT_EQ(kernel->run(ext, kept).code(), Code::kUnavailable);
  EXPECT_TRUE(at::isnan(kept.back()[0]).all().item<bool>()) << "declined before writing anything";

  auto indices = bench::last_output_only(*c);  // the max-pool's indices: ATen's NCHW kernel picks among equal maxima
  ASSERT_EQ(indices[7].size(), 2u) << c->text();
  indices[7][1] = at::zeros(c->nodes[7].outputs[1].sizes, at::kLong);
  EXPECT_EQ(kernel->run(ext, indices).code(), Code::kUnavailable);
  EXPECT_NE(kernel->describe().find("2 regions, 2 declined"), std::string::npos) << kernel->describe();

  auto bad = ext;
  bad[1] = at::randn({8, 8, 5, 5});  // not the recorded weight's shape
  EXPECT_FALSE(kernel->run(bad, bench::last_output_only(*c)).ok());
}

TEST(ProgramChains, FoldedWeightsFollowAWeightChangedInPlace) {
  Block b;
  const at::Tensor x = at::randn({2, 8, 14, 14});
  dispatcher::ChainRecord* c = record_block(b, x);
  ASSERT_NE(c, nullptr);
  auto p = chains::plan_program(*c);
  ASSERT_TRUE(p.ok());
  auto kernel = chains::program_kernel(*c, p.value(), false);
  const std::vector<at::Tensor> ext = c->last_externals();
  auto first = bench::last_output_only(*c);
  ASSERT_TRUE(kernel->run(ext, first).ok());
  aten([&] { return b.v2.mul_(4); });  // a running variance updated in place: the fold must follow
  aten([&] { return b.w1.neg_(); });
  auto second = bench::last_output_only(*c);
  ASSERT_TRUE(kernel->run(ext, second).ok());
  const at::Tensor ref = aten([&] { return b(ext[0]); });
  EXPECT_TRUE(at::allclose(second.back()[0], ref, 1e-4, 1e-4)) << (second.back()[0] - ref).abs().max();
  EXPECT_FALSE(at::allclose(first.back()[0], second.back()[0]));
}

TEST(ProgramChains, ADeferredProgramRunsWholeAndAnEarlyFlushReplaysExactly) {
  const Block b;
  const at::Tensor x = at::randn({2, 8, 9, 9});
  dispatcher::ChainRecord* c = record_block(b, x);
  ASSERT_NE(c, nullptr);
  auto p = chains::plan_program(*c);
  ASSERT_TRUE(p.ok());
  dispatcher::DeferralOptions d;
  d.cpu = true;
  d.poison = true;  // a pending output read before its region ran would be NaN
  ASSERT_TRUE(dispatcher::enable_deferral(d).ok());
  const Status fused = dispatcher::fuse_chain(*c, chains::program_kernel(*c, p.value(), true));
  ASSERT_TRUE(fused.ok()) << fused.to_string();
  const dispatcher::RegionCounters before = dispatcher::region_counters();
  const at::Tensor y = b(x);
  const at::Tensor ref = aten([&] { return b(x); });  // the region runs first
  EXPECT_TRUE(at::allclose(y, ref, 1e-4, 1e-4)) << (y - ref).abs().max();
  const dispatcher::RegionCounters after = dispatcher::region_counters();
  EXPECT_EQ(after.completed, before.completed + 1);
  EXPECT_EQ(after.kernel_failures, before.kernel_failures);
  EXPECT_GE(after.skipped, before.skipped + 5) << "the block's intermediates died inside the region";

  EXPECT_GE(after.advanced, before.advanced + 7) << "Note [Incremental regions]: the program ran as calls came";

  // Diverging after the first group: the app reads the first activation (an op the chain does not have); the
  // program had already computed the group in its own tensors, and the flush replays through ATen.
  at::Tensor a = at::conv2d(x, b.w1, {}, 1, 1);
  a = at::batch_norm(a, b.g1, b.b1, b.m1, b.v1, false, 0.1, 1e-5, true);
  a.relu_();
  EXPECT_TRUE(dispatcher::region_open_on_this_thread());
  const double s = a.sum().item<double>();
  const at::Tensor a_ref = aten([&] {
    return at::relu(at::batch_norm(at::conv2d(x, b.w1, {}, 1, 1), b.g1, b.b1, b.m1, b.v1, false, 0.1, 1e-5, true));
  });
  EXPECT_TRUE(at::equal(a, a_ref)) << "an early flush replays through ATen: exact";
  EXPECT_NEAR(s, a_ref.sum().item<double>(), 1e-6 * std::max(1.0, std::abs(s)));
  EXPECT_EQ(dispatcher::region_counters().lost, 0u);
  EXPECT_GT(dispatcher::region_counters().by_op + dispatcher::region_counters().diverged,
            after.by_op + after.diverged);
}

// torchvision's downsampling block: `out += identity` adds the downsample's batch norm into the main path's, in
// place on the main path's value, so the downsample group takes the residual add and the ReLU.
TEST(ProgramChains, ADownsampleGroupTakesTheBlocksAddInPlaceOnTheMainPath) {
  const Block b;
  const at::Tensor wd = at::randn({8, 8, 1, 1}).mul_(0.3);
  const at::Tensor gd = at::rand({8}).add_(0.5), bd = at::randn({8}), md = at::randn({8}), vd = at::rand({8}).add_(0.5);
  auto block = [&](const at::Tensor& in) {
    const at::Tensor x = at::relu(in);  // the block's input is a chain value (the previous block's ReLU)
    at::Tensor y = at::batch_norm(at::conv2d(x, b.w1, {}, 1, 1), b.g1, b.b1, b.m1, b.v1, false, 0.1, 1e-5, true);
    y.relu_();
    at::Tensor z = at::batch_norm(at::conv2d(y, b.w2, {}, 1, 1), b.g2, b.b2, b.m2, b.v2, false, 0.1, 1e-5, true);
    at::Tensor identity = at::batch_norm(at::conv2d(x, wd), gd, bd, md, vd, false, 0.1, 1e-5, true);
    z.add_(identity);
    return z.relu_();
  };
  const at::Tensor x = at::randn({2, 8, 11, 11});
  dispatcher::ChainRecord* c = bench::record_chain([&] { block(x); }, 2);
  ASSERT_NE(c, nullptr);
  auto p = chains::plan_program(*c);
  ASSERT_TRUE(p.ok()) << p.status().to_string() << "\n" << c->text();
  ASSERT_EQ(p->groups.size(), 4u) << p->text;
  EXPECT_EQ(p->groups[2].relu, -1) << "the main path's last batch norm ends its group";
  EXPECT_GE(p->groups[3].add, 0) << p->text;
  EXPECT_GE(p->groups[3].relu, 0) << p->text;
  EXPECT_EQ(p->groups[3].residual.producer, static_cast<int>(p->groups[2].last));
  auto kernel = chains::program_kernel(*c, p.value(), true);
  const std::vector<at::Tensor> ext = c->last_externals();
  auto got = bench::last_output_only(*c);
  ASSERT_TRUE(kernel->run(ext, got).ok());
  const at::Tensor ref = aten([&] { return block(ext[0]); });
  EXPECT_TRUE(at::allclose(got.back()[0], ref, 1e-4, 1e-4)) << (got.back()[0] - ref).abs().max();
}

TEST(ProgramChains, WhatIsNotAProgramIsDeclined) {
  const at::Tensor w = at::randn({4, 4, 3, 3});
  const std::vector<std::pair<std::string, std::function<void()>>> cases = {
      {"no convolution", [] { at::randn({4, 8}).mul(2).relu_(); }},
      {"a transposed convolution",
       [&] { at::conv_transpose2d(at::randn({1, 4, 6, 6}), w, {}, 1, 1).relu_().mul_(2); }},
      {"an in-place op on an external", [&] {
         at::Tensor e = at::randn({1, 4, 6, 6});
         at::Tensor y = at::conv2d(at::randn({1, 4, 6, 6}), w, {}, 1, 1);
         e.add_(y);
         e.relu_();
       }}};
  for (const auto& [why, f] : cases) {
    dispatcher::ChainRecord* c = bench::record_chain(f, 2);
    if (!c) continue;  // nothing recorded is declined too
    auto p = chains::plan_program(*c);
    EXPECT_FALSE(p.ok()) << why << "\n" << c->text();
  }
}

}  // namespace
}  // namespace cudal1::optimizer
