/// @brief Sampled device timing of hooked calls (see gpu_sampler.h).
#include "gpu_sampler.h"

#include "cudal1/core/cuda_driver.h"
#include "cudal1/dispatcher/cuda_glue.h"
#include "hook_state.h"

namespace cudal1::dispatcher::detail {
namespace {
constexpr size_t kMaxPending = 4096;
}

bool GpuSampler::acquire(int device, Pair* p) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (pending_.size() >= kMaxPending) return false;
    for (size_t i = 0; i < free_.size(); ++i)
      if (free_[i].device == device) {
        *p = free_[i];
        free_[i] = free_.back();
        free_.pop_back();
        return true;
      }
  }
  auto d = driver();
  if (!d.ok()) return false;
  p->device = device;
  if (d.value()->cuEventCreate(&p->start, CU_EVENT_DEFAULT) != CUDA_SUCCESS) return false;
  if (d.value()->cuEventCreate(&p->end, CU_EVENT_DEFAULT) != CUDA_SUCCESS) {
    d.value()->cuEventDestroy(p->start);
    return false;
  }
  return true;
}

void GpuSampler::release(const Pair& p) {
  std::lock_guard<std::mutex> lock(mu_);
  free_.push_back(p);
}

GpuSampler::Token GpuSampler::begin(SigRecord& rec, int arm) noexcept {
  Token t;
  auto d = driver();
  if (!d.ok()) return t;
  auto stream = current_stream(rec.device_index);
  if (!stream.ok()) return t;
  ContextScope ctx(rec.device_index);
  if (!ctx.status().ok()) return t;
  CUstreamCaptureStatus capture = CU_STREAM_CAPTURE_STATUS_NONE;
  if (d.value()->cuStreamIsCapturing(stream.value(), &capture) != CUDA_SUCCESS ||
      capture != CU_STREAM_CAPTURE_STATUS_NONE)
    return t;  // never add nodes to a graph being captured
  Pair p;
  if (!acquire(rec.device_index, &p)) return t;
  if (d.value()->cuEventRecord(p.start, stream.value()) != CUDA_SUCCESS) {
    release(p);
    return t;
  }
  t.rec = &rec;
  t.start = p.start;
  t.end = p.end;
  t.stream = stream.value();
  t.device = rec.device_index;
  t.arm = static_cast<int8_t>(arm);
  return t;
}

void GpuSampler::end(Token& t) noexcept {
  if (!t) return;
  auto d = driver();
  ContextScope ctx(t.device);
  if (!d.ok() || !ctx.status().ok() || d.value()->cuEventRecord(t.end, t.stream) != CUDA_SUCCESS) {
    abandon(t);
    return;
  }
  std::lock_guard<std::mutex> lock(mu_);
  pending_.push_back(t);
  t.rec = nullptr;
}

void GpuSampler::abandon(Token& t) noexcept {
  if (!t) return;
  release(Pair{t.start, t.end, t.device});
  t.rec = nullptr;
}

void GpuSampler::collect() noexcept {
  auto d = driver();
  if (!d.ok()) return;
  std::vector<Token> work;
  {
    std::lock_guard<std::mutex> lock(mu_);
    work.swap(pending_);
  }
  std::vector<Token> unfinished;
  for (Token& t : work) {
    ContextScope ctx(t.device);
    const CUresult q = d.value()->cuEventQuery(t.end);
    if (q == CUDA_ERROR_NOT_READY) {
      unfinished.push_back(t);
      continue;
    }
    float ms = 0;
    if (q == CUDA_SUCCESS && d.value()->cuEventElapsedTime(&ms, t.start, t.end) == CUDA_SUCCESS && ms >= 0) {
      t.rec->sampled_ns.fetch_add(static_cast<uint64_t>(ms * 1e6), std::memory_order_relaxed);
      t.rec->samples.fetch_add(1, std::memory_order_relaxed);
      if (t.arm >= 0) trial_sample(*t.rec, t.arm == 1, ms * 1e3);
    }
    release(Pair{t.start, t.end, t.device});
  }
  std::lock_guard<std::mutex> lock(mu_);
  pending_.insert(pending_.end(), unfinished.begin(), unfinished.end());
}

}  // namespace cudal1::dispatcher::detail
