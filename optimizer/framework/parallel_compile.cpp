/// @brief Concurrent source generation and NVRTC compilation of one tuning round (compiler.h).
///
/// Note [Concurrent NVRTC]
/// NVRTC compiles distinct nvrtcProgram objects from several host threads: before CUDA 11.5 it serialised
/// concurrent requests with one global lock; since 11.5 it holds per-stage locks (parser, NVVM optimizer, PTX
/// compiler), so programs compiled from different threads are pipelined through the stages (NVIDIA technical
/// blog "Reducing Application Build Times Using CUDA C++ Compilation Aids", CUDA 11.5). nvrtc.h marks only
/// nvrtcGetTypeName (Windows) as not thread-safe, and cudal1 never calls it. Each job here owns its program
/// (compile() creates and destroys it), so threads share nothing but NVRTC's loaded library. How much faster a
/// round gets is therefore bounded by NVRTC's internal locking (users report contention on 11.8 and 12.3, and
/// CUDA 12.3 U2 notes improved NVVM concurrency). On a build host with 2 idle cores (NVRTC 13.0), 16 softmax-row
/// variants (f32 [4096,32000], sm_90) take 1.2 s on one thread and 0.6 s on two, the same CPU time, so 13.0 does
/// compile in parallel; the tune-seconds column of bench_kernels shows it on the GPU host.
/// The GPU part of tuning (load, bind, verify, time) stays serial on the tuner thread.
#include <atomic>
#include <exception>
#include <system_error>
#include <thread>

#include "cudal1/optimizer/compiler.h"

namespace cudal1::optimizer {
namespace {

/// One job: make the source, compile it. Never throws.
VariantBuild build_one(const SourceMaker& make, size_t i, int sm) noexcept {
  VariantBuild b;
  try {
    auto src = make(i);
    if (!src.ok()) {
      b.kernel = src.status();
      return b;
    }
    b.has_source = true;
    b.kernel = compile(src.value(), sm);
  } catch (const std::exception& e) {
    b.kernel = Status(Code::kInternal, std::string("building the variant raised: ") + e.what());
  } catch (...) {
    b.kernel = Status(Code::kInternal, "building the variant raised a non-standard exception");
  }
  return b;
}

}  // namespace

std::vector<VariantBuild> compile_concurrently(size_t n, const SourceMaker& make, int sm, size_t max_threads) {
  std::vector<VariantBuild> out(n);
  std::atomic<size_t> next{0};
  auto work = [&]() noexcept {
    for (size_t i; (i = next.fetch_add(1)) < n;) out[i] = build_one(make, i, sm);
  };
  const size_t helpers = std::min(n, std::max<size_t>(max_threads, 1)) - (n > 0 ? 1 : 0);
  std::vector<std::thread> threads;
  threads.reserve(helpers);
  for (size_t t = 0; t < helpers; ++t) {
    try {
      threads.emplace_back(work);
    } catch (const std::system_error&) {
      break;  // no more threads: the ones started and this one finish the batch
    }
  }
  work();
  for (auto& t : threads) t.join();
  return out;
}

}  // namespace cudal1::optimizer
