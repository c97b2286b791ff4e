/// @brief Profile mode hooks every functional aten op (and nothing else); a small network still trains and
/// gives the same loss as with cudal1 bypassed. Its own binary: hooks install once per process.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>

#include "cudal1/dispatcher/hook.h"

namespace cudal1::dispatcher {
namespace {

TEST(HookAllOps, RegistersEveryFunctionalOpAndNoViewOrInPlace) {
  HookOptions o;
  o.mode = Mode::kProfile;
  o.profile_cpu = true;
  ASSERT_TRUE(install_hooks(o, {}).ok());
  const auto ops = hooked_ops();
  EXPECT_GT(ops.size(), 500u);
  auto has = [&](const std::string& s) { return std::find(ops.begin(), ops.end(), s) != ops.end(); };
  EXPECT_TRUE(has("relu"));
  EXPECT_TRUE(has("addmm"));
  EXPECT_TRUE(has("add.Tensor"));
  EXPECT_TRUE(has("cudnn_batch_norm"));  // several outputs, optional tensors (Note [Batch norm inference])
  EXPECT_TRUE(has("native_batch_norm"));
  EXPECT_FALSE(has("relu_"));
  EXPECT_FALSE(has("add.out"));
  EXPECT_FALSE(has("transpose.int"));
  EXPECT_FALSE(has("view"));
  EXPECT_FALSE(has("empty.memory_format"));  // factory ops keep their own BackendSelect kernel

  torch::manual_seed(0);
  torch::nn::Sequential net(torch::nn::Linear(16, 32), torch::nn::ReLU(), torch::nn::Linear(32, 4));
  const auto x = torch::randn({8, 16});
  const auto target = torch::randint(0, 4, {8});
  auto loss_of = [&] { return torch::nll_loss(torch::log_softmax(net->forward(x), 1), target); };
  at::Tensor plain;
  {
    BypassScope b;
    plain = loss_of();
  }
  const auto loss = loss_of();
  EXPECT_TRUE(at::allclose(loss, plain));
  loss.backward();
  for (const auto& p : net->parameters()) EXPECT_TRUE(p.grad().defined());
  EXPECT_GT(hook_counters().hooked_calls, 5u);
  bool saw_view = false;
  for_each_record([&](SigRecord& r) {
    saw_view |= r.sig.text.rfind("aten::view(", 0) == 0 || r.sig.text.rfind("aten::t(", 0) == 0;
  });
  EXPECT_FALSE(saw_view);
}

}  // namespace
}  // namespace cudal1::dispatcher
