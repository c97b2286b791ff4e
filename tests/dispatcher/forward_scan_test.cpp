/// @brief What Note [Forward graphs] reads before graphing a TorchScript call (host-only): the obstacles in a
/// method's graph, the module snapshot that must hold for a replay, and the call key.
#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>
#include <gtest/gtest.h>
#include <torch/script.h>

#include "cudal1/dispatcher/forward_graphs.h"
#include "forward_scan.h"  // private

namespace cudal1::dispatcher {
namespace {

torch::jit::Module module_with(const std::string& forward) {
  torch::jit::Module m("M");
  m.register_parameter("w", at::ones({4}), false);
  m.register_attribute("scale", c10::FloatType::get(), 2.0);
  m.define(forward);
  return m;
}

TEST(ForwardScan, APlainForwardHasNoObstacle) {
  torch::jit::Module m = module_with("def forward(self, x):\n  return x * self.w * self.scale\n");
  EXPECT_EQ(forward_graph_obstacle(m.get_method("forward")), "");
}

TEST(ForwardScan, RandomNumbersSetAttrAndPrintAreObstacles) {
  EXPECT_NE(forward_graph_obstacle(module_with("def forward(self, x):\n  return x + torch.rand_like(x)\n")
                                       .get_method("forward"))
                .find("random"),
            std::string::npos);
  EXPECT_NE(forward_graph_obstacle(module_with("def forward(self, x):\n  return torch.dropout(x, 0.5, True)\n")
                                       .get_method("forward"))
                .find("training mode"),
            std::string::npos);
  EXPECT_EQ(forward_graph_obstacle(
                module_with("def forward(self, x):\n  return torch.dropout(x, 0.5, False)\n").get_method("forward")),
            "");
  EXPECT_NE(forward_graph_obstacle(module_with("def forward(self, x):\n  self.scale = 3.0\n  return x\n")
                                       .get_method("forward"))
                .find("sets a module attribute"),
            std::string::npos);
  EXPECT_NE(forward_graph_obstacle(module_with("def forward(self, x):\n  print(x)\n  return x\n").get_method("forward"))
                .find("prints"),
            std::string::npos);
}

TEST(ForwardScan, ObstaclesInACalledMethodCount) {
  torch::jit::Module inner("Inner");
  inner.define("def forward(self, x):\n  return x + torch.randn_like(x)\n");
  torch::jit::Module outer("Outer");
  outer.register_module("inner", inner);
  outer.define("def forward(self, x):\n  return self.inner.forward(x) * 2\n");
  EXPECT_NE(forward_graph_obstacle(outer.get_method("forward")).find("random"), std::string::npos);
}

TEST(ForwardScan, ASnapshotSeesInPlaceChangesSwapsAndAttributes) {
  torch::jit::Module m = module_with("def forward(self, x):\n  return x * self.w\n");
  detail::ModuleSnapshot snap;
  std::string why;
  ASSERT_TRUE(snap.take(m._ivalue(), &why)) << why;
  EXPECT_TRUE(snap.same());
  m.attr("w").toTensor().add_(1);  // in place: the version moves
  EXPECT_FALSE(snap.same());
  ASSERT_TRUE(snap.take(m._ivalue(), &why));
  m.setattr("w", at::ones({4}));  // another tensor
  EXPECT_FALSE(snap.same());
  ASSERT_TRUE(snap.take(m._ivalue(), &why));
  m.setattr("scale", 3.0);
  EXPECT_FALSE(snap.same());
  ASSERT_TRUE(snap.take(m._ivalue(), &why));
  EXPECT_TRUE(snap.same());
}

TEST(ForwardScan, ASnapshotWalksSubmodulesAndRefusesContainers) {
  torch::jit::Module inner("Inner");
  inner.register_buffer("b", at::zeros({2}));
  torch::jit::Module outer("Outer");
  outer.register_module("inner", inner);
  detail::ModuleSnapshot snap;
  std::string why;
  ASSERT_TRUE(snap.take(outer._ivalue(), &why)) << why;
  inner.attr("b").toTensor().fill_(1);
  EXPECT_FALSE(snap.same());
  torch::jit::Module listy("Listy");
  listy.register_attribute("xs", c10::ListType::ofInts(), c10::List<int64_t>({1, 2}));
  EXPECT_FALSE(snap.take(listy._ivalue(), &why));
  EXPECT_NE(why.find("'xs'"), std::string::npos) << why;
}

TEST(ForwardScan, CallKeysNeedCudaTensorsAndSimpleValues) {
  std::vector<int64_t> key;
  std::vector<at::Tensor> tensors;
  int device = 0;
  std::string why;
  EXPECT_FALSE(detail::call_key({c10::IValue(at::ones({2}))}, &key, &tensors, &device, &why));
  EXPECT_NE(why.find("not on a CUDA device"), std::string::npos) << why;
  EXPECT_TRUE(detail::call_key({c10::IValue(int64_t{3}), c10::IValue(2.5), c10::IValue()}, &key, &tensors, &device,
                               &why));
  EXPECT_EQ(device, -1);
  std::vector<int64_t> other;
  EXPECT_TRUE(detail::call_key({c10::IValue(int64_t{4}), c10::IValue(2.5), c10::IValue()}, &other, &tensors, &device,
                               &why));
  EXPECT_NE(key, other);  // a scalar's value is part of the key
  c10::impl::GenericDict d(c10::StringType::get(), c10::IntType::get());
  EXPECT_FALSE(detail::call_key({c10::IValue(d)}, &key, &tensors, &device, &why));
}

TEST(ForwardScan, WithTensorsRebuildsTuplesAndLists) {
  const at::Tensor a = at::zeros({1}), b = at::ones({1});
  const std::vector<c10::IValue> in = {c10::ivalue::Tuple::create({c10::IValue(a), c10::IValue(int64_t{2})})};
  const std::vector<c10::IValue> out = detail::with_tensors(in, {b});
  ASSERT_TRUE(out[0].isTuple());
  EXPECT_TRUE(out[0].toTupleRef().elements()[0].toTensor().is_same(b));
  EXPECT_EQ(out[0].toTupleRef().elements()[1].toInt(), 2);
  std::vector<at::Tensor> found;
  detail::tensors_of(out[0], &found);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_TRUE(found[0].is_same(b));
}

}  // namespace
}  // namespace cudal1::dispatcher

namespace cudal1::dispatcher {
namespace {

TEST(ForwardGraphHost, BadOptionsAreRefused) {
  ForwardGraphOptions o;
  o.block = 1;
  EXPECT_FALSE(configure_forward_graphs(o).ok());
  o = ForwardGraphOptions();
  o.instances = 0;
  EXPECT_FALSE(configure_forward_graphs(o).ok());
  EXPECT_TRUE(configure_forward_graphs(ForwardGraphOptions()).ok());
}

// This executable holds cudal1's definition of Method::operator() (Note [Forward graphs]): with forward graphs on,
// calls on CPU tensors, with keyword arguments or from a nested method reach libtorch's definition and compute as
// before.
TEST(ForwardGraphHost, CallsThatAreNotGraphedComputeAsBefore) {
  ForwardGraphOptions o;
  o.enabled = true;
  o.settle_calls = 1;
  o.min_calls = 0;
  o.settle_ms = 0;
  ASSERT_TRUE(configure_forward_graphs(o).ok());
  torch::jit::Module inner("Inner");
  inner.define("def forward(self, x, k: float = 1.0):\n  return x * k\n");
  torch::jit::Module m("Outer");
  m.register_module("inner", inner);
  m.define("def forward(self, x, k: float = 1.0):\n  return self.inner.forward(x, k) + 1.0\n");
  const at::Tensor x = at::randn({8});
  const uint64_t before = forward_graph_counters().calls;
  for (int i = 0; i < 4; ++i) {
    EXPECT_TRUE(at::allclose(m.forward({x}).toTensor(), x + 1.0));
    EXPECT_TRUE(at::allclose(m.forward({x}, {{"k", 3.0}}).toTensor(), x * 3.0 + 1.0));
  }
  EXPECT_EQ(forward_graph_counters().calls - before, 8u);  // the nested call is inlined or passes through
  EXPECT_EQ(forward_graph_counters().replays, 0u);
  ASSERT_TRUE(configure_forward_graphs(ForwardGraphOptions()).ok());
}

}  // namespace
}  // namespace cudal1::dispatcher
