/// @brief The CUDA Driver API, opened with dlopen at run time (Note [CUDA at run time] in
/// cmake/cudal1Dependencies.cmake), and the check macro for CUresult.
#pragma once

#include <cuda.h>

#include <string>

#include "cudal1/core/status.h"

namespace cudal1 {

// Every driver entry point cudal1 uses. Names go through cuda.h's macros (cuMemAlloc -> cuMemAlloc_v2),
// so the symbol looked up is the one the headers mean.
#define CUDAL1_DRIVER_FUNCS(X)                                                                         \
  X(cuInit) X(cuDriverGetVersion) X(cuGetErrorName) X(cuGetErrorString) X(cuDeviceGet)                 \
  X(cuDeviceGetName) X(cuDeviceGetAttribute) X(cuDevicePrimaryCtxRetain) X(cuCtxGetCurrent)             \
  X(cuCtxSetCurrent) X(cuCtxSynchronize) X(cuModuleLoadData) X(cuModuleUnload) X(cuModuleGetFunction)   \
  X(cuLaunchKernel) X(cuEventCreate) X(cuEventDestroy) X(cuEventRecord) X(cuEventQuery)                 \
  X(cuEventSynchronize) X(cuEventElapsedTime) X(cuStreamSynchronize) X(cuStreamIsCapturing)             \
  X(cuStreamCreate) X(cuMemsetD32Async) X(cuOccupancyMaxActiveBlocksPerMultiprocessor)                  \
  X(cuLaunchCooperativeKernel) X(cuLaunchKernelEx) X(cuFuncSetAttribute) X(cuOccupancyMaxActiveClusters) \
  X(cuMemGetInfo) X(cuDeviceGetCount)

/// Function table of the driver. Only obtainable through driver(); every pointer is non-null there.
struct DriverApi {
#define CUDAL1_DRIVER_MEMBER(name) decltype(&::name) name = nullptr;
  CUDAL1_DRIVER_FUNCS(CUDAL1_DRIVER_MEMBER)
#undef CUDAL1_DRIVER_MEMBER
  int driver_version = 0;   ///< cuDriverGetVersion, e.g. 13000
  std::string library;      ///< path or soname that was opened
};

/// Opens libcuda (CUDAL1_CUDA_LIBRARY and only it when set, else libcuda.so.1, libcuda.so), resolves every entry
/// point and calls cuInit(0), once per process (thread-safe). Returns the table, or Unavailable saying why (no
/// library, CUDAL1_CUDA_LIBRARY's path does not load, a missing symbol, cuInit failed e.g. because no device is
/// present). The table lives until process exit.
Result<const DriverApi*> driver();

/// Opens libcuda and resolves every entry point without initialising CUDA (no cuInit: safe before a fork and
/// at library load). Ok when driver() would find a complete library; the reason otherwise.
Status probe_driver();

/// "CUDA_ERROR_INVALID_VALUE (invalid argument)" for `r`; works even when the driver is not loaded.
std::string cu_error_text(CUresult r);

/// Builds the CudaError Status for a failed driver call.
Status cu_status(CUresult r, const char* expr, const char* file, int line);

}  // namespace cudal1

/// Runs a driver call (an expression of type CUresult) and returns a CudaError Status from the enclosing
/// function if it failed. The Status names the expression and file:line.
#define CUDAL1_CU_TRY(expr)                                                               \
  do {                                                                                    \
    const CUresult _cudal1_r = (expr);                                                    \
    if (_cudal1_r != CUDA_SUCCESS) return ::cudal1::cu_status(_cudal1_r, #expr, __FILE__, __LINE__); \
  } while (0)
