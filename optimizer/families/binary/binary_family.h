/// @brief Private: the binary elementwise family (add/sub/mul/div, maximum/minimum, pow, where; broadcasting,
/// scalar and 0-dim operands, PyTorch's type promotion).
///
/// Note [Binary elementwise]
/// What ATen's CUDA kernels compute, and how this family reproduces it:
/// - Result dtype: torch's result_type. Only fp32/fp16/bf16 tensors of rank >= 1 take part as "dimensioned"
///   operands; their promotion is the result (bf16 + fp16 -> fp32), because a floating dimensioned result wins
///   over 0-dim tensors and wrapped numbers (combine_categories). Calls with no dimensioned value operand are
///   declined (whether a 0-dim tensor is a wrapped number is not recorded, and it would matter there).
/// - Values: every operand is converted to the common dtype (TensorIterator's dynamic cast to scalar_t; exact for
///   dimensioned operands, a rounding for a wider 0-dim one), then computed in fp32 (opmath) and rounded once:
///   add/sub `a + alpha * b` (sub: -alpha), mul `a * b`, div `a / b` except a CPU-scalar divisor, which ATen
///   turns into `a * (1 / b)` (div_true_kernel_cuda), maximum/minimum with NaN propagation, pow `powf`, where
///   `cond ? a : b`. A CPU scalar (0-dim CPU tensor, Scalar argument) reaches ATen's functor either rounded to
///   the common dtype (scalar_value) or not (original_scalar_value, newer torch); calls whose CPU scalar or
///   alpha is not exactly representable in the common dtype are therefore declined at plan time, so both
///   readings agree. A 0-dim CPU tensor operand is declined at launch: its value is not in the signature and
///   verification draws 0-dim operands on the GPU, so that path would run unverified.
///   pow with a 0-dim operand is declined
///   (ATen's pow_tensor_scalar special-cases exponents).
/// - Output layout: TensorIterator's (broadcast_output_strides in layout.h, over the inputs in argument order;
///   a 0-dim operand counts as an operand of another shape). where.self casts a mismatched value operand with
///   .to() first, which keeps strides only for dense tensors: other layouts are declined.
/// - Kernel: the output is written densely in memory order over the coalesced dims; each input's offset uses
///   compile-time strides. A VEC-wide group of outputs lies in one innermost row, so an input is read as one
///   vector (inner stride 1, aligned), one broadcast element (inner stride 0) or VEC gathers (other strides).
///   Scalar operands are read once per thread: from the device for a CUDA 0-dim tensor, else passed by value.
#pragma once

#include <c10/core/ScalarType.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cudal1/optimizer/family.h"
#include "cudal1/optimizer/layout.h"

namespace cudal1::optimizer::binary {

/// The family object (a process-wide singleton).
const Family& binary_family();

/// How one input is read.
enum class OperandKind {
  kTensor,  ///< a tensor of rank >= 1 (possibly broadcast)
  kZeroDim, ///< a 0-dim tensor (CUDA: read on the device; CPU: value passed at launch)
  kScalar,  ///< a Scalar argument (value passed at launch)
};

/// One input of a planned call.
struct BinaryOperand {
  OperandKind kind = OperandKind::kTensor;
  int arg = 0;                          ///< index of the call argument
  c10::ScalarType dtype = c10::ScalarType::Float;  ///< storage dtype (kScalar: Double)
  std::vector<int64_t> sizes, strides;  ///< as recorded (kTensor only)
  int64_t storage_offset = 0;
  std::vector<int64_t> it_strides;      ///< strides over the coalesced space (kTensor only)
};

/// Everything the generator and the kernel need about one planned signature.
struct BinaryShape {
  std::string math;                      ///< "add" (also sub: alpha negated), "mul", "div", "maximum", ...
  c10::ScalarType out_dtype = c10::ScalarType::Float;  ///< the common dtype
  std::vector<int64_t> shape, out_strides;
  std::vector<BinaryOperand> ins;        ///< in argument order: (self, other) or (condition, self, other)
  int alpha_arg = -1;                    ///< argument holding alpha, -1: none
  bool negate_alpha = false;             ///< sub
  std::vector<int64_t> it_sizes;         ///< coalesced iteration space, innermost first
  int64_t numel = 0;
  int max_vec = 1;                       ///< largest vector width the layout allows
};

/// Plans a problem into a shape, or declines (Note [Binary elementwise]).
Result<BinaryShape> plan_binary(const Problem& p);

/// True when input `k` of `s` is read as one aligned vector for vector width `vec`.
bool vector_readable(const BinaryShape& s, size_t k, int vec);

/// CUDA source of the binary kernel for `s` and the technique knobs.
KernelSource generate_binary(const BinaryShape& s, int vec, int block, int unroll, bool grid_stride);

/// The kernel bound to one planned shape (binary_kernel.cpp).
std::unique_ptr<BoundKernel> make_binary_kernel(std::shared_ptr<LoadedModule> m, const BinaryShape& s, int vec,
                                                int64_t grid, int block);

/// The value of a Scalar argument or a 0-dim CPU tensor as the kernel gets it: (float)v, or nothing when that is
/// not exactly representable in `common` (Note [Binary elementwise]).
std::optional<float> exact_scalar(double v, c10::ScalarType common);

}  // namespace cudal1::optimizer::binary
