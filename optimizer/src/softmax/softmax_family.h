/// @brief Private: the softmax family (_softmax and _log_softmax over the last dimension; fp32/fp16/bf16 with
/// fp32 accumulation; rows contiguous inside, any uniform row stride).
#pragma once

#include "cudal1/optimizer/family.h"

namespace cudal1::optimizer::softmax {

/// The family object (a process-wide singleton).
const Family& softmax_family();

/// One planned signature.
struct SoftmaxShape {
  bool log = false;
  c10::ScalarType dtype = c10::ScalarType::Float;
  std::vector<int64_t> sizes, in_strides, out_strides;
  int64_t rows = 0, cols = 0, row_stride = 0;
  int max_vec = 1;
};

/// The number of vectors one thread keeps in registers when the row is cached; above kMaxCachedElements per
/// thread, caching is not offered.
constexpr int kMaxCachedElements = 64;

/// CUDA source for `s` with the technique knobs: vector width, block size, warp-per-row (else block-per-row),
/// and whether the row stays in registers between its passes (one read) or is re-read (three reads).
KernelSource generate_softmax(const SoftmaxShape& s, int vec, int block, bool warp_per_row, bool cache);

}  // namespace cudal1::optimizer::softmax
