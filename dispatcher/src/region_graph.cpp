/// @brief Region graphs (Note [Region graphs] in region_graph.h): the trial arithmetic, the counters, and the
/// graph-wrapped chain kernel (torch-CUDA builds only).
#include "cudal1/dispatcher/region_graph.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <c10/core/InferenceMode.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <optional>
#include <string>

#include "cudal1/core/log.h"
#include "cudal1/core/stats.h"
#include "graph_capture.h"
#include "region.h"

#if defined(CUDAL1_TORCH_CUDA)
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>
#endif

namespace cudal1::dispatcher {
namespace {

struct Totals {
  std::atomic<uint64_t> captures{0}, capture_failures{0}, check_failures{0}, replays{0}, eager{0}, invalidated{0},
      kept{0}, rejected{0}, idle_released{0};
  std::atomic<int64_t> bytes{0};
};
Totals g_totals;

}  // namespace

void trial_periods(const std::vector<TrialMark>& marks, std::vector<double>* graph_ms, std::vector<double>* eager_ms) {
  for (size_t i = 1; i < marks.size(); ++i)
    if (marks[i].graph == marks[i - 1].graph)
      (marks[i].graph ? graph_ms : eager_ms)->push_back(marks[i].ms - marks[i - 1].ms);
}

bool graph_wins(const std::vector<double>& graph_ms, const std::vector<double>& eager_ms, double margin) {
  if (graph_ms.empty() || eager_ms.empty()) return false;
  return median(graph_ms) < (1.0 - margin) * median(eager_ms);
}

bool launch_bound_candidate(const ChainRecord& chain) noexcept {
  const size_t n = chain.nodes.size();
  if (n < kLaunchBoundMinNodes) return false;
  const double us = chain.mean_us();  // 0 while no call was sampled: the trial decides
  return us <= kLaunchBoundUsPerNode * static_cast<double>(n);
}

GraphCounters graph_counters() noexcept {
  GraphCounters c;
  c.captures = g_totals.captures.load();
  c.capture_failures = g_totals.capture_failures.load();
  c.check_failures = g_totals.check_failures.load();
  c.replays = g_totals.replays.load();
  c.eager = g_totals.eager.load();
  c.invalidated = g_totals.invalidated.load();
  c.kept = g_totals.kept.load();
  c.rejected = g_totals.rejected.load();
  c.idle_released = g_totals.idle_released.load();
  c.bytes = g_totals.bytes.load();
  return c;
}

#if defined(CUDAL1_TORCH_CUDA)
namespace detail {

int64_t reserved_bytes(c10::DeviceIndex device) {
  const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(device);
  return stats.reserved_bytes[0].current;  // index 0: the aggregate of all pools
}

Result<c10::cuda::CUDAStream> capture_stream(c10::DeviceIndex device) {
  static std::mutex mu;
  static cudaStream_t streams[64] = {};
  if (device < 0 || device >= 64) return Status(Code::kInvalidArgument, "device index");
  std::lock_guard<std::mutex> lock(mu);
  if (!streams[device]) {
    c10::cuda::CUDAGuard guard(device);
    if (cudaStreamCreateWithFlags(&streams[device], cudaStreamNonBlocking) != cudaSuccess) {
      streams[device] = nullptr;
      return Status(Code::kCudaError, "cudaStreamCreateWithFlags failed");
    }
  }
  return c10::cuda::getStreamFromExternal(streams[device], device);
}

void order(const c10::cuda::CUDAStream& before, const c10::cuda::CUDAStream& after) {
  cudaEvent_t ev = nullptr;
  if (cudaEventCreateWithFlags(&ev, cudaEventDisableTiming) != cudaSuccess) throw std::runtime_error("event");
  cudaEventRecord(ev, before.stream());
  cudaStreamWaitEvent(after.stream(), ev, 0);
  cudaEventDestroy(ev);
}

at::Tensor normal_like(const at::Tensor& t) {
  c10::InferenceMode normal(false);
  c10::NoGradGuard no_grad;
  return at::empty_strided(t.sizes(), t.strides(), t.options());
}

bool close_enough(const at::Tensor& a, const at::Tensor& b) {
  if (!at::isFloatingType(a.scalar_type())) return at::equal(a, b);
  const auto wide = a.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;  // exact for 16- and 32-bit values
  const at::Tensor x = a.to(wide), y = b.to(wide);
  if (!at::equal(x.isnan(), y.isnan())) return false;
  at::Tensor d = at::where(x == y, at::zeros_like(x), (x - y).abs());
  d = at::where(x.isnan(), at::zeros_like(d), d);
  const double diff = at::nan_to_num(d, 0.0, 1e300, 1e300).max().item<double>();
  const at::Tensor fin = at::where(y.isfinite(), y.abs(), at::zeros_like(y));
  const double scale = fin.numel() ? fin.max().item<double>() : 0.0;
  return diff <= 0.01 * std::max(scale, 1e-12);
}

}  // namespace detail

namespace {

using detail::capture_stream;
using detail::close_enough;
using detail::normal_like;
using detail::order;
using detail::reserved_bytes;

/// The first output before outs[k][i] that is the same tensor (an in-place node's output is an earlier node's
/// tensor), as (node, output); (-1, -1) when there is none or outs[k][i] is undefined.
std::pair<int, int> earlier_same(const std::vector<std::vector<at::Tensor>>& outs, size_t k, size_t i) {
  const at::Tensor& o = outs[k][i];
  if (o.defined())
    for (size_t j = 0; j <= k; ++j)
      for (size_t m = 0; m < outs[j].size() && (j < k || m < i); ++m)
        if (outs[j][m].defined() && outs[j][m].is_same(o)) return {static_cast<int>(j), static_cast<int>(m)};
  return {-1, -1};
}

class GraphKernel;
std::mutex g_kernels_mu;
std::vector<GraphKernel*>* g_kernels = new std::vector<GraphKernel*>();  // leaked: kernels live until exit

class GraphKernel final : public ChainKernel {
 public:
  GraphKernel(const ChainRecord& chain, std::unique_ptr<ChainKernel> inner, GraphOptions o)
      : chain_(chain), inner_(std::move(inner)), o_(o) {
    std::lock_guard<std::mutex> lock(g_kernels_mu);
    g_kernels->push_back(this);
  }
  /// A kernel fuse_chain() refused is destroyed at once: the idle sweep must not see it again.
  ~GraphKernel() override {
    std::lock_guard<std::mutex> lock(g_kernels_mu);
    g_kernels->erase(std::remove(g_kernels->begin(), g_kernels->end(), this), g_kernels->end());
  }

  /// Frees the graph when the chain ran no region for o_.idle_seconds; skips a kernel computing a region now.
  void release_if_idle(std::chrono::steady_clock::time_point now) noexcept {
    try {
      std::unique_lock<std::mutex> lock(mu_, std::try_to_lock);
      if (!lock.owns_lock() || !graph_) return;
      if (std::chrono::duration<double>(now - last_region_).count() < o_.idle_seconds) return;
      // No synchronisation from this thread (the app may be capturing a graph of its own): the graph is freed
      // once its last replay is seen complete, else at a later tick.
      if (done_ && cudaEventQuery(done_) != cudaSuccess) return;
      detail::RegionWorkScope ours;  // CUDA calls below flush no region (Note [Deferred regions])
      release_graph(/*wait=*/false);
      g_totals.idle_released.fetch_add(1);
      state_ = State::kWarm;
      warm_done_ = 0;
    } catch (...) {
    }
  }

  std::unique_ptr<Progress> begin() noexcept override {
    if (detail::in_forward_capture()) return inner_->begin();  // Note [Forward graphs]: the forward's graph holds it
    {
      std::lock_guard<std::mutex> lock(mu_);
      last_region_ = std::chrono::steady_clock::now();
      if (whole_region_wanted()) return nullptr;  // the region comes whole through run()
    }
    return inner_->begin();
  }

  Status advance(Progress& p, size_t deferred, const std::vector<at::Tensor>& ext,
                 const std::vector<std::vector<at::Tensor>>& held) noexcept override {
    return inner_->advance(p, deferred, ext, held);
  }

  Status finish(Progress& p, const std::vector<at::Tensor>& ext,
                const std::vector<std::vector<at::Tensor>>& outs) noexcept override {
    if (detail::in_forward_capture()) return inner_->finish(p, ext, outs);
    const Status s = inner_->finish(p, ext, outs);
    if (s.ok()) ran_eagerly(ext);
    return s;
  }

  Status run(const std::vector<at::Tensor>& ext, const std::vector<std::vector<at::Tensor>>& outs) noexcept override {
    if (detail::in_forward_capture()) return inner_->run(ext, outs);
    try {
      std::unique_lock<std::mutex> lock(mu_);
      if (state_ == State::kWantCapture && !detail::flush_may_capture() && ++missed_chances_ >= o_.capture_chances) {
        lock.unlock();
        drop_for_good("no region was flushed where a capture may begin (its own thread, at its next op)");
        return inner_->run(ext, outs);
      }
      if (state_ == State::kWantCapture && detail::flush_may_capture()) {
        missed_chances_ = 0;
        const Status c = capture_and_check(ext, outs);
        if (c.ok()) {  // the outputs are written by the checked replay
          mark(true);
          return Status();
        }
        if (c.code() != Code::kUnavailable) {
          lock.unlock();
          return inner_->run(ext, outs);
        }
      }
      if (graph_ && graph_mode_now()) {
        bool invalid = false;
        if (serves(ext, outs, &invalid)) {
          replay(ext, outs);
          g_totals.replays.fetch_add(1);
          mark(true);
          if (state_ == State::kServe && decided_graph_ && ++served_ >= static_cast<size_t>(o_.retrial_every)) {
            state_ = State::kTrial;  // judged again by the app's period now
            trial_n_ = 0;
            served_ = 0;
          }
          return Status();
        }
        if (invalid) invalidate("a held external changed");
      }
    } catch (const std::exception& e) {
      drop_for_good(std::string("graph replay failed: ") + e.what());
    } catch (...) {
      drop_for_good("graph replay failed");
    }
    const Status s = inner_->run(ext, outs);
    if (s.ok()) ran_eagerly(ext);
    return s;
  }

  std::string describe() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return inner_->describe() + "; CUDA graph: " + state_text();
  }

 private:
  enum class State { kWarm, kWantCapture, kTrial, kDeciding, kServe, kOff };

  /// Caller holds mu_. Whether the next region should come whole (graph mode or a capture).
  bool whole_region_wanted() const { return state_ == State::kWantCapture || (graph_ && graph_mode_now()); }

  /// Caller holds mu_. Whether a region now would be served by the graph (when it matches).
  bool graph_mode_now() const {
    if (state_ == State::kServe) return true;
    if (state_ != State::kTrial) return false;
    return (trial_n_ / static_cast<size_t>(o_.block)) % 2 == 0;  // graph, eager, graph, ... blocks
  }

  /// After a region the kernel computed eagerly: counts it, notes its externals (warm-up) or its trial mark.
  void ran_eagerly(const std::vector<at::Tensor>& ext) noexcept {
    try {
      g_totals.eager.fetch_add(1);
      std::lock_guard<std::mutex> lock(mu_);
      if (state_ == State::kWarm || state_ == State::kWantCapture) {
        note_externals(ext);
        if (state_ == State::kWarm && ++warm_done_ >= o_.warm_regions) state_ = State::kWantCapture;
      }
      mark(false);
    } catch (...) {
    }
  }

  /// Caller holds mu_. Remembers each external's storage, to tell a held tensor (the same storage at the next
  /// region) from an activation.
  void note_externals(const std::vector<at::Tensor>& ext) {
    prev_storage_.clear();
    prev_ptr_.clear();
    for (const at::Tensor& t : ext) {
      prev_storage_.push_back(t.defined() ? t.storage().getWeakStorageImpl()
                                          : c10::weak_intrusive_ptr<c10::StorageImpl>(
                                                c10::intrusive_ptr<c10::StorageImpl>()));
      prev_ptr_.push_back(t.defined() ? t.data_ptr() : nullptr);
    }
  }

  /// Caller holds mu_. In a trial: records the region's end on the current stream (`graph`: served by the graph),
  /// and decides once every block ran and the events completed.
  void mark(bool graph) {
    if (state_ == State::kTrial) {
      cudaEvent_t ev = nullptr;
      if (cudaEventCreate(&ev) == cudaSuccess) {
        cudaEventRecord(ev, c10::cuda::getCurrentCUDAStream(device_).stream());
        marks_.push_back({graph, ev});
      }
      if (++trial_n_ >= static_cast<size_t>(2 * o_.rounds * o_.block)) state_ = State::kDeciding;
      return;
    }
    if (state_ == State::kDeciding) decide();
  }

  /// Caller holds mu_. Decides the trial when its last event completed; otherwise waits for a later region.
  void decide() {
    if (marks_.empty() || cudaEventQuery(marks_.back().second) == cudaErrorNotReady) return;
    std::vector<TrialMark> m;
    for (const auto& [graph, ev] : marks_) {
      float ms = 0;
      if (cudaEventElapsedTime(&ms, marks_.front().second, ev) != cudaSuccess) ms = -1;
      m.push_back({graph, ms});
    }
    for (auto& [graph, ev] : marks_) cudaEventDestroy(ev);
    marks_.clear();
    std::vector<double> g, e;
    trial_periods(m, &g, &e);
    graph_ms_ = median(g);
    eager_ms_ = median(e);
    const bool bad = std::any_of(m.begin(), m.end(), [](const TrialMark& t) { return t.ms < 0; });
    if (!bad && graph_wins(g, e, o_.margin)) {
      state_ = State::kServe;
      decided_graph_ = true;
      g_totals.kept.fetch_add(1);
      CUDAL1_LOG(kInfo, "a chain of " << chain_.nodes.size() << " ops runs as a CUDA graph: the app's period "
                                      << graph_ms_ << " ms with it, " << eager_ms_ << " ms without");
    } else {
      g_totals.rejected.fetch_add(1);
      release_graph();
      state_ = State::kOff;
      why_off_ = "the app was not faster with it";
      give_up();
    }
  }

  /// Caller holds mu_. Whether the graph can compute this region; `invalid` when a held external changed.
  bool serves(const std::vector<at::Tensor>& ext, const std::vector<std::vector<at::Tensor>>& outs, bool* invalid) {
    if (!stream_ || c10::cuda::getCurrentCUDAStream(device_) != *stream_) return false;
    if (ext.size() != statics_.size()) return false;
    for (size_t i = 0; i < ext.size(); ++i) {
      const at::Tensor& t = ext[i];
      const at::Tensor& s = statics_[i];
      if (!t.defined() || t.sizes() != s.sizes() || t.strides() != s.strides() || t.scalar_type() != s.scalar_type())
        return false;
      // A held tensor is read in place: the same storage at the same address. Its values may change (the graph
      // reads them at replay), except where the kernel keeps values computed from them (a folded weight).
      if (by_ref_[i] && (t.storage().unsafeGetStorageImpl() != s.storage().unsafeGetStorageImpl() ||
                         t.data_ptr() != s.data_ptr() ||
                         (inner_->derives_from(i) && detail::version_of(t) != held_versions_[i]))) {
        *invalid = true;
        return false;
      }
    }
    if (outs.size() != live_.size()) return false;
    for (size_t k = 0; k < outs.size(); ++k) {
      if (outs[k].size() != live_[k].size()) return false;
      for (size_t i = 0; i < outs[k].size(); ++i)
        if (outs[k][i].defined() && !live_[k][i]) return false;
    }
    return true;
  }

  /// Caller holds mu_. Copies the activations in, replays, copies the outputs the app holds out.
  void replay(const std::vector<at::Tensor>& ext, const std::vector<std::vector<at::Tensor>>& outs) {
    for (size_t i = 0; i < ext.size(); ++i)
      if (!by_ref_[i]) statics_[i].copy_(ext[i]);
    graph_->replay();
    // The idle release's event is recorded after the copies out, which read the graph's static outputs: an idle
    // sweep that sees it complete may free them. Recorded on every way out, a throwing copy included.
    struct RecordDone {
      cudaEvent_t& done;
      c10::DeviceIndex device;
      ~RecordDone() {
        if (!done && cudaEventCreateWithFlags(&done, cudaEventDisableTiming) != cudaSuccess) done = nullptr;
        if (done) cudaEventRecord(done, c10::cuda::getCurrentCUDAStream(device).stream());
      }
    } record{done_, device_};
    for (size_t k = 0; k < outs.size(); ++k)
      for (size_t i = 0; i < outs[k].size(); ++i) {
        const at::Tensor& o = outs[k][i];
        if (!o.defined()) continue;
        if (earlier_same(outs, k, i).first < 0) o.copy_(static_outs_[k][i]);  // an in-place output: copied once
      }
  }

  /// Caller holds mu_. Captures the kernel on this region (Note [Region graphs]), replays it into the region's
  /// outputs and checks them against the kernel run eagerly. Unavailable: the kernel declined this region (try
  /// again later); another error: this chain is not graphed.
  Status capture_and_check(const std::vector<at::Tensor>& ext, const std::vector<std::vector<at::Tensor>>& outs) {
    if (++captures_ > o_.max_captures) return off("captured " + std::to_string(o_.max_captures) + " times");
    c10::DeviceIndex device = -1;
    for (const at::Tensor& t : ext)
      if (t.defined() && t.is_cuda()) device = t.device().index();
    if (device < 0) return off("no CUDA external");
    device_ = device;
    // Externals: the same storage as in the previous region -> read in place and held; else a static copy.
    statics_.clear();
    by_ref_.clear();
    held_versions_.clear();
    for (size_t i = 0; i < ext.size(); ++i) {
      const at::Tensor& t = ext[i];
      if (!t.defined()) return off("an undefined external");
      const bool held = i < prev_storage_.size() && prev_ptr_[i] == t.data_ptr() &&
                        prev_storage_[i].lock().get() == t.storage().unsafeGetStorageImpl();
      by_ref_.push_back(held);
      held_versions_.push_back(detail::version_of(t));
      if (held) {
        statics_.push_back(t);
        continue;
      }
      if (!t.is_non_overlapping_and_dense()) return off("an overlapping or strided activation");
      statics_.push_back(normal_like(t));
    }
    // Outputs the app holds: a static tensor each (in-place nodes share their producer's); none may alias an external.
    int64_t static_bytes = 0;
    for (size_t i = 0; i < ext.size(); ++i)
      if (!by_ref_[i]) static_bytes += static_cast<int64_t>(statics_[i].nbytes());
    static_outs_.assign(outs.size(), {});
    live_.assign(outs.size(), {});
    for (size_t k = 0; k < outs.size(); ++k)
      for (size_t i = 0; i < outs[k].size(); ++i) {
        const at::Tensor& o = outs[k][i];
        live_[k].push_back(o.defined());
        if (!o.defined()) {
          static_outs_[k].emplace_back();
          continue;
        }
        for (const at::Tensor& t : ext)
          if (t.storage().unsafeGetStorageImpl() == o.storage().unsafeGetStorageImpl())
            return off("an output aliases an external (an in-place op on an input)");
        const auto [j, m] = earlier_same(outs, k, i);
        at::Tensor same = j >= 0 ? static_outs_[j][m] : at::Tensor();
        if (!same.defined()) {
          same = normal_like(o);
          static_bytes += static_cast<int64_t>(same.nbytes());
        }
        static_outs_[k].push_back(same);
      }
    // Capture on cudal1's stream, ordered after the region's stream and before it again.
    const c10::cuda::CUDAStream region = c10::cuda::getCurrentCUDAStream(device);
    CUDAL1_ASSIGN_OR_RETURN(const c10::cuda::CUDAStream side, capture_stream(device));
    const int64_t before = reserved_bytes(device);
    auto graph = std::make_unique<detail::Capture>();
    Status s;
    order(region, side);
    {
      c10::cuda::CUDAStreamGuard on_side(side);
      try {
        graph->begin(device);
      } catch (const detail::CaptureBusy& e) {  // Note [Captures and context synchronisation]: capture later
        order(side, region);
        --captures_;
        return Status(Code::kUnavailable, e.what());
      } catch (const std::exception& e) {
        order(side, region);
        return off(std::string("capture could not begin: ") + e.what());
      }
      try {
        s = inner_->run(statics_, static_outs_);
      } catch (const std::exception& e) {
        s = Status(Code::kInternal, e.what());
      }
      try {
        graph->end();
      } catch (const std::exception& e) {
        if (s.ok()) s = Status(Code::kInternal, std::string("capture failed: ") + e.what());
      }
    }
    order(side, region);
    if (!s.ok()) {
      graph.reset();
      statics_.clear();
      static_outs_.clear();
      if (s.code() == Code::kUnavailable) return s;  // declined this region: captured again at a later one
      return off("capture failed (" + s.to_string() + ")");
    }
    const int64_t pool = std::max<int64_t>(0, reserved_bytes(device) - before);
    bytes_ = static_bytes + pool;
    if (g_totals.bytes.load() + bytes_ > o_.memory_budget) {
      graph.reset();
      bytes_ = 0;
      return off("over the graph memory budget (" + std::to_string(o_.memory_budget >> 20) + " MiB)");
    }
    g_totals.bytes.fetch_add(bytes_);
    graph_ = std::move(graph);
    stream_ = region;
    // The check: the graph's first replay against the kernel run eagerly on the same inputs.
    replay(ext, outs);
    std::vector<std::vector<at::Tensor>> ref(outs.size());
    for (size_t k = 0; k < outs.size(); ++k)
      for (size_t i = 0; i < outs[k].size(); ++i) {
        const at::Tensor& o = outs[k][i];
        const auto [j, m] = earlier_same(outs, k, i);
        at::Tensor same = j >= 0 ? ref[j][m] : at::Tensor();
        if (o.defined() && !same.defined()) same = at::empty_strided(o.sizes(), o.strides(), o.options());
        ref[k].push_back(same);
      }
    const Status r = inner_->run(ext, ref);
    bool equal = r.ok();
    for (size_t k = 0; equal && k < outs.size(); ++k)
      for (size_t i = 0; equal && i < outs[k].size(); ++i)
        if (outs[k][i].defined()) equal = close_enough(outs[k][i], ref[k][i]);
    if (!equal) {
      g_totals.check_failures.fetch_add(1);
      CUDAL1_LOG(kWarn, "a chain's CUDA graph differed from its kernel run eagerly"
                            << (r.ok() ? "" : " (" + r.to_string() + ")") << "; it runs eagerly from now on");
      // The region's outputs: the eager kernel's, which the tuner verified.
      for (size_t k = 0; r.ok() && k < outs.size(); ++k)
        for (size_t i = 0; i < outs[k].size(); ++i)
          if (outs[k][i].defined()) outs[k][i].copy_(ref[k][i]);
      drop_locked("its first replay differed from the kernel run eagerly");
      return r.ok() ? Status() : Status(Code::kInternal, "graph check: " + r.to_string());
    }
    g_totals.captures.fetch_add(1);
    if (o_.force || decided_graph_) {
      state_ = State::kServe;
    } else {
      state_ = State::kTrial;
      trial_n_ = 0;
    }
    return Status();
  }

  /// Caller holds mu_. The graph is not used for this chain again; `why` goes to describe().
  Status off(std::string why) {
    g_totals.capture_failures.fetch_add(1);
    release_graph();
    state_ = State::kOff;
    why_off_ = std::move(why);
    give_up();
    if (first_time("region-graph-off:" + std::to_string(chain_.hash)))
      CUDAL1_LOG(kInfo, "a chain of " << chain_.nodes.size() << " ops is not run as a CUDA graph: " << why_off_);
    return Status(Code::kUnsupported, why_off_);
  }

  /// Takes mu_ (called after a failure unwound the caller's lock).
  void drop_for_good(std::string why) noexcept {
    try {
      std::lock_guard<std::mutex> lock(mu_);
      drop_locked(std::move(why));
    } catch (...) {
    }
  }
  /// Caller holds mu_.
  void drop_locked(std::string why) noexcept {
    try {
      release_graph();
      state_ = State::kOff;
      why_off_ = std::move(why);
      give_up();
    } catch (...) {
    }
  }

  /// Caller holds mu_. The graph is off for good: tells the owner, once.
  void give_up() {
    if (given_up_ || !o_.on_given_up) return;
    given_up_ = true;
    o_.on_given_up();
  }

  /// Caller holds mu_. A held external changed: the graph goes; a new one is captured after a new warm-up.
  void invalidate(const char* why) {
    g_totals.invalidated.fetch_add(1);
    release_graph();
    if (captures_ >= o_.max_captures) {
      state_ = State::kOff;
      why_off_ = std::string(why) + ", " + std::to_string(captures_) + " captures made";
      give_up();
      return;
    }
    state_ = State::kWarm;
    warm_done_ = 0;
  }

  /// Caller holds mu_. Frees the graph and its tensors once the GPU is done with them.
  /// `wait`: synchronise the graph's stream first (a region flush on the app's thread); else the caller saw its
  /// last replay complete.
  void release_graph(bool wait = true) {
    for (auto& [graph, ev] : marks_) cudaEventDestroy(ev);
    marks_.clear();
    if (graph_) {
      if (wait && stream_) cudaStreamSynchronize(stream_->stream());
      graph_.reset();
      g_totals.bytes.fetch_sub(bytes_);
      bytes_ = 0;
    }
    if (done_) cudaEventDestroy(done_);
    done_ = nullptr;
    statics_.clear();
    static_outs_.clear();
  }

  std::string state_text() const {
    char buf[160];
    const double mb = static_cast<double>(bytes_) / (1 << 20);
    switch (state_) {
      case State::kWarm:
      case State::kWantCapture: return "warming up before its capture";
      case State::kTrial:
      case State::kDeciding: std::snprintf(buf, sizeof buf, "on trial (%.1f MiB)", mb); return buf;
      case State::kServe:
        if (o_.force && !decided_graph_) {
          std::snprintf(buf, sizeof buf, "serving (forced, %.1f MiB)", mb);
          return buf;
        }
        std::snprintf(buf, sizeof buf, "serving: the app's period %.3f ms with it, %.3f ms without (%.1f MiB)",
                      graph_ms_, eager_ms_, mb);
        return buf;
      case State::kOff:
        if (graph_ms_ > 0 || eager_ms_ > 0) {
          std::snprintf(buf, sizeof buf, "not used: the app's period %.3f ms with it, %.3f ms without", graph_ms_,
                        eager_ms_);
          return buf;
        }
        return "not used: " + why_off_;
    }
    return "";
  }

  const ChainRecord& chain_;
  std::unique_ptr<ChainKernel> inner_;
  const GraphOptions o_;
  mutable std::mutex mu_;
  State state_ = State::kWarm;
  int warm_done_ = 0;
  int captures_ = 0;
  int missed_chances_ = 0;  // regions in kWantCapture flushed where no capture may begin
  bool decided_graph_ = false;
  bool given_up_ = false;
  std::string why_off_;
  std::vector<c10::weak_intrusive_ptr<c10::StorageImpl>> prev_storage_;
  std::vector<const void*> prev_ptr_;
  // The captured graph and what it reads and writes.
  std::unique_ptr<detail::Capture> graph_;
  c10::DeviceIndex device_ = 0;
  std::optional<c10::cuda::CUDAStream> stream_;
  std::vector<at::Tensor> statics_;
  std::vector<char> by_ref_;
  std::vector<uint32_t> held_versions_;
  std::vector<std::vector<at::Tensor>> static_outs_;
  std::vector<std::vector<char>> live_;
  int64_t bytes_ = 0;
  cudaEvent_t done_ = nullptr;  // recorded after each replay: an idle graph is freed once it completed
  std::chrono::steady_clock::time_point last_region_ = std::chrono::steady_clock::now();
  size_t served_ = 0;  // regions served since the last trial
  // The trial.
  size_t trial_n_ = 0;
  std::vector<std::pair<bool, cudaEvent_t>> marks_;
  double graph_ms_ = 0, eager_ms_ = 0;
};

}  // namespace

std::unique_ptr<ChainKernel> graph_chain_kernel(const ChainRecord& chain, std::unique_ptr<ChainKernel> inner,
                                                const GraphOptions& opts) {
  if (!inner) return inner;
  return std::make_unique<GraphKernel>(chain, std::move(inner), opts);
}

void release_idle_graphs() noexcept {
  try {
    // Under the registry's lock: a kernel being destroyed waits (release_if_idle only try-locks the kernel's own).
    const auto now = std::chrono::steady_clock::now();
    std::lock_guard<std::mutex> lock(g_kernels_mu);
    for (GraphKernel* k : *g_kernels) k->release_if_idle(now);
  } catch (...) {
  }
}

#else

void release_idle_graphs() noexcept {}

std::unique_ptr<ChainKernel> graph_chain_kernel(const ChainRecord&, std::unique_ptr<ChainKernel> inner,
                                                const GraphOptions&) {
  return inner;
}

#endif

}  // namespace cudal1::dispatcher
