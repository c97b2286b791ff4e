/// @brief The cross-family policies shipped with cudal1 (shipped_shared_prior in shared_features.h).
#include "cudal1/optimizer/shared_features.h"

namespace cudal1::optimizer {
namespace {

// Written by `build/bench/bench_tuner_replay bench/replay --write-prior > optimizer/framework/shared_prior_sm90.inc`:
// the cross-family policy taught by every recorded landscape (sm 90, H200), shared feature layout 1.
constexpr const char* kSharedPriorSm90 =
#include "shared_prior_sm90.inc"
    ;

}  // namespace

std::string_view shipped_shared_prior(int sm) {
  static_assert(kSharedFeaturesVersion == 1, "re-teach the shipped prior for the new shared feature layout");
  return sm == 90 ? std::string_view(kSharedPriorSm90) : std::string_view();
}

}  // namespace cudal1::optimizer
