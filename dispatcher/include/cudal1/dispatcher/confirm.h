/// @brief In-app confirmation: a swapped kernel is judged by what the app's own calls feel, not only by its
/// isolated timing (Note [In-app confirmation]).
///
/// Note [In-app confirmation]
/// The tuner's timing runs a kernel alone on a quiet stream, L2 flushed: a filter, not the judge. In the app a
/// kernel can lose what it won there: the host path of a launch matters when the GPU waits for the host (a decode
/// step of small ops), and another stream's work changes what the GPU has to spare. So a kernel the tuner would swap
/// in goes on *trial* first (SigRecord::install with calls_per_arm > 0): the app's calls of that signature alternate
/// between ATen and the kernel, both verified, and every trial call is timed where the app runs it: driver events
/// on the app's current stream recorded when the hook starts handling the call and when it returns (so a call's
/// time is its GPU time when the GPU is busy and includes the host's launch path when the GPU waits for it; the host
/// clock for CPU tensors). judge() decides once each arm has `per_arm` samples, and again at each doubling up to
/// `max_per_arm`:
///  - *promote* when the kernel's median time is lower and the kernel's calls are faster than ATen's with a
///    probability of superiority P(kernel < aten) at least 0.5 + 2 standard errors of its null distribution
///    (Mann-Whitney), so noise alone promotes about 2% of equal kernels;
///  - *demote* when its median is not lower, when P <= 0.5, or when max_per_arm samples still do not decide;
///  - otherwise keep sampling.
/// Promotion leaves the kernel serving every call; demotion uninstalls it (state kAten) and the runtime caches the
/// verdict (KernelEntry::in_app), so later processes neither re-tune nor re-try the signature. The in-app ratio
/// (ATen's median over the kernel's) is reported either way. Serve mode runs no trial (Note [Serve mode]): the
/// cache's verdict stands.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace cudal1::dispatcher {

enum class Verdict : uint8_t { kPending, kPromote, kDemote };
const char* verdict_name(Verdict v) noexcept;

/// What a trial measured.
struct TrialStats {
  int64_t aten_n = 0, kernel_n = 0;
  double aten_us = 0, kernel_us = 0;  ///< medians
  double ratio = 0;                   ///< aten_us / kernel_us (> 1: the kernel is faster in the app)
  double superiority = 0.5;           ///< P(a kernel call is faster than an ATen call), ties counted half
  std::string text() const;           ///< e.g. "in-app 1.31x (ATen 12.1 us, kernel 9.2 us, P 0.83, n 32+32)"
};

/// Note [In-app confirmation]: the verdict on samples `aten` and `kernel` (microseconds), with `stats` filled.
/// Pending until both arms hold `per_arm` samples; kDemote once both hold `max_per_arm` without a promotion.
/// Requires 1 <= per_arm <= max_per_arm.
Verdict judge(const std::vector<double>& aten, const std::vector<double>& kernel, int per_arm, int max_per_arm,
              TrialStats* stats);

/// One signature's trial: which arm the next call runs, and the samples so far. Thread-safe.
class Trial {
 public:
  Trial(int per_arm, int max_per_arm);
  /// True when this call should run the kernel (calls alternate, ATen first).
  bool kernel_turn() noexcept { return (calls_.fetch_add(1, std::memory_order_relaxed) & 1) != 0; }
  /// Adds one timed call; returns the verdict once it is reached (exactly once: later calls return kPending).
  Verdict add(bool kernel, double us, TrialStats* stats) noexcept;

 private:
  const int per_arm_, max_per_arm_;
  std::atomic<uint64_t> calls_{0};
  std::mutex mu_;
  std::vector<double> aten_, kernel_;
  int next_check_;
  bool decided_ = false;
};

}  // namespace cudal1::dispatcher
