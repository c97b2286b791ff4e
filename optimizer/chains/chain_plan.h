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
/// products (a 16-bit square rounded before its third factor, as ATen multiplies in the tensor's type) and by
/// 0.5 as sqrt, division by a scalar as a multiplication by its reciprocal, NaN-propagating
/// clamp, maximum and minimum). Verification compares every output with the ATen chain's at a tolerance that
/// grows with the steps behind it (chain_tuner.cpp).
///
/// Note [Row chains]
/// A chain is a *row chain* when it also reduces along its last dimension: sum.dim_IntList, mean.dim, amax or
/// amin over dim -1 with keepdim=True, native_layer_norm over the last dimension, or _softmax along it. Its
/// values are then of two kinds: *full* ([..., C], the chain's shape) and *row* ([..., 1], one per row), and an
/// external is full or row-broadcast (stride 0 along the last dim). A layer norm is planned as the steps ATen's
/// kernel computes in float (mean, x - mean, mean of its square, rsqrt(var + eps), the affine product, rounded
/// once to the output dtype; mean and rstd are its second and third outputs), a softmax as max, exp(x - max),
/// sum and the quotient. The kernel gives each row a group of threads (a warp, or a whole block) that keeps
/// the row's full values in registers: a value computed before a reduction and read after it is never re-read
/// from memory. Its *phases* are separated by the group's reductions (warp shuffles, then shared memory across
/// warps): phase p computes every full value whose inputs are ready after p reductions deep, accumulates the
/// reductions of those values, and ends with them. A row of more than 32 values a thread (C > 32 x 1024) is
/// declined.
///
/// Note [Batch norm in chains]
/// An eval-mode batch norm (cudnn_batch_norm or native_batch_norm with training=false; the statistics outputs
/// are then empty) is planned as ATen's per-element formula in float, ((x - mean) * weight) * rsqrt(var + eps) + bias,
/// associated as ATen's native kernels and the batch norm family (Note [Batch norm inference]; cuDNN's own
/// association differs by a few ulps), rounded once to the output dtype. On CUDA native_batch_norm's eval statistics
/// outputs are not empty: only cudnn_batch_norm (fp32, fp16 with fp32 parameters) fuses. Its four parameters are *channel* externals: [C] tensors read along
/// dim 1 of the chain's shape (NCHW, or [N, C]). The statistics must be externals (running stats), not chain
/// values; row chains do not take batch norms. So BN + ReLU (+ residual add + ReLU), torchvision's block ends with
/// their in-place ReLUs (Note [In-place nodes]), are one pass over the activation.
///
/// Note [Pooled chains]
/// A pointwise chain over an NCHW activation may end in `max_pool2d_with_indices` (what eager and traced
/// `max_pool2d` call; 2-d windows with any size, stride, padding, dilation and ceil mode) of its last value:
/// ResNet's stem after its convolution, BN + ReLU + max-pool. The plan's steps are the pointwise ones plus one
/// kPoolMax step, a value per *pooled* element ([N, C, OH, OW]), and the pooled value is the plan's only output.
/// The kernel gives each thread `rows` vertically adjacent outputs of one column: it walks the union of their
/// windows, row by row, computes the pointwise steps at every input element it visits (steps that read only
/// per-channel or scalar operands, such as the batch norm's rsqrt(var + eps), once a thread) and folds each value
/// into the maxima of the outputs whose window holds it, in ATen's order (window rows, then columns) with ATen's
/// rule (a greater value or a NaN replaces the maximum, from -inf), so values, NaN and ties come out as ATen's.
/// Elements under several windows are computed once per window; nothing but the pooled value is written. A region
/// whose app kept another output (an intermediate, or the indices) is declined (Unavailable) and runs through
/// ATen: `max_pool2d` drops the indices, and an intermediate a model names is dead by the time the region runs.
/// Verification therefore stores every output in its first trial (ATen computes it) and the pooled value only in
/// the others, as for library chains.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/ScalarType.h>

#include <cstdint>
#include <functional>
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
  kRowSum, kRowMean, kRowMax, kRowMin,  // row chains: a reduction of a full value along the last dim
  kGemm,  // library chains only (chain_library.h): a GEMM's value, computed by cuBLAS, never generated
  kPoolMax,  // pooled chains only (Note [Pooled chains]): a max-pool window of a full value, one per pooled element
};
bool is_reduction(StepOp op);

/// One operand of a step.
struct Operand {
  enum Kind : uint8_t { kStep, kExternal, kScalar, kNone } kind = kScalar;  // kNone: an absent optional
  int index = 0;      ///< step or external index
  double value = 0;   ///< kScalar
};

struct Step {
  StepOp op = StepOp::kNeg;
  std::vector<Operand> args;    ///< 1 or 2
  double alpha = 1;             ///< add/sub; row_mean: the factor of the sum
  double exponent = 1;          ///< pow
  bool has_lo = false, has_hi = false;
  double lo = 0, hi = 0;        ///< clamp
  c10::ScalarType dtype = c10::ScalarType::Float;  ///< the step's output dtype
  bool row = false;             ///< a value per row (row chains; reductions always)
  bool pooled = false;          ///< a value per pooled element (Note [Pooled chains]; kPoolMax only)
  double depth = 1;             ///< rounding steps behind it (verification's tolerance grows with it)
  /// A layer norm's mean or rstd: where ATen's value is not finite, any non-finite value matches (ATen's Welford
  /// gives inf or NaN for a row holding an infinity, depending on where in its thread layout it sits).
  bool any_nonfinite = false;
  /// > 0: a value computed from a GEMM over this many products (Note [Library chains]): verification adds
  /// (gemm_k + 2 ulps of the dtype) fp32 eps of the largest output, and a finite value beyond 1/16 of the dtype's
  /// range matches an infinity of its sign (split-K partial sums reduced in the dtype: Note [Padded GEMM]).
  int64_t gemm_k = 0;
  /// >= 0: an activation of a library chain reading this node's GEMM value (Note [Library chains]). Where the
  /// ATen chain's value there is infinite (the dtype overflowed, or an input was infinite), ATen's activation
  /// is inf or NaN (tanh GELU: -inf * 0); the epilogue, which applies it before rounding, may instead hold the
  /// activation of the true value: verification accepts NaN, an infinity of the GEMM value's sign, or a value
  /// of magnitude <= 1 (what GELU and ReLU give a large negative value) there.
  int overflow_node = -1;
};

/// One output of one node, in the kernel's parameter order (nodes in order, each node's outputs in order).
struct OutputSlot {
  int node = 0, out = 0;
  int step = 0;  ///< the step whose value it is
};

struct External {
  c10::ScalarType dtype = c10::ScalarType::Float;
  std::vector<int64_t> sizes, arg_strides;  ///< as the tensor argument has them
  std::vector<int64_t> strides;  ///< broadcast to the chain's shape: 0 along broadcast dims
  bool contiguous = false;       ///< the chain's shape, contiguous
  bool scalar = false;           ///< every stride 0 (one element read everywhere)
  bool row = false;              ///< row chains: stride 0 along the last dim (one value per row)
  /// A batch norm's per-channel parameter: 1-D, read along the chain's dim 1 (strides 0 elsewhere) rather than
  /// broadcast from the right (Note [Batch norm in chains]).
  bool channel = false;
  bool positive = false;         ///< a running variance: verification draws it >= 0
};

/// The window of a pooled chain (Note [Pooled chains]), as max_pool2d_with_indices reads it, and its output size.
struct PoolWindow {
  int64_t kh = 0, kw = 0, sh = 0, sw = 0, ph = 0, pw = 0, dh = 1, dw = 1;
  int64_t oh = 0, ow = 0;
  bool active() const { return kh > 0; }
  int64_t numel(const std::vector<int64_t>& shape) const { return shape.at(0) * shape.at(1) * oh * ow; }
};

struct ChainPlan {
  std::vector<int64_t> shape;
  int64_t numel = 0;
  std::vector<External> externals;
  std::vector<Step> steps;
  std::vector<OutputSlot> outputs;  ///< every node output a step computes, in parameter order
  bool rows = false;                ///< a row chain (Note [Row chains])
  PoolWindow pool;                  ///< active: a pooled chain (Note [Pooled chains]); shape is then its input's
  int64_t cols = 0, nrows = 0;      ///< row chains: the last dim, and numel / cols
  std::string text;  ///< readable, one step a line, e.g. "t2 = mul(e0, t1) f16"
  /// Rewrites more exact than the ATen chain (Note [Attention rewrite]): from the externals, the last output in
  /// double, and the bounds (lo, hi, broadcast to it) every finite element must lie within. Verification then
  /// measures the kernel against the exact value, not against ATen's rounding of it. Empty for generated chains.
  std::function<std::vector<at::Tensor>(const std::vector<at::Tensor>&)> exact;
  /// An external that verification also draws as a causal mask (0 on and below the diagonal, -inf above) in one
  /// more trial (Note [Attention rewrite]: masked scores must spread NaN as ATen's do); -1 for none.
  int causal_mask = -1;
};

/// The plan of `chain`, or Unsupported saying what is not pointwise.
Result<ChainPlan> plan_chain(const dispatcher::ChainRecord& chain);

/// The op a node computes, by its schema name and overload ("aten::add.Tensor"), an in-place node by its
/// functional form ("aten::relu_" -> "aten::relu"; Note [In-place nodes]).
std::string functional_op(const dispatcher::ChainNode& node);

/// A real scalar argument (double, int, bool or a non-complex Scalar) as a double; false for anything else.
bool scalar_of(const c10::IValue& v, double* out);

/// One tensor argument of a node: where it comes from and what it was.
struct TensorArg {
  dispatcher::ChainInput in;
  const dispatcher::TensorSpec* spec = nullptr;
};

/// A node's tensor arguments in schema order, and its other arguments by name (library and program chains).
struct NodeArgs {
  std::vector<TensorArg> tensors;
  std::vector<std::pair<std::string, const c10::IValue*>> named;

  /// The named scalar argument equals 1 (absent counts as its default, 1, for alpha and beta).
  bool is_one(const char* name) const;
  /// The named argument as recorded; null when the op has none of that name.
  const c10::IValue* arg(const char* name) const;
};

/// The arguments of `node` as its signature recorded them, or Unsupported when the record lacks them.
Result<NodeArgs> args_of(const dispatcher::ChainNode& node);

/// How many inputs of nodes after `k` read output `index` of node `k`.
int readers(const std::vector<dispatcher::ChainNode>& nodes, int k, int index);

/// A tensor argument from outside the chain (an external slot, not None).
bool is_external(const TensorArg& t);
/// Sets `e`'s dtype, sizes and argument strides from the tensor argument `s` (library and program chains).
void fill_external(External* e, const dispatcher::TensorSpec& s);

/// True for the dtypes the generator computes in float: fp32, fp16, bf16.
bool float_like(c10::ScalarType t);

/// The variants of a plan. Pointwise: vector width 1, 2, 4 or 8 (8: 16-bit dtypes only; only where every operand
/// allows it), 128/256/512
/// threads, one thread per chunk or a grid of 8 blocks per SM looping. Row chains: vector width 1, 2, 4 or 8
/// (at most 16 bytes, where the row and every full operand allow it), a warp per row in blocks of 128 or 256
/// threads, or a block of 128 to 1024 threads per row, each holding at most 32 values of a row. Pooled chains:
/// blocks of 128, 256 or 512 threads, each thread 1, 2 or 4 outputs of a column (Note [Pooled chains]).
struct ChainVariant {
  int vec = 1, block = 256;
  bool looped = false;
  int group = 0;  ///< row chains: threads per row (32: a warp; == block: the block); 0 for pointwise
  int pool_rows = 0;  ///< pooled chains: outputs a thread, down a column; 0 for the others
  std::string id() const;
};
std::vector<ChainVariant> variants(const ChainPlan& plan);

/// Row chains: true when a thread reads `vec` consecutive values of the full external `e` as one pack (unit
/// stride along the row, every other stride a multiple of `vec`; the kernel checks the base's alignment).
bool packed(const External& e, int vec);

/// The CUDA source of `variant`: a kernel `chain_kernel(n, ext0, ..., out0, ...)` (n: elements, or rows for a
/// row chain) with one output pointer per OutputSlot, any of which may be null (that value is not stored);
/// broadcast strides are baked in.
std::string chain_source(const ChainPlan& plan, const ChainVariant& variant);
/// The CUDA source of a row chain's variant (chain_rows.cpp); chain_source calls it.
std::string row_chain_source(const ChainPlan& plan, const ChainVariant& variant);
/// The CUDA source of a pooled chain's variant (chain_pool.cpp, Note [Pooled chains]): `chain_kernel(n, ext0, ...,
/// out)`, n the threads' work items (N C ceil(OH / rows) OW); chain_source calls it.
std::string pool_chain_source(const ChainPlan& plan, const ChainVariant& variant);
/// The operand spelling of the generated kernels: "t<k>[j]" for a step, "x<k>[j]" for an external, a literal.
std::string operand_text(const Operand& o);

/// The float expression of a pointwise step (ATen's CUDA formula, before rounding to the step's dtype), with
/// `operand(o)` spelling each operand.
std::string step_formula(const Step& s, const std::function<std::string(const Operand&)>& operand);
/// A float literal that reads back as exactly `v` rounded to float.
std::string float_literal(double v);
/// The codegen prelude's conversion suffix of a float-like dtype: "f32", "f16" or "bf16".
const char* dtype_tag(c10::ScalarType t);

}  // namespace cudal1::optimizer::chains
