/// @brief Region graphs on the GPU (Note [Region graphs]) under hostile use: the app keeps outputs across
/// iterations, changes an input and a weight in place between calls, swaps a weight tensor, resizes the batch,
/// runs two threads, and captures its own CUDA graph; every output must equal eager ATen. Also the in-app trial
/// decides and says so. Pending outputs are poisoned with NaN, so a missed write shows. Skips without a GPU.
#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "cudal1/dispatcher/capture_gate.h"
#include "cudal1/dispatcher/chains.h"
#include "cudal1/dispatcher/cuda_glue.h"
#include "cudal1/dispatcher/hook.h"
#include "cudal1/dispatcher/region_graph.h"
#include "cudal1/dispatcher/regions.h"
#include "gpu/gpu_env.h"

#if defined(CUDAL1_TORCH_CUDA)
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace cudal1::dispatcher {
namespace {

class GraphGpuEnv : public ::testing::Environment {
 public:
  void SetUp() override {
    const Status s = ::cudal1::testing::install_region_hooks(
        {"mul.Tensor", "add.Tensor", "sigmoid", "tanh", "native_layer_norm", "addmm", "gelu"});
    ASSERT_TRUE(s.ok()) << s.to_string();
  }
};
const auto* const g_env = ::testing::AddGlobalTestEnvironment(new GraphGpuEnv);

/// Six launches: a chain worth a graph. `a` and `b` stand for weights.
at::Tensor block(const at::Tensor& x, const at::Tensor& a, const at::Tensor& b) {
  at::Tensor h = x * a;
  at::Tensor s = h.sigmoid();
  at::Tensor g = h * s;
  at::Tensor t = g.tanh();
  at::Tensor u = t + b;
  return u * x;
}
/// The same ops in another order, on [kTrialRows,1024]: a second chain, left to the trial. Its own shape keeps its
/// first call (tanh) apart from block()'s tanh: where two threads flush each other's regions (the CUPTI guard),
/// block()'s later calls run one by one, and a tanh of block()'s shape would open this chain's regions and diverge.
constexpr int64_t kTrialRows = 32;
at::Tensor block2(const at::Tensor& x, const at::Tensor& a) {
  at::Tensor t = x.tanh();
  at::Tensor h = t * a;
  at::Tensor s = h.sigmoid();
  at::Tensor g = s + x;
  return g * h;
}

at::Tensor randn(int64_t rows = 64) { return at::randn({rows, 1024}, at::TensorOptions().device(at::kCUDA)); }

/// Waits for the default stream, where every test here works.
void sync_gpu() { (void)at::ones({1}, at::TensorOptions().device(at::kCUDA)).sum().item<float>(); }

at::Tensor eager(const std::function<at::Tensor()>& f) {
  BypassScope aten_only;
  return f();
}

/// The chain of `nodes` ops whose first is `first_op` on [rows,1024].
ChainRecord* find_chain(const char* first_op, size_t nodes, int64_t rows) {
  const std::string shape = "[" + std::to_string(rows) + ",1024]";
  ChainRecord* rec = nullptr;
  for_each_chain([&](ChainRecord& c) {
    if (c.nodes.size() == nodes && c.nodes[0].rec->sig.text.find(first_op) != std::string::npos &&
        c.nodes[0].rec->sig.text.find(shape) != std::string::npos)
      rec = &c;
  });
  return rec;
}

/// block() of its own shape for the two-thread test: two threads flush each other's regions (the CUPTI guard), which
/// sends a chain back to one-by-one calls (Note [Deferred regions]); the other tests' chain must stay fused.
constexpr int64_t kThreadRows = 80;
/// block() of its own shape for the idle test, so that no earlier test decides its graph's state.
constexpr int64_t kIdleRows = 16;

/// Fuses block() with a forced graph (no trial) at 64, kThreadRows and kIdleRows rows, and block2() with the trial,
/// once per process.
bool fuse_once() {
  static const bool ok = [] {
    const at::Tensor a = randn(), b = randn(), a2 = randn(kTrialRows);
    for (int i = 0; i < 8; ++i) {
      block(randn(), a, b);
      close_chain_on_this_thread();
      block2(randn(kTrialRows), a2);
      close_chain_on_this_thread();
      for (const int64_t rows : {kThreadRows, kIdleRows}) {
        block(randn(rows), randn(rows), randn(rows));
        close_chain_on_this_thread();
      }
    }
    ChainRecord* c2 = find_chain("tanh", 5, kTrialRows);
    if (!c2) return false;
    GraphOptions forced;
    forced.force = true;
    forced.warm_regions = 1;
    forced.max_captures = 1000;  // every changed weight below captures again
    for (const int64_t rows : {int64_t{64}, kThreadRows, kIdleRows}) {
      ChainRecord* c = find_chain("mul", 6, rows);
      if (!c || !fuse_chain(*c, graph_chain_kernel(*c, aten_chain_kernel(*c), forced)).ok()) return false;
    }
    GraphOptions trial;
    trial.warm_regions = 1;
    return fuse_chain(*c2, graph_chain_kernel(*c2, aten_chain_kernel(*c2), trial)).ok();
  }();
  return ok;
}

#define REQUIRE_GRAPHS()                                                                          \
  do {                                                                                            \
    CUDAL1_REQUIRE_GPU();                                                                         \
    if (!has_torch_cuda()) GTEST_SKIP() << "this build has no torch-CUDA glue";                   \
    if (deferral_status().find("CUDA: on") == std::string::npos) GTEST_SKIP() << deferral_status(); \
    ASSERT_TRUE(fuse_once());                                                                     \
  } while (0)

TEST(RegionGraphs, ReplaysEqualEagerAndKeptOutputsStay) {
  REQUIRE_GRAPHS();
  const at::Tensor a = randn(), b = randn();
  std::vector<at::Tensor> xs, ys;
  const GraphCounters before = graph_counters();
  for (int i = 0; i < 20; ++i) {
    xs.push_back(randn());
    ys.push_back(block(xs.back(), a, b));  // kept across iterations: a later replay must not overwrite it
  }
  for (size_t i = 0; i < xs.size(); ++i)
    EXPECT_TRUE(at::equal(ys[i], eager([&] { return block(xs[i], a, b); }))) << "iteration " << i;
  const GraphCounters after = graph_counters();
  EXPECT_GE(after.replays, before.replays + 15) << "the graph should serve nearly every region";
  EXPECT_EQ(after.check_failures, 0u);
  std::printf("graphs: %llu captures, %llu replays, %llu eager, %lld bytes\n",
              static_cast<unsigned long long>(after.captures), static_cast<unsigned long long>(after.replays),
              static_cast<unsigned long long>(after.eager), static_cast<long long>(after.bytes));
}

TEST(RegionGraphs, AnotherBatchSizeRunsEagerAndEqual) {
  REQUIRE_GRAPHS();
  const at::Tensor a = randn(48), b = randn(48);
  for (int i = 0; i < 5; ++i) {
    const at::Tensor x = randn(48);
    EXPECT_TRUE(at::equal(block(x, a, b), eager([&] { return block(x, a, b); })));
  }
}

TEST(RegionGraphs, TwoThreadsEachGetTheirOwnResults) {
  REQUIRE_GRAPHS();
  const at::Tensor a = randn(kThreadRows), b = randn(kThreadRows);
  std::atomic<int> wrong{0};
  auto work = [&] {
    for (int i = 0; i < 40; ++i) {
      const at::Tensor x = randn(kThreadRows);
      const at::Tensor y = block(x, a, b);
      if (!at::equal(y, eager([&] { return block(x, a, b); }))) wrong.fetch_add(1);
    }
  };
  std::thread t1(work), t2(work);
  t1.join();
  t2.join();
  EXPECT_EQ(wrong.load(), 0);
}

TEST(RegionGraphs, InputsAndWeightsChangedInPlaceOrSwapped) {
  REQUIRE_GRAPHS();
  at::Tensor a = randn(), b = randn();
  at::Tensor x = randn();  // the same input tensor every call: held in place by the graph, then changed
  const uint64_t replays_before = graph_counters().replays;
  uint64_t invalidated_at_1 = 0;
  for (int i = 0; i < 30; ++i) {
    if (i == 1) invalidated_at_1 = graph_counters().invalidated;
    // In-place changes of held tensors need no new capture (the graph reads them at replay; the ATen replay
    // derives nothing from them): only the swaps at 11 and 19 do.
    if (i == 11) {
      EXPECT_EQ(graph_counters().invalidated, invalidated_at_1);
    }
    if (i % 5 == 1) x.add_(0.25);
    if (i % 7 == 2) a.mul_(1.5);
    if (i == 11) b = randn();  // a swapped weight tensor
    if (i == 19) x = randn();  // a new input tensor
    const at::Tensor y = block(x, a, b);
    sync_gpu();  // an op: the region is flushed where a capture may begin (a bypass, below, is not one)
    ASSERT_TRUE(at::equal(y, eager([&] { return block(x, a, b); }))) << "iteration " << i;
  }
  EXPECT_EQ(graph_counters().check_failures, 0u);
  EXPECT_EQ(region_counters().lost, 0u);
  EXPECT_GE(graph_counters().replays, replays_before + 15) << "the graph should serve most of these regions";
}

#if defined(CUDAL1_TORCH_CUDA)
TEST(RegionGraphs, TheAppsOwnCaptureIsLeftAlone) {
  REQUIRE_GRAPHS();
  const at::Tensor a = randn(), b = randn(), x = randn();
  at::Tensor y;
  at::cuda::CUDAGraph app_graph;
  const auto side = c10::cuda::getStreamFromPool();
  side.synchronize();
  sync_gpu();
  {
    c10::cuda::CUDAStreamGuard guard(side);
    app_graph.capture_begin();
    // The CUPTI guard counts the app's capture at the gate (Note [Captures and context synchronisation]).
    if (dispatcher::deferral_status().find("CUPTI guard armed") != std::string::npos)
      EXPECT_GE(dispatcher::captures_in_progress(), 1);
    y = block(x, a, b);
    app_graph.capture_end();
  }
  EXPECT_EQ(dispatcher::captures_in_progress(), 0) << "the gate counted the app's capture's begin and end alike";
  x.copy_(randn());
  app_graph.replay();
  sync_gpu();
  EXPECT_TRUE(at::equal(y, eager([&] { return block(x, a, b); })));
}
#endif

TEST(RegionGraphs, AnIdleGraphIsFreedAndCapturedAgain) {
  REQUIRE_GRAPHS();
  const at::Tensor a = randn(kIdleRows), b = randn(kIdleRows);
  for (int i = 0; i < 4; ++i) block(randn(kIdleRows), a, b);
  sync_gpu();
  const GraphCounters before = graph_counters();
  ASSERT_GT(before.bytes, 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(2200));  // GraphOptions::idle_seconds = 2
  release_idle_graphs();
  const GraphCounters idle = graph_counters();
  EXPECT_GE(idle.idle_released, before.idle_released + 1);
  EXPECT_LT(idle.bytes, before.bytes);
  for (int i = 0; i < 6; ++i) {
    const at::Tensor x = randn(kIdleRows);
    EXPECT_TRUE(at::equal(block(x, a, b), eager([&] { return block(x, a, b); }))) << "iteration " << i;
  }
  EXPECT_GT(graph_counters().captures, idle.captures) << "the chain should capture again once it runs again";
}

TEST(RegionGraphs, TheTrialDecidesByTheAppsPeriod) {
  REQUIRE_GRAPHS();
  const at::Tensor a = randn(kTrialRows);
  ChainRecord* c2 = find_chain("tanh", 5, kTrialRows);
  ASSERT_NE(c2, nullptr);
  for (int i = 0; i < 70; ++i) {
    const at::Tensor x = randn(kTrialRows);
    const at::Tensor y = block2(x, a);
    if (i % 10 == 0) {
      EXPECT_TRUE(at::equal(y, eager([&] { return block2(x, a); }))) << "iteration " << i;
    }
    if (i == 60) sync_gpu();
  }
  block2(randn(kTrialRows), a);
  at::sum(a).item<float>();  // flushes the last region
  const std::string d = c2->kernel.load()->describe();
  const RegionCounters rc = region_counters();
  std::printf("trial chain: %s\nits state %s, %llu regions, %llu whole, %llu flushed early; all regions: %llu by an "
              "op, %llu diverged, %llu by CUDA, %llu other; %llu kernel failures\n",
              d.c_str(), chain_state_name(c2->state.load()), static_cast<unsigned long long>(c2->regions.load()),
              static_cast<unsigned long long>(c2->completed.load()),
              static_cast<unsigned long long>(c2->flushed_early.load()), static_cast<unsigned long long>(rc.by_op),
              static_cast<unsigned long long>(rc.diverged), static_cast<unsigned long long>(rc.by_cuda),
              static_cast<unsigned long long>(rc.by_other), static_cast<unsigned long long>(rc.kernel_failures));
  EXPECT_NE(d.find("the app's period"), std::string::npos) << d;
  const GraphCounters g = graph_counters();
  std::printf("graphs: %llu captures, %llu replays, %llu eager, %llu capture failures\n%s\n",
              static_cast<unsigned long long>(g.captures), static_cast<unsigned long long>(g.replays),
              static_cast<unsigned long long>(g.eager), static_cast<unsigned long long>(g.capture_failures),
              c2->text().c_str());
  EXPECT_EQ(g.kept + g.rejected, 1u);
}

/// A decode step as at::linear writes it (addmm with w.t(): Note [Views in regions]): two layers of layer norm,
/// linear, tanh-GELU and residual add on [1, 512] fp16, eight launches of a few microseconds each
/// (Note [Launch-bound chains]). p: per layer the norm's weight and bias, the linear's weight and bias.
constexpr int64_t kWidth = 512;
at::Tensor decode(const at::Tensor& x, const std::vector<at::Tensor>& p) {
  at::Tensor h = x;
  for (size_t l = 0; l < 2; ++l) {
    const at::Tensor n = at::layer_norm(h, {kWidth}, p[4 * l], p[4 * l + 1], 1e-5);
    h = h.add(at::gelu(at::linear(n, p[4 * l + 2], p[4 * l + 3]), "tanh"));
  }
  return h;
}
at::Tensor half(std::vector<int64_t> sizes) {
  return at::randn(sizes, at::TensorOptions().device(at::kCUDA).dtype(at::kHalf)).mul_(0.1);
}

TEST(RegionGraphs, ADecodeStepRunsAsAGraphOfItsAtenCallsAndEqualsEager) {
  REQUIRE_GRAPHS();
  std::vector<at::Tensor> p;
  for (int l = 0; l < 2; ++l)
    for (const auto& sizes : std::vector<std::vector<int64_t>>{{kWidth}, {kWidth}, {kWidth, kWidth}, {kWidth}})
      p.push_back(half(sizes));
  for (int i = 0; i < 4; ++i) {
    decode(half({1, kWidth}), p);
    close_chain_on_this_thread();
  }
  ChainRecord* c = nullptr;
  for_each_chain([&](ChainRecord& r) {
    if (r.nodes.size() == 8 && r.nodes[0].rec->sig.text.find("native_layer_norm") != std::string::npos) c = &r;
  });
  ASSERT_NE(c, nullptr) << "the views of the weights split the chain";
  EXPECT_TRUE(launch_bound_candidate(*c));
  GraphOptions forced;
  forced.force = true;
  forced.warm_regions = 1;
  ASSERT_TRUE(fuse_chain(*c, graph_chain_kernel(*c, aten_chain_kernel(*c), forced)).ok());
  const GraphCounters before = graph_counters();
  const RegionCounters rc0 = region_counters();
  const uint64_t completed0 = c->completed.load();
  for (int i = 0; i < 12; ++i) {
    const at::Tensor x = half({1, kWidth});
    const at::Tensor y = decode(x, p);
    sync_gpu();  // an op: the region is flushed where a capture may begin
    const at::Tensor want = eager([&] { return decode(x, p); });
    ASSERT_TRUE(at::allclose(y, want, 1e-3, 1e-3)) << "iteration " << i << ": max |diff| "
                                                   << (y - want).abs().max().item<float>();
  }
  const RegionCounters rc = region_counters();
  EXPECT_EQ(c->completed.load(), completed0 + 12) << "every step should run whole";
  EXPECT_EQ(rc.by_op, rc0.by_op) << "a view of a weight flushed a region";
  EXPECT_GE(graph_counters().replays, before.replays + 9) << c->kernel.load()->describe();
  EXPECT_EQ(graph_counters().check_failures, 0u);
  // The same loop in InferenceMode, as a serving app runs it: inference tensors in and out, the graph still serves.
  const uint64_t replays = graph_counters().replays;
  {
    c10::InferenceMode inference;
    for (int i = 0; i < 8; ++i) {
      const at::Tensor x = half({1, kWidth});
      const at::Tensor y = decode(x, p);
      sync_gpu();
      const at::Tensor want = eager([&] { return decode(x, p); });
      ASSERT_TRUE(at::allclose(y, want, 1e-3, 1e-3)) << "inference iteration " << i;
    }
  }
  EXPECT_GE(graph_counters().replays, replays + 6) << c->kernel.load()->describe();
  EXPECT_EQ(graph_counters().check_failures, 0u);
}

TEST(RegionGraphs, AGraphGivenUpUnfusesItsChain) {
  // Note [Launch-bound chains]: a graph of ATen calls the trial rejects leaves its chain hot again, its first
  // signature free, and the app's values right throughout.
  REQUIRE_GRAPHS();
  constexpr int64_t kRows = 24;
  const at::Tensor a = randn(kRows), b = randn(kRows);
  for (int i = 0; i < 4; ++i) {
    block(randn(kRows), a, b);
    close_chain_on_this_thread();
  }
  ChainRecord* c = find_chain("mul", 6, kRows);
  ASSERT_NE(c, nullptr);
  GraphOptions o;
  o.warm_regions = 1;
  o.block = 2;
  o.rounds = 2;
  o.margin = 0.99;  // the graph would have to take 1% of the eager period: the trial rejects it
  std::atomic<int> given_up{0};
  o.on_given_up = [c, &given_up] {
    given_up.fetch_add(1);
    unfuse_chain(*c, ChainState::kHot);
  };
  ASSERT_TRUE(fuse_chain(*c, graph_chain_kernel(*c, aten_chain_kernel(*c), o)).ok());
  const uint64_t rejected = graph_counters().rejected;
  for (int i = 0; i < 30; ++i) {
    const at::Tensor x = randn(kRows);
    const at::Tensor y = block(x, a, b);
    sync_gpu();  // an op: the region is flushed where a capture may begin
    ASSERT_TRUE(at::equal(y, eager([&] { return block(x, a, b); }))) << "iteration " << i;
  }
  sync_gpu();
  EXPECT_EQ(graph_counters().rejected, rejected + 1);
  EXPECT_EQ(given_up.load(), 1);
  EXPECT_EQ(c->state.load(), ChainState::kHot);
  EXPECT_EQ(c->nodes.front().rec->chain_head.load(), nullptr);
  const uint64_t regions = c->regions.load();
  for (int i = 0; i < 3; ++i) block(randn(kRows), a, b);
  sync_gpu();
  EXPECT_EQ(c->regions.load(), regions) << "an unfused chain opened a region";
}

}  // namespace
}  // namespace cudal1::dispatcher
