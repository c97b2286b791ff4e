/// @brief Private: the softmax family (_softmax and _log_softmax over any dimension; fp32/fp16/bf16 with fp32
/// accumulation). Rows (the last dim, or a dim followed only by size-1 dims) contiguous inside with any uniform
/// row stride; outer dims as [outer, n, inner] columns (Note [Softmax columns]).
///
/// Note [Softmax columns]
/// Softmax over a dim followed by dims of product inner > 1 reduces, for each (outer, inner) position, a column
/// of n elements with stride `n_stride` (ATen: cunn_SpatialSoftMaxForward on the .contiguous() input, so the
/// output is contiguous). The arithmetic is that kernel's, per column in fp32: max (NaN skipped: fmaxf, like
/// ATen's `a < b ? b : a` from `lowest`; the two differ only in columns of -Inf/NaN, NaN either way), then
/// sum of expf(x - max), then softmax = expf(x - max) / sum and log_softmax = (x - max) - logf(sum)
/// (SoftMaxForwardEpilogue / LogSoftMaxForwardEpilogue; the row kernels keep x - (max + log(sum)) of ATen's
/// persistent softmax). Layouts served exactly: the dims after `dim` dense (stride 1 inside), `dim` with any
/// stride, the dims before it one uniform stride (size-1 dims ignored), no overlap; anything else declines.
/// Technique space: `split` threads share a column (1: a thread per column, coalesced across threads along
/// inner; 4 or 32: a partial reduction each, combined by warp shuffles and shared memory), `vec` adjacent
/// inner columns per thread (16-byte loads where inner, the strides and the offset allow), `cache` (the
/// thread's part of the column kept in registers: one read instead of three) and the block size.
#pragma once

#include "cudal1/optimizer/family.h"

namespace cudal1::optimizer::softmax {

/// The family object (a process-wide singleton).
const Family& softmax_family();

/// One planned signature served by rows (the reduced dim is the last one that is not size 1).
struct SoftmaxShape {
  bool log = false;
  c10::ScalarType dtype = c10::ScalarType::Float;
  std::vector<int64_t> sizes, in_strides, out_strides;
  int64_t rows = 0, cols = 0, row_stride = 0;
  int max_vec = 1;
};

/// One planned signature served by columns (Note [Softmax columns]).
struct ColumnShape {
  bool log = false;
  c10::ScalarType dtype = c10::ScalarType::Float;
  std::vector<int64_t> sizes, in_strides, out_strides;
  int64_t outer = 1, n = 1, inner = 1;  ///< the input viewed as [outer, n, inner]
  int64_t outer_stride = 0, n_stride = 0;  ///< input strides (elements) of outer and n; inner is dense
  int max_vec = 1;                     ///< widest vector along inner the layout allows
};

/// The number of vectors one thread keeps in registers when the row is cached; above kMaxCachedElements per
/// thread, caching is not offered.
constexpr int kMaxCachedElements = 64;

/// Problem classes and knobs of either kind of plan, as one feature vector of a fixed length (the policy
/// learns one weight vector per family).
struct SoftmaxClass {
  int64_t n = 1;        ///< elements reduced
  bool half = false;    ///< 16-bit dtype
  bool log = false;
  bool columns = false;  ///< a ColumnShape
  int64_t inner = 1, column_count = 0;  ///< columns only
};
std::vector<float> softmax_features(const SoftmaxClass& c, const Variant& v);

/// Plans `s` (rows) / `c` (columns); never fails.
std::unique_ptr<Plan> row_plan(SoftmaxShape s);
std::unique_ptr<Plan> column_plan(ColumnShape c);

/// CUDA source for `s` with the technique knobs: vector width, block size, warp-per-row (else block-per-row),
/// and whether the row stays in registers between its passes (one read) or is re-read (three reads).
KernelSource generate_softmax(const SoftmaxShape& s, int vec, int block, bool warp_per_row, bool cache);

/// CUDA source for `c` (Note [Softmax columns]): `split` threads per column (1, or a power of two dividing
/// `block`), `vec` adjacent columns per thread, column parts cached in registers or re-read.
KernelSource generate_softmax_columns(const ColumnShape& c, int vec, int block, int split, bool cache);

}  // namespace cudal1::optimizer::softmax
