/// @brief A plain LibTorch app that serves a TorchScript model, as a C++ inference server would: it loads the
/// model, feeds it a seeded random batch, and times steady-state iterations with CUDA synchronisation. cudal1 is
/// whatever the environment says (CUDAL1_ENABLE, CUDAL1_MODE); the app calls cudal1 only to wait for its tuner
/// and to say what it did. scripts/real_models.sh runs it off, tuning and serving, and compares the outputs.
///
/// Usage: cudal1_model_runner MODEL.pt INPUT_SPEC ITERS OUT.pt [REFERENCE.pt]
///   INPUT_SPEC  f32:32x3x224x224 (randn) or i64:8x512:50257 (randint below the last number)
///   OUT.pt      the output of the last iteration (first tensor of a tuple), saved with torch::save
///   REFERENCE   an earlier run's OUT.pt: prints the max abs difference and the output's scale
/// Prints one line "RESULT ms_per_iter=... max_abs_diff=... scale=..." for the driver script.
#include <torch/script.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include "cudal1/cudal1.h"

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

}  // namespace

int main(int argc, char** argv) {
  if (argc < 5) {
    std::fprintf(stderr, "usage: %s MODEL.pt INPUT_SPEC ITERS OUT.pt [REFERENCE.pt]\n", argv[0]);
    return 2;
  }
  try {
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
    const double ms = time_iters(m, in, iters, cuda, /*synced=*/false);
    double host = 0;
    const double synced = time_iters(m, in, iters, cuda, /*synced=*/true, &host);
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
    std::printf("RESULT ms_per_iter=%.4f max_abs_diff=%.6g scale=%.6g ms_synced=%.4f ms_host=%.4f\n", ms, diff, scale,
                synced, host);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "model_runner: %s\n", e.what());
    return 1;
  }
}
