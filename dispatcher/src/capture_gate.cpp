/// @brief The capture gate (Note [Captures and context synchronisation] in capture_gate.h).
#include "cudal1/dispatcher/capture_gate.h"

#include <chrono>
#include <condition_variable>
#include <mutex>

namespace cudal1::dispatcher {
namespace {

struct Gate {
  std::mutex mu;
  std::condition_variable cv;
  int captures = 0;  // in progress (cudal1's and the app's, as counted)
  int syncing = 0;   // SyncPermits held
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

void note_app_capture(bool begin) noexcept {
  if (!begin) return capture_left();
  Gate& g = gate();
  std::unique_lock<std::mutex> lock(g.mu);
  g.cv.wait(lock, [&] { return g.syncing == 0; });
  ++g.captures;
}

SyncPermit::SyncPermit(double timeout_s) noexcept {
  Gate& g = gate();
  std::unique_lock<std::mutex> lock(g.mu);
  // Wait for the captures in progress to end, then close the gate: a capture that wants to begin meanwhile
  // may (no thread waits on another at the gate while holding a capture open).
  ok_ = g.cv.wait_for(lock, std::chrono::duration<double>(timeout_s), [&] { return g.captures == 0; });
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
  return g.captures;
}

}  // namespace cudal1::dispatcher
