/// @brief The capture gate: CUDA graph captures and context-wide synchronisations exclude each other
/// (Note [Captures and context synchronisation]).
///
/// Note [Captures and context synchronisation]
/// cuCtxSynchronize while a stream of the context captures fails (CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED) and
/// invalidates that capture, whatever its capture mode. The optimizer's timing synchronises the context after
/// each run (Note [Timing]: work that left the stream is caught), so in a tune run on an H100 (2026-12-07) a
/// ResNet-50 forward graph captured while the tuner timed a batch-norm variant: the capture failed, and the
/// variant was rejected. One process-wide gate therefore orders them:
///  - a capture of cudal1's (forward graphs, region graphs) *tries* to pass the gate: while a synchronisation
///    runs, it does not capture now (a later call tries again) rather than make the app wait;
///  - a capture of the app's own, seen by the CUPTI guard (its BeginCapture and EndCapture calls, where the
///    guard is armed), waits at the gate while a synchronisation runs (a few milliseconds at most);
///  - a context-wide operation of the optimizer (cuCtxSynchronize, emptying the allocator's cache) holds a
///    SyncPermit: it waits until no capture is in progress, and no capture begins until it is done.
/// Without the CUPTI guard (deferral off, another CUPTI client) an app's own capture is not seen: tuning while
/// the app captures may invalidate the app's capture (README, Known limits). Serving never synchronises.
#pragma once

namespace cudal1::dispatcher {

/// A capture of cudal1's may begin: true, and then the caller must call capture_left() once it has ended (or
/// failed); false while a context-wide synchronisation runs (capture later). Thread-safe, never blocks.
bool try_capture_entered() noexcept;
/// The end of a capture that try_capture_entered() let in.
void capture_left() noexcept;

/// The CUPTI guard's view of a capture call on `stream` (the call's first argument in both APIs): `begin` (a
/// BeginCapture call at its entry: waits while a synchronisation runs, then counts the stream as capturing) or its
/// end (a BeginCapture that failed, or an EndCapture call at its exit: the stream no longer captures). Keyed by
/// stream, so the runtime's call and the driver's call it makes count once.
void note_app_capture(bool begin, const void* stream) noexcept;

/// Held around a context-wide operation of the optimizer. Waits up to `timeout_s` for the captures in progress
/// to end; ok() is false when they did not (the operation must not run). Blocks new captures while held.
class SyncPermit {
 public:
  explicit SyncPermit(double timeout_s = 10.0) noexcept;
  ~SyncPermit();
  SyncPermit(const SyncPermit&) = delete;
  SyncPermit& operator=(const SyncPermit&) = delete;
  bool ok() const noexcept { return ok_; }

 private:
  bool ok_ = false;
};

/// Captures in progress (tests, reports).
int captures_in_progress() noexcept;

}  // namespace cudal1::dispatcher
