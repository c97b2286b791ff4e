/// @brief Private: device time of sampled calls, measured with driver events on torch's current stream and
/// collected later without ever blocking the app thread.
#pragma once

#include <cuda.h>

#include <mutex>
#include <vector>

#include "cudal1/dispatcher/sig_record.h"

namespace cudal1::dispatcher::detail {

class GpuSampler {
 public:
  struct Token {
    SigRecord* rec = nullptr;
    CUevent start = nullptr, end = nullptr;
    CUstream stream = nullptr;
    int device = -1;
    int8_t arm = -1;  ///< Note [In-app confirmation]: 0 ATen, 1 the kernel, -1 not a trial call
    explicit operator bool() const { return rec != nullptr; }
  };

  /// Records a start event for `rec` on the current stream of its device. Returns an empty token (no sample)
  /// when the stream is capturing a graph, the driver is unavailable, or too many samples are pending.
  Token begin(SigRecord& rec, int arm = -1) noexcept;
  /// Records the end event and queues the pair for collect().
  void end(Token& t) noexcept;
  /// Returns the events of a sample whose call threw.
  void abandon(Token& t) noexcept;
  /// Adds finished samples to their records (a trial call's also to its trial: trial_sample in hook_state.h);
  /// leaves unfinished ones queued. Never blocks on the GPU.
  void collect() noexcept;

 private:
  struct Pair { CUevent start, end; int device; };
  bool acquire(int device, Pair* p);
  void release(const Pair& p);

  std::mutex mu_;
  std::vector<Pair> free_;
  std::vector<Token> pending_;
};

}  // namespace cudal1::dispatcher::detail
