/// @brief The hook on CPU tensors (no GPU needed): every call reaches ATen unchanged, autograd, threads and
/// InferenceMode keep working, nested calls are not counted, a signature turns hot exactly once, and the
/// replacement path (served, declined, failing) behaves as the contract says.
#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>

#include "cudal1/dispatcher/hook.h"

namespace cudal1::dispatcher {
namespace {

std::mutex g_mu;
std::vector<SigRecord*> g_hot;
std::vector<std::pair<SigRecord*, Verdict>> g_verdicts;  // Note [In-app confirmation]

class HookEnv : public ::testing::Environment {
 public:
  void SetUp() override {
    HookOptions o;
    o.mode = Mode::kTune;
    o.ops = {"relu",        "clamp_min",         "gelu",           "sigmoid", "exp",    "mul.Tensor",
             "add.Tensor",  "where.self",        "native_layer_norm", "max.dim", "cumsum", "var.correction",
             "sum.dim_IntList", "native_batch_norm", "mm"};
    o.hot_calls = 10;
    o.sample_every = 1;
    o.profile_cpu = true;
    HookCallbacks cb;
    cb.on_hot = [](SigRecord& r) {
      std::lock_guard<std::mutex> lock(g_mu);
      g_hot.push_back(&r);
    };
    cb.on_confirmed = [](SigRecord& r, Verdict v, const TrialStats&) {
      std::lock_guard<std::mutex> lock(g_mu);
      g_verdicts.emplace_back(&r, v);
    };
    const Status s = install_hooks(o, cb);
    ASSERT_TRUE(s.ok()) << s.to_string();
  }
};
const auto* const g_env = ::testing::AddGlobalTestEnvironment(new HookEnv);

SigRecord* find(const std::string& text) {
  SigRecord* found = nullptr;
  for_each_record([&](SigRecord& r) {
    if (r.sig.text == text) found = &r;
  });
  return found;
}

uint64_t calls_of(const std::string& text) {
  SigRecord* r = find(text);
  return r ? r->calls.load() : 0;
}

at::Tensor aten_only(const std::function<at::Tensor()>& f) {
  BypassScope b;
  return f();
}

std::tuple<at::Tensor, at::Tensor> aten_only_pair(const std::function<std::tuple<at::Tensor, at::Tensor>()>& f) {
  BypassScope b;
  return f();
}

TEST(HookCpu, PassesCallsThroughUnchangedAndCountsThem) {
  const at::Tensor x = at::randn({4, 5});
  const at::Tensor y = at::relu(x);
  EXPECT_TRUE(at::equal(y, aten_only([&] { return at::relu(x); })));
  EXPECT_TRUE(at::equal(y, at::where(x > 0, x, at::zeros_like(x))));
  EXPECT_EQ(calls_of("aten::relu(f32[4,5]{5,1}@cpu)"), 1u);
  at::relu(x);
  EXPECT_EQ(calls_of("aten::relu(f32[4,5]{5,1}@cpu)"), 2u);
  EXPECT_EQ(find("aten::relu(f32[4,5]{5,1}@cpu)")->samples.load(), 1u);  // the 2nd call (never the 1st), host-timed
}

TEST(HookCpu, NestedCallsAreNotCounted) {
  // gelu, sigmoid and mul do not call each other; relu's CPU kernel is clamp_min(self, 0) in both torch
  // versions, so a relu call must not produce a clamp_min record.
  const at::Tensor x = at::randn({6, 7});
  const uint64_t nested = nested_calls_on_this_thread();
  at::relu(x);
  EXPECT_GE(nested_calls_on_this_thread(), nested + 1);  // clamp_min ran inside relu and was hooked
  EXPECT_EQ(find("aten::clamp_min(f32[6,7]{7,1}@cpu, 0)"), nullptr);
  at::clamp_min(x, 0);
  EXPECT_EQ(calls_of("aten::clamp_min(f32[6,7]{7,1}@cpu, 0)"), 1u);
  EXPECT_EQ(calls_of("aten::relu(f32[6,7]{7,1}@cpu)"), 1u);
}

TEST(HookCpu, AutogradStillRecordsAndDifferentiates) {
  const at::Tensor x = at::randn({3, 8}).requires_grad_(true);
  const at::Tensor s = at::sigmoid(x);
  ASSERT_TRUE(s.requires_grad());
  s.sum().backward();
  const at::Tensor sd = s.detach();
  EXPECT_TRUE(at::allclose(x.grad(), sd * (1 - sd)));
  EXPECT_EQ(calls_of("aten::sigmoid(f32[3,8]{8,1}@cpu)"), 1u);
}

TEST(HookCpu, EveryThreadIsHooked) {
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([t] {
      const at::Tensor x = at::randn({2, 10 + t});
      for (int i = 0; i < 5; ++i) at::exp(x);
    });
  for (auto& th : threads) th.join();
  for (int t = 0; t < 4; ++t)
    EXPECT_EQ(calls_of("aten::exp(f32[2," + std::to_string(10 + t) + "]{" + std::to_string(10 + t) + ",1}@cpu)"), 5u);
}

TEST(HookCpu, InferenceModeIsHookedAndCorrect) {
  const at::Tensor x = at::randn({3, 3});
  at::Tensor y;
  {
    c10::InferenceMode guard;
    y = at::exp(x);
  }
  EXPECT_TRUE(at::allclose(y, aten_only([&] { return at::exp(x); })));
  EXPECT_EQ(calls_of("aten::exp(f32[3,3]{3,1}@cpu)"), 1u);
}

TEST(HookCpu, HotExactlyOnceUnderConcurrency) {
  const at::Tensor x = at::randn({11, 13});
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < 50; ++i) at::sigmoid(x);
    });
  for (auto& th : threads) th.join();
  SigRecord* r = find("aten::sigmoid(f32[11,13]{13,1}@cpu)");
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->calls.load(), 400u);
  std::lock_guard<std::mutex> lock(g_mu);
  EXPECT_EQ(std::count(g_hot.begin(), g_hot.end(), r), 1);
  EXPECT_EQ(r->state.load(), SigState::kQueued);
}

TEST(HookCpu, SignaturesSeparateShapesStridesDtypesAndScalars) {
  const at::Tensor a = at::randn({4, 6});
  at::relu(a);
  at::relu(a.t());
  at::relu(a.to(at::kDouble));
  at::relu(a.narrow(1, 1, 3));
  at::gelu(a);
  at::gelu(a, "tanh");
  EXPECT_EQ(calls_of("aten::relu(f32[4,6]{6,1}@cpu)"), 1u);
  EXPECT_EQ(calls_of("aten::relu(f32[6,4]{1,6}@cpu)"), 1u);
  EXPECT_EQ(calls_of("aten::relu(f64[4,6]{6,1}@cpu)"), 1u);
  EXPECT_EQ(calls_of("aten::relu(f32[4,3]{6,1}@cpu)"), 1u);
  EXPECT_EQ(calls_of("aten::gelu(f32[4,6]{6,1}@cpu, approximate='none')"), 1u);
  EXPECT_EQ(calls_of("aten::gelu(f32[4,6]{6,1}@cpu, approximate='tanh')"), 1u);
}

TEST(HookCpu, BinaryOpsKeyTheirScalarsAndPassThroughUnchanged) {
  const at::Tensor a = at::randn({4, 6}), b = at::randn({6});
  const at::Tensor mask = at::randn({4, 6}) > 0;
  for (int i = 0; i < 2; ++i) {
    EXPECT_TRUE(at::equal(at::add(a, b, 2), aten_only([&] { return at::add(a, b, 2); })));
    EXPECT_TRUE(at::equal(at::add(a, b), aten_only([&] { return at::add(a, b); })));
    EXPECT_TRUE(at::equal(at::add(a, b, 0.5), aten_only([&] { return at::add(a, b, 0.5); })));
    EXPECT_TRUE(at::equal(at::where(mask, a, b), aten_only([&] { return at::where(mask, a, b); })));
  }
  EXPECT_EQ(calls_of("aten::add.Tensor(f32[4,6]{6,1}@cpu, f32[6]{1}@cpu, alpha=2)"), 2u);
  EXPECT_EQ(calls_of("aten::add.Tensor(f32[4,6]{6,1}@cpu, f32[6]{1}@cpu, alpha=1)"), 2u);
  EXPECT_EQ(calls_of("aten::add.Tensor(f32[4,6]{6,1}@cpu, f32[6]{1}@cpu, alpha=0.5)"), 2u);
  EXPECT_EQ(calls_of("aten::where.self(b8[4,6]{6,1}@cpu, f32[4,6]{6,1}@cpu, f32[6]{1}@cpu)"), 2u);
}

TEST(HookCpu, MmThroughTheTypedHookKeysItsLayoutsAndPassesThrough) {
  // Every linear layer reaches mm (Note [Padded GEMM]): its typed kernel keys both operands' layouts, and the
  // result is ATen's, through nn.Linear's transposed weight too.
  const at::Tensor a = at::randn({5, 8}), w = at::randn({3, 8});
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(at::equal(at::mm(a, w.t()), aten_only([&] { return at::mm(a, w.t()); })));
    EXPECT_TRUE(at::equal(at::linear(a, w), aten_only([&] { return at::linear(a, w); })));
  }
  EXPECT_EQ(calls_of("aten::mm(f32[5,8]{8,1}@cpu, f32[8,3]{1,8}@cpu)"), 6u);
}

/// A CPU replacement: relu computed by ATen's where(), counting its calls; or declining / failing on demand.
class TestReplacement final : public Replacement {
 public:
  enum class Mode { kServe, kDecline, kFail };
  explicit TestReplacement(Mode m) : mode_(m) {}
  Status run(torch::jit::Stack* stack, size_t nargs) noexcept override {
    ++runs;
    if (mode_ == Mode::kDecline) return Status(Code::kUnsupported, "not this call");
    if (mode_ == Mode::kFail) return Status(Code::kCudaError, "simulated launch failure");
    const at::Tensor x = (*stack)[stack->size() - nargs].toTensor();
    at::Tensor y = at::where(x > 0, x, at::zeros_like(x));
    torch::jit::drop(*stack, nargs);
    stack->emplace_back(std::move(y));
    return Status();
  }
  std::string describe() const override { return "test"; }
  std::atomic<int> runs{0};

 private:
  Mode mode_;
};

TEST(HookCpu, ReplacementServesCallsAndAutogradStillWorks) {
  const at::Tensor x = at::randn({5, 5});
  at::relu(x);
  SigRecord* r = find("aten::relu(f32[5,5]{5,1}@cpu)");
  ASSERT_NE(r, nullptr);
  auto owned = std::make_unique<TestReplacement>(TestReplacement::Mode::kServe);
  TestReplacement* rep = owned.get();
  r->install(std::move(owned), SigRecord::Outcome{});
  const at::Tensor xg = x.clone().requires_grad_(true);
  const at::Tensor y = at::relu(xg);
  EXPECT_EQ(rep->runs.load(), 1);
  EXPECT_EQ(r->replaced_calls.load(), 1u);
  EXPECT_TRUE(at::equal(y.detach(), aten_only([&] { return at::relu(x); })));
  ASSERT_TRUE(y.requires_grad());
  (y * 3).sum().backward();
  EXPECT_TRUE(at::equal(xg.grad(), (x > 0).to(at::kFloat) * 3));
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

// The typed carrier covers ops with optional tensors, int lists, doubles, optional dtypes and scalars, and
// tuple results: each keys its arguments like the boxed form and returns what a replacement left on the stack.
TEST(HookCpu, TypedCarrierKeysEveryArgumentKindAndServesTuples) {
  const at::Tensor x = at::randn({4, 8}), w = at::randn({8});
  for (int i = 0; i < 2; ++i) {
    EXPECT_TRUE(at::equal(std::get<0>(at::native_layer_norm(x, {8}, w, {}, 1e-5)),
                          aten_only([&] { return std::get<0>(at::native_layer_norm(x, {8}, w, {}, 1e-5)); })));
    EXPECT_TRUE(at::equal(at::cumsum(x, 1, at::kDouble), aten_only([&] { return at::cumsum(x, 1, at::kDouble); })));
    EXPECT_TRUE(at::equal(at::var(x, at::IntArrayRef{0}, 0, true),
                          aten_only([&] { return at::var(x, at::IntArrayRef{0}, 0, true); })));
    EXPECT_TRUE(at::equal(at::sum(x, at::IntArrayRef{1}), aten_only([&] { return at::sum(x, at::IntArrayRef{1}); })));
  }
  EXPECT_EQ(calls_of("aten::native_layer_norm(f32[4,8]{8,1}@cpu, [8], f32[8]{1}@cpu, None, 1.0000000000000001e-05)"),
            2u);
  EXPECT_EQ(calls_of("aten::cumsum(f32[4,8]{8,1}@cpu, 1, dtype=7)"), 2u);
  EXPECT_EQ(calls_of("aten::var.correction(f32[4,8]{8,1}@cpu, [0], correction=0, keepdim=True)"), 2u);
  EXPECT_EQ(calls_of("aten::sum.dim_IntList(f32[4,8]{8,1}@cpu, [1], False, dtype=None)"), 2u);

  at::max(x, 1);
  SigRecord* r = find("aten::max.dim(f32[4,8]{8,1}@cpu, 1, False)");
  ASSERT_NE(r, nullptr);
  auto owned = std::make_unique<AtenReplacement>(c10::Dispatcher::singleton().findSchemaOrThrow("aten::max", "dim"));
  AtenReplacement* rep = owned.get();
  r->install(std::move(owned), SigRecord::Outcome{});
  const auto [values, indices] = at::max(x, 1);
  EXPECT_EQ(rep->runs.load(), 1);
  const auto [ref_values, ref_indices] = aten_only_pair([&] { return at::max(x, 1); });
  EXPECT_TRUE(at::equal(values, ref_values));
  EXPECT_TRUE(at::equal(indices, ref_indices));
}

/// Relu through where(), slowed by a busy wait: verified (its values are relu's) and slower than ATen in the app.
class SlowRelu final : public Replacement {
 public:
  Status run(torch::jit::Stack* stack, size_t nargs) noexcept override {
    ++runs;
    const at::Tensor x = (*stack)[stack->size() - nargs].toTensor();
    at::Tensor y;
    {
      BypassScope b;
      y = at::where(x > 0, x, at::zeros_like(x));
    }
    const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(300);
    while (std::chrono::steady_clock::now() < until) {
    }
    torch::jit::drop(*stack, nargs);
    stack->emplace_back(std::move(y));
    return Status();
  }
  std::string describe() const override { return "slow relu"; }
  std::atomic<int> runs{0};
};

/// mm served from its product computed beforehand for one pair of operands (far cheaper than ATen's GEMM): a kernel
/// that is faster in the app; any other operands are declined.
class PrecomputedMm final : public Replacement {
 public:
  PrecomputedMm(at::Tensor a, at::Tensor b) : a_(std::move(a)), b_(std::move(b)) {
    BypassScope s;
    product_ = at::mm(a_, b_);
  }
  Status run(torch::jit::Stack* stack, size_t nargs) noexcept override {
    const at::Tensor a = (*stack)[stack->size() - nargs].toTensor(), b = (*stack)[stack->size() - nargs + 1].toTensor();
    if (!a.is_same(a_) || !b.is_same(b_)) return Status(Code::kUnsupported, "other operands");
    ++runs;
    // The product itself, not a copy: on a many-core machine a copy of it costs as much as ATen's threaded GEMM, and
    // this kernel must be the faster one by a margin no load on the machine can hide (a test kernel, not a pattern).
    torch::jit::drop(*stack, nargs);
    stack->emplace_back(product_);
    return Status();
  }
  std::string describe() const override { return "precomputed mm"; }
  std::atomic<int> runs{0};

 private:
  at::Tensor a_, b_, product_;
};

Verdict verdict_of(SigRecord* r) {
  std::lock_guard<std::mutex> lock(g_mu);
  for (const auto& [rec, v] : g_verdicts)
    if (rec == r) return v;
  return Verdict::kPending;
}

// Note [In-app confirmation]: calls alternate between ATen and the kernel on trial, each timed where the app runs
// it; a kernel slower in the app goes back to ATen, a faster one stays; every output is right throughout.
TEST(HookCpu, AKernelOnTrialThatIsSlowerInTheAppGoesBackToAten) {
  const at::Tensor x = at::randn({16, 16});
  at::relu(x);
  SigRecord* r = find("aten::relu(f32[16,16]{16,1}@cpu)");
  ASSERT_NE(r, nullptr);
  auto owned = std::make_unique<SlowRelu>();
  SlowRelu* rep = owned.get();
  r->install(std::move(owned), SigRecord::Outcome{}, /*calls_per_arm=*/8);
  const at::Tensor ref = aten_only([&] { return at::relu(x); });
  for (int i = 0; i < 40; ++i) ASSERT_TRUE(at::equal(at::relu(x), ref)) << "call " << i;
  EXPECT_EQ(verdict_of(r), Verdict::kDemote);
  EXPECT_EQ(r->state.load(), SigState::kAten);
  EXPECT_EQ(r->replacement.load(), nullptr);
  EXPECT_EQ(r->trial.load(), nullptr);
  EXPECT_EQ(rep->runs.load(), 8);  // the kernel's arm, then never again
  EXPECT_LT(r->outcome().in_app, 1.0);
  EXPECT_EQ(r->outcome().verdict, "demoted");
}

TEST(HookCpu, AKernelOnTrialThatIsFasterInTheAppStays) {
  const at::Tensor a = at::randn({512, 512}), b = at::randn({512, 512});
  at::mm(a, b);
  SigRecord* r = find("aten::mm(f32[512,512]{512,1}@cpu, f32[512,512]{512,1}@cpu)");
  ASSERT_NE(r, nullptr);
  auto owned = std::make_unique<PrecomputedMm>(a, b);
  PrecomputedMm* rep = owned.get();
  r->install(std::move(owned), SigRecord::Outcome{}, /*calls_per_arm=*/8);
  const at::Tensor ref = aten_only([&] { return at::mm(a, b); });
  // Until a verdict, at most both arms' 8 * calls_per_arm samples: a loaded machine (other tests on its cores) may
  // need the later checks at 16 or 32 samples an arm before ATen's noisy times let the kernel's lead show.
  for (int i = 0; i < 2 * 64 + 2 && verdict_of(r) == Verdict::kPending; ++i)
    ASSERT_TRUE(at::equal(at::mm(a, b), ref)) << "call " << i;
  EXPECT_EQ(verdict_of(r), Verdict::kPromote);
  EXPECT_EQ(r->state.load(), SigState::kReplaced);
  EXPECT_EQ(r->trial.load(), nullptr);
  EXPECT_GT(r->outcome().in_app, 1.0);
  const int before = rep->runs.load();
  at::mm(a, b);
  EXPECT_EQ(rep->runs.load(), before + 1);  // promoted: every call now
}

TEST(HookCpu, ATrialUnderThreadsDecidesOnceAndEveryOutputIsRight) {
  const at::Tensor x = at::randn({16, 17});
  at::relu(x);
  SigRecord* r = find("aten::relu(f32[16,17]{17,1}@cpu)");
  ASSERT_NE(r, nullptr);
  r->install(std::make_unique<SlowRelu>(), SigRecord::Outcome{}, /*calls_per_arm=*/8);
  const at::Tensor ref = aten_only([&] { return at::relu(x); });
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < 30; ++i) wrong += !at::equal(at::relu(x), ref);
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(wrong.load(), 0);
  int verdicts = 0;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    for (const auto& [rec, v] : g_verdicts) verdicts += rec == r;
  }
  EXPECT_EQ(verdicts, 1);
  EXPECT_EQ(r->state.load(), SigState::kAten);
}

TEST(HookCpu, DecliningReplacementFallsBackQuietly) {
  const at::Tensor x = at::randn({5, 6});
  at::relu(x);
  SigRecord* r = find("aten::relu(f32[5,6]{6,1}@cpu)");
  ASSERT_NE(r, nullptr);
  auto owned = std::make_unique<TestReplacement>(TestReplacement::Mode::kDecline);
  TestReplacement* rep = owned.get();
  r->install(std::move(owned), SigRecord::Outcome{});
  EXPECT_TRUE(at::equal(at::relu(x), aten_only([&] { return at::relu(x); })));
  EXPECT_EQ(rep->runs.load(), 1);
  EXPECT_EQ(r->state.load(), SigState::kReplaced);
  EXPECT_EQ(r->replaced_calls.load(), 0u);
}

TEST(HookCpu, FailingReplacementIsFirewalledAndRetired) {
  const at::Tensor x = at::randn({5, 7});
  at::relu(x);
  SigRecord* r = find("aten::relu(f32[5,7]{7,1}@cpu)");
  ASSERT_NE(r, nullptr);
  auto owned = std::make_unique<TestReplacement>(TestReplacement::Mode::kFail);
  TestReplacement* rep = owned.get();
  r->install(std::move(owned), SigRecord::Outcome{});
  const uint64_t fallbacks = hook_counters().fallbacks;
  at::Tensor y;
  EXPECT_NO_THROW(y = at::relu(x));
  EXPECT_TRUE(at::equal(y, aten_only([&] { return at::relu(x); })));
  EXPECT_EQ(r->state.load(), SigState::kFailed);
  EXPECT_EQ(hook_counters().fallbacks, fallbacks + 1);
  at::relu(x);
  EXPECT_EQ(rep->runs.load(), 1);  // never tried again
}

TEST(HookCpu, AtenErrorsReachTheAppUnchanged) {
  const at::Tensor a = at::randn({2, 3}), b = at::randn({4, 5});
  const uint64_t fallbacks = hook_counters().fallbacks;
  EXPECT_THROW(at::mul(a, b), c10::Error);
  EXPECT_EQ(hook_counters().fallbacks, fallbacks);  // ATen's error, not a cudal1 failure
}

TEST(HookCpu, OnlyFunctionalOpsAreCandidates) {
  auto& d = c10::Dispatcher::singleton();
  auto schema = [&](const char* n, const char* o) { return d.findSchemaOrThrow(n, o).schema(); };
  EXPECT_TRUE(is_functional(schema("aten::relu", "")));
  EXPECT_TRUE(is_functional(schema("aten::add", "Tensor")));
  EXPECT_FALSE(is_functional(schema("aten::relu_", "")));
  EXPECT_FALSE(is_functional(schema("aten::add", "out")));
  EXPECT_FALSE(is_functional(schema("aten::transpose", "int")));
  EXPECT_FALSE(is_functional(schema("aten::view", "")));
  EXPECT_FALSE(is_functional(schema("aten::add_", "Tensor")));
  // The batch-norm family's ops (several outputs, optional tensors) are candidates like the others.
  EXPECT_TRUE(is_functional(schema("aten::cudnn_batch_norm", "")));
  EXPECT_TRUE(is_functional(schema("aten::native_batch_norm", "")));
  EXPECT_FALSE(
      d.findSchemaOrThrow("aten::cudnn_batch_norm", "").hasKernelForDispatchKey(c10::DispatchKey::BackendSelect));
}

TEST(HookCpu, BatchNormWithOptionalTensorsPassesThroughTheBoxedHook) {
  const at::Tensor x = at::randn({4, 3, 5}), b = at::randn({3}), rm = at::randn({3}), rv = at::rand({3});
  auto call = [&] { return at::native_batch_norm(x, {}, b, rm, rv, false, 0.1, 1e-5); };  // weight absent
  const auto got = call();
  std::tuple<at::Tensor, at::Tensor, at::Tensor> want;
  {
    BypassScope bypass;
    want = call();
  }
  EXPECT_TRUE(at::equal(std::get<0>(got), std::get<0>(want)));
  EXPECT_TRUE(at::equal(std::get<1>(got), std::get<1>(want)));
  EXPECT_TRUE(at::equal(std::get<2>(got), std::get<2>(want)));
  uint64_t calls = 0;
  for_each_record([&](SigRecord& r) {
    if (r.op.operator_name().name == "aten::native_batch_norm") calls += r.calls.load();
  });
  EXPECT_EQ(calls, 1u);
}

TEST(HookCpu, SecondInstallAndBadOpsAreRefused) {
  HookOptions o;
  o.ops = {"relu"};
  EXPECT_EQ(install_hooks(o, {}).code(), Code::kInvalidArgument);
}

TEST(HookCpu, SuspendedHooksSeeNothingAndResumeCleanly) {
  const at::Tensor x = at::randn({9, 2});
  ASSERT_TRUE(suspend_hooks().ok());
  at::exp(x);
  EXPECT_EQ(find("aten::exp(f32[9,2]{2,1}@cpu)"), nullptr);
  ASSERT_TRUE(resume_hooks().ok());
  ASSERT_TRUE(resume_hooks().ok());  // idempotent
  at::exp(x);
  EXPECT_EQ(calls_of("aten::exp(f32[9,2]{2,1}@cpu)"), 1u);
}

TEST(HookCpu, InPlaceAndViewCallsPassThroughUncounted) {
  at::Tensor x = at::randn({3, 4});
  const uint64_t before = hook_counters().hooked_calls;
  x.relu_();
  x.t();
  x.view({12});
  EXPECT_EQ(hook_counters().hooked_calls, before);
}

}  // namespace
}  // namespace cudal1::dispatcher
