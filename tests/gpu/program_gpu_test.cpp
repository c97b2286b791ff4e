/// @brief Program chains on the GPU (Note [Program chains]): a small ResNet-style network (stem, max-pool, two
/// residual blocks, fp32 with cuDNN's TF32 default) is recorded through the hook as one program chain, verified
/// against the ATen chain on its own weights (the fused cuDNN-epilogue variant first; the test prints which variant
/// verified and why the other did not), timed, fused, and served through a deferred region equal to eager within
/// the program's tolerance. Shares the hook and deferral of chain_gpu_test.cpp. Skips without a GPU or CUPTI.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>
#include <iostream>

#include "bench/chain_suite.h"
#include "cudal1/dispatcher/chains.h"
#include "cudal1/dispatcher/hook.h"
#include "cudal1/dispatcher/regions.h"
#include "cudal1/optimizer/chain_tuner.h"
#include "gpu/gpu_env.h"

namespace cudal1::optimizer {
namespace {

struct Net {
  at::TensorOptions o = at::TensorOptions().device(at::kCUDA);
  struct Bn {
    at::Tensor g, b, m, v;
  };
  at::Tensor stem, w[4];
  Bn bn[5];
  Net() {
    dispatcher::BypassScope aten_only;
    stem = at::randn({32, 3, 7, 7}, o).mul_(0.1);
    for (auto& t : w) t = at::randn({32, 32, 3, 3}, o).mul_(0.06);
    for (auto& n : bn)
      n = {at::rand({32}, o).add_(0.5), at::randn({32}, o).mul_(0.1), at::randn({32}, o).mul_(0.1),
           at::rand({32}, o).add_(0.5)};
  }
  at::Tensor norm(const at::Tensor& x, const Bn& n) const { return at::batch_norm(x, n.g, n.b, n.m, n.v, false, 0.1, 1e-5, true); }
  at::Tensor operator()(const at::Tensor& x) const {
    at::Tensor y = norm(at::conv2d(x, stem, {}, 2, 3), bn[0]);
    y.relu_();
    y = at::max_pool2d(y, {3, 3}, {2, 2}, {1, 1});
    for (int b = 0; b < 2; ++b) {
      at::Tensor z = norm(at::conv2d(y, w[2 * b], {}, 1, 1), bn[1 + 2 * b]);
      z.relu_();
      z = norm(at::conv2d(z, w[2 * b + 1], {}, 1, 1), bn[2 + 2 * b]);
      z.add_(y);
      z.relu_();
      y = z;
    }
    return y.mean({2, 3}, true);
  }
};

TEST(ProgramsGpu, AResNetStyleNetworkIsVerifiedFusedAndServedEqualToEager) {
  CUDAL1_REQUIRE_GPU();
  const std::string st = dispatcher::deferral_status();
  if (st.find("CUDA: on") == std::string::npos) GTEST_SKIP() << st;
  const Net net;
  const at::Tensor x0 = [&] { dispatcher::BypassScope a; return at::randn({8, 3, 64, 64}, net.o); }();
  dispatcher::ChainRecord* c = bench::record_chain([&] { net(x0); }, 3);
  ASSERT_NE(c, nullptr);
  ChainTuneOptions o;
  o.reps = 10;
  o.min_speedup = 0;  // a verified program fuses here whatever its speed; the timing is printed
  ChainTuneReport rep;
  auto k = tune_chain(*c, o, &rep);
  std::cout << "program plan:\n" << rep.plan << "variant " << rep.variant << ", ATen " << rep.aten_us << " us, program "
            << rep.kernel_us << " us (" << rep.speedup << "x)" << (rep.note.empty() ? "" : "; " + rep.note) << "\n";
  ASSERT_TRUE(k.ok()) << k.status().to_string() << "\n" << c->text();
  ASSERT_TRUE(dispatcher::fuse_chain(*c, std::move(k).value()).ok());
  const dispatcher::RegionCounters before = dispatcher::region_counters();
  const at::Tensor x = [&] { dispatcher::BypassScope a; return at::randn({8, 3, 64, 64}, net.o); }();
  const at::Tensor y = net(x);
  const at::Tensor ref = [&] { dispatcher::BypassScope a; return net(x); }();  // the region runs first
  const dispatcher::RegionCounters after = dispatcher::region_counters();
  EXPECT_EQ(after.completed, before.completed + 1);
  EXPECT_EQ(after.kernel_failures, before.kernel_failures);
  EXPECT_EQ(after.lost, 0u);
  EXPECT_GT(after.advanced, before.advanced) << "Note [Incremental regions]: groups launched as calls came";
  const double scale = ref.abs().max().item<double>();
  const double diff = (y - ref).abs().max().item<double>();
  std::cout << "served: max|diff| " << diff << " of " << scale << "\n";
  EXPECT_LE(diff, 8 * std::ldexp(1.0, -11) * std::sqrt(5.0) * scale);
  EXPECT_TRUE(y.is_contiguous()) << "the app's tensor keeps its layout";
}

}  // namespace
}  // namespace cudal1::optimizer
