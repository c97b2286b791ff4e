/// @brief SigRecord: everything cudal1 knows about one signature on one device (counts, time, state, the
/// kernel serving it), and Replacement, the interface a swapped-in kernel implements.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "cudal1/core/signature.h"
#include "cudal1/core/status.h"
#include "cudal1/dispatcher/confirm.h"

namespace cudal1::dispatcher {

class ChainRecord;  // chains.h

/// A kernel that serves calls of one signature in place of ATen.
class Replacement {
 public:
  virtual ~Replacement() = default;
  /// Runs the call whose `nargs` arguments are on top of `stack`. On success it has popped the arguments and
  /// pushed the outputs, exactly as the ATen kernel would. On any failure it leaves `stack` untouched and
  /// returns the reason: Unsupported means "not this call" (e.g. misaligned data) and the caller quietly uses
  /// ATen; any other code marks the signature failed. Must not throw. Called concurrently from any thread.
  virtual Status run(torch::jit::Stack* stack, size_t nargs) noexcept = 0;
  /// Readable name of the technique choice, e.g. "unary_elementwise vec4.b256.u2.grid".
  virtual std::string describe() const = 0;
};

/// Lifecycle of a signature. Transitions only move rightwards, except kQueued -> kCold when the optimizer
/// declines work it was handed (so that a later run may try again).
enum class SigState : uint8_t {
  kCold,      ///< counted, not hot yet
  kQueued,    ///< hot; handed to the optimizer exactly once
  kTuning,    ///< the optimizer is working on it
  kReplaced,  ///< a verified kernel serves it
  kAten,      ///< tuned (or declined): ATen stays
  kFailed,    ///< a cudal1 error happened on it: ATen forever in this process
};
const char* state_name(SigState s) noexcept;

/// Metadata of one tensor argument (no data: records never keep tensors alive).
struct TensorSpec {
  c10::ScalarType dtype = c10::ScalarType::Undefined;
  std::vector<int64_t> sizes, strides;
  int64_t storage_offset = 0;
  bool defined = false;
};

/// One argument as the optimizer needs it to rebuild a call: tensors as specs, everything else as values.
struct ArgSpec {
  bool is_tensor = false;
  TensorSpec tensor;
  c10::IValue value;  ///< non-tensor arguments (ints, doubles, strings, lists, None)
};

struct SigRecord {
  SigRecord(c10::OperatorHandle o, Signature s, int device, std::vector<ArgSpec> a)
      : op(std::move(o)), sig(std::move(s)), device_index(device), args(std::move(a)) {}

  const c10::OperatorHandle op;
  const Signature sig;
  const int device_index;         ///< -1 for CPU
  const std::vector<ArgSpec> args;  ///< the first call's arguments (shapes identical for every call)

  std::atomic<uint64_t> calls{0};
  std::atomic<uint64_t> sampled_ns{0};  ///< device time of sampled calls
  std::atomic<uint64_t> samples{0};
  std::atomic<uint64_t> replaced_calls{0};
  std::atomic<SigState> state{SigState::kCold};
  std::atomic<Replacement*> replacement{nullptr};  ///< non-null only in kReplaced; owned by `owned`
  /// Non-null while the replacement is on trial (Note [In-app confirmation]): calls alternate with ATen.
  std::atomic<Trial*> trial{nullptr};
  /// The fused chain whose first node this signature is (Note [Deferred regions]); null when none.
  std::atomic<ChainRecord*> chain_head{nullptr};

  /// Outcome details for reports; guarded by `mu` (cold path only).
  struct Outcome {
    std::string variant;        ///< what serves it, or the best variant tried
    double speedup = 0;         ///< measured median paired speedup over ATen
    double aten_us = 0, kernel_us = 0;
    int64_t trials = 0;
    bool from_cache = false;
    std::string note;           ///< why ATen stays / what failed
    double in_app = 0;          ///< in-app ratio over ATen (Note [In-app confirmation]); 0: not judged in this app
    std::string verdict;        ///< "on trial", "promoted", "demoted", or empty (not judged here)
  };
  Outcome outcome() const;
  void set_outcome(Outcome o);

  /// Installs `r` (taking ownership) and moves the state to kReplaced. With `calls_per_arm` > 0 the replacement
  /// goes on trial first (Note [In-app confirmation]): a verdict after `calls_per_arm` timed calls of each arm
  /// (ATen, kernel), sampling on up to 8 times as many until one is reached.
  void install(std::unique_ptr<Replacement> r, Outcome o, int calls_per_arm = 0);
  /// Ends a trial with `v` (kPromote: the kernel stays; kDemote: uninstalled, state kAten), its statistics noted
  /// in the outcome. False when no trial was running (concluded already, or the record failed).
  bool conclude_trial(Verdict v, const TrialStats& stats);
  /// Marks the signature failed (ATen forever): uninstalls any replacement. Thread-safe, idempotent.
  void fail(const std::string& why);
  /// Mean device time of one call in microseconds (0 if never sampled).
  double mean_us() const;

 private:
  mutable std::mutex mu_;
  Outcome outcome_;
  std::vector<std::unique_ptr<Replacement>> owned_;  // kept until exit: a racing caller may still use one
  std::vector<std::unique_ptr<Trial>> trials_;        // likewise
};

/// Replacements on trial now, in every record (Note [In-app confirmation]); a forward graph waits for none
/// (Note [Forward graphs]: a graph would freeze a trial's arms and starve it of calls).
int open_trials() noexcept;

}  // namespace cudal1::dispatcher
