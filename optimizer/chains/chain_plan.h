/// @brief Private: a pointwise chain as the chain generator sees it (Note [Pointwise chains]).
///
/// Note [Pointwise chains]
/// A chain (Note [Chain profiling]) is *pointwise* when every node is one of the elementwise ops below with one
/// output, every node's output has the chain's shape and is contiguous, and every external input is a tensor on
/// the chain's device broadcastable to that shape. Its plan lists the steps in order, each reading earlier
/// steps' values, externals (loaded through their broadcast strides: 0 along broadcast dims) and scalars.
/// The kernel computes each step in float (ATen's opmath for fp32, fp16 and bf16) and rounds it to the step's
/// output dtype before the next step reads it, exactly where ATen stores an intermediate, so the fused result
/// differs from ATen's only by contraction (FMA) and the ulps of the math functions; every step follows the
/// formula of ATen's CUDA kernel (sigmoid as 1/(1+exp(-x)), gelu's erf and tanh forms, pow by 2 and 3 as
/// products and by 0.5 as sqrt, division by a scalar as a multiplication by its reciprocal, NaN-propagating
/// clamp, maximum and minimum). Verification compares every output with the ATen chain's at a tolerance that
/// grows with the steps behind it (chain_tuner.cpp).
#pragma once

#include <c10/core/ScalarType.h>

#include <cstdint>
#include <string>
#include <vector>

#include "cudal1/core/status.h"
#include "cudal1/dispatcher/chains.h"

namespace cudal1::optimizer::chains {

enum class StepOp : uint8_t {
  kAdd, kSub, kMul, kDiv, kDivScalar,  // binary: a (op) alpha*b; kDivScalar: a * (1/b) as ATen for a CPU scalar
  kMaximum, kMinimum,
  kNeg, kExp, kLog, kSqrt, kRsqrt, kTanh, kSigmoid, kSilu, kRelu, kAbs, kReciprocal, kErf,
  kGelu, kGeluTanh, kPow, kClamp,
};

/// One operand of a step.
struct Operand {
  enum Kind : uint8_t { kStep, kExternal, kScalar } kind = kScalar;
  int index = 0;      ///< step or external index
  double value = 0;   ///< kScalar
};

struct Step {
  StepOp op = StepOp::kNeg;
  std::vector<Operand> args;    ///< 1 or 2
  double alpha = 1;             ///< add/sub
  double exponent = 1;          ///< pow
  bool has_lo = false, has_hi = false;
  double lo = 0, hi = 0;        ///< clamp
  c10::ScalarType dtype = c10::ScalarType::Float;  ///< the step's output dtype
};

struct External {
  c10::ScalarType dtype = c10::ScalarType::Float;
  std::vector<int64_t> sizes, arg_strides;  ///< as the tensor argument has them
  std::vector<int64_t> strides;  ///< broadcast to the chain's shape: 0 along broadcast dims
  bool contiguous = false;       ///< the chain's shape, contiguous
  bool scalar = false;           ///< every stride 0 (one element read everywhere)
};

struct ChainPlan {
  std::vector<int64_t> shape;
  int64_t numel = 0;
  std::vector<External> externals;
  std::vector<Step> steps;
  std::string text;  ///< readable, one step a line, e.g. "t2 = mul(e0, t1) f16"
};

/// The plan of `chain`, or Unsupported saying what is not pointwise.
Result<ChainPlan> plan_chain(const dispatcher::ChainRecord& chain);

/// True for the dtypes the generator computes in float: fp32, fp16, bf16.
bool float_like(c10::ScalarType t);

/// The variants of a plan: vector width 1, 2 or 4 (only where every operand allows it), 128/256/512 threads,
/// one thread per chunk or a grid of 8 blocks per SM looping.
struct ChainVariant {
  int vec = 1, block = 256;
  bool looped = false;
  std::string id() const;
};
std::vector<ChainVariant> variants(const ChainPlan& plan);

/// The CUDA source of `variant`: a kernel `chain_kernel(n, ext0, ..., out0, ...)` where an output pointer may
/// be null (that value is not stored); broadcast strides are baked in.
std::string chain_source(const ChainPlan& plan, const ChainVariant& variant);

}  // namespace cudal1::optimizer::chains
