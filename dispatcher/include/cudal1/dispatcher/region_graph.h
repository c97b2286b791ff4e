/// @brief Region graphs: a fused chain's kernel captured into a CUDA graph and replayed, where the app's own
/// measured period says it is faster (Note [Region graphs]).
///
/// Note [Region graphs]
/// A fused chain's kernel issues its launches from the host when its region is flushed. A long chain (a program
/// chain: Note [Program chains]) or a chain of many small launches is then bound by the host: ResNet-50's forward
/// took 2.45 ms in one process and 4.2 ms in another on the same H100, the GPU work unchanged, because the host
/// time per forward moved (2026-12-05). graph_chain_kernel() wraps a fused chain's kernel so that its region can
/// run as one CUDA graph launch instead:
///  - *Warm-up.* The first GraphOptions::warm_regions regions run the kernel as before (cuDNN plans, cuBLAS
///    workspaces and batch-norm folds settle), and the external tensors of consecutive regions are compared.
///  - *Capture.* At the next complete region flushed on its own thread (a divergence or another op: never inside
///    another thread's CUDA call, never at exit) the kernel runs under stream capture (a side stream, thread-local
///    capture mode, a private memory pool: Note [Capture without the generator]) into *static* tensors: an external that was the
///    same storage in the previous region (a weight, a buffer) is read in place and held, at its version; every
///    other external (an activation) gets a static copy, filled before each replay. Each output the app still
///    holds gets a static tensor (in-place nodes share their producer's). A chain with an output that aliases an
///    external, an overlapping external, or a capture that fails is never graphed (its kernel runs as before).
///  - *Check.* The first replay is compared with the kernel run eagerly on the same inputs (NaN positions equal,
///    max |diff| within 1% of the scale: a wrong capture is off by far more); a mismatch drops the graph for good.
///  - *Replay.* A region is served by the graph when its stream is the captured one, every held external is the
///    same storage at the same address (its values may have changed: the graph reads them at replay; only an
///    external the kernel derives cached values from, ChainKernel::derives_from, must also keep its version), and
///    every output the app holds was captured: the activations
///    are copied in, the graph launched, and the outputs copied into the region's pending tensors (the app's),
///    all on the region's stream, one replay at a time. Anything else runs the kernel eagerly; a changed held
///    external (a swapped weight, an updated folded one) also drops the graph, to be captured again after a new warm-up
///    (at most GraphOptions::max_captures times).
///  - *Decision, by what the app feels.* The kernel's regions then alternate blocks of eager and graph runs
///    (GraphOptions::block regions, GraphOptions::rounds of each), recording a GPU event at the end of each. The
///    time between two consecutive regions' events of one mode is the app's period at that point: it contains the
///    host's deferral, the app's own work and the GPU's, whichever bounds it, in the app's own loop (pipelined or
///    synchronised). The graph is kept when its median period is below the eager one by GraphOptions::margin;
///    otherwise it is freed and the kernel runs eagerly from then on. The first period of each block, and any
///    period spanning a mode change, is not counted.
///  - *Re-trial.* A graph kept by a trial is put on trial again after every GraphOptions::retrial_every regions
///    it served, so that an app whose loop changed (pipelined forwards, then one request at a time) is judged
///    again by its new period.
///  - *Idle graphs.* A graph whose chain ran no region for GraphOptions::idle_seconds (a chain of the first
///    forwards that a longer chain took over, a model the app stopped using) is freed by release_idle_graphs(),
///    which cudal1's background thread calls on each tick; the chain captures again if its regions come back.
///  - *Giving up.* A graph that is given up for good (the trial, a failed capture or check, GraphOptions::
///    max_captures, or GraphOptions::capture_chances regions in a row flushed only by CUDA calls or other threads,
///    where no capture may begin) calls GraphOptions::on_given_up once.
///  - *Memory.* The static tensors and the growth of torch's reserved memory during the capture (the graph's
///    private pool) are counted per graph and in total (GraphCounters::bytes); a capture that would take the
///    total past GraphOptions::memory_budget is dropped.
/// The app's own captures are left alone: no region opens on a capturing stream (Note [Deferred regions]).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "cudal1/dispatcher/regions.h"

namespace cudal1::dispatcher {

struct GraphOptions {
  int warm_regions = 3;     ///< regions run eagerly before a capture
  int block = 8;            ///< regions a trial block
  int rounds = 3;           ///< trial blocks of each mode
  double margin = 0.03;     ///< the graph's median period must be below (1 - margin) x the eager one
  int max_captures = 4;     ///< captures a chain may make (a swapped weight captures again); then eager
  bool force = false;       ///< tests: no trial; the graph serves every region it matches
  int retrial_every = 2048; ///< regions a kept graph serves before it is put on trial again
  double idle_seconds = 2;  ///< a graph whose chain ran no region for this long is freed (release_idle_graphs)
  int64_t memory_budget = int64_t{4} << 30;  ///< bytes all region graphs may hold together
  int capture_chances = 64; ///< regions waiting for a capture (none flushed on its own thread) before giving up
  /// Called once, under the kernel's lock, when the graph is given up for good (the eager kernel won the trial,
  /// the chain cannot be captured or its check failed, too many captures, no chance to capture): for a kernel
  /// that exists only to be graphed (an ATen replay, Note [Launch-bound chains]) the caller unfuses the chain.
  /// Must not block or call into the kernel.
  std::function<void()> on_given_up;
};

/// Wraps the fused chain `chain`'s kernel `inner` so that its regions may run as a CUDA graph (Note [Region
/// graphs]). `chain` must outlive the result. Without torch-CUDA in this build, returns `inner` unchanged.
std::unique_ptr<ChainKernel> graph_chain_kernel(const ChainRecord& chain, std::unique_ptr<ChainKernel> inner,
                                                const GraphOptions& opts = {});

/// Note [Launch-bound chains]
/// A hot chain no generator plans whole (a decode step: layer norm, linear, GELU, residual add, layer after
/// layer) runs as many launches, each a few microseconds of host time, around GPU work that may be shorter. The
/// runtime then tries the chain as a CUDA graph of its own ATen calls (aten_chain_kernel wrapped by
/// graph_chain_kernel) before splitting it into segments (Note [Chain segments]). A candidate has at least
/// kLaunchBoundMinNodes calls, and, where its calls were sampled, at most kLaunchBoundUsPerNode microseconds of
/// device time per call on average (above that, launches are a few percent of the chain: no graph can pay).
/// That is only the filter: whether the graph stays is decided by the app's measured period (the trial of Note
/// [Region graphs]). The trial's eager arm is the same calls deferred and replayed through ATen, which costs the
/// host a little more than calling them one by one, so the trial leans towards the graph by that much; bench_steps
/// measures against one-by-one calls. An ATen replay run eagerly is only the same calls deferred, so a graph given
/// up for any reason unfuses the chain (GraphOptions::on_given_up -> unfuse_chain, state kHot) and the runtime
/// handles it again as an ordinary hot chain: its segments, or one by one.
constexpr size_t kLaunchBoundMinNodes = 8;
constexpr double kLaunchBoundUsPerNode = 40;
/// Whether `chain` is a launch-bound candidate by its size and sampled device time (see the Note).
bool launch_bound_candidate(const ChainRecord& chain) noexcept;

/// Frees the graphs of region-graph kernels whose chains ran no region for their GraphOptions::idle_seconds.
/// Never blocks on a region being computed (a busy kernel is skipped). Safe from any thread.
void release_idle_graphs() noexcept;

/// One region's end in a trial: the mode it ran in and its event time in ms (from any fixed origin).
struct TrialMark {
  bool graph = false;
  double ms = 0;
};
/// Periods of each mode from a trial's region ends in order: the difference between consecutive marks of the
/// same mode; a difference across a mode change is dropped.
void trial_periods(const std::vector<TrialMark>& marks, std::vector<double>* graph_ms, std::vector<double>* eager_ms);
/// Whether the graph wins: both modes measured and median(graph) < (1 - margin) x median(eager).
bool graph_wins(const std::vector<double>& graph_ms, const std::vector<double>& eager_ms, double margin);

struct GraphCounters {
  uint64_t captures = 0;          ///< graphs captured and checked
  uint64_t capture_failures = 0;  ///< captures that failed, or a chain found ungraphable at capture
  uint64_t check_failures = 0;    ///< first replays that differed from the eager kernel (must stay 0)
  uint64_t replays = 0;           ///< regions served by a graph
  uint64_t eager = 0;             ///< regions of graph-wrapped kernels run eagerly
  uint64_t invalidated = 0;       ///< graphs dropped because a held external changed
  uint64_t kept = 0;              ///< trials the graph won
  uint64_t rejected = 0;          ///< trials the eager kernel won (its graph freed)
  uint64_t idle_released = 0;     ///< graphs freed because their chain stopped running
  int64_t bytes = 0;              ///< GPU memory the live graphs hold now
};
GraphCounters graph_counters() noexcept;

}  // namespace cudal1::dispatcher
