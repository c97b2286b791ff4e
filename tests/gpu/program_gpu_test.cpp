/// @brief Program chains on the GPU (Note [Program chains]): a small ResNet-style network (stem, max-pool, two
/// residual blocks, fp32 with cuDNN's TF32 default) is recorded through the hook as one program chain, verified
/// against the ATen chain on its own weights (the fused cuDNN-epilogue variant first; the test prints which variant
/// verified and why the other did not), timed, fused, and served through a deferred region equal to eager within
/// the program's tolerance. Shares the hook and deferral of chain_gpu_test.cpp. Skips without a GPU or CUPTI.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <regex>
#include <vector>
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

/// x = x + act(linear(layer_norm(x))) a layer (Note [Skinny layers]), the decode step of bench_steps.
at::Tensor decode(const at::Tensor& x, const std::vector<std::array<at::Tensor, 4>>& layers, bool relu) {
  at::Tensor h = x;
  for (const auto& l : layers) {
    const at::Tensor y = at::linear(at::layer_norm(h, {h.size(-1)}, l[0], l[1], 1e-5), l[2], l[3]);
    h = h.add(relu ? at::relu(y) : at::gelu(y, "tanh"));
  }
  return h;
}

/// A decode step of skinny layers: verified as the generated layer kernel (every variant tried, the fastest
/// kept), fused, and served through a deferred region within the program's tolerance of eager.
void decode_step_is_served(c10::ScalarType dtype, int64_t rows, int64_t width, int n_layers, bool relu) {
  const auto o = at::TensorOptions().device(at::kCUDA).dtype(dtype);
  std::vector<std::array<at::Tensor, 4>> layers;
  {
    dispatcher::BypassScope a;
    for (int i = 0; i < n_layers; ++i)
      layers.push_back({at::rand({width}, o).add_(0.5), at::randn({width}, o).mul_(0.1),
                        at::randn({width, width}, o).mul_(1.0 / std::sqrt(static_cast<double>(width))),
                        at::randn({width}, o).mul_(0.1)});
  }
  auto input = [&] { dispatcher::BypassScope a; return at::randn({rows, width}, o); };
  const at::Tensor x0 = input();
  dispatcher::ChainRecord* c = bench::record_chain([&] { decode(x0, layers, relu); }, 3);
  ASSERT_NE(c, nullptr);
  ChainTuneOptions opt;
  opt.reps = 10;
  opt.min_speedup = 0;  // a verified program fuses here whatever its speed; the timing is printed
  ChainTuneReport rep;
  auto k = tune_chain(*c, opt, &rep);
  std::cout << "program plan:\n" << rep.plan << "variant " << rep.variant << " of " << rep.variants << " ("
            << rep.verified << " verified), ATen " << rep.aten_us << " us, program " << rep.kernel_us << " us ("
            << rep.speedup << "x)" << (rep.note.empty() ? "" : "; " + rep.note) << "\n";
  ASSERT_TRUE(k.ok()) << k.status().to_string() << "\n" << c->text();
  EXPECT_EQ(rep.variant.rfind("program.fused.w", 0), 0u) << "a layer-kernel variant verified: " << rep.variant;
  EXPECT_EQ(rep.verified, 12) << "every layer-kernel variant verifies: " << rep.note;
  EXPECT_EQ(rep.kernel_name, "layer_kernel");
  EXPECT_FALSE(rep.cubin.empty());
  dispatcher::ChainKernel* raw = k.value().get();
  ASSERT_TRUE(dispatcher::fuse_chain(*c, std::move(k).value()).ok());
  const dispatcher::RegionCounters before = dispatcher::region_counters();
  for (int i = 0; i < 3; ++i) {
    const at::Tensor x = input();
    const at::Tensor y = decode(x, layers, relu);
    const at::Tensor ref = [&] { dispatcher::BypassScope a; return decode(x, layers, relu); }();
    const double scale = ref.abs().max().item<double>();
    const double diff = (y - ref).abs().max().item<double>();
    const double u = dtype == c10::ScalarType::Half ? std::ldexp(1.0, -11)
                     : dtype == c10::ScalarType::BFloat16 ? std::ldexp(1.0, -8) : std::ldexp(1.0, -20);
    EXPECT_LE(diff, 8 * u * std::sqrt(static_cast<double>(n_layers)) * scale) << "served region " << i;
    if (i == 0) std::cout << "served: max|diff| " << diff << " of " << scale << "; " << raw->describe() << "\n";
  }
  const dispatcher::RegionCounters after = dispatcher::region_counters();
  EXPECT_EQ(after.completed, before.completed + 3);
  EXPECT_EQ(after.kernel_failures, before.kernel_failures);
  // Tuning ran the kernel too: every region it computed ran each layer as the kernel, none as ATen ops.
  const std::string d = raw->describe();
  const auto count = [&](const std::string& what) {  // the number before `what`, -1 if none
    std::smatch m;
    return std::regex_search(d, m, std::regex("(\\d+)" + what)) ? std::stol(m[1].str()) : -1L;
  };
  EXPECT_GE(count(" regions,"), 3) << d;
  EXPECT_EQ(count(" layer kernels,"), n_layers * count(" regions,")) << d;
  EXPECT_NE(d.find(", 0 layers as ATen ops"), std::string::npos) << d;
  dispatcher::unfuse_chain(*c, dispatcher::ChainState::kAten);
}

TEST(ProgramsGpu, ADecodeStepRunsAsLayerKernelsEqualToEager) {
  CUDAL1_REQUIRE_GPU();
  const std::string st = dispatcher::deferral_status();
  if (st.find("CUDA: on") == std::string::npos) GTEST_SKIP() << st;
  decode_step_is_served(c10::ScalarType::Half, 1, 1024, 4, /*relu=*/false);
}

TEST(ProgramsGpu, SkinnyLayersOfSeveralRowsInBf16AndFp32RunAsLayerKernels) {
  CUDAL1_REQUIRE_GPU();
  const std::string st = dispatcher::deferral_status();
  if (st.find("CUDA: on") == std::string::npos) GTEST_SKIP() << st;
  decode_step_is_served(c10::ScalarType::BFloat16, 3, 512, 2, /*relu=*/true);
  decode_step_is_served(c10::ScalarType::Float, 8, 256, 3, /*relu=*/false);
}

}  // namespace
}  // namespace cudal1::optimizer
