/// @brief The run-time loaders: a missing library is an Unavailable status, never a crash; NVRTC loads where
/// the toolkit is installed.
#include <gtest/gtest.h>

#include "cudal1/core/config.h"
#include "cudal1/core/cuda_driver.h"
#include "cudal1/core/nvrtc.h"
#include "dynlib.h"

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

// CUDAL1_CUDA_LIBRARY / CUDAL1_NVRTC_LIBRARY: a set path is the only one tried; one that does not load is an
// error naming the setting and the path, not a silent fall back to a library the user did not ask for.
TEST(Loaders, ASetLibraryPathIsTheOnlyOneTried) {
  const std::vector<std::string> search = {"libc.so.6"};  // loads on any glibc system
  std::string errors;
  const auto found = detail::open_library("", "CUDAL1_X_LIBRARY", search, &errors);
  ASSERT_NE(found.handle, nullptr) << errors;
  EXPECT_EQ(found.name, "libc.so.6");
  errors.clear();
  const auto set = detail::open_library("/nonexistent/libx.so.1", "CUDAL1_X_LIBRARY", search, &errors);
  EXPECT_EQ(set.handle, nullptr);
  EXPECT_NE(errors.find("CUDAL1_X_LIBRARY=/nonexistent/libx.so.1 does not load"), std::string::npos) << errors;
  EXPECT_EQ(errors.find("libc.so.6"), std::string::npos) << errors;
  errors.clear();
  const auto named = detail::open_library("libc.so.6", "CUDAL1_X_LIBRARY", {"/nonexistent/liby.so"}, &errors);
  EXPECT_EQ(named.name, "libc.so.6") << errors;
}

TEST(Loaders, ErrorTextWorksWithoutADriver) {
  EXPECT_FALSE(cu_error_text(CUDA_ERROR_INVALID_VALUE).empty());
}

}  // namespace
}  // namespace cudal1
