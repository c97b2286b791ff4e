/// @brief Forward graphs on the GPU (Note [Forward graphs]) under hostile use: fresh inputs every call, the app
/// keeping outputs across calls, a weight changed in place and swapped, another batch size, a forward that
/// synchronises, the app's own CUDA graph capture, two threads, the tuner's context synchronisation, and the
/// in-app trial. Every output must equal the
/// same math run eagerly. Skips without a GPU.
#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>
#include <gtest/gtest.h>
#include <torch/script.h>

#include <thread>

#include "cudal1/dispatcher/capture_gate.h"
#include "cudal1/dispatcher/forward_graphs.h"
#include "gpu/gpu_env.h"

#if defined(CUDAL1_TORCH_CUDA)
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace cudal1::dispatcher {
namespace {

ForwardGraphOptions forced() {
  ForwardGraphOptions o;
  o.enabled = true;
  o.settle_calls = 2;
  o.min_calls = 2;
  o.settle_ms = 0;
  o.force = true;  // no trial: the graph serves every call it can
  return o;
}

at::TensorOptions cuda() { return at::TensorOptions().device(at::kCUDA); }

/// A module whose forward is a few launches: y = tanh(x w + b) * 2 + rowsum(x).
torch::jit::Module layer(int64_t k = 64) {
  torch::jit::Module m("Layer");
  m.register_parameter("w", at::randn({k, k}, cuda()), false);
  m.register_parameter("b", at::randn({k}, cuda()), false);
  m.define("def forward(self, x):\n  return torch.tanh(x @ self.w + self.b) * 2.0 + x.sum(1, keepdim=True)\n");
  return m;
}
at::Tensor reference(torch::jit::Module& m, const at::Tensor& x) {
  const at::Tensor w = m.attr("w").toTensor(), b = m.attr("b").toTensor();
  return at::tanh(x.mm(w) + b) * 2.0 + x.sum(1, true);
}
void expect_close(const at::Tensor& got, const at::Tensor& want, const std::string& what) {
  ASSERT_EQ(got.sizes(), want.sizes()) << what;
  EXPECT_TRUE(at::allclose(got, want, 1e-4, 1e-4))
      << what << ": max |diff| " << (got - want).abs().max().item<double>();
}

class ForwardGraphGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    CUDAL1_REQUIRE_GPU();
    ASSERT_TRUE(configure_forward_graphs(forced()).ok());
  }
  void TearDown() override { release_forward_graphs(); }
};

TEST_F(ForwardGraphGpu, FreshInputsEveryCallEqualEager) {
  c10::InferenceMode inference;
  torch::jit::Module m = layer();
  const auto before = forward_graph_counters();
  for (int i = 0; i < 20; ++i) {
    const at::Tensor x = at::randn({32, 64}, cuda());
    expect_close(m.forward({x}).toTensor(), reference(m, x), "call " + std::to_string(i));
  }
  const auto after = forward_graph_counters();
  EXPECT_GE(after.captures - before.captures, 1u);
  EXPECT_GE(after.replays - before.replays, 15u) << forward_graph_report();
  EXPECT_EQ(after.check_failures, before.check_failures);
}

TEST_F(ForwardGraphGpu, OutputsTheAppKeepsAreNeverOverwritten) {
  c10::InferenceMode inference;
  torch::jit::Module m = layer();
  std::vector<at::Tensor> xs, ys;
  for (int i = 0; i < 12; ++i) {
    xs.push_back(at::randn({32, 64}, cuda()));
    ys.push_back(m.forward({xs.back()}).toTensor());
  }
  for (size_t i = 0; i < xs.size(); ++i) expect_close(ys[i], reference(m, xs[i]), "kept output " + std::to_string(i));
  // A view of an output holds it too.
  const at::Tensor x0 = at::randn({32, 64}, cuda());
  const at::Tensor view = m.forward({x0}).toTensor().narrow(0, 0, 4);
  for (int i = 0; i < 6; ++i) (void)m.forward({at::randn({32, 64}, cuda())});
  expect_close(view, reference(m, x0).narrow(0, 0, 4), "a view of a kept output");
}

TEST_F(ForwardGraphGpu, AWeightChangedInPlaceOrSwappedIsSeen) {
  torch::jit::Module m = layer();  // normal tensors (made outside InferenceMode): their versions move in place
  c10::InferenceMode inference;
  const at::Tensor x = at::randn({32, 64}, cuda());
  for (int i = 0; i < 6; ++i) (void)m.forward({x});
  const auto dropped = forward_graph_counters().dropped;
  {
    c10::InferenceMode normal(false);
    m.attr("w").toTensor().mul_(0.5);  // in place
  }
  for (int i = 0; i < 6; ++i) expect_close(m.forward({x}).toTensor(), reference(m, x), "after an in-place change");
  m.setattr("b", at::randn({64}, cuda()));  // another tensor
  for (int i = 0; i < 6; ++i) expect_close(m.forward({x}).toTensor(), reference(m, x), "after a swap");
  EXPECT_GE(forward_graph_counters().dropped - dropped, 2u);
}

TEST_F(ForwardGraphGpu, AnotherBatchSizeIsAnotherGraph) {
  c10::InferenceMode inference;
  torch::jit::Module m = layer();
  for (int64_t rows : {32, 8, 32, 8, 32, 8, 32, 8, 16}) {
    const at::Tensor x = at::randn({rows, 64}, cuda());
    expect_close(m.forward({x}).toTensor(), reference(m, x), "rows " + std::to_string(rows));
  }
}

TEST_F(ForwardGraphGpu, AForwardThatSynchronisesStaysEager) {
  c10::InferenceMode inference;
  torch::jit::Module m("Sync");
  m.define("def forward(self, x):\n  return x * float(x.sum())\n");
  const auto failures = forward_graph_counters().capture_failures;
  for (int i = 0; i < 8; ++i) {
    const at::Tensor x = at::randn({16}, cuda());
    expect_close(m.forward({x}).toTensor(), x * x.sum().item<double>(), "call " + std::to_string(i));
  }
  EXPECT_EQ(forward_graph_counters().capture_failures - failures, 1u) << forward_graph_report();
}

#if defined(CUDAL1_TORCH_CUDA)
TEST_F(ForwardGraphGpu, TheAppsOwnCaptureIsLeftAlone) {
  c10::InferenceMode inference;
  torch::jit::Module m = layer();
  const at::Tensor x = at::randn({32, 64}, cuda());
  for (int i = 0; i < 6; ++i) (void)m.forward({x});  // graphed by cudal1 by now
  const at::Tensor warm = m.forward({x}).toTensor().clone();
  at::cuda::CUDAGraph app_graph;
  const c10::cuda::CUDAStream side = c10::cuda::getStreamFromPool();
  at::Tensor y;
  {
    c10::cuda::CUDAStreamGuard guard(side);
    app_graph.capture_begin();
    y = m.forward({x}).toTensor();  // the app captures: cudal1 must run the method as it is
    app_graph.capture_end();
  }
  y.zero_();
  app_graph.replay();
  c10::cuda::getCurrentCUDAStream().synchronize();
  expect_close(y, warm, "the app's own graph");
}
#endif

// Note [Captures and context synchronisation]: while the optimizer synchronises the context (it holds a
// SyncPermit), a forward does not capture; it captures at a later call, and the capture is not invalidated.
TEST_F(ForwardGraphGpu, NoCaptureWhileTheTunerSynchronises) {
  c10::InferenceMode inference;
  torch::jit::Module m = layer();
  const auto before = forward_graph_counters();
  {
    const SyncPermit permit(1.0);
    ASSERT_TRUE(permit.ok());
    for (int i = 0; i < 8; ++i) {
      const at::Tensor x = at::randn({32, 64}, cuda());
      expect_close(m.forward({x}).toTensor(), reference(m, x), "while synchronising, call " + std::to_string(i));
    }
    EXPECT_EQ(forward_graph_counters().captures, before.captures);
    EXPECT_EQ(forward_graph_counters().capture_failures, before.capture_failures);
  }
  for (int i = 0; i < 8; ++i) {
    const at::Tensor x = at::randn({32, 64}, cuda());
    expect_close(m.forward({x}).toTensor(), reference(m, x), "after, call " + std::to_string(i));
  }
  const auto after = forward_graph_counters();
  EXPECT_EQ(after.captures - before.captures, 1u) << forward_graph_report();
  EXPECT_EQ(after.capture_failures, before.capture_failures);
  EXPECT_GE(after.replays - before.replays, 5u);
  EXPECT_EQ(captures_in_progress(), 0);
}

TEST_F(ForwardGraphGpu, TwoThreadsEqualEager) {
  torch::jit::Module m = layer();
  std::atomic<int> bad{0};
  auto work = [&] {
    c10::InferenceMode inference;
    for (int i = 0; i < 30; ++i) {
      const at::Tensor x = at::randn({32, 64}, cuda());
      const at::Tensor y = m.forward({x}).toTensor();
      if (!at::allclose(y, reference(m, x), 1e-4, 1e-4)) bad.fetch_add(1);
    }
  };
  std::thread a(work), b(work);
  a.join();
  b.join();
  EXPECT_EQ(bad.load(), 0);
}

TEST_F(ForwardGraphGpu, TheTrialDecidesByTheAppsPeriod) {
  ForwardGraphOptions o = forced();
  o.force = false;
  ASSERT_TRUE(configure_forward_graphs(o).ok());
  c10::InferenceMode inference;
  torch::jit::Module m("Launches");  // 40 tiny launches a call: launch-bound
  std::string body = "def forward(self, x):\n";
  for (int i = 0; i < 40; ++i) body += "  x = x * 1.001 + 0.001\n";
  body += "  return x\n";
  m.define(body);
  const auto before = forward_graph_counters();
  const at::Tensor x = at::randn({256}, cuda());
  at::Tensor want = x;
  for (int i = 0; i < 40; ++i) want = want * 1.001 + 0.001;
  for (int i = 0; i < 80; ++i) expect_close(m.forward({x}).toTensor(), want, "call " + std::to_string(i));
  const auto after = forward_graph_counters();
  EXPECT_EQ((after.kept - before.kept) + (after.given_up - before.given_up), 1u) << forward_graph_report();
  const std::string report = forward_graph_report();
  EXPECT_NE(report.find("the app's period"), std::string::npos) << report;
  std::printf("%s", report.c_str());
}

}  // namespace
}  // namespace cudal1::dispatcher
