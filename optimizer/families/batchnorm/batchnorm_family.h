/// @brief Private: the batch-norm family (cudnn_batch_norm and native_batch_norm in inference form: training
/// false, running statistics given; fp32/fp16/bf16 input, parameters of the input's dtype or fp32).
///
/// Note [Batch norm inference]
/// Eval-mode BatchNorm reaches the CUDA backend as one of two ops (bench/probes/batch_norm_ops.py on the H200,
/// torch 2.11 + cuDNN 9.19): cudnn_batch_norm for fp32, and fp16 input with fp32 parameters (ranks 2-5), else
/// native_batch_norm (fp16 with fp16 parameters, bf16, no affine, cuDNN off). Both are served as
///   y = ((x - mean[c]) * w[c]) * invstd[c] + b[c],   invstd[c] = rsqrtf(float(var[c]) + float(eps))
/// in fp32 (w = 1, b = 0 when absent): ATen's own expression, association and rsqrt in every one of its
/// native kernels (batch_norm_elementwise's contiguous, channels-last and TensorIterator paths,
/// batch_norm_calc_invstd), so native results match bit for bit where both contract to the same FMA. The
/// subtraction stays first: x * scale + shift would cancel catastrophically when |mean| >> |x - mean|. cuDNN's
/// inference kernel associates its own way; verification allows it a few fp32 ulps of the largest output, Inf
/// against NaN, and 65504 against Inf where one fp32 value sits at fp16's overflow edge (OutputTolerance).
/// Outputs as ATen allocates them:
///   native_batch_norm: (out = empty_like(x): the input's strides, save_mean = float(running_mean) [C],
///                       save_invstd [C] fp32)  (batch_norm_cuda / batch_norm_cuda_out)
///   cudnn_batch_norm:  (out contiguous in x's suggest_memory_format, empty [0] of the weight's dtype twice,
///                       empty [0] uint8 reserve)  (cudnn/BatchNorm.cpp, eval branch)
/// Training (including eval without running stats, which calls the ops with training=true) is declined, as is
/// anything ATen would reject or route elsewhere: fp64, mixed parameter dtypes, parameters that are not
/// contiguous [C] vectors, cudnn inputs not contiguous in their suggested format, bf16 cudnn calls (never seen).
/// Inputs must be non-overlapping and dense (any permutation): then the physical flat index i of an element is
/// the same in x and y and its channel is (i / INNER) % C with INNER = x.stride(1) (the product of the sizes
/// physically inside the channel dim). Three techniques walk that flat view, each its own class below with only
/// the knobs it uses and its own device code (batchnorm_<technique>.cuh after batchnorm_common.cuh):
///   FlatVectors:    a grid-stride loop over VEC-element vectors; a vector lies in one channel (INNER % VEC == 0)
///                   or holds VEC consecutive channels (INNER == 1, C % VEC == 0); parameters per vector.
///   PlanePerBlock (INNER > 1): a block per (outer, c) plane of INNER elements (grid-stride over planes),
///                   parameters once per plane, VEC-element vectors over the plane.
///   ChannelColumns (INNER == 1: channels-last, [N, C] rows): a thread holds VEC consecutive channels, loads
///                   their parameters once and strides over the rows in steps of ceil(ROWS / RPT), about RPT
///                   rows a thread.
/// A variant names its technique by the knob "mode" (0, 1, 2 in that order) with knobs vec, block and rpt (1
/// outside ChannelColumns): the ids that caches, policy data and replay fixtures know.
/// Memory-bound: x read once, y written once; the parameters are C-sized and stay in L1/L2.
#pragma once

#include <iosfwd>
#include <variant>

#include "cudal1/optimizer/family.h"

namespace cudal1::optimizer::batchnorm {

/// The family object (a process-wide singleton).
const Family& batchnorm_family();

/// One planned signature.
struct BnShape {
  bool cudnn = false;  ///< cudnn_batch_norm, else native_batch_norm
  c10::ScalarType dtype = c10::ScalarType::Float;        ///< input and output
  c10::ScalarType param_dtype = c10::ScalarType::Float;  ///< weight, bias, running_mean, running_var
  std::vector<int64_t> sizes, strides;  ///< the input as planned (non-overlapping and dense)
  std::vector<int64_t> out_strides;     ///< Note [Batch norm inference]
  int64_t storage_offset = 0;
  int64_t numel = 0, channels = 1;
  int64_t inner = 1;  ///< elements physically inside one channel step (x.stride(1); numel when C == 1)
  bool has_weight = false, has_bias = false;
  float eps = 1e-5f;
  int max_vec = 1;
  int64_t rows() const { return numel / channels; }  ///< ChannelColumns (inner == 1)
  int64_t planes() const { return numel / inner; }   ///< PlanePerBlock
};

/// The knobs every technique has.
struct BnLaunch {
  int vec = 1;      ///< elements per load/store
  int block = 256;  ///< threads per block
};

/// The techniques (Note [Batch norm inference]), one interface: kMode, its value of the variant knob "mode";
/// kName, its name in the source's first line; grid, the blocks of one launch on a shape; source, which writes,
/// after the shared head and batchnorm_common.cuh, the constants its device code adds and its .cuh's text
/// (batchnorm_<technique>.cuh, which defines bn::walk).

/// A grid-stride loop over the flat view's vectors.
struct FlatVectors : BnLaunch {
  static constexpr int kMode = 0;
  static constexpr const char* kName = "FlatVectors";
  int64_t grid(const BnShape& s) const;
  void source(std::ostream& o, const BnShape& s) const;
};

/// A block per plane of `inner` elements (inner > 1).
struct PlanePerBlock : BnLaunch {
  static constexpr int kMode = 1;
  static constexpr const char* kName = "PlanePerBlock";
  int64_t grid(const BnShape& s) const;
  void source(std::ostream& o, const BnShape& s) const;
};

/// A thread per `vec` consecutive channels, striding over the rows (inner == 1). Its grid does not loop over
/// blocks: the space offers it only where the grid fits.
struct ChannelColumns : BnLaunch {
  static constexpr int kMode = 2;
  static constexpr const char* kName = "ChannelColumns";
  int rpt = 1;  ///< rows per thread
  int64_t slots(const BnShape& s) const { return (s.rows() + rpt - 1) / rpt; }  ///< row slots the grid covers
  int64_t grid(const BnShape& s) const;
  void source(std::ostream& o, const BnShape& s) const;
};

/// One variant's technique and knobs (default: FlatVectors, vec 1, block 256).
using BnTechnique = std::variant<FlatVectors, PlanePerBlock, ChannelColumns>;

/// The variant of `t`: knobs {mode, vec, block, rpt} in that order, rpt 1 outside ChannelColumns.
Variant variant_of(const BnTechnique& t);

/// The shape of a cudnn_batch_norm / native_batch_norm call (both: input, weight, bias, running_mean, running_var,
/// training, momentum, eps), or Unsupported (Note [Batch norm inference]).
Result<BnShape> parse_batch_norm(const Problem& p);

/// CUDA source of one variant, exactly as NVRTC compiles it: the generated head (dtypes and typed constants),
/// batchnorm_common.cuh, then the technique's constants and .cuh. Its kernel is extern "C" cudal1_bn(x, w, b,
/// running_mean, running_var, y, save_mean, save_invstd); absent parameters are null, save_* null for
/// cudnn_batch_norm.
KernelSource generate_batchnorm(const BnShape& s, const BnTechnique& t);

/// Binds a loaded module of technique `t` to `s`.
std::unique_ptr<BoundKernel> make_batchnorm_kernel(const BnShape& s, const BnTechnique& t,
                                                   std::shared_ptr<LoadedModule> module);

}  // namespace cudal1::optimizer::batchnorm
