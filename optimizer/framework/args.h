/// @brief Private: reading a recorded call's arguments (ints, int lists, layouts) the way every family's planner
/// needs them.
#pragma once

#include <optional>
#include <utility>
#include <vector>

#include "cudal1/dispatcher/sig_record.h"

namespace cudal1::optimizer {

/// An int or a concrete SymInt; nullopt for anything else (a symbolic SymInt, None, a list).
std::optional<int64_t> int_value(const c10::IValue& v);

/// An int[] or SymInt[] of concrete values; nullopt otherwise.
std::optional<std::vector<int64_t>> int_list(const c10::IValue& v);

/// ATen's reading of an int[2] pooling argument (kernel_size, stride, padding, dilation): one value for both dims,
/// two values, or an empty list meaning `empty` (the kernel size, for a stride); nullopt where ATen raises.
std::optional<std::pair<int64_t, int64_t>> int_pair(const c10::IValue& v,
                                                    std::optional<std::pair<int64_t, int64_t>> empty);

/// True when `t` is laid out contiguously (strides of size-1 dimensions do not matter, as in ATen).
bool contiguous(const dispatcher::TensorSpec& t);

}  // namespace cudal1::optimizer
