/// @brief Program chains on the GPU (Note [Program chains]): a small ResNet-style network (stem, max-pool, two
/// residual blocks, fp32 with cuDNN's TF32 default) is recorded through the hook as one program chain, verified
/// against the ATen chain on its own weights (the fused cuDNN-epilogue variant first; the test prints which variant
/// verified and why the other did not), timed, fused, and served through a deferred region equal to eager within
/// the program's tolerance. Shares the hook and deferral of chain_gpu_test.cpp. Skips without a GPU or CUPTI.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <iostream>
#include <regex>
#include <vector>

#include "bench/chain_suite.h"
#include "cudal1/dispatcher/chains.h"
#include "cudal1/dispatcher/hook.h"
#include "cudal1/dispatcher/region_graph.h"
#include "cudal1/dispatcher/regions.h"
#include "cudal1/optimizer/chain_tuner.h"
#include "cudal1/optimizer/compiler.h"
#include "cudal1/optimizer/device_info.h"
#include "gpu/gpu_env.h"
#include "optimizer/chains/chain_program.h"

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

/// tune_chain with 10 timing repetitions and no speed margin (a verified program fuses here whatever its speed);
/// prints the plan, the variant and the timing.
Result<std::unique_ptr<dispatcher::ChainKernel>> tune_printed(const dispatcher::ChainRecord& c, ChainTuneReport* rep) {
  ChainTuneOptions o;
  o.reps = 10;
  o.min_speedup = 0;
  auto k = tune_chain(c, o, rep);
  std::cout << "program plan:\n" << rep->plan << "variant " << rep->variant << " of " << rep->variants << " ("
            << rep->verified << " verified), ATen " << rep->aten_us << " us, program " << rep->kernel_us << " us ("
            << rep->speedup << "x)" << (rep->note.empty() ? "" : "; " + rep->note) << "\n";
  return k;
}

TEST(ProgramsGpu, AResNetStyleNetworkIsVerifiedFusedAndServedEqualToEager) {
  CUDAL1_REQUIRE_DEFERRAL();
  const Net net;
  const at::Tensor x0 = [&] { dispatcher::BypassScope a; return at::randn({8, 3, 64, 64}, net.o); }();
  dispatcher::ChainRecord* c = bench::record_chain([&] { net(x0); }, 3);
  ASSERT_NE(c, nullptr);
  ChainTuneReport rep;
  auto k = tune_printed(*c, &rep);
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

using Layers = std::vector<std::array<at::Tensor, 4>>;

Layers make_layers(c10::ScalarType dtype, int64_t width, int n) {
  const auto o = at::TensorOptions().device(at::kCUDA).dtype(dtype);
  dispatcher::BypassScope a;
  Layers layers;
  for (int i = 0; i < n; ++i)
    layers.push_back({at::rand({width}, o).add_(0.5), at::randn({width}, o).mul_(0.1),
                      at::randn({width, width}, o).mul_(1.0 / std::sqrt(static_cast<double>(width))),
                      at::randn({width}, o).mul_(0.1)});
  return layers;
}

/// A decode step of skinny layers: verified as the generated layer kernel (every variant tried, the fastest
/// kept), fused, and served through a deferred region within the program's tolerance of eager.
void decode_step_is_served(c10::ScalarType dtype, int64_t rows, int64_t width, int n_layers, bool relu) {
  const auto o = at::TensorOptions().device(at::kCUDA).dtype(dtype);
  const Layers layers = make_layers(dtype, width, n_layers);
  auto input = [&] { dispatcher::BypassScope a; return at::randn({rows, width}, o); };
  const at::Tensor x0 = input();
  dispatcher::ChainRecord* c = bench::record_chain([&] { decode(x0, layers, relu); }, 3);
  ASSERT_NE(c, nullptr);
  ChainTuneReport rep;
  auto k = tune_printed(*c, &rep);
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
  CUDAL1_REQUIRE_DEFERRAL();
  decode_step_is_served(c10::ScalarType::Half, 1, 1024, 4, /*relu=*/false);
}

TEST(ProgramsGpu, SkinnyLayersOfSeveralRowsInBf16AndFp32RunAsLayerKernels) {
  CUDAL1_REQUIRE_DEFERRAL();
  decode_step_is_served(c10::ScalarType::BFloat16, 3, 512, 2, /*relu=*/true);
  decode_step_is_served(c10::ScalarType::Float, 8, 256, 3, /*relu=*/false);
}

/// The program kernel of `c` with layer variant `id`, compiled for this device.
std::unique_ptr<dispatcher::ChainKernel> layer_program(const dispatcher::ChainRecord& c, const std::string& id) {
  auto plan = chains::plan_program(c);
  EXPECT_TRUE(plan.ok()) << plan.status().to_string();
  if (!plan.ok()) return nullptr;
  auto v = chains::layer_variant_of(plan.value(), id);
  auto info = device_info(0);
  if (!v.ok() || !info.ok()) return nullptr;
  auto built = compile(KernelSource{chains::layer_source(plan.value(), v.value()), "layer_kernel"}, info->sm);
  EXPECT_TRUE(built.ok()) << built.status().to_string();
  if (!built.ok()) return nullptr;
  auto m = LoadedModule::load(0, built->cubin, "layer_kernel");
  if (!m.ok()) return nullptr;
  return chains::program_kernel(c, plan.value(), /*fused=*/true, v.value(), m.value());
}

// Note [Skinny layers] with Note [Region graphs]: the overlapping variant (programmatic dependent launch) captured
// into a CUDA graph and replayed with fresh inputs, the outputs kept across steps: every step equals the same
// kernels run eagerly bit for bit (a layer that read its input before the previous layer wrote it would not), and
// ATen within the tolerance.
TEST(ProgramsGpu, OverlappingLayerKernelsReplayedAsAGraphEqualTheirEagerRun) {
  CUDAL1_REQUIRE_DEFERRAL();
  const Layers layers = make_layers(c10::ScalarType::Half, 2048, 6);
  auto input = [&] { dispatcher::BypassScope a; return at::randn({1, 2048}, layers[0][0].options()); };
  const at::Tensor x0 = input();
  dispatcher::ChainRecord* c = bench::record_chain([&] { decode(x0, layers, false); }, 3);
  ASSERT_NE(c, nullptr);
  auto plan = chains::plan_program(*c);
  ASSERT_TRUE(plan.ok()) << plan.status().to_string();
  ASSERT_EQ(plan->layers, 6);
  for (const std::string id : {"w8u4o", "w4u16o", "w8u4"}) {
    SCOPED_TRACE(id);
    auto eager_k = layer_program(*c, id);
    auto graph_k = layer_program(*c, id);
    ASSERT_TRUE(eager_k && graph_k);
    dispatcher::GraphOptions forced;
    forced.force = true;
    forced.warm_regions = 1;
    ASSERT_TRUE(dispatcher::fuse_chain(*c, dispatcher::graph_chain_kernel(*c, std::move(graph_k), forced)).ok());
    const dispatcher::GraphCounters before = dispatcher::graph_counters();
    std::vector<at::Tensor> xs, ys;
    for (int i = 0; i < 12; ++i) {
      // Not bypassed: the draw is the op that flushes the previous region where a capture may begin.
      xs.push_back(at::randn({1, 2048}, layers[0][0].options()));
      ys.push_back(decode(xs.back(), layers, false));  // kept: a later replay must not overwrite it
    }
    const dispatcher::GraphCounters after = dispatcher::graph_counters();
    EXPECT_GE(after.replays, before.replays + 8) << "the graph served the steps: " << c->kernel.load()->describe();
    EXPECT_EQ(after.check_failures, before.check_failures);
    dispatcher::unfuse_chain(*c, dispatcher::ChainState::kAten);
    for (size_t i = 0; i < xs.size(); ++i) {
      dispatcher::BypassScope a;
      std::vector<at::Tensor> ext = c->last_externals();
      ext.at(static_cast<size_t>(c->nodes[0].inputs[0].index)) = xs[i];
      for (size_t l = 0; l < layers.size(); ++l)  // at::linear's w.t() died with its call
        ext.at(static_cast<size_t>(plan->groups[l].args.w)) = layers[l][2].t();
      auto outs = bench::last_output_only(*c);
      outs.back()[0] = at::empty_like(ys[i]);
      ASSERT_TRUE(eager_k->run(ext, outs).ok());
      EXPECT_TRUE(at::equal(ys[i], outs.back()[0])) << "step " << i << ": the graph's result is the kernels' own";
      const at::Tensor ref = decode(xs[i], layers, false);
      EXPECT_LE((ys[i] - ref).abs().max().item<double>(),
                8 * std::ldexp(1.0, -11) * std::sqrt(6.0) * ref.abs().max().item<double>()) << "step " << i;
    }
  }
}

// A weight whose data is not 16-byte aligned (a view at an odd offset) does not meet the kernel's loads: its layer
// runs as its ATen ops, equal to eager bit for bit, and the other layers still as the kernel.
TEST(ProgramsGpu, AMisalignedWeightRunsItsLayerAsATenOps) {
  CUDAL1_REQUIRE_DEFERRAL();
  Layers layers = make_layers(c10::ScalarType::Half, 512, 3);
  {
    dispatcher::BypassScope a;
    at::Tensor base = at::empty({512 * 512 + 1}, layers[1][2].options());
    layers[1][2] = base.narrow(0, 1, 512 * 512).view({512, 512}).copy_(layers[1][2]);  // 2 bytes off
  }
  auto input = [&] { dispatcher::BypassScope a; return at::randn({2, 512}, layers[0][0].options()); };
  const at::Tensor x0 = input();
  dispatcher::ChainRecord* c = bench::record_chain([&] { decode(x0, layers, true); }, 3);
  ASSERT_NE(c, nullptr);
  auto k = layer_program(*c, "w8u4");
  ASSERT_TRUE(k);
  dispatcher::ChainKernel* raw = k.get();
  ASSERT_TRUE(dispatcher::fuse_chain(*c, std::move(k)).ok());
  const at::Tensor x = input();
  const at::Tensor y = decode(x, layers, true);
  const at::Tensor ref = [&] { dispatcher::BypassScope a; return decode(x, layers, true); }();
  EXPECT_LE((y - ref).abs().max().item<double>(), 8 * std::ldexp(1.0, -11) * std::sqrt(3.0) * ref.abs().max().item<double>());
  EXPECT_NE(raw->describe().find("2 layer kernels, 1 layers as ATen ops"), std::string::npos) << raw->describe();
  dispatcher::unfuse_chain(*c, dispatcher::ChainState::kAten);
}

}  // namespace
}  // namespace cudal1::optimizer
