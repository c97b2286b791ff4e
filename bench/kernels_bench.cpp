/// @brief Kernel benchmark on the GPU (every generator family):
/// for each signature, the tuner searches the technique space
/// (verification included) and the table shows ATen's and cudal1's best kernel time (medians of interleaved,
/// L2-flushed repetitions in the same run), the speedup, the memory floor (bytes read + written, in whole
/// 32-byte sectors, over the device-to-device copy bandwidth measured first in this run) and each one's ratio to
/// it, and the time of ATen's copy moving the same bytes (the practical floor of a small, launch-bound row).
/// Whether a kernel would be swapped in (noise-aware margin) is shown per row; swapped-in rows never lose to
/// ATen. "tune s" is the row's tuning wall time (NVRTC, verification and timing of every trial; Note [Tuning
/// rounds]).
/// Usage: bench_kernels [trials=24] ['word|word': rows whose name contains one] [variant: only ids containing it;
/// a trailing '$' anchors it at the id's end (Variant::matches)]
/// The round size comes from CUDAL1_TUNE_ROUND (default 4; >= trials: one round, the search before rounds).
#include <ATen/ATen.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "cudal1/core/config.h"
#include "bench/floor.h"
#include "cudal1/dispatcher/cuda_glue.h"
#include "cudal1/dispatcher/hook.h"
#include "cudal1/optimizer/family.h"
#include "cudal1/optimizer/measure.h"
#include "cudal1/optimizer/tuner.h"

#if defined(CUDAL1_TORCH_CUDA)
#include <c10/cuda/CUDAFunctions.h>
#endif

namespace {

using namespace cudal1;
using bench::sector_bytes;

struct Row {
  std::string name;
  std::function<at::Tensor()> make;
  std::function<at::Tensor(const at::Tensor&)> op;
  /// Bytes the op must move beyond its input and the returned tensor (e.g. indices it also writes).
  double extra_bytes = 0;
};

/// Eval-mode batch norm of `x` over dim 1 with parameters and running statistics made with `o` (their dtype),
/// through cudnn_batch_norm or native_batch_norm (the op the hook sees); returns the normalised output.
at::Tensor bn_eval(const at::Tensor& x, const at::TensorOptions& o, bool cudnn) {
  const int64_t c = x.size(1);
  const at::Tensor w = at::randn({c}, o), b = at::randn({c}, o), rm = at::randn({c}, o);
  const at::Tensor rv = at::rand({c}, o).add_(0.5);  // in place: no hooked op
  return cudnn ? std::get<0>(at::cudnn_batch_norm(x, w, b, rm, rv, false, 0.1, 1e-5))
               : std::get<0>(at::native_batch_norm(x, w, b, rm, rv, false, 0.1, 1e-5));
}

/// Device-to-device copy bandwidth (bytes read + written per second), median of 20 copies of 2 GiB.
double copy_bandwidth() {
#if defined(CUDAL1_TORCH_CUDA)
  const auto opts = at::TensorOptions().device(at::kCUDA).dtype(at::kFloat);
  at::Tensor a = at::randn({int64_t{1} << 29}, opts), b = at::empty_like(a);
  std::vector<double> ts;
  for (int i = 0; i < 23; ++i) {
    c10::cuda::device_synchronize();
    const auto t0 = std::chrono::steady_clock::now();
    b.copy_(a);
    c10::cuda::device_synchronize();
    if (i >= 3) ts.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(ts.begin(), ts.end());
  return 2.0 * a.nbytes() / ts[ts.size() / 2];
#else
  return 0;
#endif
}

}  // namespace

int main(int argc, char** argv) {
  if (!dispatcher::has_torch_cuda() || dispatcher::cuda_device_count() < 1) {
    std::printf("bench_kernels needs a CUDA device and a CUDA build of LibTorch; nothing measured here.\n");
    return 0;
  }
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // rows reach a redirected file as they finish, even if killed
  const int trials = argc > 1 ? std::atoi(argv[1]) : 24;
  // Run only rows whose name contains one of these '|'-separated words (all rows when empty).
  std::vector<std::string> only;
  for (std::string w, all = argc > 2 ? argv[2] : ""; !all.empty();) {
    const size_t bar = all.find('|');
    w = all.substr(0, bar);
    all = bar == std::string::npos ? "" : all.substr(bar + 1);
    if (!w.empty()) only.push_back(w);
  }
  dispatcher::HookOptions h;
  h.ops = optimizer::all_family_ops();
  h.hot_calls = 1;
  if (!dispatcher::install_hooks(h, {}).ok()) return 1;
  optimizer::TunerOptions o;
  o.trials = trials;
  o.round = config().tune_round;
  o.search = config().tune_search;
  o.timing_reps = 60;
  o.seed = 2026;
  if (argc > 3) o.only_variant = argv[3];  // e.g. "slide4.seg32": time or profile one technique alone
  optimizer::Tuner tuner(o, nullptr);

  const auto f32 = at::TensorOptions().device(at::kCUDA).dtype(at::kFloat);
  const auto bf16 = f32.dtype(at::kBFloat16), f16 = f32.dtype(at::kHalf);
  std::vector<Row> rows = {
      {"relu f32 [16384,4096]", [&] { return at::randn({16384, 4096}, f32); }, [](auto& x) { return at::relu(x); }},
      {"gelu-tanh bf16 [8192,8192]", [&] { return at::randn({8192, 8192}, bf16); },
       [](auto& x) { return at::gelu(x, "tanh"); }},
      {"gelu f16 [4096,11008]", [&] { return at::randn({4096, 11008}, f16); }, [](auto& x) { return at::gelu(x); }},
      {"silu bf16 gate half [8192,2x4096]", [&] { return at::randn({8192, 8192}, bf16).narrow(1, 4096, 4096); },
       [](auto& x) { return at::silu(x); }},
      {"sigmoid f32 col slice [8192,3000 of 4096]", [&] { return at::randn({8192, 4096}, f32).narrow(1, 0, 3000); },
       [](auto& x) { return at::sigmoid(x); }},
      {"tanh f16 transposed slice", [&] { return at::randn({6144, 8192}, f16).narrow(1, 0, 4096).t(); },
       [](auto& x) { return at::tanh(x); }},
      {"exp f32 [67108864]", [&] { return at::randn({int64_t{1} << 26}, f32); }, [](auto& x) { return at::exp(x); }},
      {"silu bf16 [1024,4096]", [&] { return at::randn({1024, 4096}, bf16); }, [](auto& x) { return at::silu(x); }},
      {"abs f32 channels-last [64,256,56,56]",
       [&] { return at::randn({64, 256, 56, 56}, f32).contiguous(at::MemoryFormat::ChannelsLast); },
       [](auto& x) { return at::abs(x); }},
      {"neg bf16 every 2nd col [8192,4096]", [&] { return at::randn({8192, 8192}, bf16).slice(1, 0, 8192, 2); },
       [](auto& x) { return at::neg(x); }},
      {"relu f32 [256,256] (small)", [&] { return at::randn({256, 256}, f32); }, [](auto& x) { return at::relu(x); }},
      {"softmax f32 [4096,32768]", [&] { return at::randn({4096, 32768}, f32); },
       [](auto& x) { return at::softmax(x, -1); }},
      {"softmax f32 [4096,65536]", [&] { return at::randn({4096, 65536}, f32); },
       [](auto& x) { return at::softmax(x, -1); }},
      {"log_softmax bf16 [8192,32000]", [&] { return at::randn({8192, 32000}, bf16); },
       [](auto& x) { return at::log_softmax(x, -1); }},
      {"softmax f16 [16384,1024] (attention rows)", [&] { return at::randn({16384, 1024}, f16); },
       [](auto& x) { return at::softmax(x, -1); }},
      {"softmax f32 [262144,128] (short rows)", [&] { return at::randn({262144, 128}, f32); },
       [](auto& x) { return at::softmax(x, -1); }},
      {"log_softmax f32 [1024,50257] (odd vocab)", [&] { return at::randn({1024, 50257}, f32); },
       [](auto& x) { return at::log_softmax(x, -1); }},
      {"softmax f32 [64,1000,56,56] dim 1 (spatial)", [&] { return at::randn({64, 1000, 56, 56}, f32); },
       [](auto& x) { return at::softmax(x, 1); }},
      {"log_softmax bf16 [32,32000,64] dim 1", [&] { return at::randn({32, 32000, 64}, bf16); },
       [](auto& x) { return at::log_softmax(x, 1); }},
      {"softmax f16 [8,16,2048,2048] dim 2 (attention over queries)",
       [&] { return at::randn({8, 16, 2048, 2048}, f16); }, [](auto& x) { return at::softmax(x, 2); }},
      {"softmax f32 [32,21,512,512] dim 1 (segmentation classes)",
       [&] { return at::randn({32, 21, 512, 512}, f32); }, [](auto& x) { return at::softmax(x, 1); }},
      {"layer_norm f32 [16,64,256,256] (KernelBench)", [&] { return at::randn({16, 64, 256, 256}, f32); },
       [](auto& x) { return at::layer_norm(x, {64, 256, 256}); }},
      {"layer_norm bf16 [8192,4096] affine", [&] { return at::randn({8192, 4096}, bf16); },
       [&](auto& x) { return at::layer_norm(x, {4096}, at::randn({4096}, bf16), at::randn({4096}, bf16)); }},
      {"layer_norm f32 [4096,8192] affine", [&] { return at::randn({4096, 8192}, f32); },
       [&](auto& x) { return at::layer_norm(x, {8192}, at::randn({8192}, f32), at::randn({8192}, f32)); }},
      {"layer_norm f16 [32768,1024] affine", [&] { return at::randn({32768, 1024}, f16); },
       [&](auto& x) { return at::layer_norm(x, {1024}, at::randn({1024}, f16), at::randn({1024}, f16)); }},
      {"layer_norm f32 [64,1048576] (long rows)", [&] { return at::randn({64, 1 << 20}, f32); },
       [](auto& x) { return at::layer_norm(x, {1 << 20}); }},
      {"group_norm f32 [16,64,256,256] g8 (KernelBench)", [&] { return at::randn({16, 64, 256, 256}, f32); },
       [&](auto& x) { return at::group_norm(x, 8, at::randn({64}, f32), at::randn({64}, f32)); }},
      {"group_norm bf16 [32,320,64,64] g32 (UNet)", [&] { return at::randn({32, 320, 64, 64}, bf16); },
       [&](auto& x) { return at::group_norm(x, 32, at::randn({320}, bf16), at::randn({320}, bf16)); }},
      {"group_norm f16 [64,256,28,28] g32", [&] { return at::randn({64, 256, 28, 28}, f16); },
       [&](auto& x) { return at::group_norm(x, 32, at::randn({256}, f16), at::randn({256}, f16)); }},
      // Batch norm in eval form, called as ATen's BatchNorm modules reach the CUDA backend on torch 2.11 (Note
      // [Batch norm inference]); the [C] parameters and statistics are negligible bytes.
      {"batch_norm cudnn f32 [64,256,56,56] (ResNet)", [&] { return at::randn({64, 256, 56, 56}, f32); },
       [&](auto& x) { return bn_eval(x, f32, true); }},
      {"batch_norm cudnn f16 [64,256,56,56] f32 params", [&] { return at::randn({64, 256, 56, 56}, f16); },
       [&](auto& x) { return bn_eval(x, f32, true); }},
      {"batch_norm native bf16 cl [64,512,28,28] f32 params",
       [&] { return at::randn({64, 512, 28, 28}, bf16).contiguous(at::MemoryFormat::ChannelsLast); },
       [&](auto& x) { return bn_eval(x, f32, false); }},
      {"batch_norm native f32 [8192,4096] (BatchNorm1d)", [&] { return at::randn({8192, 4096}, f32); },
       [&](auto& x) { return bn_eval(x, f32, false); }},
      {"batch_norm native f16 [32,128,112,112] f16 params", [&] { return at::randn({32, 128, 112, 112}, f16); },
       [&](auto& x) { return bn_eval(x, f16, false); }},
      // Pooling: outside inference mode at::max_pool2d runs max_pool2d_with_indices, which also writes int64
      // indices (extra_bytes); in inference mode the hook sees max_pool2d itself, which writes none.
      {"max_pool2d f32 [32,64,512,512] k4 s1 p1", [&] { return at::randn({32, 64, 512, 512}, f32); },
       [](auto& x) { return at::max_pool2d(x, {4, 4}, {1, 1}, {1, 1}); }, 32.0 * 64 * 511 * 511 * 8},
      {"max_pool2d f32 [32,64,512,512] k4 s1 p1 inference", [&] { return at::randn({32, 64, 512, 512}, f32); },
       [](auto& x) {
         c10::InferenceMode guard;
         return at::max_pool2d(x, {4, 4}, {1, 1}, {1, 1});
       }},
      {"max_pool2d f32 [32,64,256,256] k2 s2 p1 d3", [&] { return at::randn({32, 64, 256, 256}, f32); },
       [](auto& x) { return at::max_pool2d(x, {2, 2}, {2, 2}, {1, 1}, {3, 3}); }, 32.0 * 64 * 128 * 128 * 8},
      {"max_pool2d f16 [64,64,112,112] k3 s2 p1 (stem)", [&] { return at::randn({64, 64, 112, 112}, f16); },
       [](auto& x) { return at::max_pool2d(x, {3, 3}, {2, 2}, {1, 1}); }, 64.0 * 64 * 56 * 56 * 8},
      {"max_pool2d bf16 channels-last [64,64,112,112] k3 s2 p1",
       [&] { return at::randn({64, 64, 112, 112}, bf16).contiguous(at::MemoryFormat::ChannelsLast); },
       [](auto& x) { return at::max_pool2d(x, {3, 3}, {2, 2}, {1, 1}); }, 64.0 * 64 * 56 * 56 * 8},
      {"avg_pool2d f32 [64,256,56,56] k2 s2", [&] { return at::randn({64, 256, 56, 56}, f32); },
       [](auto& x) { return at::avg_pool2d(x, {2, 2}, {2, 2}); }},
      {"avg_pool2d f16 [64,128,112,112] k3 s1 p1", [&] { return at::randn({64, 128, 112, 112}, f16); },
       [](auto& x) { return at::avg_pool2d(x, {3, 3}, {1, 1}, {1, 1}); }},
      {"avg_pool2d bf16 channels-last [64,512,28,28] k3 s1 p1",
       [&] { return at::randn({64, 512, 28, 28}, bf16).contiguous(at::MemoryFormat::ChannelsLast); },
       [](auto& x) { return at::avg_pool2d(x, {3, 3}, {1, 1}, {1, 1}, false, false); }},
      {"adaptive_avg_pool2d f32 [128,512,14,14] to 7x7", [&] { return at::randn({128, 512, 14, 14}, f32); },
       [](auto& x) { return at::adaptive_avg_pool2d(x, {7, 7}); }},
      {"cumsum f32 [32768,32768] dim 1 (KernelBench)", [&] { return at::randn({32768, 32768}, f32); },
       [](auto& x) { return at::cumsum(x, 1); }},
      {"cumsum f32 [4096,8192] dim 0 (outer dim)", [&] { return at::randn({4096, 8192}, f32); },
       [](auto& x) { return at::cumsum(x, 0); }},
      {"cumsum bf16 [8192,4096] last dim", [&] { return at::randn({8192, 4096}, bf16); },
       [](auto& x) { return at::cumsum(x, -1); }},
      {"cumprod f32 [4096,4096] dim 1", [&] { return at::randn({4096, 4096}, f32); },
       [](auto& x) { return at::cumprod(x, 1); }},
      {"sum f32 [128,4096,4095] dim1 (KernelBench L1_47)", [&] { return at::randn({128, 4096, 4095}, f32); },
       [](auto& x) { return at::sum(x, {1}); }},
      {"amax f32 [128,4096,4095] dim1", [&] { return at::randn({128, 4096, 4095}, f32); },
       [](auto& x) { return at::amax(x, {1}); }},
      {"max.dim f32 [128,4096,4095] dim1 (KernelBench L1_49)", [&] { return at::randn({128, 4096, 4095}, f32); },
       [](auto& x) { return std::get<0>(at::max(x, 1)); }, 128.0 * 4095 * 8},  // + int64 indices
      {"sum f32 [16,256,256] dim1 (small)", [&] { return at::randn({16, 256, 256}, f32); },
       [](auto& x) { return at::sum(x, {1}); }},
      {"argmax f32 [128,4096,32] dim1", [&] { return at::randn({128, 4096, 32}, f32); },
       [](auto& x) { return at::argmax(x, 1); }},
      {"mean bf16 [8192,4096] last dim", [&] { return at::randn({8192, 4096}, bf16); },
       [](auto& x) { return at::mean(x, {-1}); }},
      {"sum f16 [64,1048576] last dim (long rows)", [&] { return at::randn({64, 1 << 20}, f16); },
       [](auto& x) { return at::sum(x, {-1}); }},
      {"var f32 [4096,4096] dim0 (columns)", [&] { return at::randn({4096, 4096}, f32); },
       [](auto& x) { return at::var(x, {0}); }},
      {"vector_norm f32 [4096,8192] dim -1 ord 2", [&] { return at::randn({4096, 8192}, f32); },
       [](auto& x) { return at::linalg_vector_norm(x, 2, {-1}); }},
      {"vector_norm bf16 [8192,4096] dim -1 ord 2 (LLM row norms)", [&] { return at::randn({8192, 4096}, bf16); },
       [](auto& x) { return at::linalg_vector_norm(x, 2, {-1}); }},
      {"vector_norm f32 [16,64,256,256] all dims ord 2 (KernelBench L1_37)",
       [&] { return at::randn({16, 64, 256, 256}, f32); }, [](auto& x) { return at::linalg_vector_norm(x, 2); }},
      {"vector_norm f32 [4096,4096] dim 0 ord 1", [&] { return at::randn({4096, 4096}, f32); },
       [](auto& x) { return at::linalg_vector_norm(x, 1, {0}); }},
      // Binary family: the second operand is made once (static) so that it is not re-created per call; its
      // bytes are counted as extra.
      {"add bf16 [8192,4096] + bias [4096]", [&] { return at::randn({8192, 4096}, bf16); },
       [=](auto& x) { static const at::Tensor b = at::randn({4096}, bf16); return at::add(x, b); }, 4096.0 * 2},
      {"mul f32 [64,256,56,56] * [64,256,1,1] (SE scale)", [&] { return at::randn({64, 256, 56, 56}, f32); },
       [=](auto& x) { static const at::Tensor s = at::randn({64, 256, 1, 1}, f32); return at::mul(x, s); },
       64.0 * 256 * 4},
      {"add f16 [8192,4096] + f32 [8192,4096] (promotion)", [&] { return at::randn({8192, 4096}, f16); },
       [=](auto& x) { static const at::Tensor y = at::randn({8192, 4096}, f32); return at::add(x, y); },
       8192.0 * 4096 * 4},
      {"where f32 mask broadcast [8192,4096] mask [4096]", [&] { return at::randn({8192, 4096}, f32); },
       [=](auto& x) {
         static const at::Tensor m = at::randn({4096}, f32) > 0;
         static const at::Tensor y = at::zeros({}, f32);
         return at::where(m, x, y);
       },
       4096.0},
      {"add f32 [16384,4096] same shape (near floor)", [&] { return at::randn({16384, 4096}, f32); },
       [=](auto& x) { static const at::Tensor y = at::randn({16384, 4096}, f32); return at::add(x, y); },
       16384.0 * 4096 * 4},
      {"mul bf16 [4096,4096] transposed * [4096] (strided)", [&] { return at::randn({4096, 4096}, bf16).t(); },
       [=](auto& x) { static const at::Tensor b = at::randn({4096}, bf16); return at::mul(x, b); }, 4096.0 * 2},
  };
  if (!only.empty())
    rows.erase(std::remove_if(rows.begin(), rows.end(),
                              [&](const Row& r) {
                                return std::none_of(only.begin(), only.end(), [&](const std::string& w) {
                                  return r.name.find(w) != std::string::npos;
                                });
                              }),
               rows.end());

  const double bw = copy_bandwidth();
  std::printf("device-to-device copy bandwidth: %.2f TB/s (bytes read + written)\n", bw / 1e12);
  std::printf("tuner: %d trials a row in rounds of %lld, later rounds by %s; L2 flushed by a 256 MiB %s before each "
              "repetition\n",
              trials, static_cast<long long>(o.round), tune_search_name(o.search), l2_flush_name(config().l2_flush));
  std::printf("%-44s %10s %10s %8s %10s %8s %8s %9s %8s %7s %s\n", "signature", "ATen us", "cudal1 us", "speedup",
              "floor us", "ATen/fl", "ours/fl", "copy us", "ours/cp", "tune s", "swap / best variant");
  double log_sum = 0, headroom_log_sum = 0, worst = 1e9, tune_s_sum = 0;
  int swapped = 0, headroom_rows = 0, near_floor = 0, near_copy = 0;
  for (const auto& row : rows) {
    const at::Tensor x = row.make();
    const at::Tensor y = row.op(x);  // first call: the record exists and is hot
    dispatcher::SigRecord* rec = nullptr;
    dispatcher::for_each_record([&](dispatcher::SigRecord& r) {
      if (r.state.load() == dispatcher::SigState::kQueued) rec = &r;
    });
    if (!rec) {
      std::printf("%-44s (no record)\n", row.name.c_str());
      continue;
    }
    const auto tune_start = std::chrono::steady_clock::now();
    auto r = tuner.tune(*rec);
    const double tune_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - tune_start).count();
    tune_s_sum += tune_s;
    // The memory floor: the input read once, the output written once, in whole sectors (plus what the row names).
    const double bytes = sector_bytes(x) + sector_bytes(y) + row.extra_bytes;
    const double floor_us = bytes / bw * 1e6;
    if (!r.ok() || r->aten_us <= 0) {
      std::printf("%-44s (tuned %.1f s) %s\n", row.name.c_str(), tune_s,
                  r.ok() ? r->note.c_str() : r.status().to_string().c_str());
      continue;
    }
    // A kernel that is not swapped in leaves ATen's time in place: the effective speedup is 1.
    const double effective = r->replaced ? r->speedup : 1.0;
    log_sum += std::log(effective);
    swapped += r->replaced;
    worst = std::min(worst, effective);
    if (r->aten_us >= 1.3 * floor_us) headroom_log_sum += std::log(effective), ++headroom_rows;
    near_floor += r->replaced && r->kernel_us <= 1.25 * floor_us;
    // The practical floor: ATen's copy moving the same bytes, timed the same way (launch-bound when small).
    const auto copy = optimizer::time_device_copy(static_cast<int64_t>(bytes), 0, 30);
    const double copy_us = copy.ok() ? copy.value() : 0;
    near_copy += r->replaced && copy_us > 0 && r->kernel_us <= 1.25 * std::max(floor_us, copy_us);
    std::printf("%-44s %10.1f %10.1f %7.2fx %10.1f %8.2f %8.2f %9.1f %8.2f %7.1f %s %s\n", row.name.c_str(),
                r->aten_us, r->kernel_us, r->speedup, floor_us, r->aten_us / floor_us, r->kernel_us / floor_us, copy_us,
                copy_us > 0 ? r->kernel_us / copy_us : 0.0, tune_s, r->replaced ? "SWAP" : "aten",
                r->best_variant.c_str());
  }
  std::printf("\n%d of %zu signatures swapped in; geometric mean of effective speedup (1.0 where ATen stays): %.3fx\n",
              swapped, rows.size(), std::exp(log_sum / rows.size()));
  std::printf("rows where ATen >= 1.3x the floor: %d, geometric mean effective speedup there: %.3fx\n", headroom_rows,
              headroom_rows ? std::exp(headroom_log_sum / headroom_rows) : 1.0);
  std::printf("lowest effective speedup of any row: %.3fx; swapped kernels within 1.25x of the floor: %d of %d\n",
              worst, near_floor, swapped);
  std::printf("swapped kernels within 1.25x of max(floor, copy of the same bytes): %d of %d\n", near_copy, swapped);
  std::printf("tuning wall time: %.1f s in all, %.2f s a row\n", tune_s_sum,
              rows.empty() ? 0.0 : tune_s_sum / rows.size());
  return 0;
}
