/// @brief NVRTC compilation of generated source into a cubin for one architecture.
#pragma once

#include <string>

#include "cudal1/core/status.h"
#include "cudal1/optimizer/family.h"

namespace cudal1::optimizer {

struct CompiledKernel {
  std::string cubin;        ///< SASS for exactly `sm`
  std::string kernel_name;
  std::string log;          ///< compiler log (warnings), may be empty
  int sm = 0;
};

/// Compiles `src` with NVRTC for `-arch=sm_<sm>` (no fast-math: results must match ATen). Thread-safe.
/// Returns Unavailable without NVRTC and CompileError with the full log when NVRTC rejects the source.
Result<CompiledKernel> compile(const KernelSource& src, int sm);

/// NVRTC's version as "13.0", or "" when NVRTC is unavailable.
std::string nvrtc_version();

}  // namespace cudal1::optimizer
