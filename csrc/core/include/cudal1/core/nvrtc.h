/// @brief NVRTC, opened with dlopen at run time (Note [CUDA at run time]), and its check macro.
#pragma once

#include <nvrtc.h>

#include <string>

#include "cudal1/core/status.h"

namespace cudal1 {

#define CUDAL1_NVRTC_FUNCS(X)                                                                  \
  X(nvrtcVersion) X(nvrtcGetErrorString) X(nvrtcCreateProgram) X(nvrtcDestroyProgram)          \
  X(nvrtcCompileProgram) X(nvrtcGetProgramLogSize) X(nvrtcGetProgramLog) X(nvrtcGetCUBINSize) \
  X(nvrtcGetCUBIN) X(nvrtcGetNumSupportedArchs) X(nvrtcGetSupportedArchs)

/// Function table of NVRTC. Only obtainable through nvrtc(); every pointer is non-null there.
struct NvrtcApi {
#define CUDAL1_NVRTC_MEMBER(name) decltype(&::name) name = nullptr;
  CUDAL1_NVRTC_FUNCS(CUDAL1_NVRTC_MEMBER)
#undef CUDAL1_NVRTC_MEMBER
  int major = 0, minor = 0;  ///< nvrtcVersion
  std::string library;       ///< path or soname that was opened
};

/// Opens NVRTC once per process (thread-safe): CUDAL1_NVRTC_LIBRARY and only it when set, else libnvrtc.so.13,
/// .so.12, libnvrtc.so on the loader path, then under $CUDA_HOME/lib64 and /usr/local/cuda/lib64. Returns
/// Unavailable when none loads (or the set path does not). The table lives until process exit.
Result<const NvrtcApi*> nvrtc();

}  // namespace cudal1

/// Runs an NVRTC call and returns a CompileError/Unavailable Status from the enclosing function on failure.
#define CUDAL1_NVRTC_TRY(api, expr)                                                                  \
  do {                                                                                               \
    const nvrtcResult _cudal1_r = (expr);                                                            \
    if (_cudal1_r != NVRTC_SUCCESS)                                                                  \
      return ::cudal1::Status(::cudal1::Code::kCompileError,                                         \
                              std::string(#expr) + " failed: " + (api)->nvrtcGetErrorString(_cudal1_r) + \
                                  " at " + __FILE__ + ":" + std::to_string(__LINE__));              \
  } while (0)
