/// @brief Private: reading integer arguments of a recorded call (int, SymInt, int[] and SymInt[] IValues).
#pragma once

#include <ATen/core/ivalue.h>

#include <cstdint>
#include <optional>
#include <vector>

namespace cudal1::optimizer {

/// The integer `v` holds (an int or a concrete SymInt), or nullopt.
inline std::optional<int64_t> int_value(const c10::IValue& v) {
  if (v.isInt()) return v.toInt();
  if (v.isSymInt()) {
    const auto si = v.toSymInt();
    if (!si.is_symbolic()) return si.expect_int();
  }
  return std::nullopt;
}

/// The integers of a list `v` (int[] or SymInt[]), or nullopt when it is not a list of concrete integers.
inline std::optional<std::vector<int64_t>> int_list(const c10::IValue& v) {
  if (v.isIntList()) return v.toIntVector();
  if (!v.isList()) return std::nullopt;
  std::vector<int64_t> out;
  for (const auto& e : v.toListRef()) {
    auto i = int_value(e);
    if (!i) return std::nullopt;
    out.push_back(*i);
  }
  return out;
}

}  // namespace cudal1::optimizer
