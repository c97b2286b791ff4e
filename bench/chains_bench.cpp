/// @brief bench_chains: the chain suite (bench/chain_suite.h) through the hook on the GPU. For each row: the
/// chain is recorded, tuned (Note [Chain tuning]) and fused when a kernel wins; then the eager chain is timed as
/// the app runs it, with cudal1's regions (the deferred calls, the chain kernel, the flush at the end event) and
/// with ATen only, interleaved, L2 flushed before each (Note [Timing]), median of the repetitions. The fused floor
/// is a device copy of the chain's external inputs plus its result (what a fused kernel must move at least).
/// kernel_us and kernel_x are the tuner's: the winning kernel alone, storing the last output, against the ATen chain
/// (paired median ratio). The app's result is held past the end event, so the region must write it.
/// With a file of torch.compile timings (bench/chains_compile.py, same rows in Python), its speedups over Python
/// eager (default and reduce-overhead modes) are printed beside ours.
/// Usage: bench_chains [compile_timings.txt] [reps]
#include <ATen/ATen.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <sstream>

#include "bench/chain_suite.h"
#include "cudal1/core/cuda_driver.h"
#include "cudal1/dispatcher/chains.h"
#include "cudal1/dispatcher/cuda_glue.h"
#include "cudal1/dispatcher/hook.h"
#include "cudal1/dispatcher/regions.h"
#include "cudal1/optimizer/chain_tuner.h"
#include "cudal1/optimizer/device_info.h"
#include "cudal1/optimizer/measure.h"
#include "optimizer/chains/chain_causal.h"
#include "optimizer/chains/chain_library.h"

namespace {

using namespace cudal1;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

/// Python's timings of one row: eager, torch.compile, and its reduce-overhead mode (0 when not given).
struct PyTimes {
  double eager = 0, compile = 0, reduce_overhead = 0;
};

/// Python's timings: "PY row=<name> eager_us=<x> compile_us=<y> [reduce_overhead_us=<z>]" lines.
std::map<std::string, PyTimes> read_compile(const char* path) {
  std::map<std::string, PyTimes> out;
  std::ifstream f(path);
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("PY ", 0) != 0) continue;
    const auto row = line.find("row="), e = line.find(" eager_us="), c = line.find(" compile_us=");
    if (row == std::string::npos || e == std::string::npos || c == std::string::npos) continue;
    PyTimes t;
    t.eager = std::stod(line.substr(e + 10));
    t.compile = std::stod(line.substr(c + 12));
    if (const auto r = line.find(" reduce_overhead_us="); r != std::string::npos) t.reduce_overhead = std::stod(line.substr(r + 20));
    out[line.substr(row + 4, e - row - 4)] = t;
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  const auto compiled = argc > 1 ? read_compile(argv[1]) : std::map<std::string, PyTimes>{};
  const int reps = argc > 2 ? std::atoi(argv[2]) : 30;
  if (!dispatcher::has_torch_cuda() || dispatcher::cuda_device_count() == 0) {
    std::printf("bench_chains: no CUDA device; nothing measured\n");
    return 0;
  }
  dispatcher::HookOptions o;
  o.mode = Mode::kTune;
  o.ops = {"add.Tensor", "sub.Tensor", "mul.Tensor", "div.Tensor", "add.Scalar", "sub.Scalar", "mul.Scalar",
           "div.Scalar", "neg", "exp", "tanh", "sigmoid", "silu", "relu", "gelu", "mean.dim", "sum.dim_IntList",
           "amax", "amin", "native_layer_norm", "_softmax", "native_batch_norm", "cudnn_batch_norm",
           "max_pool2d_with_indices", "mm", "addmm"};
  for (const auto& op : dispatcher::chain_ops()) o.ops.push_back(op);
  o.hot_calls = 1000000;
  o.sample_every = 1000000;
  o.chains = true;
  if (Status s = dispatcher::install_hooks(o, {}); !s.ok()) return std::printf("%s\n", s.to_string().c_str()), 1;
  if (Status s = dispatcher::enable_deferral(); !s.ok()) return std::printf("%s\n", s.to_string().c_str()), 1;
  std::printf("deferral: %s\n", dispatcher::deferral_status().c_str());
  const auto info = optimizer::device_info(0);
  std::printf("device: %s, %d reps a row\n", info.ok() ? info.value().name.c_str() : "?", reps);
  const DriverApi* api = driver().value();
  const CUstream stream = dispatcher::current_stream(0).value();
  const at::Tensor flush = at::zeros({int64_t{64} << 20}, at::TensorOptions().dtype(at::kInt).device(at::kCUDA));
  CUevent e0, e1;
  api->cuEventCreate(&e0, CU_EVENT_DEFAULT);
  api->cuEventCreate(&e1, CU_EVENT_DEFAULT);

  std::printf("\n%-22s %4s %-15s %9s %9s %8s %9s %8s %9s %8s %9s %9s %9s %9s %9s\n", "chain", "ops", "kernel",
              "aten_us", "cudal1_us", "speedup", "kernel_us", "kernel_x", "floor_us", "k/floor", "py_eag_us",
              "compil_us", "compile_x", "ro_us", "ro_x");
  std::vector<double> speedups;
  const char* only = std::getenv("CHAIN_ROWS");  // e.g. "attention|bn_": the rows whose name holds one of the words
  for (const bench::ChainRow& row : bench::chain_suite(/*small=*/false)) {
    if (only && *only && !bench::row_selected(row.name, only)) continue;
    const std::vector<at::Tensor> in = bench::chain_inputs(row, 0);
    dispatcher::ChainRecord* c = bench::record_chain([&] { row.run(bench::next_call_inputs(row, in, 0)); });
    std::string kernel = "-";
    double kernel_us = 0, kernel_x = 0;
    if (c) {
      optimizer::ChainTuneOptions t;
      t.min_speedup = 1.0;
      optimizer::ChainTuneReport rep;
      auto k = optimizer::tune_chain(*c, t, &rep);
      size_t prefix = 0;  // as the runtime does: a chain that does not fuse whole fuses its longest fusable prefix
      if (k.status().code() == Code::kUnsupported) prefix = optimizer::fusable_prefix(*c);
      dispatcher::ChainRecord* fused = prefix ? dispatcher::prefix_chain(*c, prefix) : c;
      if (prefix && fused) {
        std::printf("# %s: %s; its first %zu ops fuse\n", row.name.c_str(), rep.note.c_str(), prefix);
        k = optimizer::tune_chain(*fused, t, &rep);
      }
      if (fused && k.ok() && dispatcher::fuse_chain(*fused, std::move(k).value()).ok()) {
        kernel = (prefix ? "prefix:" : "") + rep.variant;
        kernel_us = rep.kernel_us;
        kernel_x = rep.speedup;
      } else {
        kernel = k.status().code() == Code::kUnsupported ? "not fusable" : "ATen faster";
        kernel_us = rep.kernel_us;
        std::printf("# %s: %s\n", row.name.c_str(), rep.note.c_str());
      }
    }
    // The app's view: the eager chain with cudal1 (regions) and without (bypass), interleaved.
    std::mt19937 rng(7);
    std::vector<double> ta, tc, ratio;
    auto once = [&](bool aten) {
      (void)flush.amax();
      api->cuEventRecord(e0, stream);
      at::Tensor out;  // held past the end event, as an app holds its result: the region must write it
      if (aten) {
        dispatcher::BypassScope b;
        out = row.run(in);
      } else {
        out = row.run(in);
      }
      api->cuEventRecord(e1, stream);  // a CUDA call: an open region runs before the event (CUPTI guard)
      api->cuEventSynchronize(e1);
      float ms = 0;
      api->cuEventElapsedTime(&ms, e0, e1);
      return ms * 1000.0;
    };
    for (int i = 0; i < 3; ++i) once(true), once(false);
    for (int r = 0; r < reps; ++r) {
      double a, b;
      if (rng() & 1) a = once(true), b = once(false);
      else b = once(false), a = once(true);
      ta.push_back(a);
      tc.push_back(b);
      ratio.push_back(a / b);
    }
    // Each row stands alone: its fused chain lets go of its first signature, which the next row's chain may share
    // (attention and causal attention begin with the same bmm).
    if (c) dispatcher::for_each_chain([](dispatcher::ChainRecord& r) { dispatcher::unfuse_chain(r, dispatcher::ChainState::kAten); });
    int64_t bytes = 0;
    for (const auto& t : in) bytes += t.numel() * static_cast<int64_t>(t.element_size());
    {
      dispatcher::BypassScope b;
      const at::Tensor out = row.run(in);
      bytes += out.numel() * static_cast<int64_t>(out.element_size());
    }
    const auto floor = optimizer::time_device_copy(bytes, 0, 20);
    const double fl = floor.ok() ? floor.value() : 0;
    const double sp = median(ratio);
    speedups.push_back(sp);
    const auto py = compiled.find(row.name);
    char pybuf[96] = "        -         -         -         -         -";
    if (py != compiled.end()) {
      const PyTimes& t = py->second;
      std::snprintf(pybuf, sizeof(pybuf), "%9.1f %9.1f %8.3fx %9.1f %8.3fx", t.eager, t.compile, t.eager / t.compile,
                    t.reduce_overhead, t.reduce_overhead > 0 ? t.eager / t.reduce_overhead : 0.0);
    }
    // A prefix kernel's time is not the whole chain's: no kernel/floor ratio for it.
    // Nor for a GEMM-led row: it is bound by compute, not by the bytes of its inputs and outputs.
    const bool whole = kernel.rfind("prefix:", 0) != 0 && !row.gemm;
    std::printf("%-22s %4zu %-15s %9.1f %9.1f %7.3fx %9.1f %7.3fx %9.1f %8.2f %s\n", row.name.c_str(),
                c ? c->nodes.size() : 0, kernel.c_str(), median(ta), median(tc), sp, kernel_us, kernel_x, fl,
                whole && fl > 0 && kernel_us > 0 ? kernel_us / fl : 0.0, pybuf);
  }
  double g = 0;
  for (double s : speedups) g += std::log(s);
  std::printf("\ngeometric mean speedup over the ATen chains (all rows): %.3fx\n",
              speedups.empty() ? 0 : std::exp(g / static_cast<double>(speedups.size())));
  std::printf("attention: %llu calls on the causal path (Note [Causal attention]), %llu results copied instead of "
              "adopted (Note [Adopted results])\n",
              static_cast<unsigned long long>(optimizer::chains::causal_calls()),
              static_cast<unsigned long long>(optimizer::chains::attention_results_copied()));
  const auto rc = dispatcher::region_counters();
  std::printf("regions: opened %llu, completed %llu, flushed early %llu, lost %llu\n",
              static_cast<unsigned long long>(rc.opened), static_cast<unsigned long long>(rc.completed),
              static_cast<unsigned long long>(rc.diverged + rc.by_op + rc.by_cuda + rc.by_other),
              static_cast<unsigned long long>(rc.lost));
  return 0;
}
