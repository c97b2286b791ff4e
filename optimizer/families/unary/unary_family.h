/// @brief Private: the unary elementwise family (relu, gelu none/tanh, sigmoid, tanh, silu, exp, neg, abs;
/// fp32/fp16/bf16; contiguous and strided).
#pragma once

#include <string>

#include "cudal1/optimizer/family.h"
#include "cudal1/optimizer/layout.h"

namespace cudal1::optimizer::unary {

/// The family object (a process-wide singleton).
const Family& unary_family();

/// Everything the generator needs about one planned signature.
struct UnaryShape {
  std::string math;           ///< key into the op table: "relu", "gelu_none", "gelu_tanh", ...
  c10::ScalarType dtype;
  std::vector<int64_t> sizes, in_strides, out_strides;
  IterSpace space;            ///< coalesced iteration space
  int max_vec = 1;            ///< largest vector width (elements) this layout allows
  /// 2 where the innermost input stride is 2 and vectors are picked from wider loads (Note [Unary picked
  /// vectors]); else 1.
  int pick = 1;
};

/// CUDA source of the unary kernel for `shape` and technique knobs (vec, block, unroll, grid), exactly as NVRTC
/// compiles it: the generated head (dtype, unary_approx.cuh, the op, typed constants), then unary_kernel.cuh.
KernelSource generate_unary(const UnaryShape& shape, int vec, int block, int unroll, bool grid_stride);

/// The body of a device function computing the op on a float `x` for outputs of `dtype` (statements ending in a
/// return; it may call rcp_approx and ex2_approx, which unary_approx.cuh defines), or "" for an unknown math key.
std::string unary_math(const std::string& math, c10::ScalarType dtype);

}  // namespace cudal1::optimizer::unary
