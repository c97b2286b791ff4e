/// @brief GPU test helpers: whether a usable GPU is here (else the reason to skip), the verification trials of
/// the GPU tests, and hook/tuner set-up.
#pragma once

#include <string>
#include <vector>

#include "cudal1/core/status.h"
#include "cudal1/dispatcher/regions.h"

namespace cudal1::testing {

/// True when this build has torch-CUDA, a CUDA device is visible, and the driver and NVRTC load; otherwise
/// false with the reason in `why`.
bool gpu_available(std::string* why);

/// Verification trials of the GPU sweeps and fuzz tests: one for each of make_inputs' six input scales (1, 4,
/// 0.01, 30, 1000, 0.5; optimizer/framework/measure.cpp), one more than the tuner's default 5, so a test sees every
/// scale the tuner does.
inline constexpr int kEveryScaleTrials = 6;

/// The set-up of the deferred-region tests (each in its own process): hooks `ops` in tune mode with chains
/// recorded and nothing handed to an optimizer, then turns deferral on with pending outputs poisoned (NaN), so a
/// missed write shows.
Status install_region_hooks(std::vector<std::string> ops);

}  // namespace cudal1::testing

/// Skips the current test with the reason when no usable GPU is here.
#define CUDAL1_REQUIRE_GPU()                                      \
  do {                                                            \
    std::string _why;                                             \
    if (!::cudal1::testing::gpu_available(&_why)) GTEST_SKIP() << _why; \
  } while (0)

/// CUDAL1_REQUIRE_GPU, and skips with deferral_status() where deferral on CUDA is off (no CUPTI): nothing fuses.
#define CUDAL1_REQUIRE_DEFERRAL()                                                              \
  do {                                                                                         \
    CUDAL1_REQUIRE_GPU();                                                                      \
    const std::string _st = ::cudal1::dispatcher::deferral_status();                           \
    if (_st.find("CUDA: on") == std::string::npos) GTEST_SKIP() << _st;                        \
  } while (0)
