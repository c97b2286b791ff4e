/// @brief Deferred regions (Note [Deferred regions]) on CPU tensors, no GPU needed: a fused chain runs as one
/// kernel, outputs the app dropped are never written, and every way of observing a pending tensor (a divergence
/// at each position, an unhooked op, an in-place op on an intermediate or an input, `.item()`, an exception,
/// bypass, thread exit) sees the value eager would have computed. CPU has no CUPTI guard: raw-pointer reads and
/// cross-thread use are tested on the GPU (tests/gpu/region_gpu_test.cpp).
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <set>

#include <atomic>
#include <cstdio>
#include <mutex>
#include <thread>
#include <tuple>

#include "cudal1/dispatcher/chains.h"
#include "cudal1/dispatcher/cuda_glue.h"
#include "cudal1/dispatcher/hook.h"
#include "cudal1/dispatcher/region_graph.h"
#include "cudal1/dispatcher/regions.h"
#include "region.h"  // private: out_overload

namespace cudal1::dispatcher {
namespace {

class RegionEnv : public ::testing::Environment {
 public:
  void SetUp() override {
    HookOptions o;
    o.mode = Mode::kTune;
    o.ops = {"mul.Tensor", "mul.Scalar", "add.Tensor", "add.Scalar", "sigmoid", "tanh", "native_layer_norm", "mean.dim", "_softmax",
             "mm"};
    for (const auto& op : chain_ops()) o.ops.push_back(op);
    o.hot_calls = 1000000;  // nothing is handed to an optimizer here
    o.sample_every = 1000000;
    o.profile_cpu = true;
    o.chains = true;
    Status s = install_hooks(o, HookCallbacks{});
    ASSERT_TRUE(s.ok()) << s.to_string();
    DeferralOptions d;
    d.cpu = true;
    d.poison = true;  // a pending output read before its region ran would be NaN
    s = enable_deferral(d);
    ASSERT_TRUE(s.ok()) << s.to_string();
  }
};
const auto* const g_env = ::testing::AddGlobalTestEnvironment(new RegionEnv);

/// The chain under test, HF-style SiLU times a weight: sigmoid(x) -> x * s -> m * w.
at::Tensor silu_w(const at::Tensor& x, const at::Tensor& w) {
  at::Tensor s = x.sigmoid();
  at::Tensor m = x * s;
  return m * w;
}

at::Tensor eager(const std::function<at::Tensor()>& f) {
  BypassScope aten_only;
  return f();
}

/// A chain kernel that replays through ATen and remembers which outputs it was asked to write.
class Recording final : public ChainKernel {
 public:
  explicit Recording(const ChainRecord& c) : chain_(c) {}
  /// Regions of several threads may run at once (ChainKernel's contract): what is recorded is locked.
  Status run(const std::vector<at::Tensor>& ext, const std::vector<std::vector<at::Tensor>>& outs) noexcept override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++runs;
      defined.clear();
      for (const auto& node : outs) defined.push_back(!node.empty() && node[0].defined());
    }
    return replay_chain(chain_, chain_.nodes.size(), ext, outs);
  }
  std::string describe() const override { return "recording replay"; }
  int runs = 0;                // read by single-threaded tests only
  std::vector<bool> defined;   // likewise

 private:
  const ChainRecord& chain_;
  std::mutex mu_;
};

/// Records the chain (fresh x each time, one weight), then fuses it with a Recording kernel, once per process.
Recording* fused() {
  static Recording* kernel = [] {
    const at::Tensor w = at::randn({4, 8});
    for (int i = 0; i < 8; ++i) {
      const at::Tensor x = at::randn({4, 8});
      silu_w(x, w);
    }
    close_chain_on_this_thread();
    ChainRecord* rec = nullptr;
    for_each_chain([&](ChainRecord& c) {
      if (c.nodes.size() == 3 && c.nodes[0].rec->sig.text.find("sigmoid") != std::string::npos) rec = &c;
    });
    EXPECT_NE(rec, nullptr);
    if (!rec) return static_cast<Recording*>(nullptr);
    auto k = std::make_unique<Recording>(*rec);
    Recording* raw = k.get();
    const Status s = fuse_chain(*rec, std::move(k));
    EXPECT_TRUE(s.ok()) << s.to_string();
    return raw;
  }();
  return kernel;
}

TEST(Regions, AFusedChainRunsOnceAsOneKernelAndEqualsEager) {
  Recording* k = fused();
  ASSERT_NE(k, nullptr);
  const at::Tensor x = at::randn({4, 8}), w = at::randn({4, 8});
  const RegionCounters before = region_counters();
  const int runs = k->runs;
  at::Tensor y = silu_w(x, w);
  EXPECT_TRUE(region_open_on_this_thread()) << "the complete region waits for the next event";
  EXPECT_EQ(k->runs, runs);
  const at::Tensor ref = eager([&] { return silu_w(x, w); });  // bypass: the region runs first
  EXPECT_FALSE(region_open_on_this_thread());
  EXPECT_EQ(k->runs, runs + 1);
  EXPECT_TRUE(at::equal(y, ref));
  const RegionCounters after = region_counters();
  EXPECT_EQ(after.opened, before.opened + 1);
  EXPECT_EQ(after.completed, before.completed + 1);
  EXPECT_EQ(after.lost, 0u);
  // The intermediates died inside silu_w: never written. Only the result was.
  EXPECT_EQ(k->defined, (std::vector<bool>{false, false, true}));
  EXPECT_EQ(after.skipped, before.skipped + 2);
  EXPECT_EQ(after.written, before.written + 1);
}

TEST(Regions, IntermediatesTheAppKeepsAreWritten) {
  ASSERT_NE(fused(), nullptr);
  const at::Tensor x = at::randn({4, 8}), w = at::randn({4, 8});
  at::Tensor s = x.sigmoid();
  at::Tensor m = x * s;
  at::Tensor y = m * w;
  EXPECT_TRUE(at::equal(s, eager([&] { return x.sigmoid(); })));  // at::equal is an op: the region runs first
  EXPECT_TRUE(at::equal(m, eager([&] { return x * x.sigmoid(); })));
  EXPECT_TRUE(at::equal(y, eager([&] { return silu_w(x, w); })));
  EXPECT_EQ(fused()->defined, (std::vector<bool>{true, true, true}));
}

TEST(Regions, ADivergenceAtEveryPositionFlushesThePrefixThroughAten) {
  ASSERT_NE(fused(), nullptr);
  for (int pos = 1; pos <= 3; ++pos) {
    for (int how = 0; how < 3; ++how) {  // a hooked op, an unhooked op, the same op on another input
      SCOPED_TRACE("position " + std::to_string(pos) + ", divergence " + std::to_string(how));
      const at::Tensor x = at::randn({4, 8}), w = at::randn({4, 8}), other = at::randn({4, 8});
      const RegionCounters before = region_counters();
      std::vector<at::Tensor> got, want;
      got.push_back(x.sigmoid());
      if (pos >= 2) got.push_back(x * got[0]);
      if (pos >= 3) got.push_back(got[1] * w);
      EXPECT_TRUE(region_open_on_this_thread());
      const at::Tensor last = got.back();
      at::Tensor next = how == 0 ? last.tanh() : how == 1 ? last.neg() : other * last;
      EXPECT_FALSE(region_open_on_this_thread());
      {
        BypassScope aten_only;
        want.push_back(x.sigmoid());
        if (pos >= 2) want.push_back(x * want[0]);
        if (pos >= 3) want.push_back(want[1] * w);
        const at::Tensor l = want.back();
        const at::Tensor n = how == 0 ? l.tanh() : how == 1 ? l.neg() : other * l;
        for (size_t i = 0; i < got.size(); ++i) EXPECT_TRUE(at::equal(got[i], want[i])) << "output " << i;
        EXPECT_TRUE(at::equal(next, n));
      }
      const RegionCounters after = region_counters();
      EXPECT_EQ(after.opened, before.opened + 1);
      EXPECT_EQ(after.lost, 0u);
      if (pos < 3) {
        EXPECT_EQ(after.diverged + after.by_op, before.diverged + before.by_op + 1);
      }
    }
  }
}

TEST(Regions, AnInPlaceOpOnAnIntermediateSeesItsValue) {
  ASSERT_NE(fused(), nullptr);
  const at::Tensor x = at::randn({4, 8});
  at::Tensor s = x.sigmoid();
  s.mul_(2);  // in place on a pending tensor: the region runs first
  EXPECT_TRUE(at::equal(s, eager([&] { return x.sigmoid() * 2; })));
}

TEST(Regions, AnInPlaceOpOnAnInputMidChainKeepsEagerOrder) {
  ASSERT_NE(fused(), nullptr);
  at::Tensor x = at::randn({4, 8});
  const at::Tensor x0 = eager([&] { return x.clone(); });
  at::Tensor s = x.sigmoid();
  x.add_(1);  // eager order: s read the old x
  at::Tensor m = x * s;
  BypassScope aten_only;
  EXPECT_TRUE(at::equal(s, x0.sigmoid()));
  EXPECT_TRUE(at::equal(m, (x0 + 1) * x0.sigmoid()));
}

TEST(Regions, ItemAndCopiesSeeTheValue) {
  ASSERT_NE(fused(), nullptr);
  const at::Tensor x = at::randn({4, 8}), w = at::randn({4, 8});
  at::Tensor y = silu_w(x, w);
  const float first = y[1][2].item<float>();
  const at::Tensor ref = eager([&] { return silu_w(x, w); });
  EXPECT_EQ(first, ref[1][2].item<float>());
  at::Tensor z = silu_w(x, w);
  const at::Tensor copy = z.to(at::kDouble);
  EXPECT_TRUE(at::equal(copy, ref.to(at::kDouble)));
}

TEST(Regions, AnExceptionMidChainLeavesEveryValueRight) {
  ASSERT_NE(fused(), nullptr);
  const at::Tensor x = at::randn({4, 8});
  at::Tensor s = x.sigmoid();
  EXPECT_ANY_THROW(at::mm(s, at::randn({3, 3})));  // the region runs, then ATen rejects the shapes
  EXPECT_TRUE(at::equal(s, eager([&] { return x.sigmoid(); })));
  at::Tensor t = x.sigmoid();
  try {
    throw std::runtime_error("the app's own error");
  } catch (const std::exception&) {
  }
  EXPECT_TRUE(at::equal(t, eager([&] { return x.sigmoid(); })));
}

TEST(Regions, AThreadThatExitsRunsItsRegion) {
  ASSERT_NE(fused(), nullptr);
  const at::Tensor x = at::randn({4, 8}), w = at::randn({4, 8});
  at::Tensor y;
  std::thread t([&] { y = silu_w(x, w); });
  t.join();
  EXPECT_TRUE(at::equal(y, eager([&] { return silu_w(x, w); })));
}

TEST(Regions, ThreadsDeferringWhileAnotherFlushesThemAllSeeEagerValues) {
  ASSERT_NE(fused(), nullptr);
  // Four threads run the fused chain in a loop while a fifth flushes every region at random moments (as the
  // CUPTI guard does from any thread): each region ends whole, or early and replayed; no value may differ.
  std::atomic<bool> stop{false};
  std::atomic<int> wrong{0};
  const RegionCounters before = region_counters();
  std::thread flusher([&] {
    while (!stop.load()) {
      flush_all_regions();
      std::this_thread::yield();
    }
  });
  std::vector<std::thread> apps;
  for (int t = 0; t < 4; ++t)
    apps.emplace_back([&, t] {
      for (int i = 0; i < 200; ++i) {
        const at::Tensor x = at::randn({4, 8}), w = at::randn({4, 8});
        at::Tensor s = x.sigmoid();
        at::Tensor y = (x * s) * w;
        const at::Tensor ref = eager([&] { return silu_w(x, w); });
        if (!at::equal(y, ref) || !at::equal(s, eager([&] { return x.sigmoid(); }))) wrong.fetch_add(1);
      }
      (void)t;
    });
  for (auto& a : apps) a.join();
  stop.store(true);
  flusher.join();
  EXPECT_EQ(wrong.load(), 0);
  const RegionCounters after = region_counters();
  EXPECT_GT(after.opened, before.opened);
  EXPECT_EQ(after.lost, 0u);
  std::printf("regions: %llu opened, %llu whole, %llu flushed early from the other thread\n",
              static_cast<unsigned long long>(after.opened - before.opened),
              static_cast<unsigned long long>(after.completed - before.completed),
              static_cast<unsigned long long>(after.by_other - before.by_other));
  // The early flushes may have retired the chain (kDiverged); the tests below need it fused.
  for_each_chain([&](ChainRecord& c) {
    if (c.kernel.load() && c.state.load() == ChainState::kDiverged) {
      c.recent_early.store(0);
      c.state.store(ChainState::kFused);
      c.nodes.front().rec->chain_head.store(&c);  // retiring released it
    }
  });
}

TEST(Regions, CallsAutogradRecordsAreNotDeferred) {
  ASSERT_NE(fused(), nullptr);
  const at::Tensor x = at::randn({4, 8}).requires_grad_(), w = at::randn({4, 8});
  const RegionCounters before = region_counters();
  at::Tensor y = silu_w(x, w);
  EXPECT_FALSE(region_open_on_this_thread());
  EXPECT_EQ(region_counters().opened, before.opened);
  y.sum().backward();
  ASSERT_TRUE(x.grad().defined());
}

TEST(Regions, AnInputThatNeedsGradMidChainEndsTheRegion) {
  ASSERT_NE(fused(), nullptr);
  const at::Tensor x = at::randn({4, 8}), w = at::randn({4, 8}).requires_grad_();
  const RegionCounters before = region_counters();
  at::Tensor y = silu_w(x, w);  // opens (x needs no grad), then the last call records autograd: flushed
  EXPECT_FALSE(region_open_on_this_thread());
  EXPECT_EQ(region_counters().opened, before.opened + 1);
  EXPECT_EQ(region_counters().completed, before.completed);
  y.sum().backward();
  BypassScope aten_only;
  EXPECT_TRUE(at::equal(y, silu_w(x, w)));
  EXPECT_TRUE(at::equal(w.grad(), x * x.sigmoid()));
}

TEST(Regions, FlushAllRegionsRunsThisThreadsRegion) {
  ASSERT_NE(fused(), nullptr);
  const at::Tensor x = at::randn({4, 8}), w = at::randn({4, 8});
  at::Tensor y = silu_w(x, w);
  ASSERT_TRUE(region_open_on_this_thread());
  flush_all_regions();
  EXPECT_FALSE(region_open_on_this_thread());
  EXPECT_TRUE(at::equal(y, eager([&] { return silu_w(x, w); })));
}

TEST(Regions, AViewLeavesTheRegionOpenAndWhatReadsThroughItFlushesFirst) {
  // Note [Views in regions]: at::linear's w.t() between two nodes must not end the region, nor must a view of a
  // pending tensor (it reads no value); what reads through such a view later runs the region first.
  ASSERT_NE(fused(), nullptr);
  const at::Tensor x = at::randn({4, 8}), w = at::randn({4, 8});
  const RegionCounters before = region_counters();
  at::Tensor s = x.sigmoid();
  ASSERT_TRUE(region_open_on_this_thread());
  const at::Tensor wt = w.t();
  const at::Tensor xv = x.view({8, 4});
  const at::Tensor w0 = w.select(0, 1);
  EXPECT_TRUE(region_open_on_this_thread()) << "views of an input and a weight flushed the region";
  at::Tensor m = x * s;
  at::Tensor y = m * w;  // the chain completes: the views changed nothing
  EXPECT_TRUE(region_open_on_this_thread());
  const at::Tensor yt = y.t();  // a view of a pending output: still nothing read
  EXPECT_TRUE(region_open_on_this_thread());
  const at::Tensor yc = yt.clone();  // reads through the view: the region runs first
  EXPECT_FALSE(region_open_on_this_thread());
  const RegionCounters after = region_counters();
  EXPECT_EQ(after.completed, before.completed + 1);
  EXPECT_EQ(after.by_op, before.by_op);  // counts early flushes only
  // A view of a pending intermediate mid-chain, then an op reading it: the prefix runs first.
  at::Tensor s2 = x.sigmoid();
  ASSERT_TRUE(region_open_on_this_thread());
  const at::Tensor s2v = s2.view({32});
  EXPECT_TRUE(region_open_on_this_thread());
  const at::Tensor s2sum = s2v.sum();
  EXPECT_FALSE(region_open_on_this_thread());
  EXPECT_EQ(region_counters().by_op, before.by_op + 1);
  // The chain's next node reading a view of a pending output where it reads the output itself: a divergence,
  // the prefix runs first, and the node reads what eager would.
  at::Tensor s3 = x.sigmoid();
  ASSERT_TRUE(region_open_on_this_thread());
  const uint64_t diverged = region_counters().diverged;
  at::Tensor m3 = x * s3.view({4, 8});
  EXPECT_EQ(region_counters().diverged, diverged + 1);
  BypassScope aten_only;
  EXPECT_TRUE(at::equal(yt, silu_w(x, w).t()));
  EXPECT_TRUE(at::equal(yc, silu_w(x, w).t()));
  EXPECT_TRUE(at::equal(wt, w.t()));
  EXPECT_TRUE(at::equal(w0, w[1]));
  EXPECT_TRUE(at::equal(s2v, x.sigmoid().view({32})));
  EXPECT_TRUE(at::allclose(s2sum, x.sigmoid().sum()));
  EXPECT_TRUE(at::equal(m3, x * x.sigmoid()));
}

/// Eager attention as the chain suite writes it: matmul, scale, optional additive mask, softmax, matmul.
at::Tensor attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& mask) {
  at::Tensor s = at::matmul(q, k.transpose(-2, -1)).mul(0.25);
  if (mask.defined()) s = s.add(mask);
  return at::matmul(at::softmax(s, -1), v);
}

TEST(Regions, AttentionIsOneChainThroughMatmulsViewsAndDefersWhole) {
  // Note [Matmul views]: matmul's reshapes link the bmms to the scale and the softmax, so the whole is one chain
  // of 5 calls; deferred, every call between stays in the region (views of pending tensors read nothing) and the
  // result, its intermediates kept or dropped, is eager's.
  const at::Tensor mask = at::randn({16, 16});
  auto qkv = [] { return std::make_tuple(at::randn({2, 3, 16, 8}), at::randn({2, 3, 16, 8}), at::randn({2, 3, 16, 8})); };
  for (int i = 0; i < 4; ++i) {
    auto [q, k, v] = qkv();
    attention(q, k, v, mask);
  }
  close_chain_on_this_thread();
  ChainRecord* rec = nullptr;
  for_each_chain([&](ChainRecord& c) {
    if (c.nodes.size() == 5 && c.nodes[0].rec->sig.text.find("bmm") != std::string::npos &&
        c.nodes[0].rec->sig.text.find("[6,16,8]") != std::string::npos)
      rec = &c;
  });
  ASSERT_NE(rec, nullptr) << "no 5-call attention chain";
  EXPECT_TRUE(has_view_input(rec->nodes));
  const std::string text = rec->text();
  EXPECT_NE(text.find("%1 = aten::mul.Scalar"), std::string::npos) << text;
  EXPECT_NE(text.find("<- %0.0:view"), std::string::npos) << text;  // the scale reads the scores' 4-D view
  EXPECT_NE(text.find("%4 = aten::bmm"), std::string::npos) << text;
  EXPECT_NE(text.find("<- %3.0:view ext3"), std::string::npos) << text;  // the probabilities as [6, 16, 16], then v
  auto k = std::make_unique<Recording>(*rec);
  Recording* kernel = k.get();
  ASSERT_TRUE(fuse_chain(*rec, std::move(k)).ok());
  const RegionCounters before = region_counters();
  auto [q, kk, v] = qkv();
  const at::Tensor y = attention(q, kk, v, mask);
  EXPECT_TRUE(region_open_on_this_thread());  // complete, runs at the next op
  const at::Tensor y2 = y * 2;
  const RegionCounters after = region_counters();
  EXPECT_EQ(after.completed, before.completed + 1);
  EXPECT_EQ(after.diverged + after.by_op + after.by_other, before.diverged + before.by_op + before.by_other);
  ASSERT_EQ(kernel->runs, 1);
  EXPECT_EQ(kernel->defined, (std::vector<bool>{false, false, false, false, true})) << "only the result is wanted";
  EXPECT_TRUE(at::allclose(y, eager([&] { return attention(q, kk, v, mask); })));
  EXPECT_TRUE(at::allclose(y2, eager([&] { return attention(q, kk, v, mask) * 2; })));
  // The app keeps the scores (a view of the first bmm's pending result): the region writes them too.
  auto [q2, k2, v2] = qkv();
  const at::Tensor k2b = k2.clone();  // k's values in other memory: another site (Note [Region sites])
  at::Tensor scores = at::matmul(q2, k2.transpose(-2, -1)).mul(0.25);
  at::Tensor raw_scores;
  {
    // A second bmm is not the chain's next call: the prefix runs (writing the kept scores), and this bmm opens a
    // region of its own.
    at::Tensor s0 = at::matmul(q2, k2b.transpose(-2, -1));
    raw_scores = s0;
  }
  EXPECT_TRUE(region_open_on_this_thread());
  EXPECT_TRUE(at::allclose(scores, eager([&] { return at::matmul(q2, k2.transpose(-2, -1)).mul(0.25); })));
  EXPECT_TRUE(at::allclose(raw_scores, eager([&] { return at::matmul(q2, k2.transpose(-2, -1)); })));
  auto [q3, k3, v3] = qkv();
  at::Tensor kept;
  at::Tensor y3;
  {
    at::Tensor s = at::matmul(q3, k3.transpose(-2, -1)).mul(0.25);
    s = s.add(mask);
    kept = at::softmax(s, -1);
    y3 = at::matmul(kept, v3);
  }
  const at::Tensor y3c = y3.clone();
  EXPECT_EQ(kernel->defined, (std::vector<bool>{false, false, false, true, true})) << "the kept probabilities";
  EXPECT_TRUE(at::allclose(kept, eager([&] { return at::softmax(at::matmul(q3, k3.transpose(-2, -1)).mul(0.25).add(mask), -1); })));
  EXPECT_TRUE(at::allclose(y3c, eager([&] { return attention(q3, k3, v3, mask); })));
}

TEST(Regions, LaunchBoundCandidatesAreLongChainsOfShortCalls) {
  // Note [Launch-bound chains]: at least kLaunchBoundMinNodes calls, and where sampled at most
  // kLaunchBoundUsPerNode of device time a call on average.
  ASSERT_NE(fused(), nullptr);  // the 3-call chain
  const at::Tensor w = at::randn({2, 8});
  auto eight = [&](const at::Tensor& x) {
    at::Tensor h = x.sigmoid().mul(x).tanh().add(w);
    return h.sigmoid().mul(w).tanh().add(1.0);
  };
  for (int i = 0; i < 3; ++i) {
    eight(at::randn({2, 8}));
    close_chain_on_this_thread();
  }
  ChainRecord* c = nullptr;
  for_each_chain([&](ChainRecord& r) {
    if (r.nodes.size() == 8 && r.nodes[0].rec->sig.text.find("[2,8]") != std::string::npos) c = &r;
  });
  ASSERT_NE(c, nullptr);
  EXPECT_TRUE(launch_bound_candidate(*c)) << "unsampled: the trial decides";
  SigRecord* first = c->nodes.back().rec;  // add.Scalar: once in the chain
  first->samples.store(1);
  first->sampled_ns.store(static_cast<uint64_t>(kLaunchBoundUsPerNode * 8 * 1000 - 1000));
  EXPECT_TRUE(launch_bound_candidate(*c));
  first->sampled_ns.store(static_cast<uint64_t>(kLaunchBoundUsPerNode * 8 * 1000 + 1000));
  EXPECT_FALSE(launch_bound_candidate(*c)) << "long calls: launches are a small part";
  first->samples.store(0);
  first->sampled_ns.store(0);
  ChainRecord* three = nullptr;
  for_each_chain([&](ChainRecord& r) {
    if (r.nodes.size() == 3) three = &r;
  });
  ASSERT_NE(three, nullptr);
  EXPECT_FALSE(launch_bound_candidate(*three));
}

TEST(Regions, DroppedOutputsAreHandedOutAgainAndKeptOnesNever) {
  // Note [Recycled outputs]: the intermediates the app dropped are the next region's outputs; one the app keeps is
  // never handed out again (a later region would overwrite what the app holds).
  ASSERT_NE(fused(), nullptr);
  const at::Tensor w = at::randn({4, 8});
  const RegionCounters before = region_counters();
  for (int i = 0; i < 4; ++i) {
    const at::Tensor x = at::randn({4, 8});
    const at::Tensor y = silu_w(x, w);
    EXPECT_TRUE(at::equal(y, eager([&] { return silu_w(x, w); }))) << "iteration " << i;
  }
  EXPECT_GE(region_counters().recycled, before.recycled + 4) << "the dropped intermediates were allocated anew";
  const at::Tensor x1 = at::randn({4, 8});
  at::Tensor s1 = x1.sigmoid();  // kept by the app
  at::Tensor m1 = x1 * s1;
  at::Tensor y1 = m1 * w;
  const at::Tensor s1_want = eager([&] { return x1.sigmoid(); });
  for (int i = 0; i < 3; ++i) {
    const at::Tensor x = at::randn({4, 8});
    const at::Tensor y = silu_w(x, w);
    EXPECT_TRUE(at::equal(y, eager([&] { return silu_w(x, w); }))) << "iteration " << i;
    EXPECT_TRUE(at::equal(s1, s1_want)) << "a kept intermediate was overwritten by region " << i;
    EXPECT_FALSE(s1.is_same(y));
  }
  BypassScope aten_only;
  EXPECT_TRUE(at::equal(y1, silu_w(x1, w)));
}

TEST(Regions, ViewOpsAreTheOnesThatWriteNothingAndReturnAliases) {
  auto& d = c10::Dispatcher::singleton();
  for (const auto& [name, overload] : std::vector<std::pair<const char*, const char*>>{
           {"aten::t", ""}, {"aten::view", ""}, {"aten::transpose", "int"}, {"aten::expand", ""},
           {"aten::select", "int"}, {"aten::permute", ""}, {"aten::alias", ""}})
    EXPECT_TRUE(is_view_op(d.findSchemaOrThrow(name, overload).schema())) << name << "." << overload;
  for (const auto& [name, overload] : std::vector<std::pair<const char*, const char*>>{
           {"aten::add", "Tensor"}, {"aten::add_", "Tensor"}, {"aten::add", "out"}, {"aten::relu", ""},
           {"aten::split", "Tensor"}, {"aten::resize_", ""}, {"aten::set_", "source_Tensor"}, {"aten::clone", ""}})
    EXPECT_FALSE(is_view_op(d.findSchemaOrThrow(name, overload).schema())) << name << "." << overload;
}

TEST(Regions, EarlyFlushesReplayThroughOutOverloads) {
  // An early flush writes every pending output through the op's out= overload, allocating nothing.
  auto& d = c10::Dispatcher::singleton();
  const std::vector<std::tuple<const char*, const char*, size_t, const char*>> cases = {
      {"aten::add", "Tensor", 1, "out"},       {"aten::mul", "Scalar", 1, "Scalar_out"},
      {"aten::sigmoid", "", 1, "out"},         {"aten::pow", "Tensor_Scalar", 1, "Tensor_Scalar_out"},
      {"aten::gelu", "", 1, "out"},            {"aten::clamp", "", 1, "out"},
      {"aten::native_layer_norm", "", 3, "out"}};
  for (const auto& [name, overload, outs, want] : cases) {
    const c10::OperatorHandle* h = detail::out_overload(d.findSchemaOrThrow(name, overload), outs);
    ASSERT_NE(h, nullptr) << name << "." << overload;
    EXPECT_EQ(h->schema().overload_name(), want) << name;
  }
  EXPECT_EQ(detail::out_overload(d.findSchemaOrThrow("aten::add", "Tensor"), 2), nullptr);  // wrong arity
  // Note [Unsafe out overloads]: cudnn_batch_norm.out exists (4 outputs) and is never used.
  ASSERT_TRUE(d.findSchema({"aten::cudnn_batch_norm", "out"}).has_value());
  EXPECT_EQ(detail::out_overload(d.findSchemaOrThrow("aten::cudnn_batch_norm", ""), 4), nullptr);
  EXPECT_NE(detail::out_overload(d.findSchemaOrThrow("aten::native_batch_norm", ""), 3), nullptr);
}

TEST(Regions, StatusSaysWhatIsDeferred) {
  const std::string s = deferral_status();
  EXPECT_NE(s.find("CPU: on"), std::string::npos) << s;
  if (!has_torch_cuda()) EXPECT_NE(s.find("CUDA: off (this build has no torch-CUDA glue)"), std::string::npos) << s;
  else EXPECT_EQ(s.find("CUDA: off ()"), std::string::npos) << s;  // on, or off with a reason (CUPTI missing)
}

TEST(Regions, AChainThatKeepsDivergingGoesBackToOneByOneCalls) {
  ASSERT_NE(fused(), nullptr);
  // Its own chain: tanh(x) -> x * t, fused, then cut after its first node every time.
  for (int i = 0; i < 8; ++i) {
    const at::Tensor x = at::randn({2, 3});
    at::Tensor t = x.tanh();
    at::Tensor y = x * t;
  }
  close_chain_on_this_thread();
  ChainRecord* rec = nullptr;
  for_each_chain([&](ChainRecord& c) {
    if (c.nodes.size() == 2 && c.nodes[0].rec->sig.text.find("tanh") != std::string::npos) rec = &c;
  });
  ASSERT_NE(rec, nullptr);
  ASSERT_TRUE(fuse_chain(*rec, aten_chain_kernel(*rec)).ok());
  const at::Tensor x = at::randn({2, 3});
  int regions = 0;
  for (; regions < 100 && rec->state.load() == ChainState::kFused; ++regions) {
    at::Tensor t = x.tanh();
    at::Tensor d = t.sigmoid();  // diverges after the first node every time
    EXPECT_TRUE(at::equal(d, eager([&] { return x.tanh().sigmoid(); })));
  }
  EXPECT_EQ(rec->state.load(), ChainState::kDiverged);
  EXPECT_EQ(regions, 32);
  const RegionCounters before = region_counters();
  at::Tensor t = x.tanh();
  EXPECT_FALSE(region_open_on_this_thread());
  EXPECT_EQ(region_counters().opened, before.opened);
  // Its first signature is free again: the chain the app actually runs (tanh -> sigmoid) fuses and runs whole.
  EXPECT_EQ(rec->nodes.front().rec->chain_head.load(), nullptr);
  close_chain_on_this_thread();
  for (int i = 0; i < 8; ++i) at::Tensor u = x.tanh().sigmoid();
  close_chain_on_this_thread();
  ChainRecord* other = nullptr;
  for_each_chain([&](ChainRecord& c) {
    if (c.nodes.size() == 2 && c.nodes[0].rec == rec->nodes[0].rec && &c != rec &&
        c.nodes[1].rec->sig.text.find("sigmoid") != std::string::npos)
      other = &c;
  });
  ASSERT_NE(other, nullptr);
  ASSERT_TRUE(fuse_chain(*other, aten_chain_kernel(*other)).ok());
  const RegionCounters mid = region_counters();
  at::Tensor d = x.tanh().sigmoid();
  EXPECT_TRUE(at::equal(d, eager([&] { return x.tanh().sigmoid(); })));
  EXPECT_EQ(region_counters().completed, mid.completed + 1);
  unfuse_chain(*other, ChainState::kAten);
}

/// Records `f` 8 times, fuses the new chain of `nodes` nodes with the ATen replay, and returns it.
ChainRecord* fuse_new_chain(const std::function<void()>& f, size_t nodes) {
  std::set<ChainRecord*> before;
  for_each_chain([&](ChainRecord& c) { before.insert(&c); });
  for (int i = 0; i < 8; ++i) f();
  close_chain_on_this_thread();
  ChainRecord* rec = nullptr;
  for_each_chain([&](ChainRecord& c) {
    if (!before.count(&c) && c.nodes.size() == nodes) rec = &c;
  });
  if (rec) {
    EXPECT_TRUE(fuse_chain(*rec, aten_chain_kernel(*rec)).ok());
  }
  return rec;
}

TEST(Regions, AnUnfusedChainStopsDeferringEvenMidRegionAndFreesItsFirstSignature) {
  // Note [Launch-bound chains]: a graph given up unfuses its chain from inside the chain's own flush; the region
  // open at that moment ends at its next call, and no later call opens one.
  ChainRecord* rec = fuse_new_chain(
      [] {
        const at::Tensor x = at::randn({5, 3});
        at::Tensor y = x.sigmoid().log().tanh();
      },
      3);
  ASSERT_NE(rec, nullptr);
  ASSERT_EQ(rec->state.load(), ChainState::kFused);
  const at::Tensor x = at::randn({5, 3});
  at::Tensor e = x.sigmoid();
  ASSERT_TRUE(region_open_on_this_thread());
  unfuse_chain(*rec, ChainState::kHot);
  EXPECT_EQ(rec->state.load(), ChainState::kHot);
  EXPECT_EQ(rec->nodes.front().rec->chain_head.load(), nullptr);
  at::Tensor t = e.log();  // the region ends here (its prefix through ATen), and this call runs as usual
  EXPECT_FALSE(region_open_on_this_thread());
  at::Tensor y = t.tanh();
  const uint64_t opened = region_counters().opened;
  at::Tensor y2 = x.sigmoid().log().tanh();
  EXPECT_EQ(region_counters().opened, opened) << "an unfused chain opened a region";
  unfuse_chain(*rec, ChainState::kAten);  // not fused any more: left as it is
  EXPECT_EQ(rec->state.load(), ChainState::kHot);
  BypassScope aten_only;
  EXPECT_TRUE(at::equal(y, x.sigmoid().log().tanh()));
  EXPECT_TRUE(at::equal(y2, y));
}

/// Computes regions incrementally (Note [Incremental regions]) through the ATen replay and counts progress objects
/// handed to it that another kernel's begin() made.
class Staged final : public ChainKernel {
 public:
  explicit Staged(const ChainRecord& c) : chain_(c) {}
  struct Mine final : Progress {
    const Staged* owner = nullptr;
  };
  std::unique_ptr<Progress> begin() noexcept override {
    auto p = std::make_unique<Mine>();
    p->owner = this;
    return p;
  }
  Status advance(Progress& p, size_t, const std::vector<at::Tensor>&,
                 const std::vector<std::vector<at::Tensor>>&) noexcept override {
    note(p);
    return Status();
  }
  Status finish(Progress& p, const std::vector<at::Tensor>& ext,
                const std::vector<std::vector<at::Tensor>>& outs) noexcept override {
    note(p);
    ++finishes;
    return replay_chain(chain_, chain_.nodes.size(), ext, outs);
  }
  Status run(const std::vector<at::Tensor>& ext, const std::vector<std::vector<at::Tensor>>& outs) noexcept override {
    ++runs;
    return replay_chain(chain_, chain_.nodes.size(), ext, outs);
  }
  std::string describe() const override { return "staged replay"; }
  int runs = 0, finishes = 0, foreign = 0;  // single-threaded test

 private:
  void note(Progress& p) {
    const auto* m = dynamic_cast<const Mine*>(&p);
    if (!m || m->owner != this) ++foreign;
  }
  const ChainRecord& chain_;
};

TEST(Regions, AChainFusedAgainWhileItsRegionIsOpenNeverGetsTheOldKernelsProgress) {
  ChainRecord* rec = fuse_new_chain(
      [] {
        const at::Tensor x = at::randn({4, 3});
        at::Tensor y = x.sigmoid().log().tanh();
      },
      3);
  ASSERT_NE(rec, nullptr);
  unfuse_chain(*rec, ChainState::kHot);
  auto first = std::make_unique<Staged>(*rec), second = std::make_unique<Staged>(*rec);
  Staged* k1 = first.get();
  Staged* k2 = second.get();
  ASSERT_TRUE(fuse_chain(*rec, std::move(first)).ok());
  const at::Tensor x = at::randn({4, 3});
  at::Tensor e = x.sigmoid();  // the region opens: its progress is k1's
  ASSERT_TRUE(region_open_on_this_thread());
  // The tuner's thread replaces the kernel while the region is open (unfused, then fused again).
  unfuse_chain(*rec, ChainState::kHot);
  ASSERT_TRUE(fuse_chain(*rec, std::move(second)).ok());
  at::Tensor n = e.log();
  at::Tensor y = n.tanh();
  const at::Tensor ref = eager([&] { return x.sigmoid().log().tanh(); });  // the region runs first
  EXPECT_TRUE(at::equal(y, ref));
  EXPECT_EQ(k1->foreign, 0);
  EXPECT_EQ(k2->foreign, 0) << "the new kernel was handed the old kernel's progress";
  EXPECT_EQ(k2->runs + k2->finishes, 1);  // the region ran whole through the kernel installed at its end
  // The next region is k2's from its start.
  at::Tensor y2 = x.sigmoid().log().tanh();
  EXPECT_TRUE(at::equal(y2, eager([&] { return x.sigmoid().log().tanh(); })));
  EXPECT_EQ(k2->foreign, 0);
  EXPECT_EQ(k2->finishes, 1);
  unfuse_chain(*rec, ChainState::kAten);
}

// Note [Region sites]: one fused chain, x * w -> sigmoid, whose first call is also made at two other places (other
// weights) that go on into tanh instead. Those sites stop opening regions after their first divergences, so the
// chain stays fused where it completes, instead of going to kDiverged; every value equals eager's.
TEST(Regions, ASiteWhereTheChainNeverFollowsStopsOpeningRegions) {
  const at::Tensor w = at::randn({3, 5}), other1 = at::randn({3, 5}), other2 = at::randn({3, 5});
  ChainRecord* rec = fuse_new_chain([&] { (at::randn({3, 5}) * w).sigmoid(); }, 2);
  ASSERT_NE(rec, nullptr);
  const RegionCounters before = region_counters();
  const uint64_t completed = rec->completed.load();
  for (int i = 0; i < 64; ++i) {
    const at::Tensor x = at::randn({3, 5});
    at::Tensor a = (x * other1).tanh();  // the first node's signature, at another site, then no chain
    at::Tensor b = (x * w).sigmoid();   // the chain
    at::Tensor c = (x * other2).tanh();
    EXPECT_TRUE(at::equal(a, eager([&] { return (x * other1).tanh(); })));
    EXPECT_TRUE(at::equal(b, eager([&] { return (x * w).sigmoid(); })));
    EXPECT_TRUE(at::equal(c, eager([&] { return (x * other2).tanh(); })));
  }
  EXPECT_EQ(rec->state.load(), ChainState::kFused);
  EXPECT_EQ(rec->completed.load() - completed, 64u);
  const RegionCounters after = region_counters();
  // Each other site opens once (then scores -1) and again at every 16th declined call: 2 x (1 + 63 / 16) = 8.
  EXPECT_EQ(after.diverged - before.diverged, 8u);
  EXPECT_EQ(after.site_declined - before.site_declined, 2u * 64 - 8);
}

// Note [Region sites]: a site is the weights' storage, so a weight read through a view made afresh at every call
// (as `at::linear` reads `w.t()`) is learnt as the weight itself is.
TEST(Regions, ASiteReadThroughAFreshViewOfItsWeightIsLearntToo) {
  const at::Tensor wt = at::randn({5, 3}), other1 = at::randn({5, 3}), other2 = at::randn({5, 3});
  ChainRecord* rec = fuse_new_chain([&] { (at::randn({3, 5}) * wt.t()).sigmoid(); }, 2);
  ASSERT_NE(rec, nullptr);
  const RegionCounters before = region_counters();
  const uint64_t completed = rec->completed.load();
  for (int i = 0; i < 64; ++i) {
    const at::Tensor x = at::randn({3, 5});
    at::Tensor a = (x * other1.t()).tanh();  // other sites: a fresh view of another weight each time
    at::Tensor b = (x * wt.t()).sigmoid();   // the chain
    at::Tensor c = (x * other2.t()).tanh();
    EXPECT_TRUE(at::equal(a, eager([&] { return (x * other1.t()).tanh(); })));
    EXPECT_TRUE(at::equal(b, eager([&] { return (x * wt.t()).sigmoid(); })));
    EXPECT_TRUE(at::equal(c, eager([&] { return (x * other2.t()).tanh(); })));
  }
  EXPECT_EQ(rec->state.load(), ChainState::kFused);
  EXPECT_EQ(rec->completed.load() - completed, 64u);
  const RegionCounters after = region_counters();
  EXPECT_EQ(after.diverged - before.diverged, 8u);  // as for the weights themselves (the test above)
  EXPECT_EQ(after.site_declined - before.site_declined, 2u * 64 - 8);
}

// Note [Region sites]: a first call whose later argument is a fresh activation a region just made (as
// `addmm(b, x, w.t())` reads the output of a fused activation) is learnt by its weight: here `w1 * h` goes on into
// the chain and `w2 * h` never does, both reading the chain's own fresh output `h`. Were `h` the site, the two
// places would share or renew it at every call, and `w2 * h` would diverge at every call.
TEST(Regions, ASiteWhoseLaterArgumentARegionJustMadeIsLearntByItsWeight) {
  const at::Tensor w = at::randn({4, 6}), w1 = at::randn({4, 6}), w2 = at::randn({4, 6});
  ChainRecord* rec = fuse_new_chain([&] { (at::randn({4, 6}) * w).sigmoid(); }, 2);
  ASSERT_NE(rec, nullptr);  // a shape of its own: the tests above fused [3, 5]
  const RegionCounters before = region_counters();
  const uint64_t completed = rec->completed.load();
  for (int i = 0; i < 64; ++i) {
    const at::Tensor x = at::randn({4, 6});
    at::Tensor h = (x * w).sigmoid();  // the chain; h is a region's output
    at::Tensor a = (w1 * h).sigmoid();  // the chain again, at the site of w1
    at::Tensor c = (w2 * h).tanh();     // its first node at the site of w2, then no chain
    const at::Tensor h_ref = eager([&] { return (x * w).sigmoid(); });
    EXPECT_TRUE(at::equal(h, h_ref));
    EXPECT_TRUE(at::equal(a, eager([&] { return (w1 * h_ref).sigmoid(); })));
    EXPECT_TRUE(at::equal(c, eager([&] { return (w2 * h_ref).tanh(); })));
  }
  EXPECT_EQ(rec->state.load(), ChainState::kFused);
  EXPECT_EQ(rec->completed.load() - completed, 128u);
  const RegionCounters after = region_counters();
  // w2's site opens once (then scores -1) and again at every 16th declined call: 1 + 63 / 16 = 4.
  EXPECT_EQ(after.diverged - before.diverged, 4u);
  EXPECT_EQ(after.site_declined - before.site_declined, 64u - 4);
}

// Note [Thread-local lifetime]: a thread_local constructed before cudal1's own ones is destroyed after them, and
// its destructor still makes hooked calls (as an app's static destructors do after the main thread's
// thread_locals died at exit, where cudal1's shutdown also closes the thread's chain). Those calls run unrecorded
// and undeferred, with eager's values, and nothing touches the destroyed state.
struct LateUser {
  at::Tensor x, got, want;
  bool region_open = true;
  ~LateUser() {
    x = at::randn({4, 8});
    got = silu_w(x, x);
    close_chain_on_this_thread();
    region_open = region_open_on_this_thread();
    want = eager([&] { return silu_w(x, x); });
    flush_all_regions();
    results().push_back(at::equal(got, want) && !region_open);
  }
  static std::vector<bool>& results() {
    static std::vector<bool> r;
    return r;
  }
};

TEST(Regions, HookedCallsFromALaterThreadLocalDestructorRunEagerly) {
  ASSERT_NE(fused(), nullptr);
  LateUser::results().clear();
  std::thread t([] {
    thread_local LateUser late;  // constructed first: destroyed after the builder and the region
    late.x = at::randn({4, 8});
    const at::Tensor w = at::randn({4, 8});
    for (int i = 0; i < 4; ++i) silu_w(at::randn({4, 8}), w);  // this thread's builder and region exist
  });
  t.join();
  ASSERT_EQ(LateUser::results().size(), 1u);
  EXPECT_TRUE(LateUser::results()[0]);
}

TEST(Regions, ChainsWithSeveralOutputsAndRowOpsAreDeferredWhole) {
  // Residual add -> layer norm (three outputs: the app keeps the first), RMSNorm's mean, a softmax.
  const at::Tensor w = at::randn({16}), b = at::randn({16});
  auto residual_ln = [&](const at::Tensor& a, const at::Tensor& r) {
    return at::layer_norm(a.add(r), {16}, w, b, 1e-5);
  };
  auto rms_softmax = [&](const at::Tensor& x) {
    return at::_softmax(x.mul(x.mean({-1}, true).add(1.0)), -1, false);
  };
  ASSERT_NE(fuse_new_chain([&] { residual_ln(at::randn({4, 16}), at::randn({4, 16})); }, 2), nullptr);
  ASSERT_NE(fuse_new_chain([&] { rms_softmax(at::randn({3, 16})); }, 4), nullptr);
  const at::Tensor a = at::randn({4, 16}), r = at::randn({4, 16}), x = at::randn({3, 16});
  RegionCounters before = region_counters();
  at::Tensor y = residual_ln(a, r);
  EXPECT_TRUE(region_open_on_this_thread());
  EXPECT_TRUE(at::allclose(y, eager([&] { return residual_ln(a, r); })));
  RegionCounters after = region_counters();
  EXPECT_EQ(after.completed, before.completed + 1);
  EXPECT_EQ(after.written, before.written + 1);  // the layer norm's result; its mean and rstd were dropped
  before = after;
  at::Tensor z = rms_softmax(x);
  EXPECT_TRUE(at::allclose(z, eager([&] { return rms_softmax(x); })));
  EXPECT_EQ(region_counters().completed, before.completed + 1);
}

// Note [In-place nodes]: torchvision writes `relu(inplace=True)` and `out += identity`. A chain of in-place ops
// on a chain value is recorded with each read resolved to the newest writer, deferred with the argument itself
// as the pending output, and equals eager whole, kept, or flushed after any of its calls.
at::Tensor scale_relu_add_relu(const at::Tensor& x, const at::Tensor& w, const at::Tensor& id) {
  at::Tensor t = x * w;
  t.relu_();
  t.add_(id);
  t.relu_();
  return t;
}

ChainRecord* inplace_chain() {
  static ChainRecord* rec = [] {
    const at::Tensor w = at::randn({4, 8});
    for (int i = 0; i < 8; ++i) scale_relu_add_relu(at::randn({4, 8}), w, at::randn({4, 8}));
    close_chain_on_this_thread();
    ChainRecord* found = nullptr;
    for_each_chain([&](ChainRecord& c) {
      if (c.nodes.size() == 4 && c.nodes[1].inplace && c.nodes[3].inplace) found = &c;
    });
    return found;
  }();
  return rec;
}

TEST(Regions, InPlaceChainsReadTheNewestWriterAndRunWhole) {
  ChainRecord* c = inplace_chain();
  ASSERT_NE(c, nullptr);
  const std::string text = c->text();
  EXPECT_NE(text.find("%1 = aten::relu_("), std::string::npos) << text;
  EXPECT_NE(text.find("<- %0.0"), std::string::npos) << text;
  EXPECT_NE(text.find("%2 = aten::add_.Tensor("), std::string::npos) << text;
  EXPECT_NE(text.find("%3 = aten::relu_(f32[4,8]{8,1}@cpu) <- %2.0"), std::string::npos) << text;
  EXPECT_NE(text.find("<- %1.0 ext"), std::string::npos) << "add_ reads relu_'s value, not mul's\n" << text;
  auto k = std::make_unique<Recording>(*c);
  Recording* raw = k.get();
  ASSERT_TRUE(fuse_chain(*c, std::move(k)).ok());
  const at::Tensor w = at::randn({4, 8});
  for (int i = 0; i < 3; ++i) {
    const at::Tensor x = at::randn({4, 8}), id = at::randn({4, 8});
    const RegionCounters before = region_counters();
    const int runs = raw->runs;
    const at::Tensor got = scale_relu_add_relu(x, w, id);
    EXPECT_TRUE(region_open_on_this_thread());
    const at::Tensor want = eager([&] { return scale_relu_add_relu(x, w, id); });  // runs the region first
    EXPECT_EQ(raw->runs, runs + 1);
    EXPECT_EQ(region_counters().completed, before.completed + 1);
    EXPECT_TRUE(at::equal(got, want));
  }
  // Flushed after each call (a read of the tensor written in place): the prefix, in eager order.
  for (int stop = 1; stop <= 3; ++stop) {
    const at::Tensor x = at::randn({4, 8}), id = at::randn({4, 8});
    at::Tensor t = x * w;
    if (stop >= 2) t.relu_();
    if (stop >= 3) t.add_(id);
    const at::Tensor seen = t.clone();  // an unhooked op: flushes the prefix
    EXPECT_FALSE(region_open_on_this_thread());
    const at::Tensor want = eager([&] {
      at::Tensor e = x * w;
      if (stop >= 2) e.relu_();
      if (stop >= 3) e.add_(id);
      return e;
    });
    EXPECT_TRUE(at::equal(seen, want)) << "flushed after call " << stop;
  }
}

// An in-place node's output is an earlier node's tensor: the region holds it once per node. When the app dropped
// it, it is dropped for the kernel too (not written); when the app keeps it, it is written.
TEST(Regions, AnInPlaceValueTheAppDroppedIsNotWrittenAndOneItKeepsIs) {
  const at::Tensor w = at::randn({3, 10});
  auto f = [&](const at::Tensor& x, at::Tensor* keep) {
    at::Tensor t = x.add(1.0);
    t.relu_();
    at::Tensor y = t.mul(w);
    if (keep) *keep = t;
    return y;
  };
  for (int i = 0; i < 4; ++i) f(at::randn({3, 10}), nullptr);
  close_chain_on_this_thread();
  ChainRecord* rec = nullptr;
  for_each_chain([&](ChainRecord& c) {
    const bool head = c.nodes[0].rec->sig.text.rfind("aten::add.Scalar(f32[3,10]", 0) == 0;
    if (c.nodes.size() == 3 && c.nodes[1].inplace && head) rec = &c;
  });
  ASSERT_NE(rec, nullptr);
  auto k = std::make_unique<Recording>(*rec);
  Recording* kernel = k.get();
  ASSERT_TRUE(fuse_chain(*rec, std::move(k)).ok());
  const at::Tensor x = at::randn({3, 10});
  at::Tensor y = f(x, nullptr);
  EXPECT_TRUE(at::equal(y, eager([&] { return f(x, nullptr); })));
  EXPECT_EQ(kernel->defined, (std::vector<bool>{false, false, true}));
  at::Tensor kept;
  y = f(x, &kept);
  EXPECT_TRUE(at::equal(kept, eager([&] { return x.add(1.0).relu(); })));
  EXPECT_TRUE(at::equal(y, eager([&] { return f(x, nullptr); })));
  EXPECT_EQ(kernel->defined, (std::vector<bool>{true, true, true}));
  EXPECT_EQ(region_counters().lost, 0u);
}

// Note [Chain segments]: the ops after a GEMM fuse as a chain of their own. Its region opens at the first of them
// (the GEMM runs as usual), reads the GEMM's result as an external, and equals eager.
TEST(Regions, ASuffixSegmentOpensAtItsOwnFirstCallAndEqualsEager) {
  const at::Tensor w = at::randn({16, 12}), w2 = at::randn({6, 12});
  auto f = [&](const at::Tensor& x) { return x.mm(w).sigmoid().mul(w2); };
  for (int i = 0; i < 4; ++i) f(at::randn({6, 16}));
  close_chain_on_this_thread();
  ChainRecord* whole = nullptr;
  for_each_chain([&](ChainRecord& c) {
    if (c.nodes.size() == 3 && c.nodes[0].rec->sig.text.rfind("aten::mm(", 0) == 0) whole = &c;
  });
  ASSERT_NE(whole, nullptr);
  ChainRecord* rest = suffix_chain(*whole, 1);
  ASSERT_NE(rest, nullptr);
  ASSERT_EQ(rest->nodes.size(), 2u);
  EXPECT_EQ(rest->externals, 2) << "mm's result and w2";
  auto k = std::make_unique<Recording>(*rest);
  Recording* kernel = k.get();
  ASSERT_TRUE(fuse_chain(*rest, std::move(k)).ok());
  const at::Tensor x = at::randn({6, 16});
  const RegionCounters before = region_counters();
  const at::Tensor y = f(x);
  EXPECT_TRUE(region_open_on_this_thread());
  const at::Tensor ref = eager([&] { return f(x); });
  EXPECT_TRUE(at::equal(y, ref));
  EXPECT_EQ(kernel->runs, 1);
  EXPECT_EQ(kernel->defined, (std::vector<bool>{false, true}));
  const RegionCounters after = region_counters();
  EXPECT_EQ(after.completed, before.completed + 1);
  EXPECT_EQ(after.opened, before.opened + 1);
  EXPECT_EQ(after.lost, 0u);
}

}  // namespace
}  // namespace cudal1::dispatcher
