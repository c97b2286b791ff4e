/// @brief The capture gate (Note [Captures and context synchronisation] in capture_gate.h).
#include "cudal1/dispatcher/capture_gate.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <vector>

namespace cudal1::dispatcher {
namespace {

struct Gate {
  std::mutex mu;
  std::condition_variable cv;
  int captures = 0;                      // cudal1's captures in progress
  std::vector<const void*> app_streams;  // streams the app (or cudal1, seen through CUPTI) captures now
  int syncing = 0;                       // SyncPermits held
  int in_progress() const { return captures + static_cast<int>(app_streams.size()); }
};
// Leaked: captures and permits may outlive static destruction at exit.
Gate& gate() {
  static Gate* g = new Gate();
  return *g;
}

}  // namespace

bool try_capture_entered() noexcept {
  Gate& g = gate();
  std::lock_guard<std::mutex> lock(g.mu);
  if (g.syncing > 0) return false;
  ++g.captures;
  return true;
}

void capture_left() noexcept {
  Gate& g = gate();
  {
    std::lock_guard<std::mutex> lock(g.mu);
    if (g.captures > 0) --g.captures;
  }
  g.cv.notify_all();
}

void note_app_capture(bool begin, const void* stream) noexcept {
  Gate& g = gate();
  std::unique_lock<std::mutex> lock(g.mu);
  const auto at = std::find(g.app_streams.begin(), g.app_streams.end(), stream);
  if (!begin) {
    if (at != g.app_streams.end()) g.app_streams.erase(at);
    lock.unlock();
    g.cv.notify_all();
    return;
  }
  if (at != g.app_streams.end()) return;  // the same capture seen again (the runtime's call, then the driver's)
  g.cv.wait(lock, [&] { return g.syncing == 0; });
  if (std::find(g.app_streams.begin(), g.app_streams.end(), stream) == g.app_streams.end())
    g.app_streams.push_back(stream);
}

SyncPermit::SyncPermit(double timeout_s) noexcept {
  Gate& g = gate();
  std::unique_lock<std::mutex> lock(g.mu);
  // Wait for the captures in progress to end, then close the gate: a capture that wants to begin meanwhile
  // may (no thread waits on another at the gate while holding a capture open).
  ok_ = g.cv.wait_for(lock, std::chrono::duration<double>(timeout_s), [&] { return g.in_progress() == 0; });
  if (ok_) ++g.syncing;
}

SyncPermit::~SyncPermit() {
  if (!ok_) return;
  Gate& g = gate();
  {
    std::lock_guard<std::mutex> lock(g.mu);
    --g.syncing;
  }
  g.cv.notify_all();
}

int captures_in_progress() noexcept {
  Gate& g = gate();
  std::lock_guard<std::mutex> lock(g.mu);
  return g.in_progress();
}

}  // namespace cudal1::dispatcher
