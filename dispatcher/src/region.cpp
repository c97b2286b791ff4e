/// @brief Deferred regions: each thread's open region, deferring and flushing (Note [Deferred regions]).
#include "region.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <c10/core/InferenceMode.h>
#include <c10/core/StreamGuard.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <c10/core/impl/VirtualGuardImpl.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <mutex>
#include <stdexcept>
#include <unordered_map>

#include "cudal1/core/log.h"
#include "cudal1/dispatcher/cuda_glue.h"
#include "hook_state.h"

namespace cudal1::dispatcher {
namespace detail {

std::atomic<bool> g_regions_live{false};

bool region_deferral_allowed(const c10::Device& d);  // regions_api.cpp
bool region_poison();                                // regions_api.cpp

namespace {

constexpr c10::DispatchKey kRegionKey = c10::DispatchKey::DeferredInit;

struct Counters {
  std::atomic<uint64_t> opened{0}, completed{0}, diverged{0}, by_op{0}, by_cuda{0}, by_other{0}, written{0},
      skipped{0}, kernel_failures{0}, declined{0}, lost{0}, site_declined{0}, advanced{0}, recycled{0};
};
Counters g_counters;
std::atomic<int> g_open{0};  // open regions, all threads
thread_local int t_work = 0;  // > 0 while this thread runs region work

struct WorkScope {
  WorkScope() { ++t_work; }
  ~WorkScope() { --t_work; }
};

thread_local bool t_may_capture = false;  // flush_may_capture()
struct CaptureScope {
  explicit CaptureScope(bool on) : prev(t_may_capture) { t_may_capture = on; }
  ~CaptureScope() { t_may_capture = prev; }
  bool prev;
};

thread_local int t_forward_capture = 0;  // in_forward_capture()

/// One thread's region. Only the owner thread opens it and adds nodes; any thread may flush it (under mu).
struct Region {
  std::mutex mu;
  ChainRecord* chain = nullptr;  // null: no open region
  size_t next = 0;               // nodes deferred so far
  c10::Stream stream{c10::Stream::DEFAULT, c10::Device(c10::kCPU)};
  std::vector<at::Tensor> externals;  // strong: the app's inputs stay alive until the region ran
  std::vector<uint32_t> ext_versions;
  // Per deferred node, its pending outputs. Held strongly, so that an early flush can replay into every one of
  // them without allocating; one the app dropped (only the region holds it and its storage) is not written by
  // the chain kernel.
  std::vector<std::vector<at::Tensor>> outputs;
  uint64_t site = 0;  // the first call's site (Note [Region sites]); 0: none
  std::unique_ptr<ChainKernel::Progress> progress;  // Note [Incremental regions]; null: run whole at the end
  // The kernel whose begin() made `progress`. A chain unfused and fused again while its region is open has
  // another kernel by the end: that kernel never sees this progress (its type is the first kernel's).
  ChainKernel* progress_kernel = nullptr;
  // Note [Recycled outputs]: small pending outputs the app dropped, per node and output of `spare_chain`, handed
  // out again by the next region of that chain on the same stream.
  const ChainRecord* spare_chain = nullptr;
  c10::Stream spare_stream{c10::Stream::DEFAULT, c10::Device(c10::kCPU)};
  std::vector<std::vector<at::Tensor>> spare;
  int64_t spare_bytes = 0;
};

/// Note [Recycled outputs]
/// Every deferred call allocates its outputs, and in a launch-bound chain most of them are intermediates the app
/// drops at once (a layer norm's mean and rstd, each layer's activation): the allocator's malloc and free cost
/// host time on every call of every region. A pending output that only the region holds (released while the
/// region was open, or dropped when it ran) is therefore kept, per thread, in a slot for its (node, output) of that
/// chain, and the next region of the same chain on the same stream hands it out again instead of allocating.
/// Reuse is as safe as the allocator's own: the tensor never left the region (the app dropped it without using
/// it outside a deferred call: any other use flushes the region first, which ends its place in the region), and
/// its next user is the same stream, so stream order protects the work still writing it. Only tensors up to
/// kSpareMaxBytes are kept, at most kSpareTotalBytes a thread (a long region's activations would otherwise all be
/// held at once), and only with the inference-mode flag the call is made under. A region of another chain or
/// stream empties the slots.
constexpr int64_t kSpareMaxBytes = int64_t{4} << 20;
constexpr int64_t kSpareTotalBytes = int64_t{64} << 20;

/// Keeps `t`, an output of node `k` of the region's chain the app dropped, for reuse. Caller holds r.mu.
void keep_spare(Region& r, const ChainRecord& c, size_t k, size_t i, at::Tensor t) {
  if (c.nodes[k].inplace || !t.defined() || t_forward_capture) return;  // Note [Forward graphs]: no pool memory kept
  const int64_t bytes = static_cast<int64_t>(t.nbytes());
  if (bytes > kSpareMaxBytes) return;
  if (r.spare_chain != &c || r.spare_stream != r.stream) {
    r.spare.clear();
    r.spare_bytes = 0;
    r.spare_chain = &c;
    r.spare_stream = r.stream;
  }
  if (r.spare_bytes + bytes > kSpareTotalBytes) return;
  if (r.spare.size() <= k) r.spare.resize(c.nodes.size());
  if (r.spare[k].size() <= i) r.spare[k].resize(c.nodes[k].outputs.size());
  if (i >= r.spare[k].size() || r.spare[k][i].defined()) return;
  r.spare[k][i] = std::move(t);
  r.spare_bytes += bytes;
}

/// Takes the kept output (k, i) of `c` for a region on `stream`, or an undefined tensor. Caller holds r.mu.
at::Tensor take_spare(Region& r, const ChainRecord& c, size_t k, size_t i, const c10::Stream& stream,
                      const TensorSpec& spec) {
  if (t_forward_capture) return at::Tensor();  // Note [Forward graphs]: a capture allocates from its own pool
  if (r.spare_chain != &c || r.spare_stream != stream || k >= r.spare.size() || i >= r.spare[k].size())
    return at::Tensor();
  at::Tensor t = std::move(r.spare[k][i]);
  r.spare[k][i] = at::Tensor();
  if (!t.defined()) return t;
  r.spare_bytes -= static_cast<int64_t>(t.nbytes());
  if (t.is_inference() != c10::InferenceMode::is_enabled() || t.scalar_type() != spec.dtype ||
      t.sizes() != c10::IntArrayRef(spec.sizes) || t.strides() != c10::IntArrayRef(spec.strides))
    return at::Tensor();
  g_counters.recycled.fetch_add(1, std::memory_order_relaxed);
  return t;
}

/// Note [Region sites]: per (chain, site), how the regions opened there ended.
class SiteTable {
 public:
  static constexpr size_t kMaxSites = 4096;
  static constexpr int kLimit = 4;       // scores saturate at +-kLimit
  static constexpr uint32_t kProbe = 16;  // one call in kProbe at a declining site opens a region anyway

  /// Whether a region may open for `chain` at `site` (always for site 0 or an unknown site).
  bool allows(const ChainRecord* chain, uint64_t site) {
    if (site == 0) return true;
    std::lock_guard<std::mutex> lock(mu_);
    auto it = scores_.find(key(chain, site));
    if (it == scores_.end() || it->second.score >= 0) return true;
    return ++it->second.declined % kProbe == 0;
  }
  /// Records how a region opened at `site` ended.
  void learn(const ChainRecord* chain, uint64_t site, bool completed) {
    if (site == 0) return;
    std::lock_guard<std::mutex> lock(mu_);
    const uint64_t k = key(chain, site);
    auto it = scores_.find(k);
    if (it == scores_.end()) {
      if (scores_.size() >= kMaxSites) scores_.clear();  // sites of fresh tensors filled it: learn anew
      it = scores_.emplace(k, Entry{}).first;
    }
    it->second.score = std::clamp(it->second.score + (completed ? 1 : -1), -kLimit, kLimit);
  }

 private:
  struct Entry {
    int score = 0;
    uint32_t declined = 0;
  };
  static uint64_t key(const ChainRecord* chain, uint64_t site) {
    return site ^ (reinterpret_cast<uintptr_t>(chain) * 0x9e3779b97f4a7c15ULL);
  }
  std::mutex mu_;
  std::unordered_map<uint64_t, Entry> scores_;
};
SiteTable g_sites;

/// Note [Region sites]: the storages of the last kRecentOutputs pending outputs this thread's regions handed out,
/// newest overwriting oldest. An argument stored there is an activation a region just made, never a site.
constexpr size_t kRecentOutputs = 16;
struct RecentOutputs {
  std::array<const c10::StorageImpl*, kRecentOutputs> storage{};
  size_t next = 0;
  void note(const at::Tensor& t) {
    if (!t.defined() || !t.unsafeGetTensorImpl()->has_storage()) return;
    storage[next++ % kRecentOutputs] = t.unsafeGetTensorImpl()->unsafe_storage().unsafeGetStorageImpl();
  }
  bool holds(const c10::TensorImpl* impl) const {
    if (!impl->has_storage()) return false;
    const c10::StorageImpl* s = impl->unsafe_storage().unsafeGetStorageImpl();
    return std::find(storage.begin(), storage.end(), s) != storage.end();
  }
};
thread_local RecentOutputs t_recent;  // trivially destructible: safe in late destructors

/// The site of a chain's first call (Note [Region sites]): its tensor arguments after the first that no region
/// of this thread just made, by storage and offset (a tensor without storage by its TensorImpl); when there are
/// later arguments and every one of them is such an activation, the first argument, unless it is one too. 0: none
/// (a call without later tensor arguments has no site: its first argument is as a rule a fresh activation).
uint64_t site_of(const ChainBuilder::Call& call) {
  auto address = [](const c10::TensorImpl* impl) -> uintptr_t {
    return impl->has_storage() ? reinterpret_cast<uintptr_t>(impl->unsafe_storage().unsafeGetStorageImpl()) +
                                     static_cast<uintptr_t>(impl->storage_offset()) * 0x9e3779b97f4a7c15ULL
                               : reinterpret_cast<uintptr_t>(impl);
  };
  bool made = false;  // a later argument was left out as a region's activation
  auto hash_from = [&](size_t first, size_t last) {
    uint64_t h = 0;
    bool any = false;
    for (size_t i = first; i < last && i < call.args.size(); ++i) {
      const at::Tensor* t = call.args[i];
      uintptr_t p = 0;
      if (t && t->defined()) {
        if (t_recent.holds(t->unsafeGetTensorImpl()))
          made = true;
        else
          p = address(t->unsafeGetTensorImpl());
      }
      any = any || p != 0;
      h = (h ^ p) * 0x100000001b3ULL + i;
    }
    return any ? (h | 1) : 0;
  };
  const uint64_t later = hash_from(1, call.args.size());
  return later != 0 || !made ? later : hash_from(0, 1);
}

std::mutex g_regions_mu;        // guards g_regions; held across flush_all so no region dies under it
std::vector<Region*> g_regions;

void set_key_included(bool on) { c10::impl::tls_set_dispatch_key_included(kRegionKey, on); }

/// Runs the region's chain (or its prefix) and closes it. Caller holds r.mu.
void flush_locked(Region& r, FlushReason why) noexcept {
  ChainRecord* c = r.chain;
  if (!c) return;
  WorkScope work;
  CaptureScope capture(why == FlushReason::kDivergence || why == FlushReason::kOp);
  const bool whole = r.next == c->nodes.size();
  uint64_t written = 0, skipped = 0;
  Status s;
  std::vector<std::vector<char>> dropped_at_flush;
  try {
    // Dropped: only the region holds the tensor (an in-place node's output is an earlier node's tensor, held once
    // per node) and its storage. Decided for every output before any copy below adds a reference.
    std::vector<std::vector<char>>& dropped = dropped_at_flush;
    dropped.resize(r.next);
    for (size_t k = 0; k < r.next; ++k)
      for (const at::Tensor& t : r.outputs[k]) {
        if (!t.defined()) {  // released while the region was open (release_dropped)
          dropped[k].push_back(1);
          continue;
        }
        size_t held = 0;
        for (size_t j = 0; j < r.next; ++j)
          for (const at::Tensor& u : r.outputs[j]) held += u.unsafeGetTensorImpl() == t.unsafeGetTensorImpl();
        dropped[k].push_back(static_cast<size_t>(t.use_count()) == held && t.storage().use_count() == 1);
      }
    std::vector<std::vector<at::Tensor>> live(r.next), all(r.next);
    for (size_t k = 0; k < r.next; ++k)
      for (size_t i = 0; i < r.outputs[k].size(); ++i) {
        const at::Tensor& t = r.outputs[k][i];
        (dropped[k][i] ? skipped : written) += 1;
        live[k].push_back(dropped[k][i] ? at::Tensor() : t);
        all[k].push_back(t);
      }
    c10::impl::ExcludeDispatchKeyGuard no_key(kRegionKey);
    BypassScope bypass;
    c10::StreamGuard on_stream(r.stream);
    ChainKernel* kernel = c->kernel.load(std::memory_order_acquire);
    if (whole && kernel) {
      const bool own_progress = r.progress && r.progress_kernel == kernel;
      s = own_progress ? kernel->finish(*r.progress, r.externals, live) : kernel->run(r.externals, live);
      if (!s.ok()) {
        if (s.code() == Code::kUnavailable) {  // the kernel declined this region (regions.h)
          g_counters.declined.fetch_add(1);
        } else {
          g_counters.kernel_failures.fetch_add(1);
          if (first_time("chain-kernel:" + std::to_string(c->hash)))
            CUDAL1_LOG(kWarn, "chain kernel " << kernel->describe() << " failed (" << s.to_string()
                                              << "); this region runs through ATen");
        }
        s = replay_chain(*c, r.next, r.externals, all);
      }
    } else {
      s = replay_chain(*c, r.next, r.externals, all);  // into every pending output: out= ops, no allocation
    }
  } catch (const std::exception& e) {
    s = Status(Code::kInternal, e.what());
  }
  if (!s.ok()) {
    g_counters.lost.fetch_add(1);
    CUDAL1_LOG(kError, "a deferred region could not be computed (" << s.to_string() << ")");
  }
  g_counters.written.fetch_add(written);
  g_counters.skipped.fetch_add(skipped);
  if (why != FlushReason::kOther || whole) g_sites.learn(c, r.site, whole);
  if (whole) {
    g_counters.completed.fetch_add(1);
    c->completed.fetch_add(1);
  } else {
    c->flushed_early.fetch_add(1);
    switch (why) {
      case FlushReason::kDivergence: g_counters.diverged.fetch_add(1); break;
      case FlushReason::kOp: g_counters.by_op.fetch_add(1); break;
      case FlushReason::kCuda: g_counters.by_cuda.fetch_add(1); break;
      case FlushReason::kOther: g_counters.by_other.fetch_add(1); break;
    }
  }
  // A chain whose regions mostly end early pays a replay each time: once 32 regions ran, more early flushes
  // than completions among the last 64 sends it back to one-by-one calls.
  // The chain's first signature is released too (unfuse_chain), so that another chain starting with it may fuse.
  const uint64_t bits = (c->recent_early.load() << 1) | (whole ? 0u : 1u);
  c->recent_early.store(bits);
  const uint64_t ran = c->completed.load() + c->flushed_early.load();
  const int window = ran < 64 ? static_cast<int>(ran) : 64;
  const int early = __builtin_popcountll(window == 64 ? bits : bits & ((uint64_t{1} << window) - 1));
  if (ran >= 32 && 2 * early > window && unfuse_chain(*c, ChainState::kDiverged))
    CUDAL1_LOG(kInfo, "a chain of " << c->nodes.size() << " ops diverges too often (" << early << " of the last "
                                    << window << " regions ended early): its calls run one by one again");
  try {  // Note [Recycled outputs]: what the app dropped is kept for the chain's next region
    for (size_t k = 0; k < r.next; ++k)
      for (size_t i = 0; i < r.outputs[k].size(); ++i)
        if (i < dropped_at_flush[k].size() && dropped_at_flush[k][i]) keep_spare(r, *c, k, i, r.outputs[k][i]);
  } catch (...) {
  }
  r.chain = nullptr;
  r.next = 0;
  r.site = 0;
  r.progress.reset();
  r.progress_kernel = nullptr;
  r.externals.clear();
  r.ext_versions.clear();
  for (auto& o : r.outputs) o.clear();
  g_open.fetch_sub(1);
}

thread_local bool t_region_gone = false;  // Note [Thread-local lifetime] (hook_chains.cpp)

struct ThreadRegion {
  Region r;
  ThreadRegion() {
    std::lock_guard<std::mutex> lock(g_regions_mu);
    g_regions.push_back(&r);
  }
  ~ThreadRegion() {
    std::lock_guard<std::mutex> lock(g_regions_mu);
    {
      std::lock_guard<std::mutex> rl(r.mu);
      flush_locked(r, FlushReason::kOther);
    }
    g_regions.erase(std::remove(g_regions.begin(), g_regions.end(), &r), g_regions.end());
    t_region_gone = true;
  }
};

/// This thread's region; null once its thread_local was destroyed (a call from a later destructor opens none).
Region* this_thread_region() {
  if (t_region_gone) return nullptr;
  thread_local ThreadRegion t;
  return &t.r;
}

bool same_impl(const at::Tensor& a, const at::Tensor& b) { return a.unsafeGetTensorImpl() == b.unsafeGetTensorImpl(); }
bool same_storage(const at::Tensor& a, const at::Tensor& b) {
  return a.defined() && b.defined() && a.has_storage() && b.has_storage() &&
         a.storage().unsafeGetStorageImpl() == b.storage().unsafeGetStorageImpl();
}

/// Note [Incremental regions]: lets the region's kernel start what the deferred calls allow. Caller holds r.mu.
void advance_locked(Region& r) noexcept {
  ChainKernel* kernel = r.chain ? r.chain->kernel.load(std::memory_order_acquire) : nullptr;
  if (!kernel) return;
  try {
    if (r.next == 1) {
      r.progress = kernel->begin();
      r.progress_kernel = kernel;
    }
    if (!r.progress) return;
    if (r.progress_kernel != kernel) {  // fused again since the region opened: the end computes it whole
      r.progress.reset();
      return;
    }
    WorkScope work;
    c10::impl::ExcludeDispatchKeyGuard no_key(kRegionKey);
    BypassScope bypass;
    c10::StreamGuard on_stream(r.stream);
    const Status s = kernel->advance(*r.progress, r.next, r.externals, r.outputs);
    if (s.ok()) g_counters.advanced.fetch_add(1);
    if (!s.ok()) {
      if (first_time("region-advance:" + std::to_string(r.chain->hash)))
        CUDAL1_LOG(kWarn, "chain kernel " << kernel->describe() << " could not advance (" << s.to_string()
                                          << "); its regions run whole at the end");
      r.progress.reset();
    }
  } catch (...) {
    r.progress.reset();
  }
}

/// Releases the pending outputs of node `p` that only the region still holds (the app dropped them: an
/// intermediate the interpreter freed after its last use), so that a long region (Note [Program chains]) holds no
/// more memory than the app's own calls would. A released output is one the chain kernel does not write and an
/// early flush recomputes, as a dropped one at the flush would be. An output can only be held again by later
/// in-place nodes, so the count scans from `p` on. Caller holds r.mu.
void release_dropped(Region& r, size_t p) {
  if (p >= r.next) return;
  for (size_t i = 0; i < r.outputs[p].size(); ++i) {
    const at::Tensor& t = r.outputs[p][i];
    if (!t.defined()) continue;
    c10::TensorImpl* impl = t.unsafeGetTensorImpl();
    size_t held = 0;
    for (size_t j = p; j < r.next; ++j)
      for (const at::Tensor& u : r.outputs[j]) held += u.defined() && u.unsafeGetTensorImpl() == impl;
    if (static_cast<size_t>(t.use_count()) != held || t.storage().use_count() != 1) continue;
    at::Tensor kept = t;
    for (size_t j = p; j < r.next; ++j)
      for (at::Tensor& u : r.outputs[j])
        if (u.defined() && u.unsafeGetTensorImpl() == impl) u = at::Tensor();
    if (r.chain) keep_spare(r, *r.chain, p, i, std::move(kept));  // Note [Recycled outputs]
  }
}

/// Whether `call` is node `k` of the region's chain, wired as the chain records; new external slots it binds
/// are appended to `bind`. Caller holds r.mu (or owns an empty region).
bool matches(const Region& r, ChainRecord& c, size_t k, const ChainBuilder::Call& call,
             std::vector<const at::Tensor*>* bind) {
  if (k >= c.nodes.size()) return false;
  const ChainNode& node = c.nodes[k];
  if (call.rec != node.rec || call.inplace != node.inplace || call.args.size() != node.inputs.size() ||
      node.outputs.empty())
    return false;
  const bool grad = c10::GradMode::is_enabled();
  for (size_t i = 0; i < call.args.size(); ++i) {
    const at::Tensor* t = call.args[i];
    const bool def = t && t->defined();
    if (def && grad && t->requires_grad()) return false;  // autograd records this call: not deferred
    const ChainInput in = node.inputs[i];
    if (in.producer >= 0) {
      if (!def || static_cast<size_t>(in.producer) >= k) return false;
      const auto& outs = r.outputs[static_cast<size_t>(in.producer)];
      if (static_cast<size_t>(in.index) >= outs.size()) return false;
      const at::Tensor& o = outs[static_cast<size_t>(in.index)];
      if (in.view) {  // Note [Matmul views]: a reshape of the pending output (the signature fixed its geometry)
        if (!o.defined() || !t->has_storage() || !same_storage(o, *t) || t->storage_offset() != o.storage_offset() ||
            !t->is_contiguous() || t->numel() != o.numel())
          return false;
      } else if (!same_impl(o, *t)) {
        return false;
      }
      continue;
    }
    if (in.index < 0) {
      if (def) return false;
      continue;
    }
    if (!def) return false;
    for (size_t p = 0; p < k; ++p)  // a pending tensor, or a view of one, where the chain reads an external
      for (const auto& w : r.outputs[p])
        if (same_impl(w, *t) || same_storage(w, *t)) return false;
    const size_t slot = static_cast<size_t>(in.index);
    if (slot < r.externals.size()) {
      if (r.externals[slot].unsafeGetTensorImpl() != t->unsafeGetTensorImpl() ||
          r.ext_versions[slot] != version_of(*t))
        return false;
    } else {
      size_t bound = r.externals.size();
      bool seen = false;
      for (size_t b = 0; b < bind->size(); ++b)
        if ((*bind)[b]->unsafeGetTensorImpl() == t->unsafeGetTensorImpl()) {
          seen = slot == bound + b;
          if (!seen) return false;
        }
      if (!seen) {
        if (slot != bound + bind->size()) return false;  // slots are numbered by first use
        bind->push_back(t);
      }
    }
  }
  return true;
}

/// Whether a region may open for this call: guarded device, no autograd recording, no graph capture.
bool may_open(const ChainBuilder::Call& call, c10::Device* device) {
  const at::Tensor* first = nullptr;
  for (const at::Tensor* t : call.args)
    if (t && t->defined()) {
      if (!first) first = t;
      if (t->requires_grad() && c10::GradMode::is_enabled()) return false;
    }
  if (!first) return false;
  *device = first->device();
  // The app's own captures are left alone; a forward graph's capture takes the regions (Note [Forward graphs]).
  if (device->is_cuda()) return stream_capturing(device->index()) == 0 || t_forward_capture > 0;
  return device->is_cpu();
}

/// Allocates the pending outputs of node `k` of `chain` on `device` (no dispatcher key, no hook), or takes them
/// from the region's kept ones (Note [Recycled outputs]); an in-place node's one output is its first argument
/// (Note [In-place nodes]). Takes r.mu briefly.
void allocate(Region& r, const ChainRecord& chain, size_t k, const ChainBuilder::Call& call, c10::Device device,
              std::vector<at::Tensor>* outs) {
  const ChainNode& node = chain.nodes[k];
  if (node.inplace) {
    if (call.args.empty() || !call.args[0] || !call.args[0]->defined())
      throw std::logic_error("an in-place node without its tensor");
    outs->assign(1, *call.args[0]);
    return;
  }
  outs->assign(node.outputs.size(), at::Tensor());
  {
    const c10::Stream stream = c10::impl::getDeviceGuardImpl(device.type())->getStream(device);
    std::lock_guard<std::mutex> lock(r.mu);
    for (size_t i = 0; i < node.outputs.size(); ++i) (*outs)[i] = take_spare(r, chain, k, i, stream, node.outputs[i]);
  }
  WorkScope work;
  c10::impl::ExcludeDispatchKeyGuard no_key(kRegionKey);
  BypassScope bypass;
  const bool poison = region_poison();
  for (size_t i = 0; i < node.outputs.size(); ++i) {
    const TensorSpec& s = node.outputs[i];
    at::Tensor& o = (*outs)[i];
    if (!o.defined()) o = at::empty_strided(s.sizes, s.strides, at::TensorOptions().dtype(s.dtype).device(device));
    if (poison) o.fill_(at::isFloatingType(s.dtype) ? std::nan("") : 1.0);
  }
}


}  // namespace

bool in_region_work() noexcept { return t_work > 0; }
bool flush_may_capture() noexcept { return t_may_capture; }
bool in_forward_capture() noexcept { return t_forward_capture > 0; }
ForwardCaptureScope::ForwardCaptureScope() noexcept { ++t_forward_capture; }
ForwardCaptureScope::~ForwardCaptureScope() { --t_forward_capture; }
uint32_t version_of(const at::Tensor& t) {
  c10::TensorImpl* impl = t.unsafeGetTensorImpl();
  return impl->is_inference() ? 0 : impl->version_counter().current_version();
}


bool defer_or_flush(HookState& st, SigRecord* rec, const ChainBuilder::Call& call,
                    std::vector<at::Tensor>* outs) noexcept {
  (void)st;
  if (t_work > 0) return false;
  Region* region = this_thread_region();
  if (!region) return false;
  Region& r = *region;
  try {
    std::vector<const at::Tensor*> bind;
    ChainRecord* chain = nullptr;
    size_t k = 0;
    {
      std::unique_lock<std::mutex> lock(r.mu);
      if (r.chain) {
        if (rec && r.next < r.chain->nodes.size() && r.chain->state.load() == ChainState::kFused &&
            c10::impl::getDeviceGuardImpl(r.stream.device_type())->getStream(r.stream.device()) == r.stream &&
            matches(r, *r.chain, r.next, call, &bind)) {
          chain = r.chain;
          k = r.next;
        } else {
          flush_locked(r, FlushReason::kDivergence);
          set_key_included(false);
        }
      }
    }
    c10::Device device(c10::kCPU);
    if (!chain) {  // open a region when this call starts a fused chain
      ChainRecord* head = rec ? rec->chain_head.load(std::memory_order_acquire) : nullptr;
      if (!head || head->state.load() != ChainState::kFused) return false;
      if (!may_open(call, &device) || !region_deferral_allowed(device)) return false;
      bind.clear();
      if (!matches(r, *head, 0, call, &bind)) return false;
      const uint64_t site = site_of(call);
      if (!g_sites.allows(head, site)) {
        g_counters.site_declined.fetch_add(1);
        return false;
      }
      allocate(r, *head, 0, call, device, outs);
      std::lock_guard<std::mutex> lock(r.mu);
      if (r.chain) return false;  // cannot happen: only this thread opens its region
      r.chain = head;
      r.next = 0;
      r.site = site;
      r.stream = c10::impl::getDeviceGuardImpl(device.type())->getStream(device);
      g_open.fetch_add(1);
      g_counters.opened.fetch_add(1);
      head->regions.fetch_add(1);
      chain = head;
      set_key_included(true);
    } else {
      allocate(r, *chain, k, call, r.stream.device(), outs);
    }
    std::lock_guard<std::mutex> lock(r.mu);
    if (r.chain != chain || r.next != k) return false;  // flushed by another thread meanwhile: run as usual
    for (const at::Tensor* t : bind) {
      r.externals.push_back(*t);
      r.ext_versions.push_back(version_of(*t));
    }
    if (r.outputs.size() <= k) r.outputs.resize(k + 1);
    r.outputs[k].clear();
    for (const at::Tensor& o : *outs) {
      r.outputs[k].push_back(o);
      t_recent.note(o);
    }
    ++r.next;
    if (k > 0) {  // the previous call has returned: what it read last, and what it made unread, may be gone now
      const ChainNode& prev = chain->nodes[k - 1];
      release_dropped(r, k - 1);
      for (const ChainInput& in : prev.inputs)
        if (in.producer >= 0) release_dropped(r, static_cast<size_t>(in.producer));
    }
    advance_locked(r);
    return true;
  } catch (const std::exception& e) {
    if (first_time("region-defer")) CUDAL1_LOG(kWarn, "deferring a call failed (" << e.what() << ")");
  } catch (...) {
  }
  outs->clear();
  flush_this_thread(FlushReason::kOther);
  return false;
}

void flush_this_thread(FlushReason why) noexcept {
  if (t_work > 0) return;
  try {
    Region* region = this_thread_region();
    if (!region) return;
    Region& r = *region;
    {
      std::lock_guard<std::mutex> lock(r.mu);
      flush_locked(r, why);
    }
    set_key_included(false);
  } catch (...) {
  }
}

void flush_all(FlushReason why) noexcept {
  if (t_work > 0 || g_open.load(std::memory_order_acquire) == 0) return;
  try {
    std::lock_guard<std::mutex> lock(g_regions_mu);
    for (Region* r : g_regions) {
      std::lock_guard<std::mutex> rl(r->mu);
      flush_locked(*r, why);
    }
  } catch (...) {
  }
}

}  // namespace detail

RegionCounters region_counters() noexcept {
  const auto& c = detail::g_counters;
  RegionCounters r;
  r.opened = c.opened.load();
  r.completed = c.completed.load();
  r.diverged = c.diverged.load();
  r.by_op = c.by_op.load();
  r.by_cuda = c.by_cuda.load();
  r.by_other = c.by_other.load();
  r.written = c.written.load();
  r.skipped = c.skipped.load();
  r.kernel_failures = c.kernel_failures.load();
  r.lost = c.lost.load();
  r.site_declined = c.site_declined.load();
  r.advanced = c.advanced.load();
  r.recycled = c.recycled.load();
  r.declined = c.declined.load();
  return r;
}

bool region_open_on_this_thread() noexcept {
  try {
    detail::Region* r = detail::this_thread_region();
    if (!r) return false;
    std::lock_guard<std::mutex> lock(r->mu);
    return r->chain != nullptr;
  } catch (...) {
    return false;
  }
}

void flush_all_regions() noexcept { detail::flush_all(detail::FlushReason::kOther); }

BackgroundWorkScope::BackgroundWorkScope() noexcept { ++detail::t_work; }
BackgroundWorkScope::~BackgroundWorkScope() { --detail::t_work; }

}  // namespace cudal1::dispatcher
