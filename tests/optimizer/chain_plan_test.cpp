/// @brief The pointwise chain generator on the CPU (Note [Pointwise chains]): the suite's chains, recorded through
/// the hook on CPU tensors, are planned as the ops they are, reductions are declined, and every variant's source
/// compiles with NVRTC for sm_80 and sm_90 (no GPU needed; the GPU verifies them: tests/gpu/chain_gpu_test.cpp).
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <set>

#include "bench/chain_suite.h"
#include "cudal1/dispatcher/chains.h"
#include "cudal1/dispatcher/hook.h"
#include "cudal1/optimizer/chain_tuner.h"
#include "cudal1/optimizer/compiler.h"
#include "cudal1/optimizer/family.h"

namespace cudal1::optimizer {
namespace {

class ChainPlanEnv : public ::testing::Environment {
 public:
  void SetUp() override {
    dispatcher::HookOptions o;
    o.mode = Mode::kProfile;
    o.ops = {"add.Tensor", "sub.Tensor", "mul.Tensor", "div.Tensor", "add.Scalar", "mul.Scalar", "div.Scalar",
             "tanh", "sigmoid", "silu", "relu", "gelu", "exp", "mean.dim", "sum.dim_IntList", "native_layer_norm"};
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

TEST(ChainPlan, TheSuitesPointwiseChainsPlanAndEveryVariantCompiles) {
  std::set<std::string> pointwise;
  for (const bench::ChainRow& row : bench::chain_suite(/*small=*/true)) {
    SCOPED_TRACE(row.name);
    dispatcher::ChainRecord* c = bench::record_chain([&] { row.run(cpu_inputs(row)); }, 2);
    ASSERT_NE(c, nullptr);
    auto sources = chain_sources(*c);
    if (!sources.ok()) {
      EXPECT_EQ(sources.status().code(), Code::kUnsupported);
      continue;
    }
    pointwise.insert(row.name);
    EXPECT_GE(sources.value().size(), 6u);
    for (const auto& [id, src] : sources.value())
      for (int sm : {80, 90}) {
        auto k = compile(KernelSource{src, "chain_kernel"}, sm);
        ASSERT_TRUE(k.ok()) << id << " sm_" << sm << ": " << k.status().to_string() << "\n" << src;
      }
  }
  // The reductions and the layer norm are not pointwise; everything else is.
  EXPECT_EQ(pointwise, (std::set<std::string>{"swiglu bf16", "gelu_new f16", "bias_gelu f16", "x_sigmoid_x f16",
                                              "residual_relu f32"}));
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
  EXPECT_NE(sources.value().front().second.find("off += i * 0LL"), std::string::npos);  // the bias's row stride
}

}  // namespace
}  // namespace cudal1::optimizer
