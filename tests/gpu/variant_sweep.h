/// @brief GPU test helper: compile, load, bind and verify against ATen (Note [Verification]) every variant of
/// some problems' technique spaces that a filter picks, one at a time.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "cudal1/optimizer/family.h"

namespace cudal1::testing {

/// Compute capability x 10 of device 0; 0 (and a gtest failure naming why) when it cannot be read.
int device_sm();

/// The kernel of variant `v` of `plan`: its source compiled for compute capability `sm`, loaded on device 0 and
/// bound to the plan's signature; or the status of the first step that failed (source, compile, load, bind).
Result<std::unique_ptr<optimizer::BoundKernel>> build_variant(const optimizer::Plan& plan, const optimizer::Variant& v,
                                                              int sm);

/// Number of variants `pick` accepts in the plans of `problems` (a gtest failure for a problem no family plans).
int count_variants(const std::vector<optimizer::Problem>& problems,
                   const std::function<bool(const optimizer::Variant&)>& pick);

/// Verifies every variant `pick` accepts of every problem's plan on device 0 (kEveryScaleTrials, fresh inputs each;
/// seeds from 4242). Records a gtest failure naming the signature and variant at the first step that fails
/// and stops there. Returns the number of variants verified.
int verify_variants(const std::vector<optimizer::Problem>& problems,
                    const std::function<bool(const optimizer::Variant&)>& pick);

}  // namespace cudal1::testing
