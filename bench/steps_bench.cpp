/// @brief bench_steps: launch-bound loops as an app runs them (Note [Launch-bound chains]), through libcudal1.so as
/// an app links it: cudal1 is whatever the environment says (CUDAL1_ENABLE=1 CUDAL1_MODE=tune to measure it). Row:
/// an 8-layer decode step on [1, 4096] fp16 (layer norm, linear, tanh-GELU, residual add a layer: 32 ATen calls,
/// the weights 256 MiB), the launch-bound case. The step runs until cudal1's tuner is idle and the graph
/// trial had its regions; then blocks of `steps` steps back to back (the app's throughput: wall clock from a
/// synchronised start to a synchronised end, divided by the steps), cudal1 on and ATen only (ScopedAtenOnly) in
/// random order, and the same with each step waited for (latency), median of the rounds. The floor is the weights'
/// bytes at the device's copy bandwidth (a device-to-device copy of 256 MiB, timed the same way). With a file of
/// Python timings (bench/steps_compile.py: eager, torch.compile and its reduce-overhead mode, the same step) their
/// speedups over Python eager are printed beside ours.
/// Usage: bench_steps [python_timings.txt] [rounds]
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "cudal1/cudal1.h"

namespace {

using Clock = std::chrono::steady_clock;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

/// "PY row=<name> eager_us=<x> compile_us=<y> reduce_overhead_us=<z>" lines, by row.
std::map<std::string, std::vector<double>> read_python(const char* path) {
  std::map<std::string, std::vector<double>> out;
  std::ifstream f(path);
  for (std::string line; std::getline(f, line);) {
    if (line.rfind("PY row=", 0) != 0) continue;
    const auto sp = line.find(' ', 7);
    std::vector<double> v;
    for (const char* key : {"eager_us=", "compile_us=", "reduce_overhead_us="}) {
      const auto k = line.find(key);
      v.push_back(k == std::string::npos ? 0 : std::stod(line.substr(k + std::string(key).size())));
    }
    out[line.substr(7, sp - 7)] = v;
  }
  return out;
}

struct Layer {
  at::Tensor ln_w, ln_b, w, b;
};

/// One decode step as eager C++ writes it: per layer x = x + gelu(linear(layer_norm(x)), tanh).
at::Tensor decode_step(const at::Tensor& x, const std::vector<Layer>& layers) {
  at::Tensor h = x;
  for (const Layer& l : layers) {
    const at::Tensor n = at::layer_norm(h, {h.size(-1)}, l.ln_w, l.ln_b, 1e-5);
    h = h.add(at::gelu(at::linear(n, l.w, l.b), "tanh"));
  }
  return h;
}

/// Microseconds a step over `n` steps: back to back, or each waited for (`synced`).
template <typename F>
double per_step_us(const F& step, int n, bool synced) {
  torch::cuda::synchronize();
  const auto t0 = Clock::now();
  for (int i = 0; i < n; ++i) {
    step();
    if (synced) torch::cuda::synchronize();
  }
  torch::cuda::synchronize();
  return std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / n;
}

}  // namespace

int main(int argc, char** argv) {
  const auto py = argc > 1 ? read_python(argv[1]) : std::map<std::string, std::vector<double>>{};
  const int rounds = argc > 2 ? std::max(3, std::atoi(argv[2])) : 15;
  if (!torch::cuda::is_available()) {
    std::printf("bench_steps: no CUDA device; nothing measured (cudal1 %s)\n", cudal1::status_line().c_str());
    return 0;
  }
  constexpr int64_t kWidth = 4096;
  constexpr int kLayers = 8, kSteps = 50;
  torch::manual_seed(0);
  const auto f16 = torch::TensorOptions().device(torch::kCUDA).dtype(torch::kHalf);
  std::vector<Layer> layers;
  int64_t weight_bytes = 0;
  for (int l = 0; l < kLayers; ++l) {
    Layer L{torch::ones({kWidth}, f16), torch::zeros({kWidth}, f16),
            torch::randn({kWidth, kWidth}, f16).mul_(1.0 / 64), torch::randn({kWidth}, f16).mul_(0.1)};
    weight_bytes += L.w.nbytes() + L.b.nbytes() + L.ln_w.nbytes() + L.ln_b.nbytes();
    layers.push_back(L);
  }
  const at::Tensor x = torch::randn({1, kWidth}, f16);
  at::Tensor last;  // the app holds each step's result until the next one: a graph must copy it out
  auto step = [&] { last = decode_step(x, layers); };
  auto aten_step = [&] {
    cudal1::ScopedAtenOnly aten_only;
    last = decode_step(x, layers);
  };

  // Until cudal1 settles: the chain turns hot, is handled, and its graph (if any) has had its trial.
  const auto w0 = Clock::now();
  for (int i = 0; i < 6; ++i) {
    per_step_us(step, 200, false);
    cudal1::wait_idle(60);
  }
  const double settle_s = std::chrono::duration<double>(Clock::now() - w0).count();

  at::Tensor ref, got;
  {
    cudal1::ScopedAtenOnly aten_only;
    ref = decode_step(x, layers);
  }
  for (int i = 0; i < 3; ++i) step();  // served as cudal1 serves the loop (by its graph, once kept)
  got = last;
  const double diff = (got.to(torch::kFloat) - ref.to(torch::kFloat)).abs().max().item<double>();
  const double scale = ref.to(torch::kFloat).abs().max().item<double>();

  std::mt19937 rng(7);
  std::vector<double> on, off, on_sync, off_sync;
  for (int r = 0; r < rounds; ++r) {
    if (rng() & 1) {
      off.push_back(per_step_us(aten_step, kSteps, false));
      on.push_back(per_step_us(step, kSteps, false));
    } else {
      on.push_back(per_step_us(step, kSteps, false));
      off.push_back(per_step_us(aten_step, kSteps, false));
    }
    on_sync.push_back(per_step_us(step, 10, true));
    off_sync.push_back(per_step_us(aten_step, 10, true));
  }
  // The floor: the weights read once, at the copy bandwidth (a copy of 256 MiB reads and writes 512 MiB).
  const at::Tensor src = torch::empty({int64_t{128} << 20}, f16), dst = torch::empty_like(src);
  std::vector<double> copy;
  for (int r = 0; r < 10; ++r) copy.push_back(per_step_us([&] { dst.copy_(src); }, 5, false));
  const double floor_us = median(copy) * static_cast<double>(weight_bytes) / (2.0 * src.nbytes());

  const double a = median(off), c = median(on);
  std::printf("%s\nsettled in %.1f s; output max |diff| %.3g at scale %.3g (cudal1 against ATen)\n\n",
              cudal1::status_line().c_str(), settle_s, diff, scale);
  std::printf("%-16s %9s %9s %8s %9s %9s %9s %9s %9s %8s %9s %8s %10s %9s\n", "row", "aten_us", "cudal1_us",
              "speedup", "floor_us", "c/floor", "aten_lat", "c1_lat", "py_eag_us", "comp_us", "compile_x", "ro_us",
              "ro_x", "lat_x");
  char pybuf[96] = "        -        -         -        -        -";
  if (const auto it = py.find("decode_step"); it != py.end() && it->second[0] > 0) {
    const auto& v = it->second;
    std::snprintf(pybuf, sizeof pybuf, "%9.1f %8.1f %8.3fx %8.1f %7.3fx", v[0], v[1], v[1] > 0 ? v[0] / v[1] : 0.0,
                  v[2], v[2] > 0 ? v[0] / v[2] : 0.0);
  }
  std::printf("%-16s %9.1f %9.1f %7.3fx %9.1f %9.2f %9.1f %9.1f %s %9.3fx\n", "decode_step f16", a, c, a / c, floor_us,
              c / floor_us, median(off_sync), median(on_sync), pybuf, median(off_sync) / median(on_sync));
  std::printf("\n%d rounds of %d steps each way (median); %d layers, weights %.0f MiB; cudal1 %s\n", rounds, kSteps,
              kLayers, weight_bytes / 1048576.0, cudal1::is_active() ? "on" : "off");
  return 0;
}
