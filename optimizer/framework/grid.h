/// @brief Private: the launch-grid arithmetic every bound kernel shares.
#pragma once

#include <algorithm>
#include <cstdint>

namespace cudal1::optimizer {

/// Blocks along one grid dimension for `blocks` wanted: at least 1, at most the driver's 2^31 - 1 (kernels that
/// may need more loop over their work; planners decline the rest).
inline unsigned grid_dim(int64_t blocks) {
  return static_cast<unsigned>(std::clamp<int64_t>(blocks, 1, (int64_t{1} << 31) - 1));
}

}  // namespace cudal1::optimizer
