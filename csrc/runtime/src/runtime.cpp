/// @brief The runtime: activation at library load, module wiring, the public API (cudal1/cudal1.h).
///
/// Note [Activation]
/// libcudal1.so switches itself on from a load-time initializer, so linking it (see Note [Linking keeps the
/// library] in cmake/cudal1Config.cmake.in) or LD_PRELOADing it is all an app does. Without CUDAL1_ENABLE the
/// initializer registers nothing and returns. The driver and NVRTC are only opened (dlopen, no cuInit) at load:
/// CUDA is initialised lazily on the first hooked CUDA call, when the app has already done so, which keeps
/// fork-before-CUDA apps working. Where either library is missing cudal1 logs one line and stays off.
///
/// Note [Exit order]
/// atexit handlers and static destructors run in the reverse order of their registration / construction.
/// cudart tears CUDA down in a handler it registers when the app first uses CUDA; RocksDB, the fingerprint
/// code and others keep function-local statics. cudal1 registers its own shutdown (stop the tuner, collect
/// samples, write the report) at the end of the first hooked CUDA call's device set-up, after all of those
/// exist, so it runs before any of them is destroyed.
#include "runtime.h"

#include <ATen/core/grad_mode.h>
#include <torch/csrc/jit/passes/tensorexpr_fuser.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <optional>
#include <condition_variable>
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include "cudal1/cache/kernel_cache.h"
#include "cudal1/core/config.h"
#include "cudal1/core/cuda_driver.h"
#include "cudal1/core/log.h"
#include "cudal1/core/nvrtc.h"
#include "cudal1/core/version.h"
#include "cudal1/cudal1.h"
#include "cudal1/dispatcher/chains.h"
#include "cudal1/dispatcher/region_graph.h"
#include "cudal1/dispatcher/regions.h"
#include "cudal1/dispatcher/cuda_glue.h"
#include "cudal1/dispatcher/forward_graphs.h"
#include "cudal1/dispatcher/hook.h"
#include "cudal1/optimizer/chain_tuner.h"
#include "cudal1/optimizer/compiler.h"
#include "cudal1/optimizer/device_info.h"
#include "cudal1/optimizer/family.h"
#include "cudal1/optimizer/tuner.h"
#include "report.h"

namespace cudal1::runtime {
namespace {

struct Runtime {
  Config cfg;
  std::string off_reason;
  std::atomic<bool> active{false};
  std::unique_ptr<cache::KernelCache> cache;
  std::unique_ptr<optimizer::Tuner> tuner;
  std::string run_id;
  std::mutex cached_mu;
  std::map<int, std::unordered_map<std::string, cache::KernelEntry>> cached;  // per device, by signature
  std::unordered_set<const dispatcher::ChainRecord*> chains_looked_up;  // in `cached` (cached_mu)
  std::unordered_set<const dispatcher::ChainRecord*> graph_tried;  // Note [Launch-bound chains] (cached_mu)
  std::atomic<uint64_t> cache_hits{0};
  std::atomic<uint64_t> last_report_calls{0};
  std::chrono::steady_clock::time_point last_report = std::chrono::steady_clock::now();
  std::once_flag exit_once;
  std::atomic<bool> warm{false};
  std::atomic<bool> chain_tuning{false};  // fuse_hot_chains is running (wait_idle waits for it)
  // Serve mode with CUDAL1_FUSE=on has no tuner: this thread ticks instead (hot chains served from the cache).
  std::thread chain_server;
  std::mutex server_mu;
  std::condition_variable server_cv;
  bool server_stop = false;
};

Runtime& rt() {
  static Runtime* r = new Runtime();  // leaked on purpose: used until the very end of the process
  return *r;
}

void write_report(bool final_report) {
  Runtime& r = rt();
  if (!r.active.load() || !r.cache) return;
  cache::RunRecord rec{r.run_id, report_json()};
  const Status s = r.cache->put_run(rec);
  if (!s.ok() && final_report) CUDAL1_LOG(kWarn, "could not write the run report: " << s.to_string());
  r.last_report_calls = dispatcher::hook_counters().hooked_calls;
  r.last_report = std::chrono::steady_clock::now();
}

void stop_chain_server() {
  Runtime& r = rt();
  if (!r.chain_server.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(r.server_mu);
    r.server_stop = true;
  }
  r.server_cv.notify_all();
  r.chain_server.join();
}

void tick();

/// Serve mode with CUDAL1_FUSE=on: a thread that ticks every kTickMs (hot chains fused from the cache). Started
/// with the first CUDA device, once on_exit (which joins it) is registered; chains are fused on CUDA only.
void start_chain_server() {
  Runtime& r = rt();
  if (r.tuner || !r.cfg.fuse || r.cfg.mode != Mode::kServe || r.chain_server.joinable()) return;
  r.chain_server = std::thread([] {
    const dispatcher::BackgroundWorkScope worker;  // its CUDA calls flush none of the app's regions
    const at::NoGradGuard no_grad;                 // replays on the app's live weights record no autograd graph
    Runtime& rr = rt();
    std::unique_lock<std::mutex> lock(rr.server_mu);
    while (!rr.server_cv.wait_for(lock, std::chrono::milliseconds(optimizer::kTickMs), [&] { return rr.server_stop; })) {
      lock.unlock();
      try {
        tick();
      } catch (...) {
      }
      lock.lock();
    }
  });
}

void on_exit() {
  Runtime& r = rt();
  if (r.tuner) r.tuner->stop();
  stop_chain_server();
  dispatcher::flush_all_regions();  // Note [Deferred regions]: nothing stays pending past cudal1's shutdown
  dispatcher::collect_samples();
  dispatcher::close_chain_on_this_thread();
  if (r.cfg.fuse) dispatcher::update_hot_chains(r.cfg.hot_calls, r.cfg.chain_share);
  write_report(/*final_report=*/true);
}

/// The cached outcome for `key` on `device` (loaded with the device's cache), if any.
std::optional<cache::KernelEntry> cached_entry(int device, const std::string& key);

/// Stores a chain's tuning outcome for its device's fingerprint (Note [Cache layout]; key chain_cache_key).
void store_chain_outcome(const dispatcher::ChainRecord& c, const std::string& key,
                         const optimizer::ChainTuneReport& rep, bool has_kernel) {
  Runtime& r = rt();
  const int device = c.nodes.front().rec->device_index;
  if (!r.cache || device < 0) return;
  auto fp = optimizer::fingerprint_for(device);
  if (!fp.ok()) return;
  cache::KernelEntry e;
  e.signature = key;
  e.has_kernel = has_kernel;
  e.family = "chain";
  e.generator_version = optimizer::kChainGeneratorVersion;
  e.variant = rep.variant;
  e.launch_json = has_kernel ? rep.launch_json : "";
  e.kernel_name = rep.kernel_name;
  e.cubin = has_kernel ? rep.cubin : "";
  e.speedup = rep.speedup;
  e.aten_us = rep.aten_us;
  e.kernel_us = rep.kernel_us;
  e.trials = rep.variants;
  e.created_unix = std::chrono::duration_cast<std::chrono::seconds>(
                       std::chrono::system_clock::now().time_since_epoch()).count();
  const Status s = r.cache->put(fp.value(), e);
  if (!s.ok()) CUDAL1_LOG(kWarn, "chain outcome not cached: " << s.to_string());
  std::lock_guard<std::mutex> lock(r.cached_mu);
  r.cached[device][key] = e;
}

/// Note [Region graphs]: with CUDAL1_GRAPHS on, a fused chain's kernel may run as a CUDA graph, where the app's
/// own measured period is shorter with it.
std::unique_ptr<dispatcher::ChainKernel> graphed(const dispatcher::ChainRecord& c,
                                                 std::unique_ptr<dispatcher::ChainKernel> k) {
  const auto& cfg = rt().cfg;
  if (!cfg.graphs) return k;
  dispatcher::GraphOptions o;
  o.memory_budget = cfg.graph_memory_mb << 20;
  return dispatcher::graph_chain_kernel(c, std::move(k), o);
}

/// Turns deferral on for a chain about to be fused; false (with `out`'s note saying why) where it cannot be.
bool deferral_ready(const dispatcher::ChainRecord& c, dispatcher::ChainOutcome* out) {
  dispatcher::DeferralOptions d;
  d.cupti_full = rt().cfg.cupti_full;
  d.device = c.nodes.empty() || !c.nodes.front().rec ? -1 : c.nodes.front().rec->device_index;
  if (const Status s = dispatcher::enable_deferral(d); !s.ok()) {
    out->note = "deferral unavailable: " + s.to_string();
    return false;
  }
  const std::string status = dispatcher::deferral_status();
  if (status.find("CUDA: on") == std::string::npos) {
    out->note = "deferral unavailable: " + status;
    if (first_time("chain-deferral-off")) CUDAL1_LOG(kWarn, "no chain is fused: " << status);
    return false;
  }
  return true;
}

/// Note [Launch-bound chains]: a long chain no generator plans whole is tried first as a CUDA graph of its own
/// ATen calls, kept only while the app's period says it is faster. True when the chain was handled here (fused
/// as such, or deferral unavailable: `out` says which); false to take the ordinary path (not a candidate, or its
/// graph was tried before and given up, which unfused it back to kHot).
bool try_as_graph(dispatcher::ChainRecord& c, dispatcher::ChainOutcome* out) {
  Runtime& r = rt();
  if (!r.cfg.graphs || !dispatcher::has_torch_cuda() || c.nodes.front().rec->device_index < 0 ||
      !dispatcher::launch_bound_candidate(c))
    return false;
  {
    std::lock_guard<std::mutex> lock(r.cached_mu);
    if (!r.graph_tried.insert(&c).second) {
      if (dispatcher::ChainKernel* k = c.kernel.load()) out->note = "given up as a CUDA graph (" + k->describe() + ")";
      return false;
    }
  }
  if (optimizer::chain_plans(c)) return false;
  if (!deferral_ready(c, out)) return true;
  dispatcher::GraphOptions o;
  o.memory_budget = r.cfg.graph_memory_mb << 20;
  dispatcher::ChainRecord* chain = &c;
  o.on_given_up = [chain] { dispatcher::unfuse_chain(*chain, dispatcher::ChainState::kHot); };
  const Status f = dispatcher::fuse_chain(c, dispatcher::graph_chain_kernel(c, dispatcher::aten_chain_kernel(c), o));
  if (!f.ok()) {
    out->note = "not fused as a CUDA graph: " + f.to_string();
    return false;
  }
  out->kernel = "its ATen calls as a CUDA graph";
  out->note = "launch-bound: a CUDA graph while the app's period is shorter with it";
  CUDAL1_LOG(kInfo, "a chain of " << c.nodes.size() << " ops runs as a CUDA graph of its ATen calls, on trial");
  return true;
}

/// Note [Serve mode]
/// CUDAL1_MODE=serve is for deployment: no Tuner is built and fuse_hot_chains tunes nothing, so after start-up
/// cudal1 never compiles or times anything on the app's GPU. Signatures and chains are served from the cache
/// (loading a cubin is all it does); a cached kernel that does not load, or whose generator is older than this
/// cudal1's (Note [Generator versions]), leaves its signature or chain on ATen, with one warning per signature or
/// chain. Stats::compiled counts NVRTC compilations and stays 0 (tests/gpu/warm_app.cpp checks it).
///
/// Note [Chain tuning]: each chain that turned hot is handled once, on the tuner's thread: served from the cache
/// when a tuning run stored its outcome (a kernel is fused; "ATen not beaten" leaves it one by one), else tuned
/// in tune mode and its outcome stored; serve mode tunes nothing. Deferral (the DeferredInit key, the CUPTI
/// guard) is enabled at the first hot chain, so a run where no chain gets hot never subscribes to CUPTI.
void fuse_hot_chains() {
  Runtime& r = rt();
  if (!r.cfg.fuse) return;
  std::vector<dispatcher::ChainRecord*> hot;
  dispatcher::for_each_chain([&](dispatcher::ChainRecord& c) {
    if (c.state.load() == dispatcher::ChainState::kHot) hot.push_back(&c);
  });
  r.chain_tuning.store(!hot.empty());
  struct Done {
    std::atomic<bool>& flag;
    ~Done() { flag.store(false); }
  } done{r.chain_tuning};
  for (size_t i = 0; i < hot.size(); ++i) {
    dispatcher::ChainRecord* c = hot[i];
    dispatcher::ChainState expected = dispatcher::ChainState::kHot;
    if (!c->state.compare_exchange_strong(expected, dispatcher::ChainState::kAten)) continue;  // tried once
    dispatcher::ChainOutcome out;
    if (try_as_graph(*c, &out)) {
      c->set_outcome(out);
      continue;
    }
    const std::string before = out.note;  // a graph given up says so
    // Note [Chain segments]: a chain that does not plan whole fuses the runs of it that plan (GPT-2's layer: the
    // GEMMs with their bias adds and activation, the residual add with the layer norm; ResNet's stem: batch
    // norm and ReLU before a max-pool), each a chain of its own handled next; a segment's region runs before the
    // next segment's first call.
    const auto ranges = optimizer::fusable_segments(*c);
    if (!ranges.empty()) {
      std::string note;
      for (const auto& [from, to] : ranges) {
        dispatcher::ChainRecord* seg = dispatcher::segment_chain(*c, from, to);
        if (!seg) continue;
        note += (note.empty() ? "ops " : ", ") + std::to_string(from + 1) + "-" + std::to_string(to);
        dispatcher::ChainState cold = dispatcher::ChainState::kCold;
        if (seg->state.compare_exchange_strong(cold, dispatcher::ChainState::kHot)) hot.push_back(seg);
      }
      out.note = note + " fuse as chains of their own";
      if (!before.empty()) out.note = before + "; " + out.note;
      c->set_outcome(out);
      continue;
    }
    const std::string key = optimizer::chain_cache_key(*c);
    const auto cached = cached_entry(c->nodes.front().rec->device_index, key);
    if (!cached && r.cfg.mode != Mode::kTune) {  // nothing to fuse: deferral (and CUPTI) stays off
      out.note = "not in the cache (this mode tunes nothing)";
      c->set_outcome(out);
      continue;
    }
    if (!deferral_ready(*c, &out)) {
      c->set_outcome(out);
      continue;
    }
    if (const auto& e = cached) {
      out.kernel = e->variant.empty() ? "" : "chain " + e->variant + " (cache)";
      out.aten_us = e->aten_us;
      out.kernel_us = e->kernel_us;
      out.speedup = e->speedup;
      if (!e->has_kernel) {
        out.note = "cached outcome: the ATen chain was not beaten";
        c->set_outcome(out);
        continue;
      }
      auto k = optimizer::load_chain_kernel(*c, e->launch_json, e->cubin);
      if (k.ok()) {
        const Status f = dispatcher::fuse_chain(*c, graphed(*c, std::move(k).value()));
        out.note = f.ok() ? "from cache" : "not fused: " + f.to_string();
        c->set_outcome(out);
        continue;
      }
      CUDAL1_LOG(kWarn, "cached chain kernel not used (" << k.status().to_string() << ")");
      out.note = "cached kernel not used: " + k.status().to_string();
    }
    if (r.cfg.mode != Mode::kTune) {
      if (out.note.empty()) out.note = "not in the cache (this mode tunes nothing)";
      c->set_outcome(out);
      continue;
    }
    optimizer::ChainTuneOptions o;
    o.verify_trials = static_cast<int>(r.cfg.verify_trials);
    o.reps = static_cast<int>(r.cfg.timing_reps);
    o.min_speedup = r.cfg.min_speedup;
    o.seed = r.cfg.seed ? r.cfg.seed : 1;
    optimizer::ChainTuneReport rep;
    auto k = optimizer::tune_chain(*c, o, &rep);
    out.plan = rep.plan;
    out.kernel = rep.variant.empty() ? "" : "chain " + rep.variant;
    out.aten_us = rep.aten_us;
    out.kernel_us = rep.kernel_us;
    out.speedup = rep.speedup;
    out.note = rep.note;
    if (k.ok()) {
      store_chain_outcome(*c, key, rep, /*has_kernel=*/true);
      const Status f = dispatcher::fuse_chain(*c, graphed(*c, std::move(k).value()));
      if (!f.ok()) out.note = "not fused: " + f.to_string();
      else CUDAL1_LOG(kInfo, "chain of " << c->nodes.size() << " ops fused (" << out.kernel << ", " << rep.speedup
                                         << "x over its ATen ops)");
    } else if (k.status().code() == Code::kNotFound) {
      store_chain_outcome(*c, key, rep, /*has_kernel=*/false);  // timed, not faster: remembered
    }
    c->set_outcome(out);
  }
}

/// Note [Cached chains turn hot early]: a chain the cache holds an outcome for needs no profile to be worth
/// serving, so it turns hot once it recurred (kCachedChainCommits commits), where an unknown chain waits for
/// CUDAL1_HOT_CALLS commits and its share of the profiled device time. A program chain (one a forward) is thereby
/// served from a process's first forwards instead of whenever its profile completes: ResNet-50 served from the
/// cache ran a whole timed window without its program once (4.70 ms, against 2.45 ms with it; H100, 2026-12-05).
/// Each chain is looked up once; the lookup builds its key (a long string for a program) on the ticking thread.
constexpr uint64_t kCachedChainCommits = 2;

void mark_cached_chains_hot() {
  Runtime& r = rt();
  if (!r.cfg.fuse) return;
  std::vector<dispatcher::ChainRecord*> fresh;
  dispatcher::for_each_chain([&](dispatcher::ChainRecord& c) {
    if (c.state.load() == dispatcher::ChainState::kCold && c.count.load() >= kCachedChainCommits &&
        !c.nodes.empty() && c.nodes.front().rec->device_index >= 0)
      fresh.push_back(&c);
  });
  for (dispatcher::ChainRecord* c : fresh) {
    {
      std::lock_guard<std::mutex> lock(r.cached_mu);
      if (!r.chains_looked_up.insert(c).second) continue;
    }
    if (cached_entry(c->nodes.front().rec->device_index, optimizer::chain_cache_key(*c))) mark_chain_hot(*c);
  }
}

void tick() {
  dispatcher::collect_samples();
  mark_cached_chains_hot();
  if (rt().cfg.fuse) dispatcher::update_hot_chains(rt().cfg.hot_calls, rt().cfg.chain_share);
  fuse_hot_chains();
  dispatcher::release_idle_graphs();  // Note [Region graphs]: a chain that stopped running frees its graph
  Runtime& r = rt();
  const bool changed = dispatcher::hook_counters().hooked_calls != r.last_report_calls.load();
  if (changed && std::chrono::steady_clock::now() - r.last_report > std::chrono::seconds(10)) write_report(false);
}

void load_cache(int device);

/// First keyed call on a CUDA device: CUDA is up now. Load this device's cache entries.
void on_device(int device) {
  static std::once_flag healed;
  std::call_once(healed, [] {  // Note [Cache healing]: an unusable cache is replaced, never read forever
    Runtime& r = rt();
    if (!r.cache) return;
    auto h = r.cache->heal();
    if (!h.ok() && h.status().code() == Code::kUnavailable)  // another process is writing it: it can be used
      CUDAL1_LOG(kInfo, "cache " << r.cache->dir() << " not checked now (" << h.status().to_string() << ")");
    else if (!h.ok())
      CUDAL1_LOG(kWarn, "cache " << r.cache->dir() << " not checked (" << h.status().to_string() << ")");
    else if (h->healed)
      CUDAL1_LOG(kWarn, "cache " << r.cache->dir() << " was unusable (" << h->reason << "); kept as " << h->moved_to
                                 << ", a fresh cache is used from now on");
  });
  load_cache(device);
  Runtime& r = rt();
  std::call_once(r.exit_once, [] {  // Note [Exit order]: after everything on_exit uses has been created
    if (rt().cache) {
      const Status s = rt().cache->prepare();
      if (!s.ok()) CUDAL1_LOG(kWarn, "cache " << rt().cache->dir() << " is not writable: " << s.to_string());
    }
    (void)optimizer::fingerprint_for(0);
    std::atexit(on_exit);
    start_chain_server();  // after atexit(on_exit), which joins it
  });
}

/// Note [Cache transfer]: the records of other fingerprints whose allowance covers how they differ from `own`,
/// added to `m` where `own` has none for the signature, each marked for verification at first use. Chain
/// kernels are left out (they tune again here). Logs what it took and what it refused.
void load_transferable(int device, const GpuFingerprint& own, std::unordered_map<std::string, cache::KernelEntry>* m,
                       std::map<std::string, int>* stale) {
  Runtime& r = rt();
  auto fps = r.cache->fingerprints();
  if (!fps.ok()) return;
  for (const GpuFingerprint& other : fps.value()) {
    if (other.key() == own.key()) continue;
    auto allowed = r.cache->transfer_allowance(other);
    if (!allowed.ok()) continue;  // no allowance: that fingerprint's records serve only itself
    const Status ok = cache::transfer_check(other, own, allowed.value());
    if (!ok.ok()) {
      CUDAL1_LOG(kInfo, "device " << device << ": records of fingerprint " << other.key() << " not used: "
                                  << ok.message());
      continue;
    }
    std::vector<std::string> rejected;
    auto entries = r.cache->load_all(other, &rejected);
    if (!entries.ok()) continue;
    int taken = 0, chains = 0;
    for (auto& e : entries.value()) {
      if (e.family == "chain") {
        ++chains;
        continue;
      }
      if (!optimizer::check_generator(e).ok()) {
        ++(*stale)[e.family];
        continue;
      }
      e.transferred_from = other.key();
      taken += m->emplace(e.signature, std::move(e)).second;
    }
    std::string differs;
    for (const auto& f : other.differing_fields(own)) differs += (differs.empty() ? "" : ", ") + f;
    CUDAL1_LOG(kInfo, "device " << device << ": " << taken << " cached outcomes of fingerprint " << other.key()
                                << " (differs in " << differs << ", allowed) taken; each kernel is checked "
                                << "against ATen on this GPU before its first call" << (chains ? "; " + std::to_string(chains) +
                                                                     " chain kernels left to tune here" : ""));
  }
}

void load_cache(int device) {
  Runtime& r = rt();
  if (!r.cache) return;
  auto fp = optimizer::fingerprint_for(device);
  if (!fp.ok()) {
    CUDAL1_LOG(kWarn,
               "device " << device << ": no fingerprint (" << fp.status().to_string() << "); the cache is not used");
    return;
  }
  std::vector<std::string> rejected;
  auto entries = r.cache->load_all(fp.value(), &rejected);
  for (const auto& why : rejected) CUDAL1_LOG(kWarn, "ignoring cache entry " << why);
  if (!entries.ok()) {
    if (entries.status().code() != Code::kNotFound)
      CUDAL1_LOG(kWarn, "cache " << r.cache->dir() << " unreadable (" << entries.status().to_string()
                                  << "); continuing without it");
    return;
  }
  std::map<std::string, int> stale;  // Note [Generator versions]: per family, records an older generator made
  std::lock_guard<std::mutex> lock(r.cached_mu);
  auto& m = r.cached[device];
  for (auto& e : entries.value()) {
    if (!optimizer::check_generator(e).ok()) {
      ++stale[e.family];
      continue;
    }
    m.emplace(e.signature, std::move(e));
  }
  load_transferable(device, fp.value(), &m, &stale);
  for (const auto& [family, n] : stale)
    CUDAL1_LOG(kInfo, "device " << device << ": " << n << " cached outcomes of " << family
                                << " were made by an older generator (version now "
                                << optimizer::generator_version(family) << "): not used"
                                << (r.cfg.mode == Mode::kTune ? ", tuned again when hot" : ""));
  CUDAL1_LOG(kInfo, "device " << device << " (" << fp->gpu_name << "): " << m.size()
                              << " cached outcomes for fingerprint " << fp->key());
}

std::optional<cache::KernelEntry> cached_entry(int device, const std::string& key) {
  Runtime& r = rt();
  std::lock_guard<std::mutex> lock(r.cached_mu);
  auto dev = r.cached.find(device);
  if (dev == r.cached.end()) return std::nullopt;
  auto it = dev->second.find(key);
  if (it == dev->second.end()) return std::nullopt;
  return it->second;
}

/// A new signature: serve it from the cache if an entry exists.
void on_new_record(dispatcher::SigRecord& rec) {
  if (rec.device_index < 0) return;
  Runtime& r = rt();
  cache::KernelEntry e;
  {
    std::lock_guard<std::mutex> lock(r.cached_mu);
    auto dev = r.cached.find(rec.device_index);
    if (dev == r.cached.end()) return;
    auto it = dev->second.find(rec.sig.text);
    if (it == dev->second.end()) return;
    e = it->second;
  }
  const Status s = optimizer::attach_cached(rec, e, r.cfg.mode == Mode::kTune ? static_cast<int>(r.cfg.confirm_calls) : 0);
  if (!s.ok()) {
    CUDAL1_LOG(kWarn, "cached kernel for " << rec.sig.text << " not used: " << s.to_string());
    return;
  }
  r.cache_hits.fetch_add(1);
  CUDAL1_LOG(kInfo, rec.sig.text << ": " << (e.has_kernel ? "replaced by " + e.variant : std::string("stays on ATen"))
                              << (e.transferred_from.empty() || !e.has_kernel
                                      ? " (from cache)"
                                      : " (from the cache of fingerprint " + e.transferred_from +
                                            ", re-verified on this GPU)"));
}

/// Note [In-app confirmation] (dispatcher/confirm.h): a trial's verdict is cached with the signature's entry, so
/// that a later process neither tries the kernel again (demoted: the entry says ATen stays) nor re-judges it.
void on_confirmed(dispatcher::SigRecord& rec, dispatcher::Verdict v, const dispatcher::TrialStats& stats) {
  Runtime& r = rt();
  if (!r.cache || rec.device_index < 0) return;
  auto fp = optimizer::fingerprint_for(rec.device_index);
  if (!fp.ok()) return;
  auto e = r.cache->get(fp.value(), rec.sig.text);
  if (!e.ok()) {
    CUDAL1_LOG(kDebug, rec.sig.text << ": in-app verdict not cached (" << e.status().to_string() << ")");
    return;
  }
  cache::KernelEntry entry = std::move(e).value();
  entry.in_app = stats.ratio > 0 ? stats.ratio : 1e-6;  // > 0: judged
  if (v == dispatcher::Verdict::kDemote) {
    entry.has_kernel = false;
    entry.launch_json.clear();
    entry.kernel_name.clear();
    entry.cubin.clear();
  }
  if (const Status s = r.cache->put(fp.value(), entry); !s.ok())
    CUDAL1_LOG(kWarn, rec.sig.text << ": in-app verdict not cached: " << s.to_string());
  std::lock_guard<std::mutex> lock(r.cached_mu);
  r.cached[rec.device_index][rec.sig.text] = entry;
}

void on_hot(dispatcher::SigRecord& rec) {
  Runtime& r = rt();
  const auto& name = rec.op.operator_name();
  if (!optimizer::family_for(name.name.substr(6), name.overload_name)) {  // a chain op no family serves
    dispatcher::SigState q = dispatcher::SigState::kQueued;
    rec.state.compare_exchange_strong(q, dispatcher::SigState::kAten);
    return;
  }
  if (!r.tuner || !r.tuner->enqueue(&rec)) {
    dispatcher::SigState q = dispatcher::SigState::kQueued;
    rec.state.compare_exchange_strong(q, dispatcher::SigState::kCold);
  }
}

/// Note [TorchScript fuser]
/// TorchScript's profiling executor hands elementwise runs of a traced model to its TensorExpr fuser (NNC), whose
/// kernels run outside the dispatcher: cudal1 never sees those ops, so it cannot fuse them with the GEMM before
/// them (a GELU_BIAS epilogue: Note [Library chains]) or time them against its own kernels. In a traced GPT-2 the
/// fuser runs HF's gelu_new as one kernel of 44 us a layer against 16 us for torch.compile's (H100, 2026-12-06).
/// With CUDAL1_JIT_FUSER=off (and CUDAL1_FUSE on, tune or serve mode) cudal1 turns that fuser off at start-up,
/// before the app loads a model (the flag is read when a graph is optimised, at its first runs). The ops then
/// reach the hook one by one: a chain no generator fuses runs as ATen's eager ops. It is not the default: each op
/// that reaches the hook costs the host a call, and in the traced GPT-2 the extra host time outweighed the GPU
/// time saved (docs/PERF.md, "GPT-2: host time, the TorchScript fuser and the GELU epilogue").
void take_jit_fusion(const Config& cfg) {
  if (!cfg.fuse || cfg.mode == Mode::kProfile || !cfg.jit_fuser_off) return;
  torch::jit::setTensorExprFuserEnabled(false);
  CUDAL1_LOG(kInfo, "TorchScript's TensorExpr fuser is off (CUDAL1_JIT_FUSER=off): its elementwise chains reach cudal1");
}

/// Note [Forward graphs] (dispatcher/forward_graphs.h): in tune and serve mode a TorchScript method's whole call may
/// run as one CUDA graph once nothing cudal1 does can change what its calls run (the tuner and the chain tuning
/// idle); a swap, fusion or trial verdict later drops the graph (note_dispatch_change).
void start_forward_graphs(const Config& cfg) {
  if (!cfg.forward_graphs || cfg.mode == Mode::kProfile) return;
  dispatcher::ForwardGraphOptions o;
  o.enabled = true;
  o.min_calls = static_cast<int>(std::min<int64_t>(cfg.hot_calls, 1 << 20));
  o.memory_budget = cfg.graph_memory_mb << 20;
  o.busy = [] {
    Runtime& r = rt();
    return r.chain_tuning.load() || (r.tuner && !r.tuner->wait_idle(0.0));
  };
  if (Status s = dispatcher::configure_forward_graphs(o); !s.ok()) {
    CUDAL1_LOG(kWarn, "forward graphs off: " << s.to_string());
    return;
  }
  std::string why;
  if (!dispatcher::forward_graph_interposed(&why)) CUDAL1_LOG(kInfo, "forward graphs: " << why);
}

void start() {
  Runtime& r = rt();
  r.cfg = config();
  if (!r.cfg.enable) {
    r.off_reason = "CUDAL1_ENABLE is not set";
    return;
  }
  if (Status s = probe_driver(); !s.ok()) {
    r.off_reason = "no usable CUDA driver: " + s.message();
    CUDAL1_LOG(kWarn, "off: " << r.off_reason);
    return;
  }
  if (auto n = nvrtc(); !n.ok()) {
    r.off_reason = "no usable NVRTC: " + n.status().message();
    CUDAL1_LOG(kWarn, "off: " << r.off_reason);
    return;
  }
  if (!dispatcher::has_torch_cuda()) {
    r.off_reason = "this build of cudal1 was made against a CPU-only LibTorch";
    CUDAL1_LOG(kWarn, "off: " << r.off_reason);
    return;
  }
  r.run_id = std::to_string(static_cast<long long>(std::time(nullptr))) + "-" + std::to_string(::getpid());
  r.cache = std::make_unique<cache::KernelCache>(r.cfg.cache_dir);
  if (r.cfg.mode == Mode::kTune) {
    optimizer::TunerOptions t;
    t.trials = r.cfg.trials;
    t.round = r.cfg.tune_round;
    t.search = r.cfg.tune_search;
    t.shared_prior = r.cfg.tune_prior;
    t.verify_trials = r.cfg.verify_trials;
    t.timing_reps = r.cfg.timing_reps;
    t.min_speedup = r.cfg.min_speedup;
    t.confirm_calls = r.cfg.confirm_calls;
    t.seed =
        r.cfg.seed ? r.cfg.seed : static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
    r.tuner = std::make_unique<optimizer::Tuner>(t, r.cache.get());
  }
  dispatcher::HookOptions h;
  h.mode = r.cfg.mode;
  if (r.cfg.mode != Mode::kProfile) {
    h.ops = optimizer::all_family_ops();
    if (r.cfg.fuse)  // Note [Chain profiling]: the chain ops too, so that chains are seen whole
      for (const auto& op : dispatcher::chain_ops())
        if (std::find(h.ops.begin(), h.ops.end(), op) == h.ops.end()) h.ops.push_back(op);
  }
  h.chains = r.cfg.fuse;
  h.hot_calls = r.cfg.hot_calls;
  h.sample_every = r.cfg.profile_sample;
  h.profile_cpu = r.cfg.profile_cpu;
  dispatcher::HookCallbacks cb;
  cb.on_hot = on_hot;
  cb.on_device = on_device;
  cb.on_new_record = on_new_record;
  cb.on_confirmed = on_confirmed;
  if (Status s = dispatcher::install_hooks(h, cb); !s.ok()) {
    r.off_reason = "hooks not installed: " + s.to_string();
    CUDAL1_LOG(kWarn, "off: " << r.off_reason);
    return;
  }
  if (r.tuner) r.tuner->start(tick);
  r.active = true;
  take_jit_fusion(r.cfg);
  start_forward_graphs(r.cfg);
  CUDAL1_LOG(kInfo, "on: mode " << mode_name(r.cfg.mode) << ", " << dispatcher::hooked_ops().size()
                                << " ops hooked, cache " << r.cfg.cache_dir);
}

}  // namespace

void start_from_environment() noexcept {
  try {
    start();
  } catch (const std::exception& e) {
    rt().off_reason = std::string("start-up failed: ") + e.what();
    CUDAL1_LOG(kWarn, "off: " << rt().off_reason);
  } catch (...) {
    rt().off_reason = "start-up failed";
  }
}

bool tuning_on() noexcept { return rt().active.load() && rt().tuner != nullptr; }

bool enqueue_for_tuning(dispatcher::SigRecord& rec) {
  dispatcher::SigState cold = dispatcher::SigState::kCold;
  if (!tuning_on() || !rec.state.compare_exchange_strong(cold, dispatcher::SigState::kQueued)) return false;
  on_hot(rec);
  return rec.state.load() != dispatcher::SigState::kCold;
}

void note_warm() noexcept { rt().warm = true; }

void mark_chain_hot(dispatcher::ChainRecord& chain) {
  dispatcher::ChainState cold = dispatcher::ChainState::kCold;
  chain.state.compare_exchange_strong(cold, dispatcher::ChainState::kHot);
}

Status check_cached(int device, const std::string& signature) {
  Runtime& r = rt();
  if (!r.cache) return Status(Code::kUnavailable, "no cache");
  auto fp = optimizer::fingerprint_for(device);
  if (!fp.ok()) return fp.status();
  auto e = r.cache->get(fp.value(), signature);
  return e.ok() ? Status()
                : Status(e.status().code(), "not in the cache at " + r.cache->dir() + ": " + e.status().message());
}

std::string report_json() {
  Runtime& r = rt();
  ReportHeader h;
  h.run_id = r.run_id;
  h.mode = mode_name(r.cfg.mode);
  h.hot_calls = r.cfg.hot_calls;
  h.cache_hits = r.cache_hits.load();
  h.tuned = r.tuner ? r.tuner->tuned() : 0;
  h.warm = r.warm.load();
  return build_report(h);
}

}  // namespace cudal1::runtime

namespace cudal1 {

bool is_active() noexcept { return runtime::rt().active.load(); }

bool cache_record(int device, const std::string& key, CacheRecord* out) noexcept {
  try {
    auto& r = runtime::rt();
    if (!r.active || !r.cache || !out) return false;
    auto fp = optimizer::fingerprint_for(device);
    if (!fp.ok()) return false;
    auto e = r.cache->get(fp.value(), key);
    if (!e.ok()) return false;
    out->fingerprint = fp.value().to_json();
    out->record = cache::KernelCache::encode(fp.value(), e.value());
    return true;
  } catch (...) {
    return false;
  }
}

bool store_cache_record(const CacheRecord& rec, std::string* why) noexcept {
  std::string local;
  std::string& w = why ? *why : local;
  try {
    auto fp = GpuFingerprint::from_json(rec.fingerprint);
    if (!fp.ok()) return w = "fingerprint: " + fp.status().to_string(), false;
    auto e = cache::KernelCache::decode(rec.record, &fp.value(), nullptr);
    if (!e.ok()) return w = "record: " + e.status().to_string(), false;
    cache::KernelCache c(config().cache_dir);
    const auto have = c.get(fp.value(), e.value().signature);
    if (have.ok() && (have.value().has_kernel || !e.value().has_kernel)) return w = "present", true;
    const Status s = c.put(fp.value(), e.value());
    if (!s.ok()) return w = s.to_string(), false;
    w.clear();
    return true;
  } catch (const std::exception& ex) {
    w = ex.what();
    return false;
  }
}

std::string status_line() {
  try {
    auto& r = runtime::rt();
    if (!r.active) return "off: " + (r.off_reason.empty() ? std::string("not started") : r.off_reason);
    const Stats s = stats();
    const auto g = dispatcher::graph_counters();
    const std::string graphs = g.captures ? ", " + std::to_string(g.replays) + " as CUDA graphs (" +
                                                std::to_string(g.kept) + " graphs kept)"
                                          : "";
    return "on (" + std::string(mode_name(r.cfg.mode)) + "): " + std::to_string(s.hooked_calls) + " calls, " +
           std::to_string(s.signatures) + " signatures, " + std::to_string(s.hot) + " hot, " +
           std::to_string(s.replaced) + " replaced (" + std::to_string(s.cache_hits) + " from cache), " +
           std::to_string(s.replaced_calls) + " calls served by cudal1 kernels; " + std::to_string(s.chains_hot) +
           " hot chains, " + std::to_string(s.chains_fused) + " fused, regions " +
           std::to_string(s.regions_completed) + " whole / " + std::to_string(s.regions_early) + " flushed early" +
           graphs + "; " + std::to_string(s.compiled) + " kernels compiled";
  } catch (...) {
    return "unknown";
  }
}

std::string forward_graph_status() {
  try {
    std::string why;
    const bool reached = dispatcher::forward_graph_interposed(&why);
    const auto c = dispatcher::forward_graph_counters();
    std::string s = "forward graphs: " + std::to_string(c.calls) + " method calls reached cudal1";
    if (!reached) return s + " (" + why + ")";
    s += ", " + std::to_string(c.replays) + " served by a graph; " + std::to_string(c.captures) + " captured, " +
         std::to_string(c.kept) + " kept, " + std::to_string(c.given_up) + " given up, " +
         std::to_string(c.capture_failures) + " captures failed, " + std::to_string(c.check_failures) +
         " checks failed, " + std::to_string(c.dropped) + " dropped; " + std::to_string(c.bytes >> 20) + " MiB";
    const std::string per = dispatcher::forward_graph_report();
    return per.empty() ? s : s + "\n" + per.substr(0, per.size() - 1);
  } catch (...) {
    return "forward graphs: unknown";
  }
}

Stats stats() noexcept {
  Stats s;
  try {
    auto& r = runtime::rt();
    s.active = r.active.load();
    if (!s.active) return s;
    const auto c = dispatcher::hook_counters();
    s.hooked_calls = c.hooked_calls;
    s.signatures = c.signatures;
    s.replaced_calls = c.replaced_calls;
    s.fallbacks = c.fallbacks;
    s.cache_hits = r.cache_hits.load();
    s.tuned = r.tuner ? r.tuner->tuned() : 0;
    dispatcher::for_each_record([&](dispatcher::SigRecord& rec) {
      if (rec.calls.load() >= static_cast<uint64_t>(r.cfg.hot_calls)) ++s.hot;
      if (rec.state.load() == dispatcher::SigState::kReplaced) ++s.replaced;
    });
    dispatcher::for_each_chain([&](dispatcher::ChainRecord& c) {
      const auto st = c.state.load();
      if (st != dispatcher::ChainState::kCold) ++s.chains_hot;
      if (st == dispatcher::ChainState::kFused) ++s.chains_fused;
    });
    const auto rc = dispatcher::region_counters();
    s.regions_completed = rc.completed;
    s.regions_early = rc.diverged + rc.by_op + rc.by_cuda + rc.by_other;
    s.compiled = optimizer::compiles_started();
    s.forward_graphs_undecided = dispatcher::forward_graph_counters().undecided;
  } catch (...) {
  }
  return s;
}

bool wait_idle(double timeout_s) noexcept {
  try {
    auto& r = runtime::rt();
    if (!r.tuner && !r.chain_server.joinable()) return true;
    const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
    auto left = [&] { return std::chrono::duration<double>(end - std::chrono::steady_clock::now()).count(); };
    auto tuner_idle = [&](double t) { return !r.tuner || r.tuner->wait_idle(t); };
    if (!tuner_idle(timeout_s)) return false;
    // Note [Chain tuning]: chains turn hot and are tuned on the tuner's tick; wait for those too.
    dispatcher::close_chain_on_this_thread();
    for (;;) {
      bool untried = false;
      if (r.cfg.fuse && r.cfg.mode != Mode::kProfile) {
        dispatcher::update_hot_chains(r.cfg.hot_calls, r.cfg.chain_share);
        dispatcher::for_each_chain([&](dispatcher::ChainRecord& c) {
          untried |= c.state.load() == dispatcher::ChainState::kHot;
        });
      }
      if (!untried && !r.chain_tuning.load()) return tuner_idle(std::max(0.0, left()));
      if (left() <= 0) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  } catch (...) {
    return false;
  }
}

void flush() noexcept {
  try {
    dispatcher::collect_samples();
    dispatcher::close_chain_on_this_thread();
    const auto& cfg = runtime::rt().cfg;
    if (cfg.fuse) dispatcher::update_hot_chains(cfg.hot_calls, cfg.chain_share);
    runtime::write_report(true);
  } catch (...) {
  }
}

const char* version() noexcept { return kVersion; }

ScopedAtenOnly::ScopedAtenOnly() noexcept { dispatcher::push_bypass(); }
ScopedAtenOnly::~ScopedAtenOnly() { dispatcher::pop_bypass(); }

}  // namespace cudal1
