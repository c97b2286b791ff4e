/// @brief Layout arithmetic shared by generators: the output layout ATen's TensorIterator allocates, and the
/// coalesced iteration space of an elementwise kernel.
#pragma once

#include <cstdint>
#include <vector>

namespace cudal1::optimizer {

/// True when the tensor's elements exactly fill a dense block of memory (some permutation of contiguous).
bool non_overlapping_and_dense(const std::vector<int64_t>& sizes, const std::vector<int64_t>& strides);

/// Row-major (contiguous) strides of `sizes`; size-0 dimensions count as 1, as ATen computes them.
std::vector<int64_t> contiguous_strides(const std::vector<int64_t>& sizes);

/// Strides of the fresh output TensorIterator allocates for an elementwise op with one input of this layout:
/// contiguous for a contiguous input, channels-last for a channels-last 4-d one (size-1 dimensions ignored in
/// both tests), the input's strides when it is otherwise non-overlapping and dense, else contiguous in the
/// input's stride order (TensorIterator::reorder_dimensions rules, ties to the smaller size).
std::vector<int64_t> elementwise_output_strides(const std::vector<int64_t>& sizes,
                                                const std::vector<int64_t>& in_strides);

/// One input operand of an elementwise op: its sizes and strides (both empty for a 0-dim tensor or a scalar).
struct OperandLayout {
  std::vector<int64_t> sizes, strides;
};

/// The broadcast shape of `operands` (numpy rules, 0-dim operands take part as []), or false when two sizes
/// conflict. `shape` receives the result.
bool broadcast_shape(const std::vector<OperandLayout>& operands, std::vector<int64_t>* shape);

/// Strides of the fresh output TensorIterator allocates for an elementwise op whose inputs are `operands` (in
/// the op's argument order) and whose broadcast shape is `shape` (non-empty rank). Ported from
/// TensorIteratorBase::compute_fast_setup_type (all inputs of one shape: all contiguous -> contiguous, all
/// channels-last 4-d -> channels-last, all non-overlapping-and-dense with equal strides -> those strides), else
/// compute_strides + reorder_dimensions over every input's broadcast strides (a broadcast or missing dim has
/// stride 0 and gives no order) + allocate_or_resize_outputs (contiguous in that permutation). A 0-dim operand
/// makes the shapes differ, as in TensorIterator::compute_shape.
std::vector<int64_t> broadcast_output_strides(const std::vector<int64_t>& shape,
                                              const std::vector<OperandLayout>& operands);

/// ATen's is_channels_last_strides_2d for a 4-d tensor (c10/core/MemoryFormat.h), ambiguous cases included (a
/// trivial C stride, N111 tensors default to NCHW). False for other ranks. What suggest_memory_format() reads.
bool channels_last_strides_2d(const std::vector<int64_t>& sizes, const std::vector<int64_t>& strides);

/// Strides of a channels-last 4-d tensor of `sizes` (ATen's get_channels_last_strides_2d).
std::vector<int64_t> channels_last_strides(const std::vector<int64_t>& sizes);

/// Iteration space of an elementwise kernel that writes a dense output in memory order.
struct IterSpace {
  std::vector<int64_t> sizes;       ///< innermost first, size-1 dims dropped, adjacent dims merged
  std::vector<int64_t> in_strides;  ///< input stride (elements) per dim
  int64_t numel = 0;
  /// The input is read linearly too (one dim of stride 1).
  bool linear() const { return sizes.size() <= 1 && (in_strides.empty() || in_strides[0] == 1); }
};

/// Iteration space of an elementwise kernel with several inputs that writes a dense output in memory order.
struct MultiIterSpace {
  std::vector<int64_t> sizes;                    ///< innermost first, size-1 dims dropped, adjacent dims merged
  std::vector<std::vector<int64_t>> in_strides;  ///< per input, its stride (elements) per dim (0: broadcast)
  int64_t numel = 0;
};

/// Orders dims by the (dense) output's strides and merges two adjacent dims when every input (and the output)
/// is contiguous across them; `in_strides[k]` are input k's strides over `sizes` (broadcast dims: 0).
MultiIterSpace coalesce_inputs(const std::vector<int64_t>& sizes, const std::vector<int64_t>& out_strides,
                               const std::vector<std::vector<int64_t>>& in_strides);

/// Orders dims by the (dense) output's strides and merges dims contiguous in both operands.
IterSpace coalesce(const std::vector<int64_t>& sizes, const std::vector<int64_t>& out_strides,
                   const std::vector<int64_t>& in_strides);

}  // namespace cudal1::optimizer
