/// @brief cudal1::warm: tuning a list of signatures now, for the GPU this process runs on (`cudal1 warm`).
///
/// Note [Pre-warming]
/// A deployment should not tune in production: tuning a signature takes seconds of GPU time (the benchmark
/// table's 16 trials: 1-40 s a signature) while the app serves. Signatures are recorded anywhere cudal1 ran
/// (any GPU, any mode: the run report holds their text), and their text is complete (Note [Signature
/// encoding]): dtypes, sizes, strides and every scalar. warm() rebuilds each call from its text
/// (dispatcher::rebuild_call: tensors at offset 0 with random values, checked to describe back to the same
/// text, hence the same cache key), runs it once through the dispatcher, so the hook creates its record exactly
/// as in an app, and hands the records it reached to the tuner as if they had become hot: the call's own record,
/// or, for a composite op such as aten::layer_norm (profile mode hooks every op and records the composite, which
/// tune mode does not hook), the records of the family ops it calls (aten::native_layer_norm). A record counts
/// as reached when its call count rose during the call and a family tunes its op (the hook also keys ops that
/// only chains use, e.g. aten::bmm). Calls go one at a time, each waiting for its tuning to
/// finish, so that no rebuilt call runs on the GPU while a candidate is timed. The
/// tuner verifies, times and writes the cache as it does in an app; an entry the cache already holds for
/// this GPU's fingerprint is attached by the hook on the rebuilt call's first use and reported "cached", not
/// tuned again (`cudal1 cache clear` forces a re-tune). A kernel tuned for offset 0 still checks each call's
/// pointers (alignment) and leaves misaligned calls to ATen, as any cached kernel does. Warming is for later
/// processes, so an outcome the cache does not hold afterwards (an unwritable directory) is reported as an error.
/// A chain's cache key ("chain %0 = ... | %1 = ...", a run report's chain "key") is warmed as a chain (Note
/// [Pre-warming chains] in warm_chain.cpp).
#include <c10/core/InferenceMode.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <set>

#include "cudal1/core/log.h"
#include "cudal1/cudal1.h"
#include "cudal1/dispatcher/call_of.h"
#include "cudal1/dispatcher/cuda_glue.h"
#include "cudal1/dispatcher/hook.h"
#include "cudal1/optimizer/family.h"
#include "runtime.h"
#include "warm_chain.h"

namespace cudal1 {
namespace {

using Clock = std::chrono::steady_clock;

/// True when the signature's op is one a family tunes ("relu", "add.Tensor", ... as the families name them).
bool family_op(const std::string& text) {
  const std::string full = text.substr(0, text.find('('));
  if (full.rfind("aten::", 0) != 0) return false;
  const auto ops = optimizer::all_family_ops();
  return std::find(ops.begin(), ops.end(), full.substr(6)) != ops.end();
}

std::map<dispatcher::SigRecord*, uint64_t> calls_by_record() {
  std::map<dispatcher::SigRecord*, uint64_t> m;
  dispatcher::for_each_record([&](dispatcher::SigRecord& r) { m[&r] = r.calls.load(); });
  return m;
}

WarmResult outcome_of(const dispatcher::SigRecord& rec, const std::string& text) {
  WarmResult res;
  res.signature = text;
  if (rec.sig.text != text) res.tuned_signature = rec.sig.text;
  const auto o = rec.outcome();
  res.speedup = o.speedup;
  res.variant = o.variant;
  res.note = o.note;
  switch (rec.state.load()) {
    case dispatcher::SigState::kReplaced:
      res.outcome = o.from_cache ? "cached" : "kernel";
      break;
    case dispatcher::SigState::kAten:
      res.outcome = o.from_cache ? "cached" : "aten";
      break;
    case dispatcher::SigState::kFailed:
      res.outcome = "error";
      break;
    default:
      res.outcome = "timeout";
      res.note = "still tuning when the time ran out";
  }
  return res;
}

std::vector<WarmResult> warm_one(const std::string& text, const WarmOptions& o, Clock::time_point deadline) {
  WarmResult res;
  res.signature = text;
  auto one = [&](const char* outcome, std::string note) {
    res.outcome = outcome;
    res.note = std::move(note);
    return std::vector<WarmResult>{res};
  };
  if (!o.dry_run && Clock::now() >= deadline) return one("timeout", "not started: the time ran out");
  const c10::Device device = o.dry_run ? c10::Device(c10::DeviceType::Meta)
                                       : c10::Device(c10::DeviceType::CUDA, static_cast<c10::DeviceIndex>(o.device));
  if (!o.dry_run && !runtime::tuning_on())
    return one("error", is_active() ? "cudal1 is not in tune mode (CUDAL1_MODE)" : "cudal1 is " + status_line());
  if (!o.dry_run) {
    const int n = dispatcher::cuda_device_count();
    if (o.device < 0 || o.device >= n)
      return one("error", "no CUDA device " + std::to_string(o.device) + " (" + std::to_string(n) + " visible)");
  }
  auto call = dispatcher::rebuild_call(text, device, /*fill=*/!o.dry_run);
  if (!call.ok())
    return one(call.status().code() == Code::kUnsupported ? "skipped" : "error", call.status().to_string());
  const bool family = family_op(text);
  if (o.dry_run)
    return one("checked", family ? "" : "not an op cudal1 tunes itself: what its call reaches on the GPU is tuned");
  const auto before = calls_by_record();
  try {
    c10::InferenceMode inference;
    call->op.callBoxed(&call->stack);
  } catch (const std::exception& e) {
    return one("error", std::string("ATen rejected the rebuilt call: ") + e.what());
  }
  call->stack.clear();
  // The records this call reached at the top level: its own (a family op), or those of the family ops a
  // composite op calls (e.g. aten::layer_norm reaches aten::native_layer_norm: profile mode records the former).
  std::vector<dispatcher::SigRecord*> reached;
  for (const auto& [rec, calls] : calls_by_record()) {
    const auto it = before.find(rec);
    if (rec->device_index == o.device && calls > (it == before.end() ? 0 : it->second) && family_op(rec->sig.text))
      reached.push_back(rec);
  }
  std::sort(reached.begin(), reached.end(), [](auto* a, auto* b) { return a->sig.text < b->sig.text; });
  if (reached.empty())
    return one("skipped", family ? "the hook did not key the rebuilt call"
                                 : "its call reaches no op cudal1 tunes (" + text.substr(0, text.find('(')) +
                                       " is not one)");
  std::vector<WarmResult> out;
  for (dispatcher::SigRecord* rec : reached) {
    if (!runtime::enqueue_for_tuning(*rec) && rec->state.load() == dispatcher::SigState::kCold) {
      out.push_back(outcome_of(*rec, text));
      out.back().outcome = "error";
      out.back().note = "the tuner did not take the signature";
      continue;
    }
    const double left = std::chrono::duration<double>(deadline - Clock::now()).count();
    wait_idle(std::max(0.0, left));
    out.push_back(outcome_of(*rec, text));
    WarmResult& r = out.back();
    if (r.outcome == "kernel" || r.outcome == "aten" || r.outcome == "cached") {
      // Warming is for later processes: an outcome the cache did not keep (e.g. an unwritable directory) failed.
      if (Status s = runtime::check_cached(o.device, rec->sig.text); !s.ok()) {
        r.outcome = "error";  // keeps what the tuner said: why it stored nothing (e.g. no variant verified)
        r.note = "tuned, but " + s.message() + (r.note.empty() ? "" : "; the tuner's note: " + r.note);
      }
    }
  }
  return out;
}

}  // namespace

std::vector<WarmResult> warm(const std::vector<std::string>& signatures, const WarmOptions& options) noexcept {
  std::vector<WarmResult> out;
  auto emit = [&](WarmResult r) {
    out.push_back(std::move(r));
    if (!options.on_result) return;
    try {
      options.on_result(out.back());
    } catch (...) {
    }
  };
  try {
    const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                             std::chrono::duration<double>(std::max(0.0, options.timeout_s)));
    if (!options.dry_run) runtime::note_warm();
    std::set<std::string> seen;
    for (const std::string& text : signatures) {
      if (!seen.insert(text).second) continue;
      if (text.rfind("chain ", 0) == 0) {  // a chain's cache key (Note [Pre-warming chains])
        WarmResult r;
        if (!options.dry_run && !runtime::tuning_on()) {
          r.signature = text;
          r.outcome = "error";
          r.note = is_active() ? "cudal1 is not in tune mode (CUDAL1_MODE)" : "cudal1 is " + status_line();
        } else if (!options.dry_run && Clock::now() >= deadline) {
          r.signature = text;
          r.outcome = "timeout";
          r.note = "not started: the time ran out";
        } else {
          r = runtime::warm_chain(text, options, std::chrono::duration<double>(deadline - Clock::now()).count());
        }
        CUDAL1_LOG(kInfo, "warm: " << r.outcome << " " << text);
        emit(std::move(r));
        continue;
      }
      for (WarmResult& r : warm_one(text, options, deadline)) {
        CUDAL1_LOG(kInfo, "warm: " << r.outcome << " " << text);
        emit(std::move(r));
      }
    }
    if (!options.dry_run) flush();
  } catch (const std::exception& e) {
    WarmResult r;
    r.outcome = "error";
    r.note = std::string("warm stopped: ") + e.what();
    emit(std::move(r));
  }
  return out;
}

}  // namespace cudal1
