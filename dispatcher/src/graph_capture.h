/// @brief Private: what region graphs (Note [Region graphs]) and forward graphs (Note [Forward graphs]) share to
/// capture and check CUDA graphs. Only in builds with torch-CUDA.
#pragma once

#if defined(CUDAL1_TORCH_CUDA)
#include <ATen/Tensor.h>
#include <c10/cuda/CUDAStream.h>

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
/// Note [Failed captures]: torch's CUDAGraph::capture_end throws before its generator epilogue when the capture
/// was invalidated (the captured work synchronised or copied to the host), which leaves the default CUDA
/// generator of `device` believing it is capturing: the app's next random op outside a capture would throw
/// ("Offset increment outside graph capture encountered unexpectedly"). One capture that succeeds runs the
/// epilogue again; this makes one (a single fill on cudal1's capture stream). Never throws.
void repair_generator(c10::DeviceIndex device) noexcept;
/// Whether `a` (a graph's) matches `b` (the eager result): equal NaN positions and equal infinities, other values
/// within 1% of b's largest finite magnitude (floating point); integers and booleans exactly. Synchronises.
bool close_enough(const at::Tensor& a, const at::Tensor& b);

}  // namespace cudal1::dispatcher::detail
#endif
