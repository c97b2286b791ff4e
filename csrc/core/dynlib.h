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

/// dlsym; nullptr if absent.
void* symbol(const DynLib& lib, const char* name);

}  // namespace cudal1::detail
