/// @brief Verification of a bound kernel against ATen, and its timing interleaved with ATen.
///
/// Note [Verification]
/// Defends against the reward hacks CUDA-L1 met. Every trial draws fresh random inputs at the signature's
/// full size and layout (never shrunk), with a different scale and injected NaN/+-Inf/+-0 on most trials
/// (an argument whose domain is non-negative by ATen's contract, a running variance, is drawn as |x|);
/// ATen computes the reference on the same stream; the candidate writes into an output poisoned with NaN or
/// a finite sentinel (alternating) and framed by guard regions. A trial passes only if dtype, sizes and
/// strides equal ATen's, every element is close within the dtype's tolerance with NaN/Inf parity, and the
/// guards are bit-identical afterwards. Integer outputs (indices) must equal ATen's exactly and are poisoned with
/// integer sentinels. The floating-point tolerance is the dtype's (rtol, atol), plus, for kernels whose
/// rounding error scales with the input rather than the output (BoundKernel::input_scaled_atol, e.g.
/// log_softmax, where x - (max + log(sum)) cancels), k * eps(dtype) * max|finite input| absolute.
/// Reductions and normalisations state a per-output tolerance (BoundKernel::output_tolerance): an absolute
/// term in fp32 eps times max|finite input| (a mean's rounding follows the input's range) and one times
/// max|finite ATen output| (a normalised value near zero carries the row's rounding); and, for statistics over
/// rows holding +-Inf, non-finite matches non-finite, because ATen's own Welford gives Inf or NaN there
/// depending on its combine order. Finite ATen results still need finite, close results, and the finite
/// sentinel poison still catches unwritten elements. Integer outputs (indices) are poisoned with -1 or a large
/// sentinel and must equal ATen's exactly.
///
/// Note [Timing]
/// Median of many repetitions on one stream, candidate and ATen interleaved in random order per repetition, L2 flushed
/// before each by touching 256 MiB, which also keeps the GPU busy while the host enqueues, so host overhead is not
/// counted as kernel time. CUDAL1_L2_FLUSH picks how: `read` (default) reads the buffer, so L2 is left holding clean
/// lines; `write` memsets it (Triton's do_bench, nvbench), which leaves up to the whole L2 dirty, and the timed work
/// then also writes that back: on an H200 a kernel that only reads 64 MB takes 24.7 us after a memset and 18.6 us after
/// a read, a 32 MB copy 20.6 and 17.9 us. The write-back belongs to the flush, not to the kernel, so it is kept out of
/// the timed region.
/// Each repetition records start, runs, records end, then synchronizes the whole device before a third event: work that
/// escaped the stream would show as extra time between the end and the third event, and such a candidate is rejected
/// (check_escape). That extra time also holds the host's wake-up after the synchronize and whatever else the process
/// has on the device (an application calling its ops while the optimizer tunes them in the background; other processes'
/// time slices), which come and go from one repetition to the next, while work moved to a side stream adds its time to
/// every repetition. So the rule takes the candidate's 25th percentile, not its median, against ATen's median: with
/// eight test processes sharing the card, a 5 us layer-norm variant's median "escaped" time can reach 272 us.
/// Side-stream work shorter than the slack (kEscapeSlackUs beyond ATen's own extra time) is not caught: it buys at most
/// that much.
/// A round that looks escaped is timed once more, and only a second escaped round rejects: with eight processes sharing
/// the card, a 2 us exp kernel's 25th percentile can reach 1664 us "escaped" in one round; other work comes and goes,
/// while work on a side stream shows in every round. The kept timing is the last round's.
/// The speedup is the median of the per-repetition ratios; a kernel is accepted when that median reaches the
/// margin and its 25th percentile is at least 1 (noise-aware).
///
/// Note [Tuning memory]
/// The optimizer tunes inside the app's process, on the app's GPU: its allocations must never be why the app's
/// own fail. Before a signature's first variant is verified the tuner estimates the peak it will hold
/// (tuning_bytes: the call's inputs, ATen's reference outputs, the candidate's guarded outputs and the timing
/// outputs, the comparison's float64 copies of one output pair, the L2 flush buffer and the kernel's own scratch,
/// BoundKernel::scratch_bytes) and tunes only when that fits the budget: CUDAL1_TUNE_MEMORY as a size, or as a
/// share of the device's free memory then (default 50%). A signature that does not fit stays on ATen for this run
/// with the reason in its outcome (not cached: a later run with room tunes it). After each signature the tuner
/// returns what torch's caching allocator holds unused, so the memory goes back to the app.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>

#include <cstdint>
#include <string>
#include <vector>

#include "cudal1/core/status.h"
#include "cudal1/optimizer/family.h"

namespace cudal1::optimizer {

struct VerifyReport {
  int trials_passed = 0;
  double max_abs_error = 0;  ///< over finite elements, all trials
};

/// Runs `trials` verification trials of `kernel` for `problem` (op `op`) on `device`, on the calling thread's
/// current stream, with hooks bypassed. Ok when all pass; VerifyFailed naming the first failure otherwise;
/// Mismatch when ATen's output layout differs from the plan's (the whole plan is wrong for this signature);
/// Unsupported when the kernel declines this call (e.g. alignment); Unavailable in CPU-only builds.
Status verify(const Problem& problem, const c10::OperatorHandle& op, BoundKernel& kernel, int device, int trials,
              uint64_t seed, VerifyReport* report);

struct Timing {
  double aten_us = 0;       ///< median
  double kernel_us = 0;     ///< median
  double speedup = 0;       ///< median of per-repetition ATen/kernel ratios
  double speedup_p25 = 0;   ///< 25th percentile of those ratios
  double escaped_us = 0;    ///< extra time after the end event, candidate minus ATen (check_escape)
  int reps = 0;
  /// True when the kernel is faster by a noise-aware margin (see Note [Timing]).
  bool accepted(double min_speedup) const { return speedup >= min_speedup && speedup_p25 >= 1.0; }
};

/// Extra time a candidate may show after its end event beyond ATen's (Note [Timing]).
constexpr double kEscapeSlackUs = 20.0;

struct EscapeCheck {
  double escaped_us = 0;  ///< candidate's 25th percentile minus ATen's median of the extra times
  bool escaped = false;   ///< escaped_us > kEscapeSlackUs + ATen's median extra time
};

/// The rule of Note [Timing] on the per-repetition extra times (us) between the end event and the event after
/// the device-wide synchronize, for the candidate and for ATen. Empty inputs count as 0.
EscapeCheck check_escape(const std::vector<double>& kernel_extra_us, const std::vector<double>& aten_extra_us);

/// Peak GPU bytes tuning `kernel` for `problem` may hold (Note [Tuning memory]).
int64_t tuning_bytes(const Problem& problem, const BoundKernel& kernel);

/// The bytes one signature's tuning may hold on `device` now (Note [Tuning memory]): CUDAL1_TUNE_MEMORY's size,
/// or its share of the free memory; Unavailable when the driver cannot say.
Result<int64_t> tuning_budget(int device);

/// Times `kernel` against ATen with `reps` interleaved repetitions (Note [Timing]). Returns VerifyFailed when
/// work escaped the stream; Unavailable in CPU-only builds.
Result<Timing> time_against_aten(const Problem& problem, const c10::OperatorHandle& op, BoundKernel& kernel,
                                 int device, int reps, uint64_t seed);

/// Median time (us) of ATen's device-to-device copy of `bytes / 2` bytes (so `bytes` are read + written), timed
/// like time_against_aten (L2 flushed before each of `reps` repetitions, events on the current stream). The
/// practical floor of an op that must move `bytes`: bandwidth-bound for large sizes, launch-bound for small.
/// Unavailable in CPU-only builds; InvalidArgument when bytes < 2 or reps < 1.
Result<double> time_device_copy(int64_t bytes, int device, int reps);

/// Relative and absolute tolerance for comparing a dtype's results with ATen's; (0, 0) for integral dtypes
/// (indices compare exactly).
std::pair<double, double> tolerance(c10::ScalarType dtype);

/// The largest finite magnitude of a floating dtype.
double dtype_max(c10::ScalarType t);

}  // namespace cudal1::optimizer
