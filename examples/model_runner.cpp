/// @brief A plain LibTorch app that serves a TorchScript model, as a C++ inference server would: it loads the
/// model, feeds it a seeded random batch, and times steady-state iterations with CUDA synchronisation. cudal1 is
/// whatever the environment says (CUDAL1_ENABLE, CUDAL1_MODE); the app calls cudal1 only to wait for its tuner
/// and to say what it did. scripts/real_models.sh runs it off, tuning and serving, and compares the outputs.
///
/// Usage: cudal1_model_runner MODEL.pt INPUT_SPEC ITERS OUT.pt [REFERENCE.pt]
///   INPUT_SPEC  f32:32x3x224x224 (randn) or i64:8x512:50257 (randint below the last number)
///   OUT.pt      the output of the last iteration (first tensor of a tuple), saved with torch::save
///   REFERENCE   an earlier run's OUT.pt: prints the max abs difference and the output's scale
/// RUNNER_JIT_FUSER=off turns TorchScript's TensorExpr fuser off (its fused groups then run as the ops they hold).
/// Prints one line "RESULT ms_per_iter=... max_abs_diff=... scale=... ms_synced=... ms_host=... ms_gpu=..." for the
/// driver script (ms_gpu: a forward's GPU time with the host out of the way, -1 where it could not be measured).
#include <torch/csrc/jit/passes/tensorexpr_fuser.h>
#include <torch/script.h>
#include <torch/torch.h>

#include <execinfo.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "cudal1/cudal1.h"

#if CUDAL1_TORCH_CUDA
#include <ATen/cuda/CUDAEvent.h>
#include <ATen/cuda/Sleep.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace {

at::Tensor make_input(const std::string& spec, torch::Device dev) {
  const auto colon = spec.find(':');
  const std::string kind = spec.substr(0, colon);
  std::string rest = spec.substr(colon + 1);
  int64_t high = 0;
  if (const auto c2 = rest.find(':'); c2 != std::string::npos) {
    high = std::stoll(rest.substr(c2 + 1));
    rest = rest.substr(0, c2);
  }
  std::vector<int64_t> sizes;
  std::stringstream ss(rest);
  for (std::string d; std::getline(ss, d, 'x');) sizes.push_back(std::stoll(d));
  torch::manual_seed(0);  // the same batch in every process
  const at::Tensor cpu = kind == "i64" ? torch::randint(high, sizes, torch::kLong) : torch::randn(sizes);
  return cpu.to(dev);
}

at::Tensor first_tensor(const c10::IValue& v) {
  if (v.isTensor()) return v.toTensor();
  if (v.isTuple()) return first_tensor(v.toTupleRef().elements()[0]);
  if (v.isList()) return first_tensor(v.toListRef()[0]);
  if (v.isGenericDict()) return first_tensor(v.toGenericDict().begin()->value());
  throw std::runtime_error("the model returned no tensor");
}

/// Milliseconds per forward, median of 5 rounds of `iters`: back to back (throughput), or with `synced` each
/// forward waited for (latency, as an app that reads every result has it). With `synced`, `host_ms` gets the
/// median time the host spends issuing one forward (until forward() returns, the GPU idle when it starts): a
/// forward whose host time is near its synced time is bound by the host, not the GPU.
double time_iters(torch::jit::Module& m, const std::vector<c10::IValue>& in, int iters, bool cuda, bool synced,
                  double* host_ms = nullptr) {
  std::vector<double> ms, host;
  using Ms = std::chrono::duration<double, std::milli>;
  for (int r = 0; r < 5; ++r) {  // median of 5 rounds
    if (cuda) torch::cuda::synchronize();
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < iters; ++i) {
      const auto h0 = std::chrono::steady_clock::now();
      m.forward(in);
      if (host_ms) host.push_back(Ms(std::chrono::steady_clock::now() - h0).count());
      if (cuda && synced) torch::cuda::synchronize();
    }
    if (cuda) torch::cuda::synchronize();
    ms.push_back(Ms(std::chrono::steady_clock::now() - t0).count() / iters);
  }
  std::sort(ms.begin(), ms.end());
  if (host_ms) {
    std::sort(host.begin(), host.end());
    *host_ms = host[host.size() / 2];
  }
  return ms[ms.size() / 2];
}

/// Milliseconds of GPU work in one forward, the host out of the way: a spin kernel holds the stream while the host
/// issues the forward, so the events around the forward time only the GPU's work, none of its waits for the host.
/// A sample counts only if the spin was still running when forward() returned (and cudal1 had flushed what it
/// defers); the spin doubles until that holds, up to kMaxSpin cycles (about 0.13 s, far beyond any forward's host
/// time here). A forward that waits for the GPU (a synchronising op: Llama's traced mask code) never gets ahead, so
/// after kMaxMisses tries at that length it gives up. Median of the valid samples of 21 tries, or -1 (no CUDA torch,
/// or the host never got ahead).
double gpu_ms(torch::jit::Module& m, const std::vector<c10::IValue>& in) {
#if CUDAL1_TORCH_CUDA
  constexpr int64_t kMaxSpin = int64_t{1} << 28;
  constexpr int kMaxMisses = 3;
  std::vector<double> ms;
  int64_t cycles = 4'000'000;
  int misses = 0;
  for (int t = 0; t < 21 && misses < kMaxMisses; ++t) {
    torch::cuda::synchronize();
    const auto stream = c10::cuda::getCurrentCUDAStream();
    at::cuda::CUDAEvent begin(cudaEventDefault), end(cudaEventDefault);
    at::cuda::sleep(cycles);
    begin.record(stream);
    m.forward(in);
    cudal1::flush();
    const bool ahead = !begin.query();  // the spin (and so the forward) had not started when the host was done
    end.record(stream);
    torch::cuda::synchronize();
    if (ahead) {
      ms.push_back(begin.elapsed_time(end));
    } else if (cycles < kMaxSpin) {
      cycles = std::min(kMaxSpin, cycles * 2);
    } else {
      ++misses;
    }
  }
  if (ms.empty()) {
    std::fprintf(stderr, "model_runner: no GPU time (ms_gpu=-1): the forward did not return before a %.2g-cycle spin "
                 "ended, so it waits for the GPU\n", static_cast<double>(kMaxSpin));
    return -1;
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
#else
  (void)m;
  (void)in;
  return -1;
#endif
}

}  // namespace

/// A host sampling profiler preloaded into the runner (bench/probes/hostprof.cpp) samples only while this window
/// is open: the timed loops. Absent (the usual case), the calls are skipped.
extern "C" void cudal1_probe_window(int open) __attribute__((weak));

namespace {
/// An abort (a heap check, an assertion in a library) or a crash prints the dying thread's stack first: a
/// harness's failure should say where it happened.
void print_stack_and_die(int sig) {
  void* frames[64];
  const int n = backtrace(frames, 64);
  const char msg[] = "\n*** model_runner: fatal signal, the stack follows\n";
  (void)!write(2, msg, sizeof(msg) - 1);
  backtrace_symbols_fd(frames, n, 2);
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}
}  // namespace

int main(int argc, char** argv) {
  void* warm[1];
  (void)backtrace(warm, 1);  // loads the unwinder now: the handler must not allocate on a broken heap
  std::signal(SIGABRT, print_stack_and_die);
  std::signal(SIGSEGV, print_stack_and_die);
  if (argc < 5) {
    std::fprintf(stderr, "usage: %s MODEL.pt INPUT_SPEC ITERS OUT.pt [REFERENCE.pt]\n", argv[0]);
    return 2;
  }
  try {
    if (const char* f = std::getenv("RUNNER_JIT_FUSER"); f && std::string(f) == "off")
      torch::jit::setTensorExprFuserEnabled(false);
    const bool cuda = torch::cuda::is_available();
    const torch::Device dev = cuda ? torch::kCUDA : torch::kCPU;
    torch::jit::Module m = torch::jit::load(argv[1], dev);
    m.eval();
    const std::vector<c10::IValue> in{make_input(argv[2], dev)};
    const int iters = std::max(1, std::atoi(argv[3]));
    c10::InferenceMode guard;
    // Warm-up: as many calls as a signature needs to turn hot and more; then let cudal1's tuner finish (tune
    // mode), and run again so that every swapped kernel and cached entry is in place before timing.
    for (int i = 0; i < 120; ++i) m.forward(in);
    if (cuda) torch::cuda::synchronize();
    const bool idle = cudal1::wait_idle(900.0);
    for (int i = 0; i < 20; ++i) m.forward(in);
    // Forward graphs (Note [Forward graphs]) settle, capture and hold a trial on the app's own calls after the
    // tuner is done: call on until they are decided (bounded), so that the timed loops see the steady state.
    for (int i = 0; i < 2000 && cudal1::stats().forward_graphs_undecided > 0; ++i) m.forward(in);
    if (cudal1_probe_window) cudal1_probe_window(1);
    const double ms = time_iters(m, in, iters, cuda, /*synced=*/false);
    double host = 0;
    const double synced = time_iters(m, in, iters, cuda, /*synced=*/true, &host);
    if (cudal1_probe_window) cudal1_probe_window(0);
    const double gpu = cuda ? gpu_ms(m, in) : -1;
    const at::Tensor out = first_tensor(m.forward(in)).to(torch::kCPU).to(torch::kFloat);
    torch::save(out, argv[4]);
    double diff = -1, scale = out.abs().max().item<double>();
    if (argc > 5) {
      at::Tensor ref;
      torch::load(ref, argv[5]);
      diff = (out - ref).abs().max().item<double>();
      scale = ref.abs().max().item<double>();
    }
    cudal1::flush();
    std::printf("cudal1: %s%s\n", cudal1::status_line().c_str(), idle ? "" : " (tuner still busy after 900 s)");
    std::printf("cudal1: %s\n", cudal1::forward_graph_status().c_str());
    std::printf("RESULT ms_per_iter=%.4f max_abs_diff=%.6g scale=%.6g ms_synced=%.4f ms_host=%.4f ms_gpu=%.4f\n", ms,
                diff, scale, synced, host, gpu);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "model_runner: %s\n", e.what());
    return 1;
  }
}
