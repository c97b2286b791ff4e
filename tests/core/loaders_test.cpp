/// @brief The run-time loaders: a missing library is an Unavailable status, never a crash; NVRTC loads where
/// the toolkit is installed.
#include <gtest/gtest.h>

#include "cudal1/core/config.h"
#include "cudal1/core/cuda_driver.h"
#include "cudal1/core/nvrtc.h"

namespace cudal1 {
namespace {

TEST(Loaders, DriverEitherLoadsOrSaysWhy) {
  auto d = driver();
  if (d.ok()) {
    EXPECT_GT(d.value()->driver_version, 0);
    EXPECT_NE(d.value()->cuLaunchKernel, nullptr);
  } else {
    EXPECT_EQ(d.status().code(), Code::kUnavailable);
    EXPECT_FALSE(d.status().message().empty());
  }
  EXPECT_EQ(probe_driver().ok() || !d.ok(), true);
}

TEST(Loaders, NvrtcEitherLoadsOrSaysWhy) {
  auto n = nvrtc();
  if (!n.ok()) {
    EXPECT_EQ(n.status().code(), Code::kUnavailable);
    GTEST_SKIP() << "NVRTC not installed here: " << n.status().message();
  }
  EXPECT_GE(n.value()->major, 12);
  EXPECT_NE(n.value()->nvrtcCompileProgram, nullptr);
}

TEST(Loaders, ErrorTextWorksWithoutADriver) {
  EXPECT_FALSE(cu_error_text(CUDA_ERROR_INVALID_VALUE).empty());
}

}  // namespace
}  // namespace cudal1
