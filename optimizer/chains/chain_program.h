/// @brief Private: program chains, a CNN's convolutions with what runs between them computed as one program in
/// channels-last with folded batch norms (Note [Program chains]).
///
/// Note [Program chains]
/// A convolution splits ordinary chains (it is no chain op of theirs), so a CNN's batch norms and activations fuse
/// between convolutions that cuDNN runs NCHW: for fp32 it transposes to NHWC and back around its kernels, and every
/// batch norm stays a pass over the activation. The hook therefore also sees `_convolution` (what eager Conv2d and
/// a traced model both call) and a second builder per thread records *program chains*: the same calls with the
/// convolutions included, up to kMaxProgramNodes, committed only when they hold one (ResNet-50's forward from its
/// input to the view before the classifier is one program of 175 calls). A hot program chain is planned here:
///  - each convolution (2-d, not transposed) followed by an eval-mode batch norm of its result is one *conv
///    group*: the batch norm folded into the weight and bias (s = weight / sqrt(var + eps), W' = W s, b' = bias -
///    mean s, computed in double, cached per group while the six tensors are the same at the same versions),
///    optionally followed by a residual add (alpha 1) and a ReLU, in place or not;
///  - a group runs channels-last: its input is converted once if the app's is not, the folded weight is kept
///    channels-last, and with a ReLU it is one cuDNN call with its bias (+ residual) + ReLU epilogue,
///    `cudnn_convolution_relu` / `cudnn_convolution_add_relu` (the *fused* variant), or a convolution with its
///    bias followed by the add and ReLU as ATen ops (the *separate* variant, and every CPU or non-cuDNN program);
///  - every other node runs as its own ATen op on the program's values, whatever their layout (ATen ops are
///    layout-agnostic; channels-last values stay channels-last through pooling, adds and activations).
/// The program keeps its values; at the end it copies each output the app still holds into the app's tensor (its
/// recorded strides: the app never sees a layout it did not ask for). A value inside a conv group (the
/// convolution's or the batch norm's result before its epilogue) is not computed: a region where the app kept
/// one is declined (Unavailable) and replays through ATen, as is one where the app kept an index output (a
/// max-pool's indices over channels-last values may pick another of equal maxima than ATen's NCHW kernel). In-place ops on an external (the app's own tensor)
/// are not planned. Since intermediates die inside the region as the app drops them (release_dropped, region.cpp),
/// the region holds no more memory than eager calls would. The program runs as its calls arrive (Note
/// [Incremental regions]): each group is launched once its last call is deferred, into the program's own
/// tensors, so the GPU works while the host defers the rest; only the copies into the app's tensors wait for
/// the last call.
/// Verification (chain_tuner.cpp) runs the program and the ATen chain on the model's own weights (the externals
/// that were the same tensor in the chain's commits) and fresh random inputs with NaN and infinities injected;
/// outputs must match within 8 u sqrt(convolutions) of their largest magnitude, u the unit roundoff of the
/// convolutions' inputs (2^-11 for TF32, which cuDNN uses for fp32 unless the app turned it off), and NaN and
/// infinities must be where ATen has them: an epilogue that turns NaN into 0 (a ReLU as max) fails it.
///
/// Note [Skinny layers]
/// A decode step is linear layers on a few rows: `x + act(linear(layer_norm(x)))`, layer after layer, on [M, K]
/// with M of 1 to 8. ATen runs each layer as four launches (layer norm, a cuBLAS GEMV with its bias, the
/// activation, the add) and stores three intermediates; the weight's bytes are the whole cost of the layer. A
/// program chain (above) therefore also takes *layer groups*, with or without convolutions in the chain:
///  - an optional `native_layer_norm` over the last dim of a 2-d input whose only reader is the GEMM (its mean
///    and rstd read by nothing), then `addmm(bias, x, w.t())` (beta = alpha = 1; what `at::linear` calls for a 2-d
///    input) or `mm(x, w.t())` with x [M, K], M <= kLayerRows, K a multiple of 8 and the weight the transpose of a
///    contiguous [N, K] external; then optionally one activation read only by the next node (relu, silu, gelu in
///    its erf or tanh form), then optionally a residual add (alpha 1) of an [M, N] value, all of one dtype (fp32,
///    fp16, bf16);
///  - a fused program runs such a group as one generated kernel (layer_kernel.cuh, compiled by NVRTC): each block
///    normalises the M input rows into shared memory, each warp streams whole weight rows (16-byte loads, a few in
///    flight a lane, the first issued before the normalisation) and writes y[m, n] through the epilogue. Values
///    are rounded to the dtype exactly where ATen stores them, so the result differs from ATen's only by the
///    order of fp32 sums (layer_kernel.cuh);
///  - the kernel's variants are its warps a block, loads in flight and whether it overlaps the previous kernel
///    (programmatic dependent launch: a grid starts streaming its weight while the one before it finishes, and
///    waits for it before touching anything that grid may write) (LayerVariant); tuning verifies and times
///    each and keeps the fastest. A group whose tensors do not meet the kernel's layout at run time (a misaligned
///    weight) runs as its ATen ops.
/// Verification is the program's: the model's own biases and layer-norm parameters, fresh activations and
/// weights (at::linear's w.t() is a view that dies with the call) with NaN and infinities, 8 u
/// sqrt(groups) of the largest magnitude (u of the layers' dtype, 2^-11 for TF32 GEMMs). A program of layer
/// groups is then a region like any other and, launch-bound as a decode step is, runs as a CUDA graph where the
/// app's period says so (Note [Region graphs]).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "cudal1/core/status.h"
#include "cudal1/dispatcher/chains.h"
#include "cudal1/dispatcher/regions.h"
#include "cudal1/optimizer/family.h"

namespace cudal1::optimizer::chains {

/// The most input rows of a layer group (Note [Skinny layers]).
constexpr int64_t kLayerRows = 8;

/// What a layer group reads, from its nodes' records (Note [Skinny layers]).
struct LayerArgs {
  bool ln = false;                               ///< a layer norm of the input first
  int ln_w = -1, ln_b = -1, w = -1, bias = -1;  ///< external slots (-1: absent)
  double eps = 0;
  int act = 0;  ///< 0 none, 1 relu, 2 silu, 3 gelu (erf), 4 gelu (tanh)
  int64_t m = 0, k = 0, n = 0;
};

struct ProgramPlan {
  /// A run of nodes computed as one unit: a conv group, a layer group, or a single node run as its ATen op.
  struct Group {
    size_t first = 0, last = 0;  ///< node range [first, last]
    bool conv = false;
    bool layer = false;
    int bn = -1, add = -1, relu = -1;   ///< conv groups: node indices (-1: absent); add: layer groups too
    int ln = -1, gemm = -1, act = -1;   ///< layer groups: node indices (-1: absent)
    dispatcher::ChainInput residual{-1, -1};  ///< the add's other operand
    LayerArgs args;                     ///< layer groups
    bool grouped() const { return conv || layer; }
  };
  std::vector<Group> groups;
  int convs = 0, folded = 0, fused_epilogues = 0;
  int layers = 0;     ///< layer groups
  int64_t rows = 0;   ///< the most input rows of any layer group
  /// The external slots read as a convolution's weight or bias or a batch norm's parameters and statistics: the
  /// model's own tensors (verification keeps them; every other external is drawn fresh).
  std::vector<int> params;
  int64_t max_k = 0;  ///< the most products of any convolution output (Cin / groups x kernel area)
  c10::ScalarType dtype = c10::ScalarType::Float;
  std::string text;  ///< readable, a group a line
};

/// The program plan of `chain`, or Unsupported saying why it is not one (Note [Program chains]).
Result<ProgramPlan> plan_program(const dispatcher::ChainRecord& chain);

/// How a fused program's layer groups run (Note [Skinny layers]): the generated kernel's warps a block and 16-byte
/// weight loads in flight a lane. warps 0: no generated kernel (the groups run as their ATen ops).
struct LayerVariant {
  int warps = 0, unroll = 0;
  bool overlap = false;    ///< programmatic dependent launch on sm_90+ (the weight's first loads overlap the
                           ///< previous kernel's end); the same as without on older devices
  std::string id() const;  ///< "w8u4", "w8u4o"; "" for none
};
/// The layer kernel's variants for `plan` (none without layer groups).
std::vector<LayerVariant> layer_variants(const ProgramPlan& plan);
/// The CUDA source of `v` for `plan`'s dtype and rows: extern "C" `layer_kernel` (layer_kernel.cuh).
std::string layer_source(const ProgramPlan& plan, const LayerVariant& v);
/// The layer variant whose id() is `id`, or Mismatch.
Result<LayerVariant> layer_variant_of(const ProgramPlan& plan, const std::string& id);

/// The program kernel of `plan` for `chain` (which must outlive it). `fused`: conv groups with a ReLU run as one
/// cuDNN call with its epilogue where the device and settings allow, and layer groups as `layers`'s kernel from
/// `module` (both given, or neither: then as ATen ops); otherwise everything runs as separate ATen ops.
std::unique_ptr<dispatcher::ChainKernel> program_kernel(const dispatcher::ChainRecord& chain, ProgramPlan plan,
                                                        bool fused, LayerVariant layers = {},
                                                        std::shared_ptr<LoadedModule> module = nullptr);

}  // namespace cudal1::optimizer::chains
