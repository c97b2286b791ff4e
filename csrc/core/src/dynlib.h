/// @brief Private helper: dlopen the first library of a candidate list and resolve symbols from it.
#pragma once

#include <string>
#include <vector>

namespace cudal1::detail {

/// An opened shared library (never closed: driver libraries must outlive every handle made from them).
struct DynLib {
  void* handle = nullptr;
  std::string name;  ///< the candidate that opened
};

/// Tries each candidate in order with dlopen(RTLD_NOW | RTLD_LOCAL). On failure `errors` lists each dlerror.
DynLib open_first(const std::vector<std::string>& candidates, std::string* errors);

/// The library a setting names, and only that one when it is set: `path` (the value of the environment variable
/// `setting`, e.g. CUDAL1_CUDA_LIBRARY) that does not load is an error naming both, never a silent fall back to
/// another library, which the user did not ask for. With `path` empty, the first of `candidates` that loads. On
/// failure `errors` says what was tried (dlerror for each).
DynLib open_library(const std::string& path, const char* setting, const std::vector<std::string>& candidates,
                    std::string* errors);

/// dlsym; nullptr if absent.
void* symbol(const DynLib& lib, const char* name);

}  // namespace cudal1::detail
