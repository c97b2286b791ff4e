/// @brief Private: the carriers' entry to deferred regions and the guards' flush entry points
/// (Note [Deferred regions] in regions.h).
#pragma once

#include <ATen/core/Tensor.h>

#include <atomic>
#include <string>
#include <vector>

#include "cudal1/dispatcher/chains.h"
#include "cudal1/dispatcher/regions.h"

namespace cudal1::dispatcher::detail {

struct HookState;

/// Why a region was flushed (counters).
enum class FlushReason : uint8_t { kDivergence, kOp, kCuda, kOther };

/// True once some chain was fused: only then does a hooked call look at regions (one relaxed load otherwise).
extern std::atomic<bool> g_regions_live;

/// For a hooked call on a thread where regions are live: defers it when it opens or continues a region (then
/// `outs` holds its pending outputs, one per tensor output, and true is returned); otherwise flushes this
/// thread's open region, if any, and returns false (the call then runs as usual). `rec` is the call's record
/// (null when it has none). Never throws.
bool defer_or_flush(HookState& st, SigRecord* rec, const ChainBuilder::Call& call,
                    std::vector<at::Tensor>* outs) noexcept;


/// Flushes the calling thread's open region, if any, and drops its TLS key. Never throws.
void flush_this_thread(FlushReason why) noexcept;

/// Flushes every thread's open region (the CUPTI guard, shutdown). Never throws; returns at once when none is
/// open or when called from inside cudal1's own region work on this thread.
void flush_all(FlushReason why) noexcept;

/// Registers the DeferredInit fallback and a fallthrough for each op in `typed_ops` (the hooked ops whose
/// calls reach defer_or_flush). Ok when already registered.
Status register_region_key(const std::vector<std::string>& typed_ops);
/// The aten ops whose only kernel is CompositeImplicitAutograd (no CPU, CUDA, Meta or CompositeExplicitAutograd
/// one): they compute through other ops only, so they pass the region key (Note [Deferred regions]).
std::vector<c10::OperatorName> composite_only_ops();

/// The CUPTI guard: subscribes to the runtime and driver API entry points that launch, copy, set, synchronise,
/// record events, wait on events or begin a capture, and calls flush_all(kCuda) on entry. Ok when armed (or
/// already armed: the first call's `full` decides); Unavailable with the reason otherwise. Launches one kernel
/// through ATen on the calling thread, on `device` (-1: torch's current device; Note [Lean CUPTI guard]).
///
/// Note [Lean CUPTI guard]
/// Every callback CUPTI makes costs the calling thread host time, and an app launches hundreds of kernels a
/// forward outside any region, each through the runtime's cudaLaunchKernel, which calls the driver's
/// cuLaunchKernel: watching both API domains made every ATen launch call back twice. bench/probes/cupti_cost.cu
/// measured an empty kernel's launch on the H200 (2026-12-06, two runs): 4351 / 4678 ns without CUPTI, 5056 /
/// 5446 ns with both domains watched, and 4964 ns with the runtime's launches left to the driver, which reported
/// each of them (one callback a launch) and every other watched runtime call the probe made. So
/// the guard watches the runtime's kernel launches only through the driver's. Whether the driver reports them is
/// checked once, when the guard is armed, by launching one ATen kernel and counting the driver's launch callbacks
/// on this thread; where it does not, the runtime's launches are watched as well. The runtime's other watched
/// entry points (copies, sets, synchronisations, events, graph launches) stay watched in both domains.
/// CUDAL1_CUPTI_GUARD=full watches both, as before, for measuring. Switching callbacks on only while a region is
/// open was measured too and rejected: one switch of the watched callbacks (cuptiEnableCallback per id, or
/// cuptiEnableDomain) took 92-100 us, and GPT-2 opens about 190 regions a forward.
Status arm_cupti_guard(bool full = false, int device = -1);
/// What the armed guard watches: "lean: ..." or "full: ..." with why; "not armed" before (or without) one.
std::string cupti_guard_watch();

/// The out= overload of `op` taking `outs` out tensors after exactly `op`'s arguments; null when none, or when
/// calling it boxed is unsafe (Note [Unsafe out overloads] in regions_api.cpp: cudnn_batch_norm.out).
const c10::OperatorHandle* out_overload(const c10::OperatorHandle& op, size_t outs);

/// The tensor's version counter; 0 for inference tensors, which have none (and cannot be modified in place
/// outside InferenceMode).
uint32_t version_of(const at::Tensor& t);

/// True while this thread flushes its own region at its own event (a divergence or another op): never inside
/// another thread's CUDA call or at exit. Only then may a chain kernel capture a CUDA graph or synchronise
/// (Note [Region graphs]).
bool flush_may_capture() noexcept;

/// Marks the calling thread as running cudal1's own region work for the scope's lifetime: the CUPTI guard ignores
/// its CUDA calls (a background thread freeing a region graph synchronises a stream without flushing regions).
/// The same mark as a background worker's (regions.h).
using RegionWorkScope = BackgroundWorkScope;

/// True while this thread captures a forward graph (Note [Forward graphs]): regions open on the capturing stream,
/// recycle no outputs, and region graphs run their kernels directly.
bool in_forward_capture() noexcept;
class ForwardCaptureScope {
 public:
  ForwardCaptureScope() noexcept;
  ~ForwardCaptureScope();
  ForwardCaptureScope(const ForwardCaptureScope&) = delete;
  ForwardCaptureScope& operator=(const ForwardCaptureScope&) = delete;
};

/// True while this thread runs cudal1's own region work (flushes, allocations): CUDA calls made then are ours.
bool in_region_work() noexcept;

}  // namespace cudal1::dispatcher::detail
