/// @brief Every CUDAL1_* environment variable, parsed once, typed, documented in one table.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace cudal1 {

/// What cudal1 does once enabled.
enum class Mode {
  kTune,     ///< profile, tune hot signatures in the background, swap verified kernels, use and fill the cache
  kServe,    ///< swap kernels found in the cache only; never tune (deployment after `cudal1` pre-warming)
  kProfile,  ///< count and time every functional op; replace nothing
};
const char* mode_name(Mode m) noexcept;

/// How timing evicts L2 before each repetition (Note [Timing] in optimizer/measure.h).
enum class L2FlushKind {
  kRead,   ///< read a 256 MiB buffer: L2 ends holding clean lines, so a timed kernel pays only its own traffic
  kWrite,  ///< memset a 256 MiB buffer (Triton's do_bench, nvbench): L2 ends dirty, a timed kernel also writes it back
};
const char* l2_flush_name(L2FlushKind k) noexcept;

/// How the tuner picks a signature's later rounds (Notes [Similarity model] and [Knob model] in optimizer/search.h).
enum class TuneSearch {
  kGp,         ///< a Gaussian process over knob similarity, lowest confidence bound (Note [Similarity model])
  kKnobs,      ///< a ridge model of this signature's measured times on its knob values, lowest confidence bound
  kPolicy,     ///< a copy of the contrastive policy adapted to this signature's measurements
  kKnobsMean,  ///< the ridge model's predictions alone, without the confidence bound
};
const char* tune_search_name(TuneSearch s) noexcept;

/// Log levels, mirroring spdlog's without including it.
enum class LogLevel { kTrace, kDebug, kInfo, kWarn, kError, kOff };

/// The parsed configuration. Defaults here are the documented defaults.
struct Config {
  bool enable = false;
  Mode mode = Mode::kTune;
  std::string cache_dir;            ///< resolved at parse time; empty only if no home directory is known
  LogLevel log_level = LogLevel::kWarn;
  int64_t hot_calls = 50;           ///< calls of one signature before it is hot
  int64_t trials = 16;              ///< kernel variants tried per hot signature
  int64_t tune_round = 4;           ///< variants per tuning round (Note [Tuning rounds] in optimizer/tuner.h)
  TuneSearch tune_search = TuneSearch::kGp;  ///< how rounds after the first are picked
  bool tune_prior = false;          ///< the cross-family policy steers round 1 (Note [Cross-family policy])
  int64_t verify_trials = 5;        ///< fresh random inputs per verification
  int64_t timing_reps = 40;         ///< interleaved timing repetitions per candidate
  double min_speedup = 1.03;        ///< median paired speedup a kernel needs before it is swapped in
  int64_t confirm_calls = 32;       ///< timed calls per arm of a swap's in-app trial; 0: no trial
  L2FlushKind l2_flush = L2FlushKind::kRead;  ///< how timing flushes L2 before each repetition
  int64_t profile_sample = 64;      ///< one call in N per signature is timed with GPU events
  uint64_t seed = 0;                ///< 0: seeded from the clock
  std::string cuda_library;         ///< explicit libcuda path; empty: search
  std::string nvrtc_library;        ///< explicit libnvrtc path; empty: search
  bool fuse = true;                 ///< record op chains (Note [Chain profiling] in dispatcher/chains.h)
  double chain_share = 0.01;        ///< share of profiled device time at which a recurring chain turns hot
  bool graphs = true;               ///< fused chains may run as CUDA graphs (Note [Region graphs])
  /// With fuse on (tune, serve): turn TorchScript's TensorExpr fuser off at start-up, so that the elementwise
  /// chains it would compute outside the dispatcher reach cudal1 (Note [TorchScript fuser] in runtime.cpp).
  bool jit_fuser_off = false;
  /// The CUPTI guard also watches the runtime's kernel launches in the runtime API, not only through the
  /// driver's (Note [Lean CUPTI guard] in dispatcher/src/region.h): its former host cost, for measuring.
  bool cupti_full = false;
  int64_t graph_memory_mb = 4096;   ///< GPU memory all region graphs may hold together, MiB (forward graphs too)
  /// A TorchScript method's whole call may run as one CUDA graph (Note [Forward graphs] in
  /// dispatcher/forward_graphs.h).
  bool forward_graphs = true;
  /// GPU memory one signature's tuning may hold (Note [Tuning memory] in optimizer/measure.h): a size in bytes
  /// when > 0, else this fraction of the device's free memory at the time.
  int64_t tune_memory_bytes = 0;
  double tune_memory_fraction = 0.5;
  /// Test-only (no variable): profile calls on CPU tensors too, so host-only tests can see the profiler.
  bool profile_cpu = false;
};

/// One row of the variable table: name, default as text, meaning.
struct ConfigVar {
  const char* name;
  const char* default_text;
  const char* meaning;
};
/// The table of every variable cudal1 reads (the source for docs and `cudal1 env`).
const std::vector<ConfigVar>& config_variables();

/// Looks up an environment variable; returns nullptr when unset.
using EnvLookup = std::function<const char*(const char*)>;

/// Parses the configuration from `env`. Never fails: a bad value keeps the default and appends a warning
/// ("CUDAL1_HOT_CALLS='abc' is not an integer; using 50") to `warnings` (may be null).
Config parse_config(const EnvLookup& env, std::vector<std::string>* warnings);

/// The process-wide configuration, parsed from the real environment on first use (thread-safe); its
/// warnings are logged once.
const Config& config();

/// Replaces the process-wide configuration. For tests and embedding apps; call it before cudal1 starts
/// work (not concurrently with running hooks).
void set_config(const Config& c);

}  // namespace cudal1
