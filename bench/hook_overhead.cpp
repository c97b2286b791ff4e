/// @brief Host cost of the hook per call on a small op (16 elements, so the GPU is never the bottleneck):
/// cudal1 off (no hook registered), on but cold (hooked, profiled, not replaced), and on and replaced (served by
/// a cudal1 kernel). Google Benchmark; run with --benchmark_repetitions=N for medians. The three run in this
/// order in one process because hooks, once registered, stay registered.
#include <ATen/ATen.h>
#include <benchmark/benchmark.h>

#include <cstdio>

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

const at::Tensor& input() {
  static const at::Tensor x = at::randn({16}, at::TensorOptions().device(on_gpu() ? at::kCUDA : at::kCPU));
  return x;
}

void install_once() {
  static const bool done = [] {
    dispatcher::HookOptions o;
    o.ops = optimizer::all_family_ops();
    o.hot_calls = int64_t{1} << 60;  // never hot by itself: "on but cold"
    o.profile_cpu = !on_gpu();
    const Status s = dispatcher::install_hooks(o, {});
    if (!s.ok()) std::fprintf(stderr, "install_hooks: %s\n", s.to_string().c_str());
    return s.ok();
  }();
  (void)done;
}

void BM_Relu_Off(benchmark::State& state) {
  const at::Tensor& x = input();
  for (auto _ : state) benchmark::DoNotOptimize(at::relu(x));
  state.SetLabel(on_gpu() ? "cuda" : "cpu");
}

void BM_Relu_OnCold(benchmark::State& state) {
  install_once();
  const at::Tensor& x = input();
  for (auto _ : state) benchmark::DoNotOptimize(at::relu(x));
  state.SetLabel(on_gpu() ? "cuda" : "cpu");
}

/// The hook registered, this thread bypassing it: the dispatcher's cost of a boxed BackendSelect kernel alone.
void BM_Relu_OnBypassed(benchmark::State& state) {
  install_once();
  const at::Tensor& x = input();
  dispatcher::BypassScope bypass;
  for (auto _ : state) benchmark::DoNotOptimize(at::relu(x));
  state.SetLabel(on_gpu() ? "cuda" : "cpu");
}

void BM_Relu_OnReplaced(benchmark::State& state) {
  if (!on_gpu()) {
    state.SkipWithError("replacement needs a GPU");
    return;
  }
  install_once();
  static const bool tuned = [] {
    at::relu(input());
    dispatcher::SigRecord* rec = nullptr;
    dispatcher::for_each_record([&](dispatcher::SigRecord& r) {
      if (r.sig.text.rfind("aten::relu(f32[16]", 0) == 0) rec = &r;
    });
    optimizer::TunerOptions o;
    o.trials = 1;
    o.require_faster = false;  // measure the replaced path's host cost whatever the kernel's speed
    optimizer::Tuner t(o, nullptr);
    return rec && t.tune(*rec).ok() && rec->state.load() == dispatcher::SigState::kReplaced;
  }();
  if (!tuned) {
    state.SkipWithError("could not install a replacement");
    return;
  }
  const at::Tensor& x = input();
  for (auto _ : state) benchmark::DoNotOptimize(at::relu(x));
  state.SetLabel("cuda");
}

BENCHMARK(BM_Relu_Off)->MinTime(0.5);
BENCHMARK(BM_Relu_OnBypassed)->MinTime(0.5);
BENCHMARK(BM_Relu_OnCold)->MinTime(0.5);
BENCHMARK(BM_Relu_OnReplaced)->MinTime(0.5);

}  // namespace

BENCHMARK_MAIN();
