/// @brief The chain generator on the CPU (Notes [Pointwise chains] and [Row chains]): the suite's chains, recorded
/// through the hook on CPU tensors, are planned as the ops they are (reductions, layer norms and softmaxes as row
/// chains), what the generator cannot fuse is declined with a reason, and every variant's source compiles with
/// NVRTC for sm_80 and sm_90 (no GPU needed; the GPU verifies them: tests/gpu/chain_gpu_test.cpp).
#include <ATen/ATen.h>
#include <torch/version.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <set>

#include "bench/chain_suite.h"
#include "cudal1/dispatcher/chains.h"
#include "cudal1/dispatcher/hook.h"
#include "cudal1/optimizer/chain_tuner.h"
#include "cudal1/optimizer/compiler.h"
#include "cudal1/optimizer/family.h"
#include "optimizer/chains/chain_causal.h"
#include "optimizer/chains/chain_library.h"
#include "optimizer/chains/chain_plan.h"
#include "optimizer/source_digest.h"

namespace cudal1::optimizer {
namespace {

class ChainPlanEnv : public ::testing::Environment {
 public:
  void SetUp() override {
    dispatcher::HookOptions o;
    o.mode = Mode::kProfile;
    o.ops = {"add.Tensor", "sub.Tensor", "mul.Tensor", "div.Tensor", "add.Scalar", "mul.Scalar", "div.Scalar",
             "tanh", "sigmoid", "silu", "relu", "gelu", "exp", "mean.dim", "sum.dim_IntList", "native_layer_norm",
             "amax", "_softmax", "native_batch_norm", "max_pool2d_with_indices", "mm", "addmm"};
    for (const auto& op : dispatcher::chain_ops()) o.ops.push_back(op);
    o.hot_calls = 1000000;
    o.sample_every = 1000000;
    o.profile_cpu = true;
    o.chains = true;
    const Status s = dispatcher::install_hooks(o, dispatcher::HookCallbacks{});
    ASSERT_TRUE(s.ok()) << s.to_string();
  }
};
const auto* const g_env = ::testing::AddGlobalTestEnvironment(new ChainPlanEnv);

/// The suite's row on CPU in fp32 (CPU kernels for half types are incomplete on older LibTorch).
std::vector<at::Tensor> cpu_inputs(const bench::ChainRow& row) {
  std::vector<at::Tensor> in;
  for (const auto& s : row.input_sizes) in.push_back(at::randn(s));
  return in;
}

/// Each case records a chain that plan_chain declines as Unsupported with a message holding the case's reason.
void expect_declined(const std::vector<std::pair<std::function<void()>, std::string>>& cases) {
  for (const auto& [f, why] : cases) {
    dispatcher::ChainRecord* c = bench::record_chain(f, 2);
    ASSERT_NE(c, nullptr) << why;
    auto plan = chains::plan_chain(*c);
    ASSERT_FALSE(plan.ok()) << why << "\n" << c->text();
    EXPECT_EQ(plan.status().code(), Code::kUnsupported);
    EXPECT_NE(plan.status().message().find(why), std::string::npos) << plan.status().message();
  }
}

TEST(ChainPlan, TheSuitesChainsPlanAndEveryVariantCompiles) {
  std::set<std::string> planned;
  std::map<std::string, std::string> library;  // row -> the library chain's plan (Note [Library chains])
  std::vector<std::pair<std::string, std::pair<std::string, std::string>>> all;  // row, (variant, source)
  for (const bench::ChainRow& row : bench::chain_suite(/*small=*/true)) {
    SCOPED_TRACE(row.name);
    dispatcher::ChainRecord* c = bench::record_chain([&] { row.run(cpu_inputs(row)); }, 2);
    ASSERT_NE(c, nullptr);
    auto sources = chain_sources(*c);
    if (!sources.ok()) {
      EXPECT_EQ(sources.status().code(), Code::kUnsupported);
      if (auto lib = chains::plan_library_chain(*c); lib.ok()) library[row.name] = lib.value().check.text;
      continue;
    }
    planned.insert(row.name);
    EXPECT_GE(sources.value().size(), 4u);
    for (const auto& s : sources.value()) all.push_back({row.name, s});
  }
  // Note [Source digests]: the chain generators' code is pinned to kChainGeneratorVersion.
  std::vector<std::string> parts;
  for (const auto& [row, s] : all) parts.push_back(row + "/" + s.first + "\n" + s.second);
  // The chains are recorded on CPU tensors, through the ops this LibTorch calls: pinned per LibTorch version.
  const std::string name = "ChainPlan.TheSuitesChains@torch" + std::to_string(TORCH_VERSION_MAJOR) + "." +
                           std::to_string(TORCH_VERSION_MINOR);
  if (!testing::check_source_digest(name, "chains", kChainGeneratorVersion, parts, /*missing_ok=*/true)) return;
  for (const auto& [row, s] : all) {
    SCOPED_TRACE(row);
    const auto& [id, src] = s;
    for (int sm : {80, 90}) {
      auto k = compile(KernelSource{src, "chain_kernel"}, sm);
      ASSERT_TRUE(k.ok()) << id << " sm_" << sm << ": " << k.status().to_string() << "\n" << src;
    }
  }
  // Every row but the GEMM-led ones (BN + ReLU + max-pool as a pooled chain: Note [Pooled chains]).
  EXPECT_EQ(planned, (std::set<std::string>{"rmsnorm_ops bf16", "swiglu bf16", "gelu_new f16", "bias_gelu f16",
                                            "residual_layernorm f16", "softmax_ops f32", "x_sigmoid_x f16",
                                            "bn_relu_maxpool f32", "bn_relu_ f32", "bn_add_relu_ f32",
                                            "residual_relu f32"}));
  // Naive attention is one chain from matmul to matmul (Note [Matmul views]), rewritten to fused attention with
  // its scale (and mask) (Note [Attention rewrite]); the small suite runs [1, 2, 64, 32].
  ASSERT_EQ(library.count("attention f16"), 1u);
  EXPECT_NE(library["attention f16"].find("library scaled_dot_product_attention(q e0, k^T e1, v e2) softmax(q k^T * "
                                          "0.176777"), std::string::npos) << library["attention f16"];
  EXPECT_NE(library["attention f16"].find("[2, 64, 32] x [64] -> 32"), std::string::npos) << library["attention f16"];
  ASSERT_EQ(library.count("attention_causal f16"), 1u);
  EXPECT_NE(library["attention_causal f16"].find("scaled_dot_product_attention(mask)"), std::string::npos);
  EXPECT_NE(library["attention_causal f16"].find("+ mask e2"), std::string::npos) << library["attention_causal f16"];
}

TEST(ChainPlan, AttentionsExactValueIsItsChainInDouble) {
  // Note [Attention rewrite]: verification measures the rewrite against plan.exact; here it is checked against
  // the chain itself (replayed through ATen in fp32 on the CPU), with and without a mask.
  for (const bool masked : {false, true}) {
    SCOPED_TRACE(masked ? "mask" : "no mask");
    const at::Tensor mask = at::randn({10, 12});
    auto run = [&] {
      const at::Tensor q = at::randn({2, 3, 10, 8}), k = at::randn({2, 3, 12, 8}), v = at::randn({2, 3, 12, 5});
      at::Tensor s = at::matmul(q, k.transpose(-2, -1)).div(3.0);
      if (masked) s = s.add(mask);
      return at::matmul(at::softmax(s, -1), v);
    };
    dispatcher::ChainRecord* c = bench::record_chain(run, 2);
    ASSERT_NE(c, nullptr);
    auto plan = chains::plan_library_chain(*c);
    ASSERT_TRUE(plan.ok()) << plan.status().to_string() << "\n" << c->text();
    const chains::AttentionPlan& a = plan.value().attention;
    EXPECT_EQ(a.scale, 1.0 / 3.0);
    EXPECT_EQ(a.scores, (std::vector<int64_t>{2, 3, 10, 12}));
    EXPECT_EQ(a.mask >= 0, masked);
    std::vector<at::Tensor> ext;
    for (const chains::External& e : plan.value().check.externals) {
      int64_t extent = 1;
      for (size_t d = 0; d < e.sizes.size(); ++d) extent += (e.sizes[d] - 1) * e.arg_strides[d];
      ext.push_back(at::randn({extent}).as_strided(e.sizes, e.arg_strides));
    }
    std::vector<std::vector<at::Tensor>> outs(c->nodes.size());
    for (size_t k = 0; k < c->nodes.size(); ++k)
      for (const auto& o : c->nodes[k].outputs) outs[k].push_back(at::empty_strided(o.sizes, o.strides, at::kFloat));
    ASSERT_TRUE(dispatcher::replay_chain(*c, c->nodes.size(), ext, outs).ok());
    const std::vector<at::Tensor> exact = plan.value().check.exact(ext);
    ASSERT_EQ(exact.size(), 3u);
    EXPECT_EQ(exact[0].sizes(), (at::IntArrayRef{6, 10, 5}));
    EXPECT_TRUE(at::allclose(outs.back().at(0).to(at::kDouble), exact[0], 1e-5, 1e-6));
    EXPECT_TRUE(exact[0].ge(exact[1] - 1e-12).all().item<bool>() && exact[0].le(exact[2] + 1e-12).all().item<bool>());
  }
}

// Note [Causal attention]: a square [L, L] mask may take the causal path; its two kernels compile for every dtype.
TEST(ChainPlan, CausalAttentionTakesSquareMasksAndItsKernelsCompile) {
  auto attention = [](const std::vector<int64_t>& mask_sizes, int64_t l, int64_t s) {
    const at::Tensor mask = mask_sizes.empty() ? at::Tensor() : at::randn(mask_sizes);
    return bench::record_chain(
        [=] {
          const at::Tensor q = at::randn({1, 2, l, 8}), k = at::randn({1, 2, s, 8}), v = at::randn({1, 2, s, 4});
          at::Tensor sc = at::matmul(q, k.transpose(-2, -1)).mul(0.5);
          if (mask.defined()) sc = sc.add(mask);
          return at::matmul(at::softmax(sc, -1), v);
        },
        2);
  };
  struct Case {
    std::vector<int64_t> mask;
    int64_t l, s;
    bool capable;
  };
  for (const Case& c : {Case{{12, 12}, 12, 12, true}, Case{{}, 12, 12, false}, Case{{10, 12}, 10, 12, false},
                        Case{{1, 12}, 12, 12, false}, Case{{2, 12, 12}, 12, 12, false}}) {
    dispatcher::ChainRecord* r = attention(c.mask, c.l, c.s);
    ASSERT_NE(r, nullptr);
    auto plan = chains::plan_library_chain(*r);
    ASSERT_TRUE(plan.ok()) << plan.status().to_string() << "\n" << r->text();
    EXPECT_EQ(chains::causal_capable(plan.value().attention), c.capable) << r->text();
  }
  std::vector<std::string> parts;
  for (const auto dt : {at::kFloat, at::kHalf, at::kBFloat16}) parts.push_back(chains::causal_source(dt));
  if (!testing::check_source_digest("ChainPlan.CausalAttentionKernels", "chains", kChainGeneratorVersion, parts)) return;
  for (const std::string& src : parts)
    for (int sm : {80, 90})
      for (const char* name : {"attention_specials", "attention_exact_rows"}) {
        auto k = compile(KernelSource{src, name}, sm);
        ASSERT_TRUE(k.ok()) << name << " sm_" << sm << ": " << k.status().to_string() << "\n" << src;
      }
}

TEST(ChainPlan, GeluNewIsPlannedAsItsEightOps) {
  auto rows = bench::chain_suite(true);
  bench::ChainRow& row = rows.at(2);
  ASSERT_EQ(row.name, "gelu_new f16");
  row.input_sizes = {{64, 96}};  // a shape of its own: a chain the first test did not record
  dispatcher::ChainRecord* c = bench::record_chain([&] { row.run(cpu_inputs(row)); }, 2);
  ASSERT_NE(c, nullptr);
  auto sources = chain_sources(*c);
  ASSERT_TRUE(sources.ok()) << sources.status().to_string();
  const std::string& src = sources.value().front().second;
  // 0.5 * x, pow by 3 (a product), the scalar multiplications as literals, tanh, add 1, the final product.
  EXPECT_NE(src.find("t1 = pow(e0, 3)"), std::string::npos) << src;
  EXPECT_NE(src.find("tanhf("), std::string::npos);
  EXPECT_NE(src.find("4.471499845e-02f"), std::string::npos) << src;
  EXPECT_EQ(c->nodes.size(), 8u) << c->text();
}

TEST(ChainPlan, BroadcastInputsAreReadThroughTheirStrides) {
  const at::Tensor bias = at::randn({16});
  dispatcher::ChainRecord* c = bench::record_chain([&] { at::relu(at::randn({4, 16}).add(bias)).mul(2.0); }, 2);
  ASSERT_NE(c, nullptr);
  auto sources = chain_sources(*c);
  ASSERT_TRUE(sources.ok()) << sources.status().to_string();
  const std::string& src = sources.value().front().second;
  EXPECT_NE(src.find("off0 += i * 1LL"), std::string::npos) << src;  // the bias along the last dim
  EXPECT_EQ(src.find("off0 += i * 0LL"), std::string::npos) << src;  // and no division above it
}

/// The source of the first variant of the chain `f` records (fails the test when it does not plan).
std::string first_source(const std::function<void()>& f) {
  dispatcher::ChainRecord* c = bench::record_chain(f, 2);
  if (!c) return "no chain";
  auto sources = chain_sources(*c);
  if (!sources.ok()) return sources.status().to_string() + "\n" + c->text();
  return sources.value().front().second;
}

TEST(ChainPlan, RmsNormAsOpsIsOneRowChainWithTheMeanFactorOfAten) {
  const at::Tensor w = at::randn({96});
  const std::string src = first_source([&] {
    const at::Tensor x = at::randn({6, 96});
    x.mul(x.pow(2).mean({-1}, true).add(1e-6).rsqrt()).mul(w);
  });
  if (std::getenv("CUDAL1_TEST_PRINT")) std::printf("%s\n", src.c_str());
  EXPECT_NE(src.find("t1 = row_mean(t0) Float row"), std::string::npos) << src;
  EXPECT_NE(src.find("t3 = rsqrt(t2) Float row"), std::string::npos) << src;
  EXPECT_NE(src.find("// phase 1"), std::string::npos) << src;   // after the mean
  EXPECT_EQ(src.find("// phase 2"), std::string::npos) << src;   // one reduction deep
  EXPECT_NE(src.find(chains::float_literal(6.0 / 576.0)), std::string::npos) << src;  // float(rows) / float(numel)
}

TEST(ChainPlan, LayerNormIsPlannedAsAtensFloatSteps) {
  const at::Tensor w = at::randn({64}), b = at::randn({64});
  const std::string src = first_source([&] {
    const at::Tensor h = at::randn({5, 64}).add(at::randn({5, 64}));
    at::layer_norm(h, {64}, w, b, 1e-5);
  });
  // mean, x - mean, its square, the mean of that, + eps, rsqrt, then the affine product rounded once.
  for (const char* step : {"row_mean(t0)", "sub(t0, t1)", "mul(t2, t2)", "row_mean(t3)", "rsqrt(t5)",
                           "mul(t2, t6)", "mul(t7, e2)", "add(t8, e3)"})
    EXPECT_NE(src.find(step), std::string::npos) << step << "\n" << src;
  EXPECT_NE(src.find("// phase 2"), std::string::npos) << src;  // two reductions deep
}

TEST(ChainPlan, SoftmaxAndItsOpsAreRowChains) {
  const std::string ops = first_source([&] {
    const at::Tensor e = at::randn({7, 33}).exp();
    e.div(e.sum({-1}, true));
  });
  EXPECT_NE(ops.find("row_sum(t0)"), std::string::npos) << ops;
  const std::string fused = first_source([&] { at::_softmax(at::randn({7, 40}).mul(0.125), -1, false); });
  EXPECT_NE(fused.find("row_max(t0)"), std::string::npos) << fused;
  EXPECT_NE(fused.find("expf("), std::string::npos) << fused;
}

TEST(ChainPlan, WhatRowChainsCannotFuseIsDeclinedWithAReason) {
  auto why = [](const std::function<void()>& f) {
    dispatcher::ChainRecord* c = bench::record_chain(f, 2);
    if (!c) return std::string("no chain");
    auto s = chain_sources(*c);
    return s.ok() ? std::string("planned") : s.status().message();
  };
  EXPECT_NE(why([] { at::randn({8, 12}).exp().sum({0}, true).mul(2.0); }).find("other dims than the last"),
            std::string::npos);
  EXPECT_NE(why([] { at::randn({8, 12}).exp().sum({-1}, false).mul(2.0); }).find("without keepdim"),
            std::string::npos);
  EXPECT_NE(why([] { at::randn({8, 1}).exp().sum({-1}, true).mul(2.0); }).find("size < 2"), std::string::npos);
}

TEST(ChainPlan, RowVariantsHoldAtMost32ValuesAThread) {
  dispatcher::ChainRecord* c = bench::record_chain([] { at::randn({4, 4096}).exp().sum({-1}, true).mul(2.0); }, 2);
  ASSERT_NE(c, nullptr);
  auto sources = chain_sources(*c);
  ASSERT_TRUE(sources.ok()) << sources.status().to_string();
  std::set<std::string> ids;
  for (const auto& [id, src] : sources.value()) ids.insert(id);
  EXPECT_TRUE(ids.count("rows.vec4.b1024.block")) << *ids.begin();
  EXPECT_TRUE(ids.count("rows.vec4.b128.block"));   // 8 chunks of 4 a thread
  EXPECT_TRUE(ids.count("rows.vec1.b128.block"));   // 32 chunks of 1 a thread
  EXPECT_FALSE(ids.count("rows.vec1.b128.warp"));   // 128 chunks of 1 a lane
  EXPECT_FALSE(ids.count("rows.vec4.b128.warp"));   // 32 chunks of 4 a lane: 128 values
}

TEST(ChainPlan, CachedKernelsAreCheckedAgainstTheChainsPlanBeforeLoading) {
  dispatcher::ChainRecord* c = bench::record_chain([] { at::randn({4, 32}).exp().sum({-1}, true).mul(2.0); }, 2);
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(chain_cache_key(*c).rfind("chain %0 = aten::exp(f32[4,32]{32,1}@cpu) <- ext0 | %1 = ", 0), 0u)
      << chain_cache_key(*c);
  auto plan = chains::plan_chain(*c);
  ASSERT_TRUE(plan.ok());
  auto described = [&](const std::string& id_plan, int vec, int group) {
    return nlohmann::json{{"vec", vec}, {"block", 128}, {"looped", false}, {"group", group}, {"plan", id_plan}}.dump();
  };
  EXPECT_EQ(load_chain_kernel(*c, "{not json", "").status().code(), Code::kCorrupt);
  EXPECT_EQ(load_chain_kernel(*c, described("t0 = exp(e0) Float", 4, 128), "").status().code(), Code::kMismatch);
  EXPECT_EQ(load_chain_kernel(*c, described(plan.value().text, 3, 128), "").status().code(), Code::kMismatch);
  // A description that matches: it gets as far as the device (a CPU chain has none).
  const auto k = load_chain_kernel(*c, described(plan.value().text, 4, 32), "");
  EXPECT_EQ(k.status().code(), Code::kUnsupported) << k.status().to_string();
}

// Note [Batch norm in chains] and [In-place nodes]: torchvision's bottleneck end, batch norm then `+= identity`
// then ReLU(inplace=True), is one pass storing one value; its parameters are read per channel.
TEST(ChainPlan, EvalBatchNormWithInPlaceResidualAndReluIsOnePass) {
  const at::Tensor w = at::randn({16}), b = at::randn({16}), m = at::randn({16}), v = at::rand({16}).add_(0.5);
  const at::Tensor id = at::randn({2, 16, 5, 7});
  dispatcher::ChainRecord* c = bench::record_chain([&] {
    at::Tensor y = at::batch_norm(at::randn({2, 16, 5, 7}), w, b, m, v, false, 0.1, 1e-5, true);
    y.add_(id);
    y.relu_();
  }, 2);
  ASSERT_NE(c, nullptr);
  ASSERT_EQ(c->nodes.size(), 3u) << c->text();
  auto plan = chains::plan_chain(*c);
  ASSERT_TRUE(plan.ok()) << plan.status().to_string() << "\n" << c->text();
  ASSERT_EQ(plan->outputs.size(), 1u) << "the batch norm's and add_'s values live in relu_'s storage";
  EXPECT_EQ(plan->outputs[0].node, 2);
  int channel = 0, positive = 0;
  for (const auto& e : plan->externals) {
    channel += e.channel;
    positive += e.positive;
    if (e.channel) {
      EXPECT_EQ(e.strides, (std::vector<int64_t>{0, 1, 0, 0}));
    }
  }
  EXPECT_EQ(channel, 4);
  EXPECT_EQ(positive, 1);
  EXPECT_NE(plan->text.find("rsqrt("), std::string::npos) << plan->text;
  EXPECT_NE(plan->text.find("relu("), std::string::npos) << plan->text;
  auto sources = chain_sources(*c);
  ASSERT_TRUE(sources.ok());
  const std::string& src = sources.value().front().second;
  EXPECT_NE(src.find("off0 += i * 1LL"), std::string::npos) << src;  // the channel, once for all four
  EXPECT_EQ(src.find("off1"), std::string::npos) << src;
}

TEST(ChainPlan, InPlaceOpsOnExternalsAndTrainingBatchNormsAreDeclined) {
  const at::Tensor w = at::randn({16}), b = at::randn({16}), m = at::randn({16}), v = at::rand({16}).add_(0.5);
  const std::vector<std::pair<std::function<void()>, std::string>> cases = {
      {[] {
         at::Tensor x = at::randn({4, 16});
         x.add_(x.exp());
       },
       "an in-place op on an external"},
      {[&] {
         at::Tensor y = at::batch_norm(at::randn({2, 16, 5, 7}), w, b, m.clone(), v.clone(), true, 0.1, 1e-5, true);
         y.relu_();
       },
       "batch norm in training mode"},
  };
  expect_declined(cases);
}

// Note [Pooled chains]: ResNet's stem after its convolution, batch norm + ReLU + max-pool, is one chain whose only
// output is the pooled value; the batch norm's rsqrt(var + eps) is computed once a thread, the activation's steps
// at every window element.
TEST(ChainPlan, BatchNormReluMaxPoolIsOnePooledChain) {
  auto rows = bench::chain_suite(true);
  const auto row = std::find_if(rows.begin(), rows.end(), [](const bench::ChainRow& r) { return r.name == "bn_relu_maxpool f32"; });
  ASSERT_NE(row, rows.end());
  row->input_sizes = {{2, 64, 9, 9}, {64}, {64}, {64}, {64}};  // a shape of its own: a chain the first test did not record
  dispatcher::ChainRecord* c = bench::record_chain([&] { row->run(cpu_inputs(*row)); }, 2);
  ASSERT_NE(c, nullptr);
  ASSERT_EQ(c->nodes.size(), 3u) << c->text();
  auto plan = chains::plan_chain(*c);
  ASSERT_TRUE(plan.ok()) << plan.status().to_string() << "\n" << c->text();
  EXPECT_TRUE(plan->pool.active());
  EXPECT_EQ(plan->shape, (std::vector<int64_t>{2, 64, 9, 9}));
  EXPECT_EQ(plan->pool.oh, 5);
  EXPECT_EQ(plan->pool.ow, 5);
  ASSERT_EQ(plan->outputs.size(), 1u) << "only the pooled value";
  EXPECT_EQ(plan->outputs[0].node, 2);
  EXPECT_TRUE(plan->steps[static_cast<size_t>(plan->outputs[0].step)].pooled);
  EXPECT_NE(plan->text.find("window 3x3 stride 2x2 padding 1x1 dilation 1x1 -> 5x5"), std::string::npos) << plan->text;
  const auto vs = chains::variants(plan.value());
  ASSERT_EQ(vs.size(), 9u);
  const std::string src = chains::chain_source(plan.value(), vs[3]);  // 2 outputs a thread
  EXPECT_NE(src.find("pool.r2.b128"), std::string::npos) << src;
  // rsqrt(var + eps) before the window loop, the activation's subtraction inside it.
  const size_t loop = src.find("for (int a = 0;");
  ASSERT_NE(loop, std::string::npos) << src;
  EXPECT_LT(src.find("rsqrtf("), loop) << src;
  EXPECT_GT(src.find(" - x"), loop) << src;
  EXPECT_EQ(fusable_prefix(*c), 0u) << "the chain plans whole";
  EXPECT_FALSE(fusable_segments(*c).size()) << "the chain plans whole";
}

TEST(ChainPlan, WhatPooledChainsCannotFuseIsDeclinedWithAReason) {
  const std::vector<std::pair<std::function<void()>, std::string>> cases = {
      {[] { at::max_pool2d(at::randn({2, 8, 9, 9}).exp(), {3, 3}, {2, 2}, {1, 1}).relu(); },
       "a max-pool before the chain's end"},
      {[] { at::max_pool2d(at::randn({8, 9, 9}).exp(), {3, 3}, {2, 2}, {1, 1}); }, "not NCHW"},
  };
  expect_declined(cases);
}

// A chain whose tail does not fuse (a reduction over the channels) fuses its longest prefix, as a chain of its own
// in the hook's table (what the runtime then tunes and fuses).
TEST(ChainPlan, AChainWhoseTailCannotFuseFusesItsLongestPrefix) {
  const at::Tensor w = at::randn({16}), b = at::randn({16}), m = at::randn({16}), v = at::rand({16}).add_(0.5);
  dispatcher::ChainRecord* c = bench::record_chain([&] {
    const at::Tensor y = at::batch_norm(at::randn({2, 16, 5, 7}), w, b, m, v, false, 0.1, 1e-5, true);
    y.relu().amax({1}, true);
  }, 2);
  ASSERT_NE(c, nullptr);
  ASSERT_EQ(c->nodes.size(), 3u) << c->text();
  EXPECT_FALSE(chains::plan_chain(*c).ok());
  ASSERT_EQ(fusable_prefix(*c), 2u);
  dispatcher::ChainRecord* p = dispatcher::prefix_chain(*c, 2);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p, dispatcher::prefix_chain(*c, 2)) << "found, not inserted twice";
  EXPECT_EQ(p->nodes.size(), 2u);
  EXPECT_EQ(p->externals, 5);
  EXPECT_TRUE(chains::plan_chain(*p).ok());
  EXPECT_EQ(fusable_prefix(*p), 0u) << "the prefix plans whole";
  EXPECT_EQ(dispatcher::prefix_chain(*c, 1), nullptr);
  EXPECT_EQ(dispatcher::prefix_chain(*c, 4), nullptr);
}

// Note [Chain segments]: with mm and addmm hooked, an activation composite written after a linear layer records as
// one chain with the GEMM in front; what follows the GEMM fuses as a chain of its own (unless it is the tanh GELU,
// an epilogue: Note [Library chains]), and after a bias add the GEMM and its add fuse as a library chain while the
// rest fuses after it.
TEST(ChainPlan, WhatFollowsAGemmFusesAsASegmentOfItsOwn) {
  const at::Tensor w = at::randn({24, 40}), b = at::randn({40});
  dispatcher::ChainRecord* gelu = bench::record_chain([&] {
    const at::Tensor x = at::addmm(b, at::randn({9, 24}), w);
    const at::Tensor half = x.mul(0.5);
    half.mul(x.pow(3.0).mul(0.044715).add(x).mul(0.7978845608).tanh().add(1.0));
  }, 2);
  ASSERT_NE(gelu, nullptr);
  ASSERT_GE(gelu->nodes.size(), 8u) << gelu->text();
  EXPECT_TRUE(chains::plan_library_chain(*gelu).ok()) << "the tanh GELU after addmm is its epilogue";
  EXPECT_EQ(fusable_prefix(*gelu), 0u) << "it plans whole";
  dispatcher::ChainRecord* c = bench::record_chain([&] {
    const at::Tensor x = at::addmm(b, at::randn({9, 24}), w);
    const at::Tensor half = x.mul(0.5);
    half.mul(x.pow(3.0).mul(0.05).add(x).mul(0.7978845608).tanh().add(1.0));  // not the GELU's constant
  }, 2);
  ASSERT_NE(c, nullptr);
  ASSERT_GE(c->nodes.size(), 8u) << c->text();
  EXPECT_FALSE(chains::plan_chain(*c).ok());
  EXPECT_FALSE(chains::plan_library_chain(*c).ok()) << "not the tanh GELU: no epilogue computes it";
  EXPECT_EQ(fusable_prefix(*c), 0u) << "addmm then mul is no library call";
  ASSERT_EQ(fusable_suffix(*c, 1), 1u);
  dispatcher::ChainRecord* rest = dispatcher::suffix_chain(*c, 1);
  ASSERT_NE(rest, nullptr);
  EXPECT_EQ(rest, dispatcher::suffix_chain(*c, 1)) << "found, not inserted twice";
  EXPECT_EQ(rest->nodes.size(), c->nodes.size() - 1);
  EXPECT_EQ(rest->externals, 1) << "addmm's result, read by several nodes, is one external";
  EXPECT_TRUE(chains::plan_chain(*rest).ok()) << rest->text();
  EXPECT_EQ(dispatcher::suffix_chain(*c, 0), nullptr);
  EXPECT_EQ(dispatcher::suffix_chain(*c, c->nodes.size() - 1), nullptr) << "a segment has two nodes at least";

  dispatcher::ChainRecord* d = bench::record_chain([&] { at::randn({5, 24}).mm(w).add(b).mul(2.0).tanh(); }, 2);
  ASSERT_NE(d, nullptr);
  ASSERT_EQ(d->nodes.size(), 4u) << d->text();
  EXPECT_EQ(fusable_prefix(*d), 2u);
  EXPECT_EQ(fusable_suffix(*d, 2), 2u);
  EXPECT_TRUE(chains::plan_library_chain(*dispatcher::prefix_chain(*d, 2)).ok());
  EXPECT_TRUE(chains::plan_chain(*dispatcher::suffix_chain(*d, 2)).ok());
}

}  // namespace
}  // namespace cudal1::optimizer
