/// @brief GPU test helper: compile, load, bind and verify against ATen (Note [Verification]) every variant of
/// some problems' technique spaces that a filter picks, one at a time.
#pragma once

#include <functional>
#include <vector>

#include "cudal1/optimizer/family.h"

namespace cudal1::testing {

/// Compute capability x 10 of device 0; 0 (and a gtest failure naming why) when it cannot be read.
int device_sm();

/// Number of variants `pick` accepts in the plans of `problems` (a gtest failure for a problem no family plans).
int count_variants(const std::vector<optimizer::Problem>& problems,
                   const std::function<bool(const optimizer::Variant&)>& pick);

/// Verifies every variant `pick` accepts of every problem's plan on device 0 (kEveryScaleTrials, fresh inputs each;
/// seeds from 4242). Records a gtest failure naming the signature and variant at the first step that fails
/// and stops there. Returns the number of variants verified.
int verify_variants(const std::vector<optimizer::Problem>& problems,
                    const std::function<bool(const optimizer::Variant&)>& pick);

}  // namespace cudal1::testing
