/// @brief Layer groups of program chains on the CPU (Note [Skinny layers]): a decode step written as eager code
/// (layer norm, linear, activation, residual add, layer after layer) is planned as one program of layer groups,
/// what is not one stays ATen nodes, and the program kernel without a generated kernel (the CPU's path, and the
/// GPU's fallback for operands the kernel does not take) computes what the ATen chain does. The kernel itself is
/// compiled by compile_variants_test and run against ATen by program_gpu_test. Shares the hook of
/// chain_plan_test.cpp.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "bench/chain_suite.h"
#include "cudal1/dispatcher/chains.h"
#include "cudal1/dispatcher/hook.h"
#include "cudal1/optimizer/chain_tuner.h"
#include "cudal1/optimizer/compiler.h"
#include "optimizer/chains/chain_plan.h"
#include "optimizer/chains/chain_program.h"
#include "optimizer/chains/chain_tuning.h"
#include "optimizer/source_digest.h"

namespace cudal1::optimizer {
namespace {

struct Layer {
  at::Tensor ln_w, ln_b, w, b;
};

std::vector<Layer> make_layers(int n, int64_t width) {
  std::vector<Layer> out;
  for (int i = 0; i < n; ++i)
    out.push_back({at::rand({width}).add_(0.5), at::randn({width}).mul_(0.1),
                   at::randn({width, width}).mul_(1.0 / std::sqrt(static_cast<double>(width))), at::randn({width})});
  return out;
}

/// x = x + act(linear(layer_norm(x))) a layer, as the decode-step bench writes it.
at::Tensor decode(const at::Tensor& x, const std::vector<Layer>& layers, const char* act = "tanh") {
  at::Tensor h = x;
  for (const Layer& l : layers) {
    const at::Tensor n = at::layer_norm(h, {h.size(-1)}, l.ln_w, l.ln_b, 1e-5);
    const at::Tensor y = at::linear(n, l.w, l.b);
    h = h.add(std::string(act) == "relu" ? at::relu(y) : at::gelu(y, act));
  }
  return h;
}

TEST(SkinnyLayers, ADecodeStepIsOneProgramOfLayerGroups) {
  const auto layers = make_layers(3, 64);
  const at::Tensor x = at::randn({2, 64});
  dispatcher::ChainRecord* c = bench::record_chain([&] { decode(x, layers); }, 2);
  ASSERT_NE(c, nullptr);
  ASSERT_EQ(c->nodes.size(), 12u) << c->text();
  EXPECT_FALSE(chains::plan_chain(*c).ok()) << "GEMMs: no pointwise or row chain";
  auto p = chains::plan_program(*c);
  ASSERT_TRUE(p.ok()) << p.status().to_string() << "\n" << c->text();
  EXPECT_EQ(p->convs, 0);
  EXPECT_EQ(p->layers, 3);
  EXPECT_EQ(p->rows, 2);
  ASSERT_EQ(p->groups.size(), 3u) << p->text;
  for (size_t i = 0; i < 3; ++i) {
    const auto& g = p->groups[i];
    EXPECT_TRUE(g.layer);
    EXPECT_EQ(g.first, 4 * i);
    EXPECT_EQ(g.last, 4 * i + 3);
    EXPECT_EQ(g.ln, static_cast<int>(4 * i));
    EXPECT_EQ(g.gemm, static_cast<int>(4 * i + 1));
    EXPECT_EQ(g.act, static_cast<int>(4 * i + 2));
    EXPECT_EQ(g.add, static_cast<int>(4 * i + 3));
    EXPECT_EQ(g.args.act, 4) << "gelu tanh";
    EXPECT_TRUE(g.args.ln);
    EXPECT_EQ(g.args.m, 2);
    EXPECT_EQ(g.args.k, 64);
    EXPECT_EQ(g.args.n, 64);
    EXPECT_GE(g.args.w, 0);
    EXPECT_GE(g.args.bias, 0);
    EXPECT_EQ(g.residual.producer, i == 0 ? -1 : static_cast<int>(4 * i - 1)) << "the previous layer's result";
  }
  EXPECT_EQ(p->params.size(), 9u) << "bias and the layer norm's two parameters a layer (the weight's w.t() dies)";
  EXPECT_NE(p->text.find("3 layers of at most 2 rows"), std::string::npos) << p->text;
  EXPECT_EQ(chains::layer_variants(p.value()).size(), 12u);
  auto sources = chain_sources(*c);  // what NVRTC compiles for it: the layer kernel's variants
  ASSERT_TRUE(sources.ok()) << sources.status().to_string();
  ASSERT_EQ(sources->size(), 12u);
  EXPECT_EQ(sources->front().first, "program.fused.w4u4");
  EXPECT_NE(sources->front().second.find("layer_kernel("), std::string::npos);
}

TEST(SkinnyLayers, TheProgramWithoutAKernelComputesTheATenChainAndDeclinesAKeptValue) {
  const auto layers = make_layers(2, 32);
  const at::Tensor x = at::randn({1, 32});
  dispatcher::ChainRecord* c = bench::record_chain([&] { decode(x, layers, "none"); }, 2);
  ASSERT_NE(c, nullptr);
  auto p = chains::plan_program(*c);
  ASSERT_TRUE(p.ok()) << p.status().to_string() << "\n" << c->text();
  ASSERT_EQ(p->layers, 2);
  EXPECT_EQ(p->groups[0].args.act, 3) << "gelu, erf form";
  std::vector<at::Tensor> ext = c->last_externals();
  for (size_t i = 0; i < 2; ++i) {  // at::linear's w.t() died with its call; a region holds it
    const size_t w = static_cast<size_t>(p->groups[i].args.w);
    EXPECT_FALSE(ext.at(w).defined());
    ext[w] = layers[i].w.t();
  }
  auto kernel = chains::program_kernel(*c, p.value(), /*fused=*/true);  // no module: the groups' ATen ops
  auto got = bench::last_output_only(*c);
  const Status run = kernel->run(ext, got);
  ASSERT_TRUE(run.ok()) << run.to_string() << "\n" << p->text;
  const at::Tensor ref = [&] {
    dispatcher::BypassScope aten_only;
    return decode(ext[0], layers, "none");
  }();
  EXPECT_TRUE(at::equal(got.back()[0], ref)) << (got.back()[0] - ref).abs().max();
  EXPECT_NE(kernel->describe().find("2 layers as ATen ops"), std::string::npos) << kernel->describe();
  auto kept = bench::last_output_only(*c);
  kept[1][0] = at::full(c->nodes[1].outputs[0].sizes, NAN);  // the first linear's result, inside group 0
  EXPECT_EQ(kernel->run(ext, kept).code(), Code::kUnavailable);
  EXPECT_TRUE(at::isnan(kept.back()[0]).all().item<bool>()) << "declined before writing anything";
}

TEST(SkinnyLayers, WhatIsNotALayerGroupStaysATenNodes) {
  const auto layers = make_layers(1, 32);
  const Layer& l = layers[0];
  struct Case {
    std::string why;
    std::function<void()> f;
    int layers;  ///< layer groups expected (0: no program at all)
  };
  const std::vector<Case> cases = {
      {"more rows than a skinny layer", [&] { decode(at::randn({16, 32}), layers); }, 0},
      {"a weight that is not w.t()", [&] { at::relu(at::mm(at::randn({1, 32}), l.w)).mul_(2); }, 0},
      {"a width not a multiple of 8", [&] { decode(at::randn({1, 12}), make_layers(1, 12)); }, 0},
      {"a layer norm read twice: the group starts at the linear",
       [&] {
         const at::Tensor n = at::layer_norm(at::randn({1, 32}), {32}, l.ln_w, l.ln_b, 1e-5);
         at::gelu(at::linear(n, l.w, l.b)).add(n);
       },
       1},
      {"a linear result read twice: the group is the linear alone",
       [&] {
         const at::Tensor y = at::linear(at::randn({1, 32}), l.w, l.b);
         at::relu(y).add(y);
       },
       1},
  };
  for (const Case& k : cases) {
    dispatcher::ChainRecord* c = bench::record_chain(k.f, 2);
    ASSERT_NE(c, nullptr) << k.why;
    auto p = chains::plan_program(*c);
    if (k.layers == 0) {
      EXPECT_FALSE(p.ok()) << k.why << "\n" << c->text();
      continue;
    }
    ASSERT_TRUE(p.ok()) << k.why << ": " << p.status().to_string() << "\n" << c->text();
    EXPECT_EQ(p->layers, k.layers) << k.why << "\n" << p->text;
    const auto& g = p->groups[k.why.find("layer norm") != std::string::npos ? 1 : 0];
    EXPECT_TRUE(g.layer) << k.why << "\n" << p->text;
    EXPECT_EQ(g.ln, -1) << k.why;
    if (k.why.find("alone") != std::string::npos) EXPECT_EQ(g.last, g.first) << p->text;
  }
}

TEST(SkinnyLayers, TheCachedFormNamesItsVariantAndCarriesItsCode) {
  const auto layers = make_layers(2, 32);
  const at::Tensor x = at::randn({1, 32});
  dispatcher::ChainRecord* c = bench::record_chain([&] { decode(x, layers); }, 2);
  ASSERT_NE(c, nullptr);
  auto p = chains::plan_program(*c);
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  auto v = chains::layer_variant_of(p.value(), "w8u4o");
  ASSERT_TRUE(v.ok()) << v.status().to_string();
  EXPECT_TRUE(v->overlap);
  EXPECT_EQ(chains::layer_variant_of(p.value(), "w9u9").status().code(), Code::kMismatch);
  const std::string json = chain_tuning::program_launch_json(p.value(), true, v.value());
  EXPECT_NE(json.find("\"layers\":\"w8u4o\""), std::string::npos) << json;
  EXPECT_EQ(chain_tuning::program_launch_json(p.value(), true).find("\"layers\":"), std::string::npos);
  EXPECT_EQ(load_chain_kernel(*c, json, "").status().code(), Code::kCorrupt) << "a layer program without its code";
  std::string other = json;
  other.replace(other.find("w8u4o"), 5, "w9u9o");
  EXPECT_EQ(load_chain_kernel(*c, other, "code").status().code(), Code::kMismatch);
  EXPECT_EQ(load_chain_kernel(*c, chain_tuning::program_launch_json(p.value(), true), "code").status().code(),
            Code::kCorrupt) << "a program without layer kernels carries no code";
  EXPECT_EQ(load_chain_kernel(*c, json, "code").status().code(), Code::kUnsupported) << "a CPU chain";
}

TEST(SkinnyLayers, TheKernelCompilesForEveryDtypeRowsVariantAndArch) {
  struct Build {
    std::string id, src;
    std::vector<int> sms;
  };
  std::vector<Build> builds;
  for (const auto dtype : {c10::ScalarType::Float, c10::ScalarType::Half, c10::ScalarType::BFloat16})
    for (const int64_t rows : {int64_t{1}, chains::kLayerRows}) {
      chains::ProgramPlan p;
      p.layers = 1;
      p.rows = rows;
      p.dtype = dtype;
      const auto vs = chains::layer_variants(p);
      ASSERT_EQ(vs.size(), 12u);
      for (const auto& v : vs) {
        // Every variant for fp16 on sm_90 (the decode step's), one variant of each other case on both archs.
        const bool all = dtype == c10::ScalarType::Half && rows == chains::kLayerRows;
        if (!all && v.id() != "w8u4o") continue;
        builds.push_back({std::string(c10::toString(dtype)) + "/rows" + std::to_string(rows) + "/" + v.id(),
                          chains::layer_source(p, v), v.id() == "w8u4o" ? std::vector<int>{80, 90} : std::vector<int>{90}});
        EXPECT_NE(builds.back().src.find("constexpr int kRows = " + std::to_string(rows) + ";"), std::string::npos);
      }
    }
  std::vector<std::string> parts;
  for (const auto& b : builds) parts.push_back(b.id + "\n" + b.src);
  if (!testing::check_source_digest("SkinnyLayers.TheKernelSources", "chains", kChainGeneratorVersion, parts)) return;
  for (const auto& b : builds)
    for (int sm : b.sms) {
      auto k = compile(KernelSource{b.src, "layer_kernel"}, sm);
      ASSERT_TRUE(k.ok()) << b.id << " sm_" << sm << ": " << k.status().to_string() << "\n" << b.src;
    }
}

}  // namespace
}  // namespace cudal1::optimizer
