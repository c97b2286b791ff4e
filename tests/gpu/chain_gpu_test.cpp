/// @brief Chain kernels on the GPU (Note [Pointwise chains], Note [Chain tuning]): the suite's pointwise chains
/// are recorded through the hook, tuned (every variant verified against the ATen chain) and fused, then served
/// through deferred regions with outputs equal to eager; pooled chains (Note [Pooled chains]) over every window
/// kind; and a fuzz of 1000 random chains (pointwise and row ops, max-pool tails, dtypes, broadcast and promoting
/// inputs, sizes 0/1/odd/prime, transposed and sliced inputs, intermediates kept at random): every chain that
/// verifies is served through a region equal to eager (kept intermediates too), and at most 2% are declined by
/// verification (each printed). Skips without a GPU or without CUPTI.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <execinfo.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <functional>
#include <limits>
#include <map>
#include <random>
#include <set>

#include "bench/chain_suite.h"
#include "cudal1/dispatcher/chains.h"
#include "cudal1/dispatcher/hook.h"
#include "cudal1/dispatcher/regions.h"
#include "cudal1/optimizer/chain_tuner.h"
#include "gpu/gpu_env.h"
#include "optimizer/chains/chain_causal.h"

namespace cudal1::optimizer {
namespace {

/// An abort (a heap check, a failed assertion in a library) prints the stack before the process dies: the
/// suite test once died of `malloc(): unsorted double linked list corrupted` with nothing else to go by.
void print_stack_and_die(int sig) {
  void* frames[64];
  const int n = backtrace(frames, 64);
  const char msg[] = "\n*** fatal signal: the stack follows\n";
  (void)!write(2, msg, sizeof(msg) - 1);
  backtrace_symbols_fd(frames, n, 2);
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}
const bool g_stack_on_abort = [] {
  std::signal(SIGABRT, print_stack_and_die);
  std::signal(SIGSEGV, print_stack_and_die);
  return true;
}();

class ChainGpuEnv : public ::testing::Environment {
 public:
  void SetUp() override {
    dispatcher::HookOptions o;
    o.mode = Mode::kTune;
    o.ops = {"add.Tensor", "sub.Tensor", "mul.Tensor", "div.Tensor", "add.Scalar", "sub.Scalar", "mul.Scalar",
             "div.Scalar", "maximum", "minimum", "neg", "exp", "tanh", "sigmoid", "silu", "relu", "abs", "gelu",
             "mean.dim", "sum.dim_IntList", "amax", "amin", "native_layer_norm", "_softmax", "native_batch_norm",
             "cudnn_batch_norm", "max_pool2d_with_indices", "mm", "addmm"};
    for (const auto& op : dispatcher::chain_ops()) o.ops.push_back(op);
    o.hot_calls = 1000000;
    o.sample_every = 1000000;
    o.chains = true;
    Status s = dispatcher::install_hooks(o, dispatcher::HookCallbacks{});
    ASSERT_TRUE(s.ok()) << s.to_string();
    dispatcher::DeferralOptions d;
    d.poison = true;  // a pending output the region failed to write shows as NaN
    s = dispatcher::enable_deferral(d);
    ASSERT_TRUE(s.ok()) << s.to_string();
  }
};
const auto* const g_env = ::testing::AddGlobalTestEnvironment(new ChainGpuEnv);

/// got within `steps` roundings of want (NaN/Inf matching; the absolute part scaled by want's largest finite
/// value). With `exact` (the chain in float64), an element may also differ from want by more when it is no
/// further from the exact value than twice want's own error: both are float evaluations of a chain that a
/// reduction's order makes ill-conditioned there (sqrt of a layer norm's output near 0).
/// `got` equals `want` (eager) within the chain's tolerance, or is no further from `exact` (the chain in float64)
/// than twice eager's own distance plus `spread`: how far the float64 chain moves when its inputs, or its row
/// statistics, move by one unit roundoff of the dtype they are rounded to (see chain_spread). An element where the
/// chain itself is that sensitive (a square root just after a cancellation) has no better answer in the chain's
/// dtype than either.
::testing::AssertionResult close(const at::Tensor& got, const at::Tensor& want, double steps,
                                 const at::Tensor& exact = at::Tensor(), const at::Tensor& spread = at::Tensor()) {
  const double rtol = (want.scalar_type() == at::kFloat ? 1e-5 : want.scalar_type() == at::kHalf ? 2e-3 : 1.6e-2) * steps;
  const double eps = want.scalar_type() == at::kFloat ? 1.2e-7 : want.scalar_type() == at::kHalf ? 9.8e-4 : 7.9e-3;
  const at::Tensor w = want.to(at::kDouble), g = got.to(at::kDouble);
  const at::Tensor finite = at::isfinite(w);
  const double maxabs = finite.any().item<bool>() ? w.masked_select(finite).abs().max().item<double>() : 0.0;
  const double atol = 1e-6 + steps * eps * maxabs;
  at::Tensor ok = at::isclose(g, w, rtol, atol, /*equal_nan=*/true);
  at::Tensor bound;
  if (exact.defined()) {
    const at::Tensor x = exact.to(at::kDouble);
    bound = 2.0 * (w - x).abs() + atol;
    if (spread.defined()) bound = bound + 4.0 * spread;
    ok = ok | ((g - x).abs() <= bound);
  }
  if (ok.all().item<bool>()) return ::testing::AssertionSuccess();
  // The failing elements, worst first (by distance from eager): enough to tell a wrong value from a tolerance.
  const at::Tensor bad = (~ok).flatten().nonzero().flatten();
  const at::Tensor dist = (g - w).abs().flatten().index_select(0, bad).nan_to_num(1e300);
  const at::Tensor order = dist.argsort(/*stable=*/false, /*dim=*/0, /*descending=*/true);
  auto r = ::testing::AssertionFailure();
  r << bad.numel() << " of " << w.numel() << " elements differ (rtol " << rtol << ", atol " << atol
    << ", max |eager| " << maxabs << ")";
  for (int64_t k = 0; k < std::min<int64_t>(order.numel(), 4); ++k) {
    const int64_t e = bad[order[k].item<int64_t>()].item<int64_t>();
    r << "\n  element " << e << ": got " << g.flatten()[e].item<double>() << ", eager " << w.flatten()[e].item<double>();
    if (exact.defined())
      r << ", float64 " << exact.to(at::kDouble).flatten()[e].item<double>() << ", bound " << bound.flatten()[e].item<double>()
        << (spread.defined() ? ", spread " + std::to_string(spread.flatten()[e].item<double>()) : std::string());
  }
  return r;
}

/// Unit roundoff of a dtype: the largest relative move of rounding a real to it.
double unit_roundoff(at::ScalarType t) {
  return t == at::kFloat ? 6e-8 : t == at::kHalf ? 4.9e-4 : t == at::kBFloat16 ? 3.9e-3 : 1.1e-16;
}

/// `t` in float64 moved by up to one unit roundoff u of its own dtype: mode 0 by a random relative amount per
/// element, modes 1 and 2 all by (1 + u) or (1 - u) (a coherent move, as a reduction's rounded result shifts a
/// whole row: random moves would average out in the sum).
at::Tensor nudged(const at::Tensor& t, int mode) {
  const at::Tensor d = t.to(at::kDouble);
  const double u = unit_roundoff(t.scalar_type());
  if (mode == 1 || mode == 2) return d * (mode == 1 ? 1.0 + u : 1.0 - u);
  return d * (1.0 + u * (2.0 * at::rand_like(d) - 1.0));
}

/// The float64 evaluations chain_spread asks for: 0-2 the inputs nudged (nudged()'s modes), 3-6 the exact inputs
/// with the row statistics nudged (RandomChain::stats_nudge).
constexpr int kSpreadModes = 7;

/// The element-wise largest move of `run`'s float64 results (the chain's value and what it keeps) over the
/// kSpreadModes nudges against `exact`; a NaN on one side only counts as any move at all.
std::vector<at::Tensor> chain_spread(const std::function<std::vector<at::Tensor>(int)>& run,
                                     const std::vector<at::Tensor>& exact) {
  std::vector<at::Tensor> spread(exact.size());
  for (int k = 0; k < kSpreadModes; ++k) {
    const std::vector<at::Tensor> moved = run(k);
    for (size_t j = 0; j < exact.size(); ++j) {
      const at::Tensor d = at::nan_to_num((moved.at(j) - exact[j]).abs(), std::numeric_limits<double>::infinity());
      spread[j] = spread[j].defined() ? at::maximum(spread[j], d) : d;
    }
  }
  return spread;
}

TEST(ChainsGpu, TheSuitesPointwiseChainsFuseAndServeEqualToEager) {
  CUDAL1_REQUIRE_DEFERRAL();
  int fused = 0;
  for (const bench::ChainRow& row : bench::chain_suite(/*small=*/true)) {
    SCOPED_TRACE(row.name);
    std::vector<at::Tensor> in = bench::chain_inputs(row, 0);
    dispatcher::ChainRecord* c = bench::record_chain([&] { row.run(bench::next_call_inputs(row, in, 0)); });
    ASSERT_NE(c, nullptr);
    ChainTuneOptions o;
    o.reps = 5;
    o.min_speedup = 0;  // correctness here; speed is bench_chains' business
    ChainTuneReport rep;
    auto k = tune_chain(*c, o, &rep);
    if (k.status().code() == Code::kUnsupported)
      if (const size_t m = fusable_prefix(*c)) {  // a chain whose tail does not fuse: its prefix is fused
        std::printf("%-24s %zu ops: %s; its first %zu fuse\n", row.name.c_str(), c->nodes.size(), rep.note.c_str(), m);
        c = dispatcher::prefix_chain(*c, m);
        ASSERT_NE(c, nullptr);
        k = tune_chain(*c, o, &rep);
      }
    std::printf("%-24s %zu ops: %s (%d of %d variants verified) %s\n", row.name.c_str(), c->nodes.size(),
                k.ok() ? "fused" : "not fused", rep.verified, rep.variants, rep.note.c_str());
    std::fflush(stdout);
    if (k.status().code() == Code::kUnsupported) continue;  // neither pointwise nor a row chain
    // Note [Library chains]: a cuBLASLt activation epilogue whose NaN or Inf handling differs from ATen's fails
    // verification and stays on ATen; a plain addmm must verify.
    if (k.status().code() == Code::kVerifyFailed && rep.plan.find("_addmm_activation") != std::string::npos) continue;
    // A library call or a program that verified but is not faster at the small suite's sizes (fused attention
    // with a mask on [1, 2, 64, 32], ResNet's stem on 4 x 3 x 56 x 56) is served here all the same: this test is
    // about correctness, bench_chains about speed.
    const bool slower_library = k.status().code() == Code::kNotFound && rep.verified > 0 &&
                                (rep.launch_json.find("library") != std::string::npos ||
                                 rep.launch_json.find("program") != std::string::npos);
    ASSERT_TRUE(k.ok() || slower_library) << k.status().to_string() << "\n" << rep.plan;
    EXPECT_EQ(rep.verified, rep.variants);
    // Served by the winner as the cache would give it back (launch description and cubin), not the tuned object.
    auto cached = load_chain_kernel(*c, rep.launch_json, rep.cubin);
    ASSERT_TRUE(cached.ok()) << cached.status().to_string();
    ASSERT_TRUE(dispatcher::fuse_chain(*c, std::move(cached).value()).ok());
    ++fused;
    const auto before = dispatcher::region_counters();
    const at::Tensor got = row.run(in);
    at::Tensor want;
    {
      dispatcher::BypassScope aten_only;  // runs the region first
      want = row.run(in);
    }
    EXPECT_EQ(dispatcher::region_counters().completed, before.completed + 1);
    if (rep.launch_json.find("program") != std::string::npos && row.name.find("conv") != std::string::npos) {
      // A folded batch norm under TF32 convolutions: Note [Program chains]' tolerance, 8 u sqrt(1), u = 2^-11.
      const at::Tensor g = got.to(at::kDouble), w = want.to(at::kDouble);
      EXPECT_TRUE(at::equal(at::isnan(g), at::isnan(w)));
      const double scale = w.nan_to_num(0).abs().max().item<double>();
      EXPECT_LE((g - w).nan_to_num(0).abs().max().item<double>(), 8 * std::ldexp(1.0, -11) * scale);
    } else {
      EXPECT_TRUE(close(got, want, static_cast<double>(c->nodes.size())));
    }
    // The next row's chain may begin with this one's first signature (attention, then causal attention).
    dispatcher::unfuse_chain(*c, dispatcher::ChainState::kAten);
  }
  EXPECT_GE(fused, 14);  // every row (BN + ReLU + max-pool as a pooled chain; both attention rows as fused
                         // attention; the stem as a program)
  EXPECT_EQ(dispatcher::region_counters().lost, 0u);
}

/// Note [Causal attention]: eager attention whose mask is the causal one, served as the cache gives it back. The
/// second call with the same mask tensor takes the causal path; NaN and infinities in q, k and v come out where
/// eager's chain puts them (masked scores and zero probabilities included); a mask changed in place, a fresh mask
/// and a mask that is not causal take the general path until checked again. Every result equals eager.
TEST(ChainsGpu, CausalMasksTakeTheCausalPathAndKeepEagersSpecials) {
  CUDAL1_REQUIRE_DEFERRAL();
  const int64_t B = 2, H = 3, L = 67, D = 32;
  const double inf = std::numeric_limits<double>::infinity();
  for (const at::ScalarType dt : {at::kHalf, at::kBFloat16, at::kFloat}) {
    SCOPED_TRACE(c10::toString(dt));
    const auto opts = at::TensorOptions().dtype(dt).device(at::kCUDA);
    auto attention = [&](const std::vector<at::Tensor>& in, const at::Tensor& m) {
      const at::Tensor s = at::matmul(in[0], in[1].transpose(-2, -1)).mul(1.0 / std::sqrt(static_cast<double>(D)));
      return at::matmul(at::softmax(s.add(m), -1), in[2]);
    };
    auto draw = [&] {
      dispatcher::BypassScope not_recorded;
      return std::vector<at::Tensor>{at::randn({B, H, L, D}, opts), at::randn({B, H, L, D}, opts),
                                     at::randn({B, H, L, D}, opts)};
    };
    auto causal_mask = [&] {
      dispatcher::BypassScope not_recorded;
      return at::full({L, L}, -inf, opts).triu(1);
    };
    at::Tensor mask = causal_mask();
    dispatcher::ChainRecord* c = bench::record_chain([&] { attention(draw(), mask); });
    ASSERT_NE(c, nullptr);
    ChainTuneOptions o;
    o.reps = 3;
    o.min_speedup = 0;
    ChainTuneReport rep;
    // Its causal trials run both paths with specials in q, k and v; fp32's general path failed the one with specials
    // on the H100 (2026-12-07) before the general path rewrote those heads too.
    auto k = tune_chain(*c, o, &rep);
    ASSERT_TRUE(k.ok() || (k.status().code() == Code::kNotFound && rep.verified > 0)) << k.status().to_string();
    EXPECT_NE(rep.launch_json.find("\"causal\":true"), std::string::npos) << rep.launch_json;
    ASSERT_FALSE(rep.cubin.empty());
    EXPECT_EQ(rep.kernel_name, "attention_specials");  // a record with code is no library-call record
    auto cached = load_chain_kernel(*c, rep.launch_json, rep.cubin);
    ASSERT_TRUE(cached.ok()) << cached.status().to_string();
    ASSERT_TRUE(dispatcher::fuse_chain(*c, std::move(cached).value()).ok());
    auto check = [&](const std::vector<at::Tensor>& in, const at::Tensor& m, bool causal_path, const char* what) {
      SCOPED_TRACE(what);
      const uint64_t calls = chains::causal_calls();
      const uint64_t completed = dispatcher::region_counters().completed;
      const at::Tensor got = attention(in, m);
      at::Tensor want;
      {
        dispatcher::BypassScope aten_only;
        want = attention(in, m);
      }
      EXPECT_EQ(dispatcher::region_counters().completed, completed + 1);
      EXPECT_EQ(chains::causal_calls(), calls + (causal_path ? 1 : 0));
      EXPECT_TRUE(close(got, want, static_cast<double>(c->nodes.size())));
      return got;
    };
    check(draw(), mask, false, "a mask seen first");
    check(draw(), mask, true, "the same mask again");
    {
      std::vector<at::Tensor> in = draw();
      {
        dispatcher::BypassScope not_recorded;
        in[1][0][0][L - 1][5] = NAN;     // the last key: a masked score of every earlier query of head (0, 0)
        in[2][1][2][3][7] = INFINITY;    // value 3 of head (1, 2): 0 x inf in the queries before it
        in[0][1][0][10][0] = -INFINITY;  // query 10 of head (1, 0)
      }
      const at::Tensor got = check(in, mask, true, "specials in q, k and v");
      EXPECT_TRUE(at::isnan(got[0][0]).all().item<bool>());  // every row, as the chain spreads the NaN
      EXPECT_TRUE(at::isnan(got[1][2].select(-1, 7).slice(0, 0, 3)).all().item<bool>());
      EXPECT_TRUE(at::isinf(got[1][2].select(-1, 7).slice(0, 3)).all().item<bool>());
      EXPECT_TRUE(at::isnan(got[1][0][10]).all().item<bool>());
      EXPECT_TRUE(at::isfinite(got[1][1]).all().item<bool>());
    }
    {
      dispatcher::BypassScope not_recorded;
      mask.zero_();  // in place: the same tensor, another version
    }
    check(draw(), mask, false, "a mask changed in place");
    check(draw(), mask, false, "the changed mask, checked: not causal");
    {
      dispatcher::BypassScope not_recorded;
      mask.copy_(causal_mask());
    }
    check(draw(), mask, false, "the causal values written back");
    check(draw(), mask, true, "the causal values, checked");
    const at::Tensor fresh = causal_mask();
    check(draw(), fresh, false, "a fresh causal mask");
    {
      // The general path with specials, under a mask that is not causal: a random one with a row of -inf only.
      std::vector<at::Tensor> in = draw();
      at::Tensor other;
      {
        dispatcher::BypassScope not_recorded;
        other = at::randn({L, L}, opts);
        other[5].fill_(-inf);
        other[9][3] = -inf;
        in[1][0][1][4][2] = INFINITY;
        in[1][0][1][6][2] = -INFINITY;  // +inf and -inf scores in one row: NaN after the max
        in[2][1][1][0][0] = NAN;
        in[0][0][2][7].fill_(INFINITY);
      }
      const at::Tensor got = check(in, other, false, "specials, general path, a mask that is not causal");
      EXPECT_TRUE(at::isnan(got[0][0][5]).all().item<bool>());  // the mask's row of -inf
      EXPECT_EQ(at::isfinite(got[1][0]).sum().item<int64_t>(), (L - 1) * D);  // a head without specials
    }
    dispatcher::unfuse_chain(*c, dispatcher::ChainState::kAten);
  }
  EXPECT_EQ(dispatcher::region_counters().lost, 0u);
}

/// Note [Pooled chains]: a pointwise prologue and a max-pool, for windows with padding, odd strides, dilation and
/// ceil mode, in every dtype, on an odd shape with NaN, infinities and the ties a ReLU makes: every variant verifies,
/// and the region serves the pooled value equal to eager. A region whose app keeps the indices or an intermediate
/// is declined by the kernel and runs through ATen, every kept value equal to eager.
TEST(ChainsGpu, PooledChainsServeEagersMaximaAndDeclineWhatTheyDoNotCompute) {
  CUDAL1_REQUIRE_DEFERRAL();
  struct Window {
    std::vector<int64_t> k, s, p, d;
    bool ceil;
  };
  const std::vector<Window> windows = {{{3, 3}, {2, 2}, {1, 1}, {1, 1}, false}, {{2, 2}, {2, 2}, {0, 0}, {1, 1}, false},
                                       {{3, 3}, {2, 2}, {0, 0}, {1, 1}, true},  {{3, 2}, {1, 2}, {1, 0}, {2, 1}, false}};
  const auto dev = at::TensorOptions().device(at::kCUDA);
  int served = 0;
  for (const at::ScalarType dt : {at::kFloat, at::kHalf, at::kBFloat16})
    for (size_t wi = 0; wi < windows.size(); ++wi) {
      const Window& w = windows[wi];
      SCOPED_TRACE(std::string(c10::toString(dt)) + " window " + std::to_string(wi));
      const int64_t C = 5 + static_cast<int64_t>(wi);  // a shape of its own per case: a chain of its own
      at::Tensor x = at::randn({3, C, 17, 13}, dev.dtype(dt));
      x.view(-1)[7].fill_(NAN);
      x.view(-1)[100].fill_(INFINITY);
      x.view(-1)[200].fill_(-INFINITY);
      const at::Tensor scale = at::randn({C, 1, 1}, dev.dtype(dt)), shift = at::randn({C, 1, 1}, dev.dtype(dt));
      auto run = [&](const at::Tensor& in) {
        return at::max_pool2d(in.mul(scale).add(shift).relu(), w.k, w.s, w.p, w.d, w.ceil);
      };
      dispatcher::ChainRecord* c = bench::record_chain([&] { run(x); });
      ASSERT_NE(c, nullptr);
      ASSERT_EQ(c->nodes.size(), 4u) << c->text();
      ChainTuneOptions o;
      o.reps = 0;  // verification of every variant; speed is bench_chains' business
      ChainTuneReport rep;
      auto k = tune_chain(*c, o, &rep);
      ASSERT_TRUE(k.ok()) << k.status().to_string() << "\n" << rep.plan;
      EXPECT_EQ(rep.verified, rep.variants) << rep.note;
      ASSERT_TRUE(dispatcher::fuse_chain(*c, std::move(k).value()).ok());
      auto before = dispatcher::region_counters();
      const at::Tensor got = run(x);
      at::Tensor want;
      {
        dispatcher::BypassScope aten_only;
        want = run(x);
      }
      EXPECT_EQ(dispatcher::region_counters().completed, before.completed + 1);
      EXPECT_EQ(dispatcher::region_counters().declined, before.declined);
      EXPECT_TRUE(close(got, want, 4));
      EXPECT_TRUE(at::equal(at::isnan(got), at::isnan(want)));
      ++served;
      // The app keeps the indices: declined, both outputs as eager's.
      before = dispatcher::region_counters();
      auto [vals, idx] = at::max_pool2d_with_indices(x.mul(scale).add(shift).relu(), w.k, w.s, w.p, w.d, w.ceil);
      at::Tensor want_idx, want_vals;
      {
        dispatcher::BypassScope aten_only;
        std::tie(want_vals, want_idx) =
            at::max_pool2d_with_indices(x.mul(scale).add(shift).relu(), w.k, w.s, w.p, w.d, w.ceil);
      }
      EXPECT_EQ(dispatcher::region_counters().declined, before.declined + 1);
      EXPECT_TRUE(at::equal(idx, want_idx));
      EXPECT_TRUE(close(vals, want_vals, 4));
      // The app keeps the activation: declined, the activation and the pooled value as eager's.
      before = dispatcher::region_counters();
      const at::Tensor act = x.mul(scale).add(shift).relu();
      const at::Tensor pooled = at::max_pool2d(act, w.k, w.s, w.p, w.d, w.ceil);
      at::Tensor want_act;
      {
        dispatcher::BypassScope aten_only;
        want_act = x.mul(scale).add(shift).relu();
      }
      EXPECT_EQ(dispatcher::region_counters().declined, before.declined + 1);
      EXPECT_TRUE(close(act, want_act, 3));
      EXPECT_TRUE(close(pooled, want, 4));
      dispatcher::unfuse_chain(*c, dispatcher::ChainState::kAten);
    }
  EXPECT_EQ(served, 12);
  EXPECT_EQ(dispatcher::region_counters().lost, 0u);
}

/// One random chain over x: pointwise ops, with a broadcast second input y, and row ops (reductions along the
/// last dim combined back into the row, a softmax, a layer norm with weight w). Intermediates are kept alive at
/// random (`keep`), as an app that holds some of them.
///
/// The float64 evaluation with `stats_nudge` (1-4) moves every row statistic (a row's mean or sum, a layer norm's
/// mean and variance) by one unit roundoff of the dtype eager rounds it to, up or down (1: all up, 2: all down, 3
/// and 4: alternating), as a reduction summed in another valid order rounds it: a fused chain's row sum or a layer
/// norm's two-pass mean may land one unit from ATen's (its Welford), and a chain that then cancels (a row sitting on
/// a large offset) and takes a square root near 0 amplifies that unit (the fuzz's chain 168 on an H100). Max and
/// min are exact and are not moved; a softmax is not decomposed.
struct RandomChain {
  std::vector<int> ops;  // op codes, see apply()
  std::vector<bool> keep;
  std::vector<int> inplace;  // per op: an in-place op after it (0: none; 1 relu_, 2 mul_(1.5), 3 sigmoid_)
  int stats_nudge = 0;
  mutable std::vector<at::ScalarType> dtypes;  // each op's input dtype in the last evaluation not in float64
  /// A max-pool after the last op (Note [Pooled chains]); k 0: none.
  struct PoolTail {
    int64_t k = 0, s = 1, p = 0;
    bool ceil = false;
  } pool;

  at::Tensor apply(const at::Tensor& x, const at::Tensor& y, const at::Tensor& w, const at::Tensor& w32,
                   std::vector<at::Tensor>* kept) const {
    at::Tensor t = x;
    const bool eager = x.scalar_type() != at::kDouble;
    if (eager) dtypes.clear();
    int moved = 0;  // row statistics moved so far (their signs alternate in modes 3 and 4)
    // A row statistic `s` of op k, rounded in eager to its own dtype or (`acc`) to float.
    const auto stat = [&](const at::Tensor& s, size_t k, bool acc) {
      if (eager || stats_nudge == 0) return s;
      const bool up = stats_nudge == 1 || (stats_nudge == 3 && moved % 2 == 0) || (stats_nudge == 4 && moved % 2);
      ++moved;
      const at::ScalarType d = acc || k >= dtypes.size() ? at::kFloat : dtypes[k];
      return s * (up ? 1.0 + unit_roundoff(d) : 1.0 - unit_roundoff(d));
    };
    for (size_t k = 0; k < ops.size(); ++k) {
      if (eager) dtypes.push_back(t.scalar_type());
      switch (ops[k]) {
        case 0: t = t.add(y); break;
        case 1: t = t.mul(y); break;
        case 2: t = t.sub(y, 0.5); break;
        case 3: t = t.div(y); break;
        case 4: t = t.mul(1.7); break;
        case 5: t = t.add(-0.3); break;
        case 6: t = t.tanh(); break;
        case 7: t = t.sigmoid(); break;
        case 8: t = t.exp(); break;
        case 9: t = t.relu(); break;
        case 10: t = t.pow(2.0); break;
        case 11: t = t.pow(3.0); break;
        case 12: t = t.clamp(-1.0, 2.0); break;
        case 13: t = at::silu(t); break;
        case 14: t = at::gelu(t, "tanh"); break;
        case 15: t = at::maximum(t, y); break;
        case 16: t = t.abs().sqrt(); break;
        case 17: t = t.neg(); break;
        case 18: t = t.div(3.0); break;
        case 19: t = t.erf(); break;
        // Row ops (Note [Row chains]):
        case 20: t = t.sub(stat(t.mean({-1}, true), k, false)); break;
        case 21: t = t.div(stat(t.abs().sum({-1}, true), k, false).add(1.0)); break;
        case 22: t = t.mul(stat(t.pow(2).mean({-1}, true), k, false).add(1e-5).rsqrt()); break;
        case 23: t = at::_softmax(t, -1, false); break;
        case 24: {  // the weight in the input's dtype (a promoting input made it fp32)
          const at::Tensor& ww = t.scalar_type() == w.scalar_type() ? w : w32;
          if (eager || stats_nudge == 0) {
            t = at::layer_norm(t, {t.size(-1)}, ww, k % 2 ? ww : at::Tensor(), 1e-5);
          } else {  // the same in float64, its statistics (kept in float by ATen and by cudal1) moved
            const at::Tensor d = t.sub(stat(t.mean({-1}, true), k, true));
            t = d.mul(stat(d.mul(d).mean({-1}, true), k, true).add(1e-5).rsqrt()).mul(ww);
            if (k % 2) t = t.add(ww);
          }
          break;
        }
        case 25: t = t.sub(t.amax({-1}, true)).exp(); break;
        default: t = t.add(t.amin({-1}, true)); break;
      }
      switch (k < inplace.size() ? inplace[k] : 0) {  // Note [In-place nodes]: on the value just computed
        case 1: t.relu_(); break;
        case 2: t.mul_(1.5); break;
        case 3: t.sigmoid_(); break;
        default: break;
      }
      if (keep[k]) kept->push_back(t);
    }
    if (pool.k) t = at::max_pool2d(t, {pool.k, pool.k}, {pool.s, pool.s}, {pool.p, pool.p}, {1, 1}, pool.ceil);
    return t;
  }
};

/// A random dim: 1, small odd or prime sizes, powers of two, and now and then 0.
int64_t random_dim(std::mt19937& rng, bool last) {
  static const int64_t last_sizes[] = {1, 2, 3, 7, 13, 31, 64, 97, 128, 255, 256, 257, 768, 1000, 1031, 4096};
  static const int64_t lead_sizes[] = {1, 2, 3, 5, 8, 11, 16, 33};
  if (rng() % 60 == 0) return 0;
  return last ? last_sizes[rng() % 16] : lead_sizes[rng() % 8];
}

/// x with `shape`: contiguous, a transposed view, or a strided slice (offset 1, stride 2 along the last dim).
at::Tensor random_layout(const std::vector<int64_t>& shape, const at::TensorOptions& opts, int mode) {
  if (mode == 1 && shape.size() >= 2) {
    std::vector<int64_t> t = shape;
    std::swap(t[t.size() - 1], t[t.size() - 2]);
    return at::randn(t, opts).transpose(-1, -2);
  }
  if (mode == 2 && !shape.empty()) {
    std::vector<int64_t> wide = shape;
    wide.back() = 2 * shape.back() + 1;
    return at::randn(wide, opts).slice(-1, 1, 2 * shape.back() + 1, 2);
  }
  return at::randn(shape, opts);
}

TEST(ChainsGpu, RandomChainsVerifyAndServeEqualToEager) {
  CUDAL1_REQUIRE_DEFERRAL();
  const char* env = std::getenv("CUDAL1_CHAIN_FUZZ");
  const int chains = env ? std::atoi(env) : 1000;
  std::mt19937 rng(1234);
  int verified = 0, rows = 0, pooled = 0, unsupported = 0, served = 0, none = 0, declined = 0, head_taken = 0;
  std::map<std::string, int> why_not;
  for (int i = 0; i < chains; ++i) {
    if (i % 100 == 0 && i)  // progress: a run cut short still says how far it got
      std::printf("random chains: %d of %d done (%d verified, %d declined, %d not fusable)\n", i, chains, verified,
                  declined, unsupported);
    RandomChain rc;
    const int rank = 1 + static_cast<int>(rng() % 4);
    std::vector<int64_t> shape;
    for (int d = 0; d < rank; ++d) shape.push_back(random_dim(rng, d + 1 == rank));
    int64_t numel = 1;
    for (int64_t s : shape) numel *= s;
    if (numel > (int64_t{1} << 21)) shape.front() = 1;  // keep every chain small
    std::vector<int64_t> other = shape;
    for (int d = 0; d < rank; ++d)
      if (rng() % 3 == 0) other[static_cast<size_t>(d)] = 1;  // broadcast along some dims
    if (rng() % 4 == 0) other.erase(other.begin());  // and sometimes a lower rank
    const at::ScalarType dts[] = {at::kFloat, at::kHalf, at::kBFloat16};
    const at::ScalarType dt = dts[rng() % 3];
    const at::ScalarType ydt = rng() % 5 == 0 ? dts[rng() % 3] : dt;  // now and then a promoting second input
    const int n = 2 + static_cast<int>(rng() % 5);
    const bool empty = numel == 0 || shape.front() == 0;  // ATen's amax/amin raise on an empty row: no row ops
    for (int k = 0; k < n; ++k) {
      rc.ops.push_back(!empty && rng() % 3 == 0 ? 20 + static_cast<int>(rng() % 7) : static_cast<int>(rng() % 20));
      rc.keep.push_back(rng() % 3 == 0);
    }
    if (rc.ops[0] <= 3 || rc.ops[0] == 15) rc.ops[0] = 6;  // the first op reads x alone: the chain starts there
    std::mt19937 ip_rng(static_cast<uint32_t>(i));  // its own generator: the chains drawn above stay as they were
    for (int k = 0; k < n; ++k) rc.inplace.push_back(ip_rng() % 5 == 0 ? 1 + static_cast<int>(ip_rng() % 3) : 0);
    // Note [Pooled chains]: a third of the NCHW chains without row ops end in a max-pool (their own generator too).
    std::mt19937 pool_rng(static_cast<uint32_t>(i) * 7919u + 1u);
    const bool row_ops = std::any_of(rc.ops.begin(), rc.ops.end(), [](int op) { return op >= 20; });
    if (rank == 4 && !empty && !row_ops && pool_rng() % 3 == 0) {
      static const RandomChain::PoolTail tails[] = {{3, 2, 1, false}, {3, 1, 1, false}, {2, 2, 1, false},
                                                    {3, 2, 1, true},  {2, 2, 0, false}, {3, 3, 1, true}};
      rc.pool = tails[pool_rng() % 6];
      if (rc.pool.p == 0 && (shape[2] < 2 || shape[3] < 2)) rc.pool = tails[0];  // an output of at least one
    }
    const int layout = static_cast<int>(rng() % 3);
    const auto opts = at::TensorOptions().dtype(dt).device(at::kCUDA);
    const at::Tensor y = at::randn(other, opts.dtype(ydt));
    const at::Tensor w = at::randn({shape.back()}, opts), w32 = w.to(at::kFloat);
    std::vector<at::Tensor> scratch;
    dispatcher::ChainRecord* c = bench::record_chain([&] {
      scratch.clear();
      rc.apply(random_layout(shape, opts, layout), y, w, w32, &scratch);
    });
    if (!c) {
      ++none;  // e.g. a single op after splitting (a promoting op that changed the chain's shape)
      continue;
    }
    ChainTuneOptions o;
    o.reps = 0;  // correctness only
    o.max_variants = 2;
    o.verify_trials = 3;
    o.seed = static_cast<uint64_t>(i);
    ChainTuneReport rep;
    auto k = tune_chain(*c, o, &rep);
    if (k.status().code() == Code::kUnsupported) {
      ++unsupported;
      ++why_not[rep.note.substr(0, rep.note.find(':') == std::string::npos ? 40 : 60)];
      continue;
    }
    if (!k.ok()) {
      // Declined by verification: the chain stays on ATen (a missed speedup, never a wrong value). Expected only
      // where the chain amplifies the last-ulp differences of a reduction's order (sqrt or log near 0 after a
      // layer norm): each is printed, and they must stay rare.
      EXPECT_EQ(k.status().code(), Code::kVerifyFailed) << k.status().to_string();
      if (++declined <= 10)
        std::printf("declined chain %d: %s\n%s\n", i, k.status().to_string().c_str(), rep.plan.c_str());
      continue;
    }
    ++verified;
    rows += rep.plan.find("row_") != std::string::npos;
    pooled += rep.plan.find("max_pool") != std::string::npos;
    // Served through a deferred region, with intermediates kept at random: equal to eager, kept ones too.
    if (const Status f = dispatcher::fuse_chain(*c, std::move(k).value()); !f.ok()) {
      // One fused chain per first signature: an earlier random chain began with the same call.
      EXPECT_NE(f.message().find("same signature"), std::string::npos) << f.to_string();
      ++head_taken;
      continue;
    }
    const at::Tensor x = random_layout(shape, opts, layout);
    std::vector<at::Tensor> kept_got, kept_want;
    const auto before = dispatcher::region_counters();
    const at::Tensor got = rc.apply(x, y, w, w32, &kept_got);
    at::Tensor want;
    {
      dispatcher::BypassScope aten_only;  // runs the region first
      want = rc.apply(x, y, w, w32, &kept_want);
    }
    served += dispatcher::region_counters().completed > before.completed;
    // The chain in float64, exactly and on nudged inputs (value first, then what it keeps).
    const auto in_double = [&](int nudge) {  // -1: exact; chain_spread's modes
      dispatcher::BypassScope aten_only;
      const bool inputs = nudge >= 0 && nudge < 3;
      const auto f = [&](const at::Tensor& t) { return inputs ? nudged(t, nudge) : t.to(at::kDouble); };
      RandomChain r = rc;
      r.stats_nudge = nudge >= 3 ? nudge - 2 : 0;
      std::vector<at::Tensor> kept;
      std::vector<at::Tensor> all{r.apply(f(x), f(y), f(w), f(w32), &kept)};
      all.insert(all.end(), kept.begin(), kept.end());
      return all;
    };
    const std::vector<at::Tensor> exact = in_double(-1);
    const std::vector<at::Tensor> spread = chain_spread(in_double, exact);
    const double steps = 2.0 * static_cast<double>(c->nodes.size()) + 2;
    EXPECT_TRUE(close(got, want, steps, exact[0], spread[0]))
        << "chain " << i << ": x " << x.sizes() << " " << x.strides() << ", y " << y.sizes() << ", variant "
        << rep.variant << "\n" << rep.plan;
    ASSERT_EQ(kept_got.size(), kept_want.size());
    ASSERT_EQ(kept_got.size() + 1, exact.size());
    for (size_t j = 0; j < kept_got.size(); ++j)
      EXPECT_TRUE(close(kept_got[j], kept_want[j], steps, exact[j + 1], spread[j + 1]))
          << "chain " << i << " kept " << j << "\n" << rep.plan;
  }
  std::printf("random chains: %d verified (%d with row ops, %d pooled), %d served whole (%d not fused: their first "
              "call began an earlier fused chain), %d declined by verification, %d not fusable, %d no chain\n",
              verified, rows, pooled, served, head_taken, declined, unsupported, none);
  for (const auto& [why, count] : why_not) std::printf("  not fusable x%d: %s\n", count, why.c_str());
  EXPECT_GE(verified, chains / 2);
  EXPECT_LE(declined * 50, verified + declined);  // at most 2% of the chains the generators can fuse
  EXPECT_EQ(dispatcher::region_counters().lost, 0u);
}

}  // namespace
}  // namespace cudal1::optimizer
