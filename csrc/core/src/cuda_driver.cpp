/// @brief Loading the CUDA driver at run time.
#include "cudal1/core/cuda_driver.h"

#include <mutex>

#include "cudal1/core/config.h"
#include "dynlib.h"

#define CUDAL1_STR2(x) #x
#define CUDAL1_STR(x) CUDAL1_STR2(x)  // expands cuda.h's versioning macros first

namespace cudal1 {
namespace {

/// Opens and resolves; no cuInit.
Result<DriverApi*> open_driver() {
  auto* api = new DriverApi();  // leaked on purpose: pointers into it live until exit
  std::string errors;
  const auto lib =
      detail::open_library(config().cuda_library, "CUDAL1_CUDA_LIBRARY", {"libcuda.so.1", "libcuda.so"}, &errors);
  if (!lib.handle) return Status(Code::kUnavailable, "no CUDA driver library (" + errors + ")");
  api->library = lib.name;
#define CUDAL1_LOAD(fn)                                                                         \
  api->fn = reinterpret_cast<decltype(api->fn)>(detail::symbol(lib, CUDAL1_STR(fn)));      \
  if (!api->fn) return Status(Code::kUnavailable, std::string("CUDA driver ") + lib.name +     \
                                                        " lacks " CUDAL1_STR(fn) " (driver too old?)");
  CUDAL1_DRIVER_FUNCS(CUDAL1_LOAD)
#undef CUDAL1_LOAD
  return api;
}

Result<DriverApi*> opened() {
  static const Result<DriverApi*> api = open_driver();
  return api;
}

Result<const DriverApi*> load_driver() {
  CUDAL1_ASSIGN_OR_RETURN(DriverApi* api, opened());
  const CUresult r = api->cuInit(0);
  if (r != CUDA_SUCCESS) {
    const char* name = nullptr;
    api->cuGetErrorName(r, &name);
    return Status(Code::kUnavailable, std::string("cuInit failed: ") + (name ? name : "?"));
  }
  api->cuDriverGetVersion(&api->driver_version);
  return static_cast<const DriverApi*>(api);
}

}  // namespace

Status probe_driver() { return opened().status(); }

Result<const DriverApi*> driver() {
  static const Result<const DriverApi*> loaded = load_driver();
  return loaded;
}

std::string cu_error_text(CUresult r) {
  auto d = driver();
  const char* name = nullptr;
  const char* text = nullptr;
  if (d.ok()) {
    d.value()->cuGetErrorName(r, &name);
    d.value()->cuGetErrorString(r, &text);
  }
  return std::string(name ? name : "CUresult " + std::to_string(static_cast<int>(r))) + " (" +
         (text ? text : "?") + ")";
}

Status cu_status(CUresult r, const char* expr, const char* file, int line) {
  return Status(Code::kCudaError,
                std::string(expr) + " failed: " + cu_error_text(r) + " at " + file + ":" + std::to_string(line));
}

}  // namespace cudal1
