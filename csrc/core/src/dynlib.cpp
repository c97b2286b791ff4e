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

DynLib open_library(const std::string& path, const char* setting, const std::vector<std::string>& candidates,
                    std::string* errors) {
  if (path.empty()) return open_first(candidates, errors);
  std::string why;
  DynLib lib = open_first({path}, &why);
  if (!lib.handle && errors)
    *errors += (errors->empty() ? "" : "; ") + std::string(setting) + "=" + path + " does not load (" + why + ")";
  return lib;
}

void* symbol(const DynLib& lib, const char* name) { return lib.handle ? dlsym(lib.handle, name) : nullptr; }

}  // namespace cudal1::detail
