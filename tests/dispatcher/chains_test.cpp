/// @brief Chain profiling (Note [Chain profiling]) on CPU tensors, no GPU needed: the builder's dataflow,
/// breaks, caps and external identities on hand-made calls, then the hook recording RMSNorm written as eager ops.
#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>
#include <gtest/gtest.h>

#include <thread>

#include "cudal1/dispatcher/chains.h"
#include "cudal1/dispatcher/hook.h"

namespace cudal1::dispatcher {
namespace {

class ChainEnv : public ::testing::Environment {
 public:
  void SetUp() override {
    HookOptions o;
    o.mode = Mode::kTune;
    o.ops = {"mul.Tensor", "add.Scalar", "add.Tensor", "mean.dim", "silu", "sigmoid", "native_batch_norm"};
    for (const auto& op : chain_ops()) o.ops.push_back(op);
    o.hot_calls = 1000000;  // nothing is handed to an optimizer here
    o.sample_every = 1;
    o.profile_cpu = true;
    o.chains = true;
    const Status s = install_hooks(o, HookCallbacks{});
    ASSERT_TRUE(s.ok()) << s.to_string();
  }
};
const auto* const g_env = ::testing::AddGlobalTestEnvironment(new ChainEnv);

/// A record for hand-made calls: a real operator, a made-up signature.
std::unique_ptr<SigRecord> record(const char* op, const char* overload, int64_t tag) {
  Signature sig;
  sig.words = {tag};
  sig.hash = hash_words(sig.words.data(), sig.words.size());
  sig.text = std::string(op) + "#" + std::to_string(tag);
  return std::make_unique<SigRecord>(c10::Dispatcher::singleton().findSchemaOrThrow(op, overload), sig, -1,
                                     std::vector<ArgSpec>{});
}

ChainBuilder::Call call(SigRecord* r, std::initializer_list<const at::Tensor*> args,
                        std::initializer_list<const at::Tensor*> outs) {
  ChainBuilder::Call c;
  c.rec = r;
  for (const auto* a : args) c.args.push_back(a);
  for (const auto* o : outs) c.outputs.push_back(o);
  return c;
}

std::vector<ChainRecord*> all(const ChainTable& t) {
  std::vector<ChainRecord*> v;
  t.for_each([&](ChainRecord& r) { v.push_back(&r); });
  return v;
}

TEST(ChainBuilder, RecordsDataflowExternalsAndWhichExternalsRecur) {
  auto sq = record("aten::pow", "Tensor_Scalar", 1), mean = record("aten::mean", "dim", 2);
  auto mul = record("aten::mul", "Tensor", 3), mulw = record("aten::mul", "Tensor", 4);
  ChainTable table;
  ChainBuilder b;
  const at::Tensor w = at::ones({4});
  for (int it = 0; it < 5; ++it) {
    const at::Tensor x = at::randn({2, 4});  // a new input every iteration; the weight stays
    const at::Tensor p = x * x, m = p.mean(-1, true), y = x * m, z = y * w;
    ChainRecord* committed = b.observe(call(sq.get(), {&x}, {&p}), table);  // commits the last iteration's
    EXPECT_EQ(committed, it == 0 ? nullptr : all(table).at(0));
    EXPECT_EQ(b.observe(call(mean.get(), {&p}, {&m}), table), nullptr);
    b.observe(call(mul.get(), {&x, &m}, {&y}), table);
    b.observe(call(mulw.get(), {&y, &w}, {&z}), table);
  }
  EXPECT_EQ(b.open_nodes(), 4u);
  ChainRecord* r = b.close(table);
  ASSERT_NE(r, nullptr);
  ASSERT_EQ(table.size(), 1u);
  EXPECT_EQ(r->count.load(), 5u);
  ASSERT_EQ(r->nodes.size(), 4u);
  EXPECT_EQ(r->externals, 2);
  EXPECT_EQ(r->nodes[0].inputs, (std::vector<ChainInput>{{-1, 0}}));
  EXPECT_EQ(r->nodes[1].inputs, (std::vector<ChainInput>{{0, 0}}));
  EXPECT_EQ(r->nodes[2].inputs, (std::vector<ChainInput>{{-1, 0}, {1, 0}}));  // x again: the same slot
  EXPECT_EQ(r->nodes[3].inputs, (std::vector<ChainInput>{{2, 0}, {-1, 1}}));
  EXPECT_EQ(r->same_external(), (std::vector<uint64_t>{0, 4}));  // x is new each time, w is the same tensor
  EXPECT_NE(r->text().find("%3 = aten::mul#4 <- %2.0 ext1"), std::string::npos) << r->text();
}

TEST(ChainBuilder, AWeightChangedInPlaceIsNotTheSameExternal) {
  auto a = record("aten::mul", "Tensor", 11), c = record("aten::sigmoid", "", 12);
  ChainTable table;
  ChainBuilder b;
  at::Tensor w = at::ones({4});
  for (int it = 0; it < 4; ++it) {
    const at::Tensor x = at::randn({4});
    const at::Tensor y = x * w, s = y.sigmoid();
    b.observe(call(a.get(), {&x, &w}, {&y}), table);
    b.observe(call(c.get(), {&y}, {&s}), table);
    if (it == 1) w.add_(1);  // the version moves between the second and third commits
  }
  ChainRecord* r = b.close(table);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->same_external(), (std::vector<uint64_t>{0, 2}));  // 1->2 same, 2->3 changed, 3->4 same
}

TEST(ChainBuilder, UnconnectedCallsBreakChainsAndSingleCallsAreNotChains) {
  auto a = record("aten::silu", "", 21), m = record("aten::mul", "Tensor", 22);
  ChainTable table;
  ChainBuilder b;
  const at::Tensor x = at::randn({4}), y = at::randn({4});
  const at::Tensor sx = x.sigmoid(), sy = y.sigmoid(), prod = sx * sy;
  EXPECT_EQ(b.observe(call(a.get(), {&x}, {&sx}), table), nullptr);
  EXPECT_EQ(b.observe(call(a.get(), {&y}, {&sy}), table), nullptr);  // breaks; a single call is no chain
  EXPECT_EQ(table.size(), 0u);
  b.observe(call(m.get(), {&sx, &sy}, {&prod}), table);  // sx came from the closed chain: external here
  ChainRecord* r = b.close(table);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->nodes[1].inputs, (std::vector<ChainInput>{{-1, 1}, {0, 0}}));
  EXPECT_EQ(r->externals, 2);
}

// HF's gelu_new: 0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * pow(x, 3)))). Its first call reads only x,
// and so does the second: they join because the second reads what the first read.
TEST(ChainBuilder, CallsReadingWhatThePreviousCallReadJoinIt) {
  auto half = record("aten::mul", "Scalar", 51), cube = record("aten::pow", "Tensor_Scalar", 52);
  auto mix = record("aten::mul", "Tensor", 53), other = record("aten::sigmoid", "", 54);
  ChainTable table;
  ChainBuilder b;
  const at::Tensor x = at::randn({4}), mask = at::randn({4});
  const at::Tensor h = x * 0.5, c = x.pow(3), y = h * c, m1 = mask.sigmoid(), z = m1 * mask;
  b.observe(call(half.get(), {&x}, {&h}), table);
  b.observe(call(cube.get(), {&x}, {&c}), table);
  b.observe(call(mix.get(), {&h, &c}, {&y}), table);
  b.observe(call(other.get(), {&mask}, {&m1}), table);  // reads neither an output nor what the last call read
  ASSERT_EQ(table.size(), 1u);
  ChainRecord* r = all(table)[0];
  EXPECT_EQ(r->nodes.size(), 3u);
  EXPECT_EQ(r->nodes[1].inputs, (std::vector<ChainInput>{{-1, 0}}));
  EXPECT_EQ(r->nodes[2].inputs, (std::vector<ChainInput>{{0, 0}, {1, 0}}));
  b.observe(call(mix.get(), {&m1, &mask}, {&z}), table);
  ChainRecord* r2 = b.close(table);
  ASSERT_NE(r2, nullptr);
  EXPECT_EQ(r2->nodes.size(), 2u);
}

TEST(ChainBuilder, LongRunsCommitAtTheCap) {
  auto s = record("aten::sigmoid", "", 31);
  ChainTable table;
  ChainBuilder b;
  std::vector<at::Tensor> v{at::randn({4})};
  for (int i = 0; i < kMaxChainNodes + 8; ++i) {
    v.push_back(v.back().sigmoid());
    b.observe(call(s.get(), {&v[v.size() - 2]}, {&v.back()}), table);
  }
  ASSERT_EQ(table.size(), 1u);  // the first 32 committed at the cap
  EXPECT_EQ(all(table)[0]->nodes.size(), static_cast<size_t>(kMaxChainNodes));
  EXPECT_EQ(b.open_nodes(), 8u);
  ChainRecord* rest = b.close(table);
  ASSERT_NE(rest, nullptr);
  EXPECT_EQ(rest->nodes.size(), 8u);
  EXPECT_EQ(rest->nodes[0].inputs, (std::vector<ChainInput>{{-1, 0}}));  // its input was the cut chain's output
}

TEST(ChainBuilder, NoneArgumentsAreRecordedAsNone) {
  auto c = record("aten::clamp", "", 41), s = record("aten::sigmoid", "", 42);
  ChainTable table;
  ChainBuilder b;
  const at::Tensor x = at::randn({4}), none;
  const at::Tensor y = x.sigmoid(), z = y.sigmoid();
  b.observe(call(s.get(), {&x}, {&y}), table);
  b.observe(call(c.get(), {&y, &none, nullptr}, {&z}), table);
  ChainRecord* r = b.close(table);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->nodes[1].inputs, (std::vector<ChainInput>{{0, 0}, {-1, -1}, {-1, -1}}));
}

/// RMSNorm as eager ops, as HF's LlamaRMSNorm writes it (here without the casts, on CPU tensors).
at::Tensor rms_norm_ops(const at::Tensor& x, const at::Tensor& w) {
  const at::Tensor var = x.pow(2).mean({-1}, true);
  return w * (x * (var + 1e-6).rsqrt());
}

std::vector<ChainRecord*> hook_chains_of_length(size_t n) {
  std::vector<ChainRecord*> v;
  for_each_chain([&](ChainRecord& r) {
    if (r.nodes.size() == n) v.push_back(&r);
  });
  return v;
}

TEST(ChainHook, RecordsRmsNormWrittenAsOpsWithItsWeight) {
  const at::Tensor w = at::randn({64});
  at::Tensor x, out;
  for (int it = 0; it < 20; ++it) {
    x = at::randn({8, 64});
    out = rms_norm_ops(x, w);
  }
  close_chain_on_this_thread();
  {
    BypassScope aten;  // the builder only observes: results are ATen's, bit for bit
    EXPECT_TRUE(at::equal(out, rms_norm_ops(x, w)));
  }
  const auto found = hook_chains_of_length(6);
  ASSERT_EQ(found.size(), 1u);
  const ChainRecord& r = *found[0];
  EXPECT_EQ(r.count.load(), 20u);
  const char* ops[] = {"aten::pow.Tensor_Scalar", "aten::mean.dim", "aten::add.Scalar", "aten::rsqrt",
                       "aten::mul.Tensor", "aten::mul.Tensor"};
  for (size_t i = 0; i < 6; ++i) EXPECT_EQ(r.nodes[i].rec->sig.text.rfind(ops[i], 0), 0u) << r.text();
  EXPECT_EQ(r.nodes[4].inputs, (std::vector<ChainInput>{{-1, 0}, {3, 0}}));  // x * rsqrt(...)
  EXPECT_EQ(r.nodes[5].inputs, (std::vector<ChainInput>{{-1, 1}, {4, 0}}));  // w * (...)
  EXPECT_EQ(r.same_external(), (std::vector<uint64_t>{0, 19}));
  EXPECT_GT(r.mean_us(), 0.0);  // every call was sampled on the host clock (sample_every = 1 after the first)
  EXPECT_EQ(update_hot_chains(20, 0.0), 1u);
  EXPECT_EQ(r.state.load(), ChainState::kHot);
}

TEST(ChainHook, ThreadsBuildTheirOwnChains) {
  const at::Tensor w = at::randn({32});
  auto body = [&] {
    for (int it = 0; it < 10; ++it) {
      const at::Tensor x = at::randn({4, 32});
      (void)rms_norm_ops(x, w);
    }
    close_chain_on_this_thread();
  };
  std::thread t1(body), t2(body);
  t1.join();
  t2.join();
  uint64_t total = 0;
  for (ChainRecord* r : hook_chains_of_length(6))
    if (r->nodes[0].rec->sig.text.find("[4,32]") != std::string::npos) total += r->count.load();
  EXPECT_EQ(total, 20u);  // each thread's 10, none interleaved into the other's
}

/// A CPU replacement for any op: ATen itself, called boxed with the hooks bypassed.
class AtenReplacement final : public Replacement {
 public:
  explicit AtenReplacement(const c10::OperatorHandle& op) : op_(op) {}
  Status run(torch::jit::Stack* stack, size_t) noexcept override {
    ++runs;
    BypassScope b;
    op_.callBoxed(stack);
    return Status();
  }
  std::string describe() const override { return "aten"; }
  std::atomic<int> runs{0};

 private:
  c10::OperatorHandle op_;
};

// A call served by a replacement through the boxed carrier (native_batch_norm has no typed kernel) leaves its
// outputs where its arguments were: the chain's inputs are taken before (a regression: reading them after the
// replacement ran indexed past the stack and crashed served apps with CUDAL1_FUSE=on, ResNet-50 on the H200).
TEST(ChainHook, CallsServedThroughTheBoxedCarrierAreRecorded) {
  const at::Tensor w = at::rand({8}) + 0.5, b = at::randn({8}), mean = at::randn({8}), var = at::rand({8}) + 0.5;
  auto bn = [&](const at::Tensor& x) {
    return std::get<0>(at::native_batch_norm(x.sigmoid(), w, b, mean, var, false, 0.1, 1e-5)).sigmoid();
  };
  (void)bn(at::randn({2, 8, 3, 3}));
  SigRecord* rec = nullptr;
  for_each_record([&](SigRecord& r) {
    if (r.sig.text.rfind("aten::native_batch_norm(f32[2,8,3,3]", 0) == 0) rec = &r;
  });
  ASSERT_NE(rec, nullptr);
  auto owned =
      std::make_unique<AtenReplacement>(c10::Dispatcher::singleton().findSchemaOrThrow("aten::native_batch_norm", ""));
  AtenReplacement* rep = owned.get();
  rec->install(std::move(owned), SigRecord::Outcome{});
  close_chain_on_this_thread();
  for (int it = 0; it < 6; ++it) {
    const at::Tensor x = at::randn({2, 8, 3, 3});
    const at::Tensor y = bn(x);
    BypassScope aten;
    EXPECT_TRUE(at::equal(y, bn(x)));
  }
  close_chain_on_this_thread();
  EXPECT_EQ(rep->runs.load(), 6);
  bool found = false;
  for (ChainRecord* r : hook_chains_of_length(3))
    if (r->nodes[1].rec == rec) {
      found = true;
      EXPECT_GE(r->count.load(), 6u);
      EXPECT_EQ(r->nodes[1].inputs,
                (std::vector<ChainInput>{{0, 0}, {-1, 1}, {-1, 2}, {-1, 3}, {-1, 4}}));  // x.sigmoid(), w, b, mean, var
      EXPECT_EQ(r->nodes[2].inputs, (std::vector<ChainInput>{{1, 0}}));
    }
  EXPECT_TRUE(found);
}

TEST(ChainHook, BypassedCallsAreNotRecorded) {
  const size_t before = [] {
    size_t n = 0;
    for_each_chain([&](ChainRecord&) { ++n; });
    return n;
  }();
  {
    BypassScope aten;
    for (int it = 0; it < 5; ++it) (void)rms_norm_ops(at::randn({3, 16}), at::randn({16}));
  }
  close_chain_on_this_thread();
  size_t after = 0;
  for_each_chain([&](ChainRecord&) { ++after; });
  EXPECT_EQ(after, before);
}

}  // namespace
}  // namespace cudal1::dispatcher
