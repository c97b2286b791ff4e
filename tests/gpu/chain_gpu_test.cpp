/// @brief Chain kernels on the GPU (Note [Pointwise chains], Note [Chain tuning]): the suite's pointwise chains
/// are recorded through the hook, tuned (every variant verified against the ATen chain) and fused, then served
/// through deferred regions with outputs equal to eager; and a fuzz of random pointwise chains (ops, dtypes,
/// broadcast shapes, scalars) where no variant may fail verification. Skips without a GPU or without CUPTI.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <random>
#include <set>

#include "bench/chain_suite.h"
#include "cudal1/dispatcher/chains.h"
#include "cudal1/dispatcher/hook.h"
#include "cudal1/dispatcher/regions.h"
#include "cudal1/optimizer/chain_tuner.h"
#include "gpu/gpu_env.h"

namespace cudal1::optimizer {
namespace {

class ChainGpuEnv : public ::testing::Environment {
 public:
  void SetUp() override {
    dispatcher::HookOptions o;
    o.mode = Mode::kTune;
    o.ops = {"add.Tensor", "sub.Tensor", "mul.Tensor", "div.Tensor", "add.Scalar", "sub.Scalar", "mul.Scalar",
             "div.Scalar", "maximum", "minimum", "neg", "exp", "tanh", "sigmoid", "silu", "relu", "abs", "gelu",
             "mean.dim", "sum.dim_IntList", "native_layer_norm"};
    for (const auto& op : dispatcher::chain_ops()) o.ops.push_back(op);
    o.hot_calls = 1000000;
    o.sample_every = 1000000;
    o.chains = true;
    Status s = dispatcher::install_hooks(o, dispatcher::HookCallbacks{});
    ASSERT_TRUE(s.ok()) << s.to_string();
    s = dispatcher::enable_deferral();
    ASSERT_TRUE(s.ok()) << s.to_string();
  }
};
const auto* const g_env = ::testing::AddGlobalTestEnvironment(new ChainGpuEnv);

#define REQUIRE_DEFERRAL()                                                                  \
  do {                                                                                      \
    CUDAL1_REQUIRE_GPU();                                                                   \
    const std::string st = dispatcher::deferral_status();                                   \
    if (st.find("CUDA: on") == std::string::npos) GTEST_SKIP() << st;                       \
  } while (0)

bool close(const at::Tensor& got, const at::Tensor& want, double steps) {
  const double rtol = (want.scalar_type() == at::kFloat ? 1e-5 : want.scalar_type() == at::kHalf ? 2e-3 : 1.6e-2) * steps;
  const double eps = want.scalar_type() == at::kFloat ? 1.2e-7 : want.scalar_type() == at::kHalf ? 9.8e-4 : 7.9e-3;
  const at::Tensor w = want.to(at::kDouble), g = got.to(at::kDouble);
  const double atol = 1e-6 + steps * eps * w.abs().max().item<double>();
  return at::isclose(g, w, rtol, atol, /*equal_nan=*/true).all().item<bool>();
}

TEST(ChainsGpu, TheSuitesPointwiseChainsFuseAndServeEqualToEager) {
  REQUIRE_DEFERRAL();
  int fused = 0;
  for (const bench::ChainRow& row : bench::chain_suite(/*small=*/true)) {
    SCOPED_TRACE(row.name);
    std::vector<at::Tensor> in = bench::chain_inputs(row, 0);
    dispatcher::ChainRecord* c = bench::record_chain([&] { row.run(bench::chain_inputs(row, 0)); });
    ASSERT_NE(c, nullptr);
    ChainTuneOptions o;
    o.reps = 5;
    o.min_speedup = 0;  // correctness here; speed is bench_chains' business
    ChainTuneReport rep;
    auto k = tune_chain(*c, o, &rep);
    std::printf("%-24s %zu ops: %s (%d of %d variants verified) %s\n", row.name.c_str(), c->nodes.size(),
                k.ok() ? "fused" : "not fused", rep.verified, rep.variants, rep.note.c_str());
    if (k.status().code() == Code::kUnsupported) continue;  // not pointwise (a reduction, a norm)
    ASSERT_TRUE(k.ok()) << k.status().to_string() << "\n" << rep.plan;
    EXPECT_EQ(rep.verified, rep.variants);
    ASSERT_TRUE(dispatcher::fuse_chain(*c, std::move(k).value()).ok());
    ++fused;
    const auto before = dispatcher::region_counters();
    const at::Tensor got = row.run(in);
    at::Tensor want;
    {
      dispatcher::BypassScope aten_only;  // runs the region first
      want = row.run(in);
    }
    EXPECT_EQ(dispatcher::region_counters().completed, before.completed + 1);
    EXPECT_TRUE(close(got, want, static_cast<double>(c->nodes.size())));
  }
  EXPECT_GE(fused, 5);  // swiglu, gelu_new, bias_gelu, x_sigmoid_x, residual_relu
  EXPECT_EQ(dispatcher::region_counters().lost, 0u);
}

/// One random pointwise chain over x (and sometimes a broadcast second input).
struct RandomChain {
  std::vector<int64_t> shape, other_shape;
  at::ScalarType dtype;
  std::vector<int> ops;  // op codes, see apply()
  at::Tensor apply(const at::Tensor& x, const at::Tensor& y) const {
    at::Tensor t = x;
    for (int op : ops) {
      switch (op) {
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
        default: t = t.erf(); break;
      }
    }
    return t;
  }
};

TEST(ChainsGpu, RandomPointwiseChainsVerify) {
  REQUIRE_DEFERRAL();
  std::mt19937 rng(1234);
  int verified = 0, unsupported = 0;
  for (int i = 0; i < 30; ++i) {
    RandomChain rc;
    const int rank = 1 + static_cast<int>(rng() % 4);
    for (int d = 0; d < rank; ++d) rc.shape.push_back(1 + static_cast<int64_t>(rng() % (d + 1 == rank ? 700 : 9)));
    rc.other_shape = rc.shape;
    for (int d = 0; d < rank; ++d)
      if (rng() % 3 == 0) rc.other_shape[static_cast<size_t>(d)] = 1;  // broadcast along some dims
    if (rng() % 4 == 0) rc.other_shape.erase(rc.other_shape.begin());  // and sometimes a lower rank
    const at::ScalarType dts[] = {at::kFloat, at::kHalf, at::kBFloat16};
    rc.dtype = dts[rng() % 3];
    const int n = 2 + static_cast<int>(rng() % 5);
    for (int k = 0; k < n; ++k) rc.ops.push_back(static_cast<int>(rng() % 20));
    if (rc.ops[0] <= 3 || rc.ops[0] == 15) rc.ops[0] = 6;  // the first op reads x alone: the chain starts there
    const auto opts = at::TensorOptions().dtype(rc.dtype).device(at::kCUDA);
    const at::Tensor y = at::randn(rc.other_shape, opts);
    dispatcher::ChainRecord* c = bench::record_chain([&] { rc.apply(at::randn(rc.shape, opts), y); });
    if (!c) continue;  // e.g. a single op after splitting
    ChainTuneOptions o;
    o.reps = 3;
    o.min_speedup = 0;
    o.verify_trials = 5;
    o.seed = static_cast<uint64_t>(i);
    ChainTuneReport rep;
    auto k = tune_chain(*c, o, &rep);
    if (k.status().code() == Code::kUnsupported) {
      ++unsupported;
      continue;
    }
    EXPECT_TRUE(k.ok()) << "chain " << i << ": " << k.status().to_string() << "\n" << rep.plan;
    EXPECT_EQ(rep.verified, rep.variants) << "chain " << i << "\n" << rep.plan << "\n" << rep.note;
    verified += k.ok();
  }
  std::printf("random pointwise chains: %d verified, %d not pointwise\n", verified, unsupported);
  EXPECT_GE(verified, 20);
}

}  // namespace
}  // namespace cudal1::optimizer
