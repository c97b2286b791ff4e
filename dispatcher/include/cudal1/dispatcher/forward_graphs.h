/// @brief Forward graphs: a TorchScript method's whole call captured into one CUDA graph and replayed, where the
/// app's own period says it is faster (Note [Forward graphs]).
///
/// Note [Forward graphs]
/// A served model's forward is a few hundred ATen calls, and each costs the host an interpreter step, the hook,
/// and a launch or a deferral: GPT-2 small (fp16, 8x512) needs about 3.4 ms of host time a forward for 2.7 ms of
/// GPU work (H100, 2026-12-06), so the app runs at the host's pace. Graphing regions (Note [Region graphs]) cannot
/// remove the interpreter. cudal1 therefore also sits where a C++ app calls a TorchScript method,
/// `torch::jit::Method::operator()` (what `Module::forward` calls): libcudal1.so defines that symbol, so the app's
/// call binds to cudal1's definition when the app links cudal1 before torch or preloads it; cudal1 calls
/// libtorch's own definition from there (forward_graph_interposed() says whether the app's calls reach cudal1).
/// Per (module, method, call signature: the inputs' dtypes, sizes, strides and devices, scalar values, grad and
/// inference mode):
///  - *Settling.* Calls run as before (the dispatcher sees them: profiling, tuning, fusion). A capture waits until
///    nothing cudal1 does can change what a call runs: at least ForwardGraphOptions::min_calls calls (every
///    signature and chain of the forward has had the calls it needs to turn hot), the tuner idle
///    (ForwardGraphOptions::busy false), no swapped kernel on its in-app trial (open_trials()), and no swap,
///    fusion or trial verdict (change_generation()) during the last ForwardGraphOptions::settle_calls calls and
///    ForwardGraphOptions::settle_ms (chains turn hot and are fused on a background tick). A graph replays no
///    call through the dispatcher, so nothing turns hot while it serves; a re-trial's eager blocks let them.
///  - *Obstacles.* A method is never graphed when its graph (and the methods it calls) sets an attribute, forks,
///    prints, calls a free function or draws random numbers (dropout with a constant train=false is none), when a
///    module attribute is of a type whose contents cudal1 cannot compare (only tensors, modules, numbers, bools,
///    strings and None are), when an input is not a tensor, number, bool, None, string, or list or tuple of them,
///    when a tensor input is not on the device of the first, or when autograd would record the call.
///  - *Capture*, on a call whose result the app gets from the eager forward: that call runs as before, its
///    pending regions are flushed, then the method runs again under stream capture (a side stream, thread-local
///    capture mode, a private pool of torch's allocator, without torch's generator: Note [Capture without the
///    generator] in src/graph_capture.h) on *static* copies of the inputs. Deferred regions run
///    inside the capture (their fused kernels are what the graph replays) without recycled outputs and without
///    region graphs of their own. The capture fails (and the method stays eager for that signature) when the
///    forward synchronises or copies to the host, changes a module tensor or an input in place, or returns an
///    output that aliases an input.
///  - *Check.* The graph's first replay is compared with the eager result of the same inputs: equal NaN
///    positions, other values within 1% of the largest finite magnitude (integers exactly). A mismatch drops it.
///  - *Replay.* A call is served by a graph when the module's state is what it was at the capture (every tensor
///    attribute the same tensor at the same data pointer and version, every other attribute equal; one pass over
///    the slots) and no change_generation() came since. The inputs are copied into the static ones and the graph is
///    launched on the caller's current stream; the call returns the graph's outputs. An output the app still
///    holds (any reference beyond cudal1's own) is never overwritten: such an instance is skipped, another one is
///    captured (at most ForwardGraphOptions::instances), else the call runs eagerly. A changed module state or
///    generation drops the graphs and the signature settles again (at most ForwardGraphOptions::max_captures).
///  - *Decision, by what the app feels.* After the check, calls alternate blocks of eager and graph runs
///    (ForwardGraphOptions::block calls, ::rounds blocks of each), and a GPU event is recorded on the caller's
///    stream at the end of each call's work; the time between two consecutive calls' events in one block is the
///    app's period there (host, GPU and the app's own work, whichever bounds it, pipelined or synchronised; the
///    host's issue time alone would favour the graph in a pipelined loop). The graph is kept when its median
///    period is below the eager one by ::margin, and judged again every ::retrial_every calls.
///  - *Memory.* Static inputs and the growth of torch's reserved memory during the capture (the private pool) are
///    counted; a capture past ForwardGraphOptions::memory_budget is dropped.
/// The app's own captures are left alone (a call on a capturing stream runs as before); calls with keyword
/// arguments, nested method calls and calls on CPU tensors pass straight through.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "cudal1/core/status.h"

namespace torch::jit {
struct Method;
}

namespace cudal1::dispatcher {

struct ForwardGraphOptions {
  bool enabled = false;
  int min_calls = 50;        ///< calls of a signature before it may be captured (the runtime: CUDAL1_HOT_CALLS)
  int settle_calls = 8;      ///< calls in a row with nothing changing before a capture
  int settle_ms = 200;       ///< and this long since the last change (4 background ticks)
  int block = 8;             ///< calls a trial block
  int rounds = 3;            ///< trial blocks of each mode
  double margin = 0.03;      ///< the graph's median period must be below (1 - margin) x the eager one
  int instances = 2;         ///< graphs a signature may hold (outputs the app keeps across calls)
  int max_captures = 6;      ///< captures a signature may make; then eager
  int retrial_every = 4096;  ///< calls a kept graph serves before it is judged again
  bool force = false;        ///< tests: no trial; the graph serves every call it can
  int64_t memory_budget = int64_t{4} << 30;  ///< bytes all forward graphs may hold together
  /// True while cudal1 may still change what a call runs (the tuner works, a chain is being tuned). Null: never.
  std::function<bool()> busy;
};

/// Sets the options (before or while the app runs; takes effect at the next call). Ok also without a GPU.
Status configure_forward_graphs(const ForwardGraphOptions& o);

/// Counts a change of what a hooked call runs (a kernel installed or demoted, a chain fused or unfused): a
/// forward graph captured before it is dropped. Cheap; any thread.
void note_dispatch_change() noexcept;
/// The number of changes so far.
uint64_t change_generation() noexcept;

struct ForwardGraphCounters {
  uint64_t calls = 0;       ///< method calls that reached cudal1's interposer
  uint64_t replays = 0;     ///< calls served by a graph
  uint64_t captures = 0, capture_failures = 0, check_failures = 0;
  uint64_t kept = 0, given_up = 0;  ///< trial verdicts
  uint64_t dropped = 0;     ///< graphs dropped because the module or cudal1 changed
  int64_t bytes = 0;        ///< GPU memory the live graphs hold
  uint64_t undecided = 0;   ///< method signatures settling or on trial (neither served by a graph nor eager for good)
};
ForwardGraphCounters forward_graph_counters() noexcept;

/// True when the process's calls to torch::jit::Method::operator() reach cudal1 (cudal1 precedes libtorch in the
/// symbol lookup order); false with `why` otherwise.
bool forward_graph_interposed(std::string* why = nullptr) noexcept;

/// One line per method signature seen: its state (settling, on trial, kept with both periods, eager and why).
std::string forward_graph_report();

/// Why `m` cannot be graphed (an obstacle of Note [Forward graphs] in its graph, the graphs it calls or its
/// module's attributes), or "" when nothing in it stands in the way.
std::string forward_graph_obstacle(const torch::jit::Method& m);

/// Frees every forward graph (cudal1's shutdown, tests); the signatures settle again.
void release_forward_graphs() noexcept;

}  // namespace cudal1::dispatcher
