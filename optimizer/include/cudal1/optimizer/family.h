/// @brief The plug-in interface every kernel family implements (CUTLASS-style: plan = can_implement,
/// source/bind = initialize, BoundKernel::launch = run), and the family registry.
///
/// A family's life: Family::plan(Problem) accepts or declines a signature -> Plan::space() lists its variants
/// (Plan::features and Plan::stratum guide the search) -> Plan::source(Variant) is the CUDA C++ NVRTC compiles ->
/// Plan::bind(Variant, LoadedModule) binds the loaded module -> BoundKernel::launch runs it, and verification
/// asks BoundKernel::outputs, output_tolerance and input_scaled_atol. Families live in
/// optimizer/families/<name>/ and are registered by one line in optimizer/families/CMakeLists.txt
/// (Note [Family plug-ins]); families() is generated from those lines.
///
/// Note [Family contract]
/// A family plans a signature only when it can reproduce ATen's result exactly in layout and dtype and
/// within dtype tolerance in value; anything it cannot do (a layout, an edge case, a dtype) it declines up
/// front with Unsupported, and the call stays on ATen; the tuner caches the decline as "stays on ATen" (trials 0),
/// so later processes and `cudal1 warm` do not plan the signature again. Generated code is specialised to the
/// signature (sizes and strides are compile-time constants), so a kernel is only ever bound to the signature it was
/// tuned for.
#pragma once

#include <ATen/core/Tensor.h>
#include <cuda.h>

#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "cudal1/core/status.h"
#include "cudal1/dispatcher/sig_record.h"

namespace cudal1::cache {
struct KernelEntry;
}  // namespace cudal1::cache

namespace cudal1::optimizer {

/// One signature, as a family sees it.
struct Problem {
  std::string op;        ///< "gelu" (no namespace)
  std::string overload;  ///< "" or e.g. "Tensor"
  std::vector<dispatcher::ArgSpec> args;
  int sm = 0;            ///< target compute capability, 10*major+minor
  int sm_count = 0;      ///< SMs of the target device; 0 unknown (a family that sizes its grid in the source
                         ///< for the device, e.g. Note [Softmax held slabs], then offers no such variant)
  std::string signature; ///< readable text, for messages

  /// Builds the problem of a profiled signature for compute capability `sm` on a device of `sm_count` SMs.
  static Problem from_record(const dispatcher::SigRecord& rec, int sm, int sm_count);
  /// The same from the operator, its arguments as the hook reads them (dispatcher::arg_specs) and the text.
  static Problem of_call(const c10::OperatorHandle& op, std::vector<dispatcher::ArgSpec> args, int sm, int sm_count,
                         std::string signature);
};

/// A point of a family's technique space: named integer knobs, e.g. {vec:4, block:256, unroll:2, grid:1}.
struct Variant {
  std::vector<std::pair<std::string, int>> knobs;
  /// "vec4.block256.unroll2.grid1": stable, readable, unique within a space.
  std::string id() const;
  int get(const std::string& knob, int dflt = 0) const;
  /// Whether id() contains `filter`; a trailing '$' anchors the rest at the id's end, so "two1.async1$" picks
  /// "...two1.async1" and not "...two1.async1.pair1". An empty filter (or "$" alone) matches every variant.
  bool matches(const std::string& filter) const;
  std::string to_json() const;
  static Result<Variant> from_json(const std::string& text);
};

/// Generated CUDA source of one variant.
struct KernelSource {
  std::string code;
  std::string kernel_name;  ///< extern "C" entry point
};

/// Layout of one output, as ATen would allocate it.
struct OutputSpec {
  c10::ScalarType dtype = c10::ScalarType::Undefined;
  std::vector<int64_t> sizes, strides;
};

/// A compiled module loaded into one device's primary context. Move-only owner of the CUmodule; the module is
/// unloaded when the last holder goes (errors during driver shutdown are ignored).
class LoadedModule {
 public:
  /// Loads `cubin` on `device` and finds `kernel_name`. Runs under the device's context.
  static Result<std::shared_ptr<LoadedModule>> load(int device, const std::string& cubin,
                                                    const std::string& kernel_name);
  ~LoadedModule();
  LoadedModule(const LoadedModule&) = delete;
  LoadedModule& operator=(const LoadedModule&) = delete;
  CUfunction function() const { return fn_; }
  int device() const { return device_; }
  int sm_count() const { return sm_count_; }
  /// The device's compute capability as 10 x major + minor (90 for an H100 or H200).
  int compute_capability() const { return cc_; }
  /// Blocks per multiprocessor at `block` threads (occupancy API), at least 1.
  int max_blocks_per_sm(int block) const;

  /// Thread-block clusters (compute capability 9.0+; Note [Clusters] in module.cpp). Opts the kernel in to
  /// `dynamic_smem` bytes of dynamic shared memory per block and to clusters of more than 8 blocks; call once
  /// before the first launch. Ok, or the driver's error (e.g. more shared memory than the device has).
  Status configure_clusters(unsigned dynamic_smem) const;
  /// Clusters of `cluster` blocks of `block` threads with `dynamic_smem` bytes each that the device can hold at
  /// once (cuOccupancyMaxActiveClusters, under the device's context); 0 when none fit or the driver cannot say.
  int max_active_clusters(unsigned block, unsigned cluster, unsigned dynamic_smem) const;
  /// Once per module (a module is one variant, so one launch shape): configure_clusters(dynamic_smem), then,
  /// for `cluster` > 1, whether one such cluster fits on the device. Later calls return the first answer. Ok, or
  /// Unsupported saying which step failed (the call then stays on ATen). Thread-safe.
  Status prepare_clusters(unsigned block, unsigned cluster, unsigned dynamic_smem) const;
  /// Once per module: opts the kernel in to `dynamic_smem` bytes of dynamic shared memory per block (any nonzero
  /// amount: the default 48 KB limit counts static memory too; no clusters, so any compute capability).
  /// Later calls return the first answer. Ok, or
  /// Unsupported with the driver's error (more than this device lets a block have). Thread-safe.
  Status prepare_shared_memory(unsigned dynamic_smem) const;
  /// Launches `grid` blocks of `block` threads in clusters of `cluster` consecutive blocks along x (`grid` a
  /// multiple of `cluster`) with `dynamic_smem` bytes of dynamic shared memory, on `stream`. Runs under the
  /// caller's context; returns the driver's error, never throws.
  Status launch_clusters(unsigned grid, unsigned block, unsigned cluster, unsigned dynamic_smem, CUstream stream,
                         void** params) const;

 private:
  LoadedModule() = default;
  CUmodule module_ = nullptr;
  CUfunction fn_ = nullptr;
  int device_ = -1;
  int sm_count_ = 1;
  int cc_ = 0;
  mutable std::once_flag clusters_once_;
  mutable Status clusters_ready_;  ///< prepare_clusters' answer
  mutable std::once_flag smem_once_;
  mutable Status smem_ready_;  ///< prepare_shared_memory's answer
};

/// How far one output of a kernel may differ from ATen's beyond the dtype's (rtol, atol); Note [Verification].
struct OutputTolerance {
  /// Extra absolute tolerance in units of fp32 eps x max|finite input|: the error of a statistic reduced over
  /// the input (a mean), whose size follows the input's range rather than the result's.
  double input_scaled = 0;
  /// Extra absolute tolerance in units of fp32 eps x max|finite ATen output|: the error of a normalised output
  /// near zero, which follows the row's range (x - mean cancels).
  double output_scaled = 0;
  /// A non-finite result matches any non-finite result (a reduction over +-Inf gives Inf or NaN depending on the
  /// order ATen's own kernel happened to combine in). Finite results must still be finite and close.
  bool nonfinite_equivalent = false;
  /// A result within rtol of the output dtype's overflow (its largest finite magnitude) matches one of the same
  /// sign beyond it, Inf included: two fp32 values a few ulps apart may round to 65504 and Inf in fp16 when a
  /// kernel associates differently from ATen's (cuDNN's batch norm, Note [Batch norm inference]).
  bool overflow_equivalent = false;
  /// With overflow_equivalent: the fraction of the dtype's largest finite magnitude from which a finite value
  /// counts as at the edge; 0 means 1 - rtol. A GEMM sets 1/16: cuBLAS may reduce split-K partial sums in fp16,
  /// so ATen's result can overflow to Inf where the whole sum is well inside range (Note [Padded GEMM]).
  double overflow_edge = 0;
  /// Where the kernel's output differs from ATen's, the call is computed again in double (every floating input
  /// cast, ATen's op) and rounded to the output's dtype; an element that matches that, under the same rules, is
  /// accepted. For a GEMM whose inputs overflow the dtype in a partial sum: ATen's split-K reduction in fp16
  /// gives Inf where the sum is finite (Note [Padded GEMM]), so the more exact result must not count as wrong.
  bool arbitrate_in_double = false;
};

/// A variant compiled, loaded and bound to one signature: launches with the call's own arguments.
class BoundKernel {
 public:
  virtual ~BoundKernel() = default;
  /// The outputs a call produces, in return order.
  virtual const std::vector<OutputSpec>& outputs() const = 0;
  /// Launches on `stream` (whose device's context must be current), reading the call's `nargs` arguments at
  /// `args` and writing `outs` (allocated per outputs()). Returns Unsupported, having done nothing, when this
  /// particular call cannot run (e.g. misaligned data); CudaError when the launch failed. Never throws.
  virtual Status launch(const c10::IValue* args, size_t nargs, at::Tensor* outs, CUstream stream) noexcept = 0;
  /// Extra absolute tolerance, in units of eps(dtype) x max|finite input|, for ops whose rounding error scales
  /// with the input's magnitude rather than the output's (log_softmax: x - (max + log(sum)) cancels). 0: none.
  virtual double input_scaled_atol() const { return 0.0; }
  /// Per-output tolerance beyond the above (reductions and normalisations). Default: none.
  virtual OutputTolerance output_tolerance(size_t /*output*/) const { return {}; }
  /// GPU bytes one launch allocates beyond its outputs (Note [Tuning memory] in measure.h). Default: none.
  virtual int64_t scratch_bytes() const { return 0; }
};

/// A family's view of one signature.
class Plan {
 public:
  virtual ~Plan() = default;
  /// Every variant of the technique space that is valid for this signature (never empty).
  virtual std::vector<Variant> space() const = 0;
  /// Features of a variant for the policy (fixed length per family, values in [0, 1]).
  virtual std::vector<float> features(const Variant& v) const = 0;
  /// The structural class of `v` (e.g. row per warp, per block, split rows): the policy tries every class at
  /// least once per signature when the trial budget allows (Policy::choose). Default: one class.
  virtual int stratum(const Variant& /*v*/) const { return 0; }
  /// Generated source of `v`.
  virtual Result<KernelSource> source(const Variant& v) const = 0;
  /// Binds a loaded module of `v` to this signature.
  virtual Result<std::unique_ptr<BoundKernel>> bind(const Variant& v,
                                                    std::shared_ptr<LoadedModule> module) const = 0;
};

/// A generator family.
class Family {
 public:
  virtual ~Family() = default;
  virtual const char* name() const = 0;
  /// Bumped whenever generated code changes; part of every cache key.
  virtual int version() const = 0;
  /// The layout of Plan::features (what each position means): bumped when it changes, so that a stored policy is
  /// never read against another layout (Note [Contrastive policy]). Independent of version().
  virtual int features_version() const { return 1; }
  /// The ATen ops ("gelu", "add.Tensor") this family can serve: the hook registers these.
  virtual std::vector<std::string> ops() const = 0;
  /// Plans `p`, or declines with Unsupported (Note [Family contract]).
  virtual Result<std::unique_ptr<Plan>> plan(const Problem& p) const = 0;
};

/// Every family, in registration order (generated: optimizer/families/CMakeLists.txt).
const std::vector<const Family*>& families();
/// The family serving `op` ("gelu", "add.Tensor"), or null.
const Family* family_for(const std::string& op, const std::string& overload);
/// The union of families' ops.
std::vector<std::string> all_family_ops();
/// "unary_elementwise:1" etc., joined, then "chains:N": the fingerprint's (informational) generator list.
std::string generators_fingerprint();
/// The current generator version of `family` (a Family::name(), or "chain" for chain kernels); -1 when unknown.
int generator_version(const std::string& family);
/// Ok when `e` was made by its family's current generator; Mismatch saying which versions otherwise (Note
/// [Generator versions] in kernel_cache.h: such a record is stale, never served).
Status check_generator(const cache::KernelEntry& e);

}  // namespace cudal1::optimizer
