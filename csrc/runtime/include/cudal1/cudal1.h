/// @brief The public API of cudal1. An app needs none of it: linking libcudal1.so (or LD_PRELOAD) and
/// CUDAL1_ENABLE=1 is enough. These calls let an app or a test ask what cudal1 is doing.
/// Every function is thread-safe, never throws, and works (returning "off" answers) when cudal1 is off.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#if defined(CUDAL1_BUILDING_LIBRARY)
#define CUDAL1_API __attribute__((visibility("default")))
#else
#define CUDAL1_API
#endif

namespace cudal1 {

/// Counters since process start.
struct Stats {
  bool active = false;             ///< cudal1 is on and its hooks are registered
  uint64_t hooked_calls = 0;       ///< top-level calls seen by the hook
  uint64_t signatures = 0;         ///< distinct signatures seen
  uint64_t hot = 0;                ///< signatures that became hot
  uint64_t tuned = 0;              ///< hot signatures the optimizer finished (swapped or not)
  uint64_t replaced = 0;           ///< signatures served by a cudal1 kernel
  uint64_t replaced_calls = 0;     ///< calls served by a cudal1 kernel
  uint64_t cache_hits = 0;         ///< signatures whose kernel came from the cache
  uint64_t fallbacks = 0;          ///< calls that fell back to ATen after an error in cudal1
  uint64_t chains_hot = 0;         ///< recurring op chains that became hot (CUDAL1_FUSE=on)
  uint64_t chains_fused = 0;       ///< chains a chain kernel computes (their calls are deferred)
  uint64_t regions_completed = 0;  ///< deferred regions run whole by a chain kernel
  uint64_t regions_early = 0;      ///< deferred regions flushed before their last call (their prefix ran in ATen)
  uint64_t compiled = 0;           ///< NVRTC compilations in this process (0 in serve mode: Note [Serve mode])
  uint64_t forward_graphs_undecided = 0;  ///< method signatures whose forward graph is settling or on trial
                                          ///< (Note [Forward graphs]): decided only by the app's further calls
};

/// True when cudal1 is on in this process and its hooks are registered.
CUDAL1_API bool is_active() noexcept;

/// One line saying what cudal1 is doing or why it is off, e.g. "off: CUDAL1_ENABLE is not set".
CUDAL1_API std::string status_line();

/// Current counters.
CUDAL1_API Stats stats() noexcept;

/// What forward graphs did (Note [Forward graphs]), on or off: how many TorchScript method calls reached cudal1 and
/// how many a graph served, one line per method signature, or why the app's calls do not reach cudal1.
CUDAL1_API std::string forward_graph_status();

/// Blocks until the optimizer has no queued or running work, or `timeout_s` passes. Returns true when idle.
/// Apps never need this (tuning runs in the background); examples and tests use it to be deterministic.
CUDAL1_API bool wait_idle(double timeout_s) noexcept;

/// Writes the profile report (hot signatures, replacements, speedups) to the cache now. cudal1 also writes
/// it periodically and at exit.
CUDAL1_API void flush() noexcept;

/// What warm() did with one signature.
struct WarmResult {
  std::string signature;
  /// "kernel": tuned now, a verified kernel serves it and is cached; "aten": tuned now, ATen stays (cached as
  /// such); "cached": the cache already held its outcome; "checked": dry run, the call rebuilds; "skipped": the
  /// call reaches no op cudal1 tunes (e.g. aten::mm), or a CPU call; "timeout": still tuning when time ran out;
  /// "error": the text does not rebuild to a call, ATen rejected the call, or tuning failed.
  std::string outcome;
  /// The signature tuned when the call reached it through another op (aten::layer_norm's call reaches
  /// aten::native_layer_norm); empty when it is `signature` itself.
  std::string tuned_signature;
  double speedup = 0;   ///< measured median speedup over ATen ("kernel", "aten", "cached")
  std::string variant;  ///< the serving or best variant
  std::string note;     ///< why ATen stays, why skipped, or the error
};

struct WarmOptions {
  int device = 0;           ///< CUDA device index to tune on
  double timeout_s = 3600;  ///< for the whole list
  bool dry_run = false;     ///< only check that each text rebuilds to a call (meta tensors; cudal1 may be off)
  /// Called with each result as soon as it is known (progress), on the calling thread; exceptions it throws
  /// are swallowed.
  std::function<void(const WarmResult&)> on_result;
};

/// Pre-warms the cache for this GPU (Note [Pre-warming] in csrc/runtime/src/warm.cpp): rebuilds each signature's
/// call from its text (as the hook and `cudal1 report` write it), runs it once on `options.device` and has the
/// optimizer tune the signatures it reached at once (its own, or for a composite op those of the family ops it
/// calls), one at a time, as if they had become hot in an app. Needs cudal1 on in tune mode (CUDAL1_ENABLE=1,
/// CUDAL1_MODE=tune), except for a dry run. Results are in input order: one per tuned signature, or one for
/// an input that tuned nothing; repeated inputs are dropped. Blocks; never throws. Meant for a process of its
/// own (`cudal1 warm`): calls other threads make meanwhile count as reached by the rebuilt call, so their
/// signatures are tuned too.
CUDAL1_API std::vector<WarmResult> warm(const std::vector<std::string>& signatures,
                                        const WarmOptions& options) noexcept;

/// One cache record as the cache stores it, with the GPU fingerprint it belongs to: how `cudal1 warm` workers on
/// other machines hand their outcomes over (Note [Fleet warm] in csrc/cli/warm_fleet.cpp).
struct CacheRecord {
  std::string fingerprint;  ///< the fingerprint's JSON
  std::string record;       ///< the encoded, checksummed record
};

/// The cached outcome of `key` (a signature's text, or a chain's cache key) for device `device`'s fingerprint, in
/// `out`; false when cudal1 is off, there is no cache or no such record. Never throws.
CUDAL1_API bool cache_record(int device, const std::string& key, CacheRecord* out) noexcept;

/// Stores `rec` in the configured cache (CUDAL1_CACHE_DIR; cudal1 may be off) unless the cache has a kernel for that
/// key, or an "ATen stays" outcome and `rec` is one too. False with `why` when the record does not decode against
/// its fingerprint (corrupt, another fingerprint's) or the cache cannot be written; true with `why` "present" when
/// nothing was stored. Never throws.
CUDAL1_API bool store_cache_record(const CacheRecord& rec, std::string* why) noexcept;

/// The CUDA source cudal1 generates for one signature (`cudal1 source`; Note [Kernel sources] in
/// csrc/runtime/src/source.cpp).
struct KernelSourceResult {
  std::string family;                 ///< the family that plans the signature ("pool", ...); empty when none does
  std::vector<std::string> variants;  ///< every variant of its technique space for the device asked
  std::string variant;                ///< the variant `code` belongs to
  std::string kernel_name;            ///< its extern "C" entry point
  std::string code;                   ///< CUDA C++ as handed to NVRTC; empty when `error` says why
  std::string error;  ///< the text does not rebuild, no family serves the op, the family declines, no such variant
};

/// The generated source of `variant` (default: the first of the space) for the signature text `signature` (as
/// the hook and `cudal1 report` write it) planned for compute capability `sm` (e.g. 90) on a device of `sm_count`
/// SMs (e.g. 132 for an H100 SXM or H200; some variants size their grid in the source). Needs no GPU and works
/// whether cudal1 is on or off: the call is rebuilt on the meta device and planned; nothing is compiled, run or
/// cached. Which variant serves the signature on a GPU is the tuner's choice (`cudal1 cache ls`). Never throws.
CUDAL1_API KernelSourceResult kernel_source(const std::string& signature, const std::string& variant, int sm,
                                            int sm_count) noexcept;

/// cudal1's version, e.g. "0.1.0".
CUDAL1_API const char* version() noexcept;

/// While an object of this class lives, every ATen call made by the constructing thread runs on ATen's own
/// kernels, unprofiled (e.g. to compute a reference, or to keep a region out of tuning). Nests. Must be
/// destroyed on the thread that created it.
class CUDAL1_API ScopedAtenOnly {
 public:
  ScopedAtenOnly() noexcept;
  ~ScopedAtenOnly();
  ScopedAtenOnly(const ScopedAtenOnly&) = delete;
  ScopedAtenOnly& operator=(const ScopedAtenOnly&) = delete;
};

}  // namespace cudal1
