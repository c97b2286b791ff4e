/// @brief dlopen/dlsym wrapper shared by the driver and NVRTC loaders.
#include "dynlib.h"

#include <dlfcn.h>

namespace cudal1::detail {

DynLib open_first(const std::vector<std::string>& candidates, std::string* errors) {
  for (const auto& c : candidates) {
    if (c.empty()) continue;
    if (void* h = dlopen(c.c_str(), RTLD_NOW | RTLD_LOCAL)) return DynLib{h, c};
    if (errors) {
      const char* e = dlerror();
      *errors += (errors->empty() ? "" : "; ") + std::string(e ? e : c.c_str());
    }
  }
  return DynLib{};
}

void* symbol(const DynLib& lib, const char* name) { return lib.handle ? dlsym(lib.handle, name) : nullptr; }

}  // namespace cudal1::detail
