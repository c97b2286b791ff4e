/// @brief cudal1::warm: tuning a list of signatures now, for the GPU this process runs on (`cudal1 warm`).
///
/// Note [Pre-warming]
/// A deployment should not tune in production: tuning a signature takes seconds of GPU time (the benchmark
/// table's 16 trials: 1-40 s a signature) while the app serves. Signatures are recorded anywhere cudal1 ran
/// (any GPU, any mode: the run report holds their text), and their text is complete (Note [Signature
/// encoding]): dtypes, sizes, strides and every scalar. warm() rebuilds each call from its text
/// (dispatcher::rebuild_call: tensors at offset 0 with random values, checked to describe back to the same
/// text, hence the same cache key), runs it once through the dispatcher, so the hook creates its record exactly
/// as in an app, and hands the record to the tuner as if it had become hot. Calls go one at a time, each
/// waiting for its tuning to finish, so that no rebuilt call runs on the GPU while a candidate is timed. The
/// tuner verifies, times and writes the cache as it does in an app; an entry the cache already holds for
/// this GPU's fingerprint is attached by the hook on the rebuilt call's first use and reported "cached", not
/// tuned again (`cudal1 cache clear` forces a re-tune). A kernel tuned for offset 0 still checks each call's
/// pointers (alignment) and leaves misaligned calls to ATen, as any cached kernel does.
#include <c10/core/InferenceMode.h>

#include <algorithm>
#include <chrono>
#include <set>

#include "cudal1/core/log.h"
#include "cudal1/cudal1.h"
#include "cudal1/dispatcher/call_of.h"
#include "cudal1/dispatcher/hook.h"
#include "cudal1/optimizer/family.h"
#include "runtime.h"

namespace cudal1 {
namespace {

using Clock = std::chrono::steady_clock;

/// "relu" or "add.Tensor" as the families name their ops, from a signature's leading "aten::name.overload".
bool family_op(const std::string& text, std::string* why) {
  const std::string full = text.substr(0, text.find('('));
  if (full.rfind("aten::", 0) != 0) {
    *why = "not an ATen operator";
    return false;
  }
  const auto ops = optimizer::all_family_ops();
  if (std::find(ops.begin(), ops.end(), full.substr(6)) != ops.end()) return true;
  *why = "cudal1 does not optimize " + full;
  return false;
}

dispatcher::SigRecord* find_record(const std::string& text, int device) {
  dispatcher::SigRecord* found = nullptr;
  dispatcher::for_each_record([&](dispatcher::SigRecord& r) {
    if (r.device_index == device && r.sig.text == text) found = &r;
  });
  return found;
}

void fill_outcome(const dispatcher::SigRecord& rec, bool from_cache_expected, WarmResult* res) {
  const auto o = rec.outcome();
  res->speedup = o.speedup;
  res->variant = o.variant;
  res->note = o.note;
  switch (rec.state.load()) {
    case dispatcher::SigState::kReplaced:
    case dispatcher::SigState::kAten:
      res->outcome = o.from_cache || from_cache_expected ? "cached"
                     : rec.state.load() == dispatcher::SigState::kReplaced ? "kernel" : "aten";
      break;
    case dispatcher::SigState::kFailed:
      res->outcome = "error";
      break;
    default:
      res->outcome = "timeout";
      res->note = "still tuning when the time ran out";
  }
}

WarmResult warm_one(const std::string& text, const WarmOptions& o, Clock::time_point deadline) {
  WarmResult res;
  res.signature = text;
  if (!o.dry_run && Clock::now() >= deadline) {
    res.outcome = "timeout";
    res.note = "not started: the time ran out";
    return res;
  }
  if (!family_op(text, &res.note)) {
    res.outcome = "skipped";
    return res;
  }
  const c10::Device device = o.dry_run ? c10::Device(c10::DeviceType::Meta)
                                       : c10::Device(c10::DeviceType::CUDA, static_cast<c10::DeviceIndex>(o.device));
  if (!o.dry_run && !runtime::tuning_on()) {
    res.outcome = "error";
    res.note = is_active() ? "cudal1 is not in tune mode (CUDAL1_MODE)" : "cudal1 is " + status_line();
    return res;
  }
  auto call = dispatcher::rebuild_call(text, device, /*fill=*/!o.dry_run);
  if (!call.ok()) {
    res.outcome = call.status().code() == Code::kUnsupported ? "skipped" : "error";
    res.note = call.status().to_string();
    return res;
  }
  if (o.dry_run) {
    res.outcome = "checked";
    return res;
  }
  try {
    c10::InferenceMode inference;
    call->op.callBoxed(&call->stack);
  } catch (const std::exception& e) {
    res.outcome = "error";
    res.note = std::string("ATen rejected the rebuilt call: ") + e.what();
    return res;
  }
  call->stack.clear();
  dispatcher::SigRecord* rec = find_record(text, o.device);
  if (!rec) {
    res.outcome = "skipped";
    res.note = "the hook did not key the rebuilt call";
    return res;
  }
  const auto state = rec->state.load();
  const bool cached = (state == dispatcher::SigState::kReplaced || state == dispatcher::SigState::kAten) &&
                      rec->outcome().from_cache;
  if (!cached) {
    if (!runtime::enqueue_for_tuning(*rec) && rec->state.load() == dispatcher::SigState::kCold) {
      res.outcome = "error";
      res.note = "the tuner did not take the signature";
      return res;
    }
    const double left = std::chrono::duration<double>(deadline - Clock::now()).count();
    wait_idle(std::max(0.0, left));
  }
  fill_outcome(*rec, cached, &res);
  return res;
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
      emit(warm_one(text, options, deadline));
      CUDAL1_LOG(kInfo, "warm: " << out.back().outcome << " " << text);
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
