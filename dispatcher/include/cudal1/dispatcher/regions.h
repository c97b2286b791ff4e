/// @brief Deferred regions: the calls of a fused chain are deferred and computed by one chain kernel, and
/// nothing the app can observe ever sees a value before it is written (Note [Deferred regions]).
///
/// Note [Deferred regions]
/// A chain (Note [Chain profiling]) in state kFused has a ChainKernel that computes all its nodes at once.
/// When a hooked call matches a fused chain's first node, on a thread with no open region, the hook opens a
/// *region* on that thread instead of running the call: it allocates the call's outputs (sizes, strides,
/// dtype as the chain recorded them, on the current stream) and returns them unwritten. Each following call
/// that is the chain's next node, wired the same way (its chain inputs are the very tensors the region handed
/// out, its external inputs the same tensors as in the region so far) and on the same stream, is deferred the
/// same way. When the last node was deferred the region is *complete*; its kernel runs at the next event
/// below, so that outputs the app dropped meanwhile are never written (the region holds each pending output; one
/// whose TensorImpl and storage only the region still holds is passed to the kernel as an undefined tensor).
///
/// The invariant: the app never observes an unwritten value. A region runs (is *flushed*) before:
///  - any hooked call that is not the chain's next node (a *divergence*; the open prefix runs through ATen);
///  - any other dispatcher op on the region's thread: while a region is open, the thread's TLS includes
///    DispatchKey::DeferredInit, whose fallback (ours) flushes and redispatches; the hooked ops have
///    fallthrough kernels on that key, so they reach the hook. So `.item()`, copies to the CPU, in-place ops
///    on a pending tensor or on an external input, an unhooked op: all flush first. A view op does not (Note
///    [Views in regions]). Ops with only a
///    CompositeImplicitAutograd kernel (layer_norm, batch_norm, softmax.int, max_pool2d, rms_norm, ...) have
///    fallthroughs too: they compute only through the ops they call, each of which flushes or defers on its own,
///    so a fused chain hidden behind one (at::layer_norm -> native_layer_norm) stays whole;
///  - any CUDA work or synchronisation issued outside ATen, from any thread: a CUPTI callback subscribed to the
///    launch, memcpy, memset, synchronise, event-record, stream-wait and capture-begin entry points of the
///    runtime and driver APIs flushes every open region before the call proceeds. This also covers another
///    thread using a pending tensor (its kernels or copies launch through those APIs) and a kernel launched on
///    a pending tensor's raw pointer. Without CUPTI (library missing, another subscriber active) regions are
///    never opened on CUDA tensors, and deferral_status() says why;
///  - the thread's exit, flush_all_regions() (cudal1's shutdown, reports) and a failure inside cudal1.
/// A call that autograd records (grad mode on and an input requiring grad) is never deferred (mid-chain, it ends
/// the region like any divergence); no region opens on a stream being captured into a CUDA graph, under BypassScope / ScopedAtenOnly, or for CPU tensors unless
/// the hook was installed with HookOptions::profile_cpu and DeferralOptions::cpu (host tests; CPU has no
/// equivalent of the CUPTI guard, so raw-pointer reads of a pending CPU tensor are not covered).
/// A flush of a complete region runs the chain kernel on the region's stream; a prefix (or a kernel that
/// failed) runs the chain's nodes through ATen with the same arguments, each node's out= overload writing its
/// pending outputs in place, so an early flush costs time but never changes a value, and allocates nothing (it may
/// run inside another thread's CUDA call, even one made under torch's allocator lock; an op without an out=
/// overload is called functionally and copied, which allocates). A fused chain whose regions flush early in more
/// than half of the last 64 (once 32 ran) goes to kDiverged: its calls run one by one again.
///
/// Note [Views in regions]
/// `at::linear(x, w, b)` calls `addmm(b, x, w.t())`: the weight's transpose is a view op between two nodes of
/// the chain, and `at::matmul` reshapes around its bmm (Note [Matmul views] in chains.h). A view op (is_view_op
/// in hook.h: it writes nothing and returns aliases of its arguments; also `_unsafe_view`) reads no values, only
/// sizes and strides, so it continues without flushing, also on a pending tensor. What reads through such a
/// view later flushes first, as for the pending tensor itself: any other op (`y[1][2].item()` flushes at
/// `item`), a hooked call that is not the chain's next node, a CUDA call (the CUPTI guard), and a next node
/// that reads a view of a pending output as an external (matches() compares storages); a node the chain
/// records as reading a reshape of a pending output (a `view` input) reads it as such. The region decides what
/// the app dropped by storage (a live view keeps its output written).
///
/// Note [Region sites]
/// Several places in a model can make the first call of one chain with the same signature, and only some of them
/// go on into the chain: ResNet-50's last batch norm of a block continues into `out += identity; relu_`, but in
/// the first block of each stage the downsample convolution comes next. A region opened where the chain never
/// follows is flushed at the next call, which costs a replay (the batch norm functional, then copied) and counts
/// as an early flush, until the chain goes to kDiverged and loses its fused places too. So the region code
/// remembers, per chain and *site*, how the regions opened there ended. A call's site is a hash of the storages
/// (and storage offsets) of its tensor arguments after the first: a module's weights and buffers, the same memory
/// at every forward, also when read through a view made afresh at each call (`at::linear` passes `w.t()`).
/// Arguments stored where one of the last 16 pending outputs of this thread's regions is stored are left out:
/// they are activations a region just made (`addmm(b, x, w.t())` after a fused activation reads a fresh `x`;
/// the site is the weight). When every later argument is left out, the first argument is the site (`w * h` with
/// `h` a region's output), unless it is such an activation too. A call whose later arguments are fresh
/// activations from elsewhere, or that has none, has a new or no site each time and is never learnt. A region
/// that completes raises its site's score, one flushed early (diverged, or by
/// another op or CUDA call; not by exit or shutdown) lowers it, saturating at +-4; at a site whose score is below
/// zero no region opens (RegionCounters::site_declined counts those calls), except one call in 16, which is
/// opened again so that a site whose behaviour changed is learnt anew. At most 4096 sites are kept (a table
/// filled by the sites of fresh tensors, whose TensorImpl addresses recur by chance, is emptied and learnt anew).
/// A wrong guess only costs speed: a declined call runs as it would without regions.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "cudal1/core/status.h"
#include "cudal1/dispatcher/chains.h"

namespace cudal1::dispatcher {

/// Computes a whole chain in one go.
class ChainKernel {
 public:
  virtual ~ChainKernel() = default;
  /// Writes every defined tensor of `outputs` (per node, per output, as the chain's nodes produce them;
  /// undefined where the app dropped the tensor: not to be written) from `externals` (by external slot), on
  /// the current stream. On failure returns the reason with nothing promised about the outputs (the caller
  /// recomputes them through ATen); Unavailable declines a region the kernel does not compute (e.g. one whose
  /// intermediate the app kept) before writing anything: it runs through ATen, not counted as a failure. Must not
  /// throw or allocate outputs. Called from any thread, never concurrently for one region.
  virtual Status run(const std::vector<at::Tensor>& externals,
                     const std::vector<std::vector<at::Tensor>>& outputs) noexcept = 0;
  /// Readable name, e.g. "aten replay" or "pointwise vec4.b256".
  virtual std::string describe() const = 0;
  /// Whether the kernel keeps values computed from external slot `slot` across regions (a folded weight, cached
  /// while the tensor and its version stay the same). A CUDA graph of the kernel reads those cached values, so it
  /// is captured again when that tensor changes (Note [Region graphs]). Default: it keeps none.
  virtual bool derives_from(size_t slot) const noexcept {
    (void)slot;
    return false;
  }

  /// Note [Incremental regions]
  /// A long region (a program chain: Note [Program chains]) would leave the GPU idle while the host defers its
  /// calls. A kernel may therefore compute a region as its calls arrive: begin() gives the region's progress (null,
  /// the default: the kernel only computes whole regions through run()); after each deferred call, advance() may
  /// launch, on the region's stream, the work whose calls are all deferred, into the kernel's own tensors only (the
  /// pending outputs are written by finish(), never before: the invariant of Note [Deferred regions] holds as
  /// before). A complete region is computed by finish() with the progress made, declining as run() would. A region
  /// flushed early discards its progress and replays its prefix through ATen, as any early flush does; the work
  /// launched for it only wrote the kernel's tensors. A failed advance() drops the progress: finish() is then not
  /// called and run() computes the region whole. A kernel is only handed progress its own begin() made: where the
  /// chain was fused again with another kernel while the region was open, that kernel computes it through run().
  struct Progress {
    virtual ~Progress() = default;
  };
  virtual std::unique_ptr<Progress> begin() noexcept { return nullptr; }
  /// `deferred` calls are pending; `externals` as bound so far; `held` the pending outputs so far (undefined where
  /// the region released one the app dropped).
  virtual Status advance(Progress& progress, size_t deferred, const std::vector<at::Tensor>& externals,
                         const std::vector<std::vector<at::Tensor>>& held) noexcept {
    (void)progress, (void)deferred, (void)externals, (void)held;
    return Status();
  }
  virtual Status finish(Progress& progress, const std::vector<at::Tensor>& externals,
                        const std::vector<std::vector<at::Tensor>>& outputs) noexcept {
    (void)progress;
    return run(externals, outputs);
  }
};

/// Runs the first `nodes` nodes of `chain` through ATen (each node's non-tensor arguments as its signature
/// recorded them): a node whose outputs are all given is written in place through its out= overload; otherwise
/// the functional op runs and its results are copied into the given (defined) outputs. Calls pass the hook
/// (BypassScope). The reference every chain kernel is verified against, and what flushes a prefix.
Status replay_chain(const ChainRecord& chain, size_t nodes, const std::vector<at::Tensor>& externals,
                    const std::vector<std::vector<at::Tensor>>& outputs) noexcept;

/// Runs `node` through ATen once, functionally (an in-place node as its in-place op on its first argument): its
/// tensor arguments from `arg` (by their source; an undefined tensor for None), its other arguments as its
/// signature recorded them; its results, in order, into `produced`. The calls pass the hook; the caller excludes
/// the DeferredInit key where a region may be open. Throws what the op throws.
void run_chain_node(const ChainNode& node, const std::function<at::Tensor(const ChainInput&)>& arg,
                    std::vector<at::Tensor>* produced);

/// A ChainKernel that is replay_chain over the whole chain: no faster than ATen; for tests of the region
/// mechanism and as the kernel of last resort.
std::unique_ptr<ChainKernel> aten_chain_kernel(const ChainRecord& chain);

struct DeferralOptions {
  bool cpu = false;     ///< also defer CPU-tensor chains (host tests only: no CUPTI guard there)
  bool poison = false;  ///< fill pending outputs with NaN (or all ones) when allocated: a missed flush shows (tests)
  /// The CUPTI guard also watches the runtime API's kernel launches (CUDAL1_CUPTI_GUARD=full; Note [Lean CUPTI
  /// guard] in src/region.h). Takes effect when the guard is armed: the first enable_deferral on CUDA decides.
  bool cupti_full = false;
  /// The CUDA device arming the guard may launch its one check kernel on (-1: torch's current one): the device
  /// of the chain about to be fused, so no other device gets a context.
  int device = -1;
};

/// Turns deferral on for the installed hook: registers the DeferredInit fallback and the hooked ops'
/// fallthroughs, and arms the CUPTI guard when CUDA tensors can be deferred. Idempotent; call after
/// install_hooks. Returns InvalidArgument without hooks; a missing CUPTI is not an error (CUDA stays
/// undeferred; deferral_status() says why).
Status enable_deferral(const DeferralOptions& opts = {});

/// One line: whether regions can be opened on CPU and on CUDA tensors, and if not, why.
std::string deferral_status();

/// Installs `kernel` for `chain` and moves it to kFused (from kHot, kCold or kDiverged). The kernel is kept
/// until exit. InvalidArgument when deferral is not enabled or the chain cannot be deferred (an output with a
/// storage offset, a node with a non-tensor output).
Status fuse_chain(ChainRecord& chain, std::unique_ptr<ChainKernel> kernel);

/// Stops deferring `chain`'s calls: a fused chain moves to `to` (e.g. kHot, to be handled again) and its first
/// signature is free to begin another fused chain. A region open now ends at its next call (as a divergence: its
/// prefix through ATen). Its kernel is kept until exit (a flush may be running it). Safe from any thread, also
/// from inside the chain's own kernel; a chain that is not fused is left as it is. True when this call moved it.
bool unfuse_chain(ChainRecord& chain, ChainState to) noexcept;

/// Runs every open region of every thread now. Never throws; safe from any thread.
void flush_all_regions() noexcept;

/// Marks the calling thread as one of cudal1's background workers (the tuner, the chain server) for the scope's
/// lifetime: the CUPTI guard does not flush the app's regions at its CUDA calls, and it defers nothing itself. A
/// worker computes on its own inputs and reads only the model's weights, which no region writes; flushing the
/// app's region at the entry of a worker's CUDA call would run the app's convolutions and GEMMs inside the
/// worker's own cuDNN or cuBLAS call, on that thread's library handles (Note [Deferred regions]).
class BackgroundWorkScope {
 public:
  BackgroundWorkScope() noexcept;
  ~BackgroundWorkScope();
  BackgroundWorkScope(const BackgroundWorkScope&) = delete;
  BackgroundWorkScope& operator=(const BackgroundWorkScope&) = delete;
};

/// Counters since enable_deferral.
struct RegionCounters {
  uint64_t opened = 0;         ///< regions opened
  uint64_t completed = 0;      ///< every node deferred: run whole (by the chain kernel)
  // Regions flushed before their last node, by what flushed them (their prefix ran through ATen):
  uint64_t diverged = 0;       ///< a hooked call that was not the next node
  uint64_t by_op = 0;          ///< another dispatcher op on the thread (DeferredInit fallback)
  uint64_t by_cuda = 0;        ///< a CUDA API call from any thread (CUPTI guard)
  uint64_t by_other = 0;       ///< thread exit, flush_all_regions, bypass, an internal failure
  uint64_t written = 0;        ///< outputs written by flushes
  uint64_t skipped = 0;        ///< outputs the app had dropped before the flush: never written
  uint64_t kernel_failures = 0;  ///< chain kernels that failed (the region then ran through ATen)
  uint64_t declined = 0;       ///< complete regions the chain kernel declined (Unavailable): run through ATen
  uint64_t lost = 0;           ///< flushes that failed altogether (logged as errors; must stay 0)
  uint64_t site_declined = 0;  ///< first calls of a fused chain not deferred: their site diverges (Note [Region sites])
  uint64_t advanced = 0;       ///< deferred calls after which the kernel advanced (Note [Incremental regions])
  uint64_t recycled = 0;       ///< pending outputs handed out again instead of allocated (Note [Recycled outputs])
};
RegionCounters region_counters() noexcept;

/// True while the calling thread has an open region (tests).
bool region_open_on_this_thread() noexcept;

}  // namespace cudal1::dispatcher
