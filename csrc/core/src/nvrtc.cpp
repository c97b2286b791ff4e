/// @brief Loading NVRTC at run time.
#include "cudal1/core/nvrtc.h"

#include <cstdlib>

#include "cudal1/core/config.h"
#include "dynlib.h"

namespace cudal1 {
namespace {

Result<const NvrtcApi*> load_nvrtc() {
  std::vector<std::string> candidates = {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"};
  for (const char* root : {static_cast<const char*>(std::getenv("CUDA_HOME")),
                           static_cast<const char*>(std::getenv("CUDA_PATH")), "/usr/local/cuda"}) {
    if (!root || !*root) continue;
    for (const char* so : {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"})
      candidates.push_back(std::string(root) + "/lib64/" + so);
  }
  std::string errors;
  const auto lib = detail::open_library(config().nvrtc_library, "CUDAL1_NVRTC_LIBRARY", candidates, &errors);
  if (!lib.handle) return Status(Code::kUnavailable, "no NVRTC library (" + errors + ")");
  auto* api = new NvrtcApi();  // leaked on purpose
  api->library = lib.name;
#define CUDAL1_LOAD(fn)                                                                           \
  api->fn = reinterpret_cast<decltype(api->fn)>(detail::symbol(lib, #fn));                   \
  if (!api->fn) return Status(Code::kUnavailable, "NVRTC " + lib.name + " lacks " #fn);
  CUDAL1_NVRTC_FUNCS(CUDAL1_LOAD)
#undef CUDAL1_LOAD
  api->nvrtcVersion(&api->major, &api->minor);
  return static_cast<const NvrtcApi*>(api);
}

}  // namespace

Result<const NvrtcApi*> nvrtc() {
  static const Result<const NvrtcApi*> loaded = load_nvrtc();
  return loaded;
}

}  // namespace cudal1
