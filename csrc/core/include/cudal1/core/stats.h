/// @brief Small statistics shared by the modules' timing code.
#pragma once

#include <algorithm>
#include <vector>

namespace cudal1 {

/// The median of `v` (the mean of the two middle values for an even count); 0 for an empty vector.
inline double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace cudal1
