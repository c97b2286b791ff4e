/// @brief Private: what region graphs (Note [Region graphs]) and forward graphs (Note [Forward graphs]) share to
/// capture and check CUDA graphs. Only in builds with torch-CUDA.
#pragma once

#if defined(CUDAL1_TORCH_CUDA)
#include <ATen/Tensor.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>

#include <atomic>
#include <memory>
#include <stdexcept>

#include "cudal1/core/status.h"

namespace cudal1::dispatcher::detail {

/// torch's reserved GPU memory on `device`, all pools together (a capture's private pool is its growth).
int64_t reserved_bytes(c10::DeviceIndex device);
/// A stream of cudal1's own per device for captures: a pool stream may be another thread's at the same time.
Result<c10::cuda::CUDAStream> capture_stream(c10::DeviceIndex device);
/// `before` then `after` on the GPU: `after` waits for the work `before` has so far. Throws when no event can be made.
void order(const c10::cuda::CUDAStream& before, const c10::cuda::CUDAStream& after);
/// An uninitialised tensor like `t` (sizes, strides, dtype, device), a normal tensor even in inference mode.
at::Tensor normal_like(const at::Tensor& t);
/// Whether `a` (a graph's) matches `b` (the eager result): equal NaN positions and equal infinities, other values
/// within 1% of b's largest finite magnitude (floating point); integers and booleans exactly. Synchronises.
bool close_enough(const at::Tensor& a, const at::Tensor& b);

/// Note [Capture without the generator]
/// torch's CUDAGraph registers the default CUDA generator with every capture and marks it capturing until the
/// capture ends: while it captures, a random op of *another* thread on that device throws ("Offset increment
/// outside graph capture encountered unexpectedly"; gpu_forward_graph_test's two threads on an H100,
/// 2026-12-06), and a capture that fails (the captured work synchronised) throws out of capture_end before
/// the generator is told, which leaves it capturing: the app's next random op throws too. Neither a forward
/// graph (Note [Forward graphs] declines random ops) nor a region graph (a fused chain's kernel: cudal1's
/// kernels and library calls) draws random numbers, so both capture without the generator: the stream captured
/// in thread-local mode, the allocations of that capture (and only those, by capture id) in a private pool of
/// torch's caching allocator, as CUDAGraph does. A random op that reaches such a capture anyway throws inside
/// it (the generator is not capturing), which fails the capture and nothing else.
/// Thrown by Capture::begin while a context-wide synchronisation runs (Note [Captures and context
/// synchronisation]): nothing was captured; capture later.
struct CaptureBusy : std::runtime_error {
  CaptureBusy() : std::runtime_error("a context-wide synchronisation is running") {}
};

class Capture {
 public:
  Capture() = default;
  ~Capture() { reset(); }
  Capture(const Capture&) = delete;
  Capture& operator=(const Capture&) = delete;
  /// Begins capturing the current stream of `device` (not its default stream), once the capture gate lets it in
  /// (CaptureBusy otherwise). Throws on failure (nothing held).
  void begin(c10::DeviceIndex device);
  /// Ends the capture and instantiates its graph. Throws when the capture was invalidated (the captured work
  /// synchronised or copied to the host); the stream and the allocator are back to normal either way.
  void end();
  /// Launches the graph on the current stream of its device. Throws on a CUDA error.
  void replay();
  /// Frees the graph and releases its pool (tensors still alive keep their blocks). No replay may be in flight.
  void reset() noexcept;

 private:
  c10::DeviceIndex device_ = -1;
  cudaStream_t stream_ = nullptr;
  decltype(at::cuda::graph_pool_handle()) pool_{0, 0};  ///< the private pool (the allocator's id type)
  bool pool_open_ = false, pool_used_ = false;
  bool gated_ = false;  ///< passed the capture gate, not left it yet
  std::shared_ptr<std::atomic<unsigned long long>> id_ = std::make_shared<std::atomic<unsigned long long>>(0);
  cudaGraph_t graph_ = nullptr;
  cudaGraphExec_t exec_ = nullptr;
};

}  // namespace cudal1::dispatcher::detail
#endif
