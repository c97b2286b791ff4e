/// @brief Private: source fragments every generator shares.
#pragma once

#include <c10/core/ScalarType.h>

#include <vector>

namespace cudal1::optimizer {

/// `storage_t`, `to_float(storage_t)` and `to_storage(float)` for fp32, fp16 or bf16, without CUDA headers (NVRTC
/// ships none): PTX cvt instructions, round-to-nearest-even like ATen's conversions. "" for other dtypes.
const char* dtype_prelude(c10::ScalarType t);

/// `warp_sum`, `warp_max`, `row_sum(v, red)` and `row_max(v, red)`: fp32 reductions over the TPR threads of a row
/// (a warp, or the whole block through `float red[32]` in shared memory), the result identical in every thread
/// of the row. The source must define TPR and BLOCK first.
const char* row_reduce_source();

/// `struct Welford {n, mean, m2}` (fp32) and `wf_combine(a, b)`: Chan's merge of two partial statistics, as
/// ATen's WelfordOps::combine (an empty side returns the other unchanged).
const char* welford_source();

/// A policy feature vector: every knob indicator crossed with every problem-class indicator (ctx x knobs,
/// context-major), so that the policy can learn a knob's worth per class of problem.
std::vector<float> crossed_features(const std::vector<float>& ctx, const std::vector<float>& knobs);

/// Bytes per element of the dtypes the generators handle (fp32: 4, fp16/bf16: 2).
inline int elem_size(c10::ScalarType t) { return t == c10::ScalarType::Float ? 4 : 2; }

/// True for the dtypes the generators handle.
inline bool generated_dtype(c10::ScalarType t) {
  return t == c10::ScalarType::Float || t == c10::ScalarType::Half || t == c10::ScalarType::BFloat16;
}

}  // namespace cudal1::optimizer
