/// @brief Host cost of the hook per call on a small op (16 elements: the GPU is never the bottleneck), in one
/// process, the modes interleaved at random by Google Benchmark (run with --benchmark_repetitions=N
/// --benchmark_enable_random_interleaving=true): cudal1 off (hook kernels unregistered), hook registered but
/// bypassed (the dispatcher's boxing cost alone), on and cold (profiled, not replaced), on and replaced (served
/// by a cudal1 kernel); and off / cold for layer norm (a tuple-returning op with optional arguments). The
/// "Fuse" modes record op chains as CUDAL1_FUSE=on does (Note [Chain profiling]), no chain hot: a relu whose
/// input is never an earlier output (every call breaks the open chain), and relu(relu(x)), a two-op chain
/// committed every iteration, against the same without recording. ConvNet: a ResNet-sized forward on tiny tensors
/// (53 blocks of convolution, eval batch norm and in-place ReLU: 159 calls, 265 weights) as one program chain
/// records it (Note [Program chains]); its time is per forward.
#include <ATen/ATen.h>
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdio>
#include <vector>

#include "cudal1/dispatcher/chains.h"
#include "cudal1/dispatcher/cuda_glue.h"
#include "cudal1/dispatcher/hook.h"
#include "cudal1/optimizer/family.h"
#include "cudal1/optimizer/tuner.h"

namespace {

using namespace cudal1;

bool on_gpu() {
  static const bool gpu = dispatcher::has_torch_cuda() && dispatcher::cuda_device_count() > 0;
  return gpu;
}

at::TensorOptions opts() { return at::TensorOptions().device(on_gpu() ? at::kCUDA : at::kCPU); }

/// Cold signature: relu on 16 elements. Replaced signature: relu on 4x4 (same work, another signature).
const at::Tensor& cold_input() {
  static const at::Tensor x = at::randn({16}, opts());
  return x;
}
const at::Tensor& replaced_input() {
  static const at::Tensor x = at::randn({4, 4}, opts());
  return x;
}

bool set_up() {
  static const bool ok = [] {
    dispatcher::HookOptions o;
    o.ops = optimizer::all_family_ops();
    for (const auto& op : dispatcher::chain_ops())  // as the runtime does with CUDAL1_FUSE=on
      if (std::find(o.ops.begin(), o.ops.end(), op) == o.ops.end()) o.ops.push_back(op);
    o.hot_calls = int64_t{1} << 60;  // never hot by itself: "on but cold"
    o.profile_cpu = !on_gpu();
    o.chains = true;  // recording is switched per benchmark (set_chain_recording)
    if (Status s = dispatcher::install_hooks(o, {}); !s.ok()) {
      std::fprintf(stderr, "install_hooks: %s\n", s.to_string().c_str());
      return false;
    }
    if (!on_gpu()) return true;
    at::relu(replaced_input());
    dispatcher::SigRecord* rec = nullptr;
    dispatcher::for_each_record([&](dispatcher::SigRecord& r) {
      if (r.sig.text.rfind("aten::relu(f32[4,4]", 0) == 0) rec = &r;
    });
    optimizer::TunerOptions t;
    t.trials = 1;
    t.require_faster = false;  // measure the replaced path's host cost whatever the kernel's speed
    optimizer::Tuner tuner(t, nullptr);
    return rec && tuner.tune(*rec).ok() && rec->state.load() == dispatcher::SigState::kReplaced;
  }();
  return ok;
}

void run(benchmark::State& state, const at::Tensor& x, bool chains = false) {
  dispatcher::set_chain_recording(chains);
  for (auto _ : state) benchmark::DoNotOptimize(at::relu(x));
  dispatcher::set_chain_recording(false);
  state.SetLabel(on_gpu() ? "cuda" : "cpu");
}

/// Two connected calls an iteration: relu(relu(x)).
void run_pair(benchmark::State& state, bool chains) {
  dispatcher::set_chain_recording(chains);
  for (auto _ : state) benchmark::DoNotOptimize(at::relu(at::relu(cold_input())));
  dispatcher::set_chain_recording(false);
  dispatcher::close_chain_on_this_thread();
  state.SetLabel(on_gpu() ? "cuda" : "cpu");
}

void BM_Relu_Off(benchmark::State& state) {
  if (!set_up() || !dispatcher::suspend_hooks().ok()) return state.SkipWithError("set-up failed");
  run(state, cold_input());
  dispatcher::resume_hooks();
}

void BM_Relu_OnBypassed(benchmark::State& state) {
  if (!set_up()) return state.SkipWithError("set-up failed");
  dispatcher::BypassScope bypass;
  run(state, cold_input());
}

void BM_Relu_OnCold(benchmark::State& state) {
  if (!set_up()) return state.SkipWithError("set-up failed");
  run(state, cold_input());
}

void BM_Relu_OnColdFuse(benchmark::State& state) {
  if (!set_up()) return state.SkipWithError("set-up failed");
  run(state, cold_input(), /*chains=*/true);
}

void BM_ReluPair_OnCold(benchmark::State& state) {
  if (!set_up()) return state.SkipWithError("set-up failed");
  run_pair(state, false);
}

void BM_ReluPair_OnColdFuse(benchmark::State& state) {
  if (!set_up()) return state.SkipWithError("set-up failed");
  run_pair(state, true);
}

void BM_Relu_OnReplaced(benchmark::State& state) {
  if (!on_gpu()) return state.SkipWithError("replacement needs a GPU");
  if (!set_up()) return state.SkipWithError("set-up failed");
  run(state, replaced_input());
}

/// A multi-output op with optional tensors, an int list and a double: layer norm over [4,16].
void run_layer_norm(benchmark::State& state) {
  static const at::Tensor x = at::randn({4, 16}, opts()), w = at::randn({16}, opts()), b = at::randn({16}, opts());
  dispatcher::set_chain_recording(false);
  for (auto _ : state) benchmark::DoNotOptimize(at::native_layer_norm(x, {16}, w, b, 1e-5));
  state.SetLabel(on_gpu() ? "cuda" : "cpu");
}

void BM_LayerNorm_Off(benchmark::State& state) {
  if (!set_up() || !dispatcher::suspend_hooks().ok()) return state.SkipWithError("set-up failed");
  run_layer_norm(state);
  dispatcher::resume_hooks();
}

void BM_LayerNorm_OnCold(benchmark::State& state) {
  if (!set_up()) return state.SkipWithError("set-up failed");
  run_layer_norm(state);
}

/// One forward of the ConvNet (see the file's comment).
void run_convnet(benchmark::State& state, bool chains) {
  struct Block {
    at::Tensor w, g, b, m, v;
  };
  static const std::vector<Block> blocks = [] {
    std::vector<Block> out;
    for (int i = 0; i < 53; ++i)
      out.push_back({at::randn({8, 8, 1, 1}, opts()), at::rand({8}, opts()), at::randn({8}, opts()),
                     at::randn({8}, opts()), at::rand({8}, opts()).add_(0.5)});
    return out;
  }();
  static const at::Tensor x = at::randn({1, 8, 4, 4}, opts());
  dispatcher::set_chain_recording(chains);
  for (auto _ : state) {
    at::Tensor y = x;
    for (const Block& k : blocks) {
      y = at::conv2d(y, k.w);
      y = at::batch_norm(y, k.g, k.b, k.m, k.v, false, 0.1, 1e-5, true);
      y.relu_();
    }
    benchmark::DoNotOptimize(y);
  }
  dispatcher::set_chain_recording(false);
  dispatcher::close_chain_on_this_thread();
  state.SetLabel(on_gpu() ? "cuda, per forward of 159 calls" : "cpu, per forward of 159 calls");
}

void BM_ConvNet_Off(benchmark::State& state) {
  if (!set_up() || !dispatcher::suspend_hooks().ok()) return state.SkipWithError("set-up failed");
  run_convnet(state, false);
  dispatcher::resume_hooks();
}

void BM_ConvNet_OnCold(benchmark::State& state) {
  if (!set_up()) return state.SkipWithError("set-up failed");
  run_convnet(state, false);
}

void BM_ConvNet_OnColdFuse(benchmark::State& state) {
  if (!set_up()) return state.SkipWithError("set-up failed");
  run_convnet(state, true);
}

BENCHMARK(BM_Relu_Off)->MinTime(0.2);
BENCHMARK(BM_Relu_OnBypassed)->MinTime(0.2);
BENCHMARK(BM_Relu_OnCold)->MinTime(0.2);
BENCHMARK(BM_Relu_OnColdFuse)->MinTime(0.2);
BENCHMARK(BM_ReluPair_OnCold)->MinTime(0.2);
BENCHMARK(BM_ReluPair_OnColdFuse)->MinTime(0.2);
BENCHMARK(BM_Relu_OnReplaced)->MinTime(0.2);
BENCHMARK(BM_LayerNorm_Off)->MinTime(0.2);
BENCHMARK(BM_LayerNorm_OnCold)->MinTime(0.2);
BENCHMARK(BM_ConvNet_Off)->MinTime(0.5);
BENCHMARK(BM_ConvNet_OnCold)->MinTime(0.5);
BENCHMARK(BM_ConvNet_OnColdFuse)->MinTime(0.5);

}  // namespace

BENCHMARK_MAIN();
