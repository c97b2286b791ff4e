/// @brief Host cost of the hook per call on a small op (16 elements: the GPU is never the bottleneck), in one
/// process, the modes interleaved at random by Google Benchmark (run with --benchmark_repetitions=N
/// --benchmark_enable_random_interleaving=true): cudal1 off (hook kernels unregistered), hook registered but
/// bypassed (the dispatcher's boxing cost alone), on and cold (profiled, not replaced), on and replaced (served
/// by a cudal1 kernel); and off / cold for layer norm (a tuple-returning op with optional arguments). The
/// "Fuse" modes record op chains as CUDAL1_FUSE=on does (Note [Chain profiling]), no chain hot: a relu whose
/// input is never an earlier output (every call breaks the open chain), and relu(relu(x)), a two-op chain
/// committed every iteration, against the same without recording. ConvNet: a ResNet-sized forward on tiny tensors
/// (53 blocks of convolution, eval batch norm and in-place ReLU: 159 calls, 265 weights) as one program chain
/// records it (Note [Program chains]); its time is per forward. GeluNew: HF's tanh GELU written as 8 ops (as a
/// traced GPT-2 calls them) on 16 elements, per composite: off, cold with chains recorded, and deferred (the chain
/// fused, Note [Deferred regions], with a kernel that computes nothing: what is left is the host cost of deferring
/// 8 calls and ending the region, the part a fused chain adds in place of 8 launches). Deferral is enabled, so the
/// CUPTI guard is armed and every CUDA launch pays it: CUDAL1_CUPTI_GUARD=full|lean picks which (Note [Lean CUPTI
/// guard] in dispatcher/src/region.h).
#include <ATen/ATen.h>
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdio>
#include <vector>

#include "cudal1/core/config.h"
#include "cudal1/dispatcher/chains.h"
#include "cudal1/dispatcher/cuda_glue.h"
#include "cudal1/dispatcher/hook.h"
#include "cudal1/dispatcher/regions.h"
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
    dispatcher::DeferralOptions d;
    d.cpu = !on_gpu();
    d.cupti_full = config().cupti_full;  // CUDAL1_CUPTI_GUARD: the guard every launch below pays
    if (Status s = dispatcher::enable_deferral(d); !s.ok()) {
      std::fprintf(stderr, "enable_deferral: %s\n", s.to_string().c_str());
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

/// HF's gelu_new as the traced model calls it.
at::Tensor gelu_new(const at::Tensor& x) {
  const at::Tensor half = x.mul(0.5);  // Python's order: 0.5 * x first, then the bracket
  const at::Tensor inner = x.add(x.pow(3.0).mul(0.044715)).mul(0.7978845608028654);
  return half.mul(inner.tanh().add(1.0));
}

const at::Tensor& gelu_input() {
  static const at::Tensor x = at::randn({2, 8}, opts());
  return x;
}

/// Host cost only: the region's kernel writes nothing (the benchmark never reads the values).
class NoWork final : public dispatcher::ChainKernel {
 public:
  Status run(const std::vector<at::Tensor>&, const std::vector<std::vector<at::Tensor>>&) noexcept override {
    return Status();
  }
  std::string describe() const override { return "nothing (host cost benchmark)"; }
};

/// The gelu_new chain, recorded and fused with NoWork once per process; null if it could not be.
dispatcher::ChainRecord* fused_gelu() {
  static dispatcher::ChainRecord* rec = []() -> dispatcher::ChainRecord* {
    dispatcher::set_chain_recording(true);
    for (int i = 0; i < 4; ++i) gelu_new(gelu_input());
    dispatcher::set_chain_recording(false);
    dispatcher::close_chain_on_this_thread();
    dispatcher::ChainRecord* found = nullptr;
    dispatcher::for_each_chain([&](dispatcher::ChainRecord& c) {
      if (c.nodes.size() == 8 && c.nodes[0].rec->sig.text.find("[2,8]") != std::string::npos) found = &c;
    });
    if (!found) return nullptr;
    if (Status s = dispatcher::fuse_chain(*found, std::make_unique<NoWork>()); !s.ok()) {
      std::fprintf(stderr, "fuse_chain: %s\n", s.to_string().c_str());
      return nullptr;
    }
    return found;
  }();
  return rec;
}

void run_gelu(benchmark::State& state, const at::Tensor& x, bool chains) {
  dispatcher::set_chain_recording(chains);
  for (auto _ : state) benchmark::DoNotOptimize(gelu_new(x));
  dispatcher::set_chain_recording(false);
  dispatcher::close_chain_on_this_thread();
  dispatcher::flush_all_regions();
  state.SetLabel(on_gpu() ? "cuda, per composite of 8 calls" : "cpu, per composite of 8 calls");
}

void BM_GeluNew_Off(benchmark::State& state) {
  if (!set_up() || !dispatcher::suspend_hooks().ok()) return state.SkipWithError("set-up failed");
  run_gelu(state, gelu_input(), false);
  dispatcher::resume_hooks();
}

void BM_GeluNew_OnColdFuse(benchmark::State& state) {
  if (!set_up()) return state.SkipWithError("set-up failed");
  // Before fused_gelu() the chain is recorded, not fused: cold. After it, the same calls are deferred, so this
  // mode needs its own input signature: [2,8] is the fused one, so run it on a [16] tensor instead.
  static const at::Tensor x = at::randn({16}, opts());
  run_gelu(state, x, /*chains=*/true);
}

void BM_GeluNew_Deferred(benchmark::State& state) {
  if (!set_up() || !fused_gelu()) return state.SkipWithError("set-up failed");
  const uint64_t before = dispatcher::region_counters().completed;
  run_gelu(state, gelu_input(), false);
  const uint64_t whole = dispatcher::region_counters().completed - before;
  if (whole + 1 < static_cast<uint64_t>(state.iterations()))
    state.SkipWithError("regions did not complete whole: the host cost measured is not deferral's");
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
BENCHMARK(BM_GeluNew_Off)->MinTime(0.2);
BENCHMARK(BM_GeluNew_OnColdFuse)->MinTime(0.2);
BENCHMARK(BM_GeluNew_Deferred)->MinTime(0.2);

}  // namespace

BENCHMARK_MAIN();
