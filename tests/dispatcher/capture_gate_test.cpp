/// @brief The capture gate (Note [Captures and context synchronisation]): captures and context-wide
/// synchronisations exclude each other.
#include "cudal1/dispatcher/capture_gate.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

namespace cudal1::dispatcher {
namespace {

TEST(CaptureGate, APermitWaitsForTheCapturesInProgressAndGivesUpAfterItsTimeout) {
  ASSERT_EQ(captures_in_progress(), 0);
  ASSERT_TRUE(try_capture_entered());
  {
    const SyncPermit permit(0.05);
    EXPECT_FALSE(permit.ok());  // a capture is in progress: no synchronisation
  }
  EXPECT_TRUE(try_capture_entered()) << "a permit that was not granted closes nothing";
  capture_left();
  capture_left();
  EXPECT_EQ(captures_in_progress(), 0);
  const SyncPermit permit(0.05);
  EXPECT_TRUE(permit.ok());
}

TEST(CaptureGate, NoCaptureOfCudal1BeginsWhileAPermitIsHeld) {
  {
    const SyncPermit permit(1.0);
    ASSERT_TRUE(permit.ok());
    EXPECT_FALSE(try_capture_entered());
    EXPECT_EQ(captures_in_progress(), 0);
  }
  ASSERT_TRUE(try_capture_entered());
  capture_left();
}

TEST(CaptureGate, AnAppsCaptureWaitsForThePermitAndAPermitForTheAppsCapture) {
  std::atomic<bool> began{false};
  std::thread app;
  {
    const SyncPermit permit(1.0);
    ASSERT_TRUE(permit.ok());
    app = std::thread([&] {
      note_app_capture(true, &began);  // blocks until the permit is released
      began = true;
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    EXPECT_FALSE(began.load());
  }
  app.join();
  EXPECT_TRUE(began.load());
  EXPECT_EQ(captures_in_progress(), 1);
  note_app_capture(true, &began);  // the same capture seen through the driver's call
  EXPECT_EQ(captures_in_progress(), 1);
  std::thread end([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    note_app_capture(false, &began);
    note_app_capture(false, &began);  // the runtime's end after the driver's: nothing more
  });
  const SyncPermit permit(5.0);  // granted once the app's capture ends
  EXPECT_TRUE(permit.ok());
  EXPECT_EQ(captures_in_progress(), 0);
  end.join();
}

}  // namespace
}  // namespace cudal1::dispatcher
