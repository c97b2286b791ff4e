/// @brief Captures without torch's generator (Note [Capture without the generator] in graph_capture.h).
#include "graph_capture.h"

#if defined(CUDAL1_TORCH_CUDA)
#include <stdexcept>
#include <string>

#include "cudal1/dispatcher/capture_gate.h"

namespace cudal1::dispatcher::detail {

void Capture::begin(c10::DeviceIndex device) {
  reset();
  device_ = device;
  stream_ = c10::cuda::getCurrentCUDAStream(device).stream();
  if (stream_ == c10::cuda::getDefaultCUDAStream(device).stream())
    throw std::runtime_error("a capture needs a stream other than the default one");
  if (!try_capture_entered()) throw CaptureBusy();
  gated_ = true;
  pool_ = at::cuda::graph_pool_handle();
  const std::shared_ptr<std::atomic<unsigned long long>> id = id_;
  id->store(0);
  // Before the capture begins (as CUDAGraph does): a free on another thread must not see a half-begun capture.
  c10::cuda::CUDACachingAllocator::beginAllocateToPool(device, pool_, [id](cudaStream_t s) {
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    unsigned long long capture = 0;
    if (cudaStreamGetCaptureInfo(s, &status, &capture) != cudaSuccess) return false;
    return status == cudaStreamCaptureStatusActive && capture == id->load();
  });
  pool_open_ = pool_used_ = true;
  cudaError_t e = cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal);
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  unsigned long long capture = 0;
  if (e == cudaSuccess) e = cudaStreamGetCaptureInfo(stream_, &status, &capture);
  if (e != cudaSuccess || status != cudaStreamCaptureStatusActive) {
    (void)cudaGetLastError();
    if (e == cudaSuccess) {  // begun but not active: end it
      cudaGraph_t g = nullptr;
      (void)cudaStreamEndCapture(stream_, &g);
      if (g) cudaGraphDestroy(g);
      (void)cudaGetLastError();
    }
    reset();
    throw std::runtime_error(std::string("the capture could not begin: ") + cudaGetErrorString(e));
  }
  id->store(capture);
}

void Capture::end() {
  if (pool_open_) {
    c10::cuda::CUDACachingAllocator::endAllocateToPool(device_, pool_);
    pool_open_ = false;
  }
  cudaGraph_t g = nullptr;
  const cudaError_t e = cudaStreamEndCapture(stream_, &g);
  if (gated_) capture_left();
  gated_ = false;
  if (e != cudaSuccess || !g) {
    (void)cudaGetLastError();
    if (g) cudaGraphDestroy(g);
    throw std::runtime_error(std::string("the capture failed: ") + cudaGetErrorString(e));
  }
  graph_ = g;
  const cudaError_t i = cudaGraphInstantiateWithFlags(&exec_, graph_, 0);
  if (i != cudaSuccess) {
    (void)cudaGetLastError();
    exec_ = nullptr;
    throw std::runtime_error(std::string("the graph could not be instantiated: ") + cudaGetErrorString(i));
  }
}

void Capture::replay() {
  if (!exec_) throw std::logic_error("replay of a graph that was not captured");
  const cudaError_t e = cudaGraphLaunch(exec_, c10::cuda::getCurrentCUDAStream(device_).stream());
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    throw std::runtime_error(std::string("cudaGraphLaunch failed: ") + cudaGetErrorString(e));
  }
}

void Capture::reset() noexcept {
  if (exec_) cudaGraphExecDestroy(exec_);
  if (graph_) cudaGraphDestroy(graph_);
  exec_ = nullptr;
  graph_ = nullptr;
  try {
    if (pool_open_) c10::cuda::CUDACachingAllocator::endAllocateToPool(device_, pool_);
    if (pool_used_) c10::cuda::CUDACachingAllocator::releasePool(device_, pool_);
  } catch (...) {
  }
  pool_open_ = pool_used_ = false;
  if (gated_) capture_left();
  gated_ = false;
}

}  // namespace cudal1::dispatcher::detail
#endif
