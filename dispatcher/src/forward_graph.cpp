/// @brief Forward graphs (Note [Forward graphs] in forward_graphs.h): cudal1's definition of
/// torch::jit::Method::operator(), and the per-signature capture, check, trial and replay.
#include "cudal1/dispatcher/forward_graphs.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <dlfcn.h>
#include <torch/csrc/jit/api/function_impl.h>
#include <torch/csrc/jit/api/method.h>
#include <torch/csrc/jit/api/module.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <sstream>
#include <unordered_map>

#include "cudal1/core/log.h"
#include "cudal1/core/stats.h"
#include "cudal1/dispatcher/cuda_glue.h"
#include "cudal1/dispatcher/region_graph.h"
#include "cudal1/dispatcher/sig_record.h"
#include "forward_scan.h"
#include "graph_capture.h"
#include "region.h"

#if defined(CUDAL1_TORCH_CUDA)
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>
#endif

namespace cudal1::dispatcher {
namespace {

using Kwargs = torch::jit::Kwargs;
using Clock = std::chrono::steady_clock;

std::atomic<uint64_t> g_changes{0};
struct Totals {
  std::atomic<uint64_t> calls{0}, replays{0}, captures{0}, capture_failures{0}, check_failures{0}, kept{0},
      given_up{0}, dropped{0};
  std::atomic<int64_t> bytes{0};
};
Totals g_totals;

std::mutex g_opts_mu;
ForwardGraphOptions g_opts;
std::atomic<bool> g_enabled{false};

thread_local int t_depth = 0;  // inside an interposed call: nested method calls pass through
struct DepthScope {
  DepthScope() { ++t_depth; }
  ~DepthScope() { --t_depth; }
};

/// The Itanium name of `c10::IValue torch::jit::Method::operator()(std::vector<c10::IValue>, const Kwargs&) const`.
constexpr const char* kMethodCall =
    "_ZNK5torch3jit6MethodclESt6vectorIN3c106IValueESaIS4_EERKSt13unordered_mapINSt7__cxx1112basic_stringIcSt11char_"
    "traitsIcESaIcEEES4_St4hashISD_ESt8equal_toISD_ESaISt4pairIKSD_S4_EEE";
/// A member function called as a free one: `this` is the first argument (Itanium C++ ABI).
using RealCall = c10::IValue (*)(const torch::jit::Method*, std::vector<c10::IValue>, const Kwargs&);

/// libtorch's own definition, looked up in the library that defines torch::jit's functions (not in the global
/// scope, where cudal1's comes first). Null when it cannot be found.
RealCall torch_definition() {
  static const RealCall fn = []() -> RealCall {
    Dl_info info{};
    void* probe = reinterpret_cast<void*>(&torch::jit::tryToGraphFunction);  // defined by libtorch, not cudal1
    if (!dladdr(probe, &info) || !info.dli_fname) return nullptr;
    void* h = dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD);
    if (!h) return nullptr;
    void* f = dlsym(h, kMethodCall);
    dlclose(h);
    return reinterpret_cast<RealCall>(f);
  }();
  return fn;
}

/// The method run as libtorch runs it.
c10::IValue call_torch(const torch::jit::Method& m, std::vector<c10::IValue> stack, const Kwargs& kwargs) {
  if (const RealCall real = torch_definition()) return real(&m, std::move(stack), kwargs);
  stack.insert(stack.begin(), m.owner()._ivalue());  // what libtorch's definition does, less its profiler record
  return m.function()(std::move(stack), kwargs);
}

/// `v` with every tuple, list and dict copied (the tensors shared): the app may change the containers it gets.
c10::IValue fresh_containers(const c10::IValue& v) {
  if (v.isTuple()) {
    std::vector<c10::IValue> elems;
    for (const c10::IValue& e : v.toTupleRef().elements()) elems.push_back(fresh_containers(e));
    return c10::ivalue::Tuple::create(std::move(elems));
  }
  if (v.isList()) {
    c10::impl::GenericList out(v.toList().elementType());
    for (const c10::IValue& e : v.toListRef()) out.push_back(fresh_containers(e));
    return out;
  }
  if (v.isGenericDict()) {
    const c10::impl::GenericDict d = v.toGenericDict();
    c10::impl::GenericDict out(d.keyType(), d.valueType());
    for (const auto& kv : d) out.insert(kv.key(), fresh_containers(kv.value()));
    return out;
  }
  return v;
}

#if defined(CUDAL1_TORCH_CUDA)

uint64_t hash_key(const void* owner, const void* fn, const std::vector<int64_t>& key) {
  uint64_t h = reinterpret_cast<uintptr_t>(owner) * 0x9E3779B97F4A7C15ull ^ reinterpret_cast<uintptr_t>(fn);
  for (int64_t k : key) h = (h ^ static_cast<uint64_t>(k)) * 0x100000001B3ull;
  return h;
}

/// One captured graph of a signature.
struct Instance {
  std::unique_ptr<detail::Capture> graph;  ///< Note [Capture without the generator]
  std::vector<at::Tensor> statics;   ///< the inputs' static copies
  c10::IValue out;                   ///< the outputs as captured
  std::vector<at::Tensor> outs;      ///< every output tensor, in order
  std::vector<long> impl_refs, storage_refs;  ///< the references cudal1 itself holds to each
  int64_t bytes = 0;
  cudaEvent_t done = nullptr;        ///< recorded after each replay
  cudaStream_t stream = nullptr;     ///< where the last replay ran

  /// True when the app holds none of the outputs (nor a view of one): a replay may overwrite them.
  bool free() const {
    for (size_t i = 0; i < outs.size(); ++i)
      if (outs[i].use_count() != impl_refs[i] || outs[i].storage().use_count() != storage_refs[i]) return false;
    return true;
  }
  /// Waits for the last replay (no CUDA call is made inside a region: Note [Deferred regions]).
  ~Instance() {
    detail::RegionWorkScope ours;
    if (done) {
      cudaEventSynchronize(done);
      cudaEventDestroy(done);
    }
  }
};

enum class State { kSettling, kTrial, kServe, kOff };

/// One (module, method, call signature).
struct Entry {
  c10::weak_intrusive_ptr<c10::ivalue::Object> owner{c10::intrusive_ptr<c10::ivalue::Object>()};
  const torch::jit::Function* fn = nullptr;
  std::vector<int64_t> key;
  std::string name;
  std::mutex mu;
  State state = State::kSettling;
  std::string why;  ///< kOff: why; else the last drop's reason
  int stable = 0;
  uint64_t gen = 0;
  uint64_t calls = 0;
  Clock::time_point changed = Clock::now();  ///< the last change of the generation or of busy seen
  detail::ModuleSnapshot snap;
  std::vector<std::unique_ptr<Instance>> inst;
  int captures = 0;
  // The trial (Note [Forward graphs]: decision).
  struct Mark {
    cudaEvent_t end;  ///< recorded on the caller's stream when the call's work was issued
    int block;        ///< the trial block; -1: the call did not run in its block's mode
    bool graph;
  };
  int trial_n = 0;
  std::vector<Mark> marks;
  double kept_graph_ms = 0, kept_eager_ms = 0;
  uint64_t served = 0;

  int64_t bytes() const {
    int64_t b = 0;
    for (const auto& i : inst) b += i->bytes;
    return b;
  }
  void drop(const std::string& reason, bool for_good) {
    const int64_t b = bytes();
    if (!inst.empty()) g_totals.dropped.fetch_add(for_good ? 0 : 1);
    inst.clear();
    g_totals.bytes.fetch_sub(b);
    why = reason;
    stable = 0;
    clear_marks();
    state = for_good ? State::kOff : State::kSettling;
  }
  void clear_marks() {
    detail::RegionWorkScope ours;
    for (const Mark& m : marks) cudaEventDestroy(m.end);
    marks.clear();
    trial_n = 0;
  }
  ~Entry() { clear_marks(); }
};

std::mutex g_entries_mu;
// Leaked: graphs and events are never destroyed at exit, after the driver may have shut down.
auto& g_entries = *new std::unordered_map<uint64_t, std::vector<std::unique_ptr<Entry>>>();

ForwardGraphOptions options() {
  std::lock_guard<std::mutex> lock(g_opts_mu);
  return g_opts;
}

Entry* find_or_add(const torch::jit::Method& m, const c10::intrusive_ptr<c10::ivalue::Object>& owner,
                   const std::vector<int64_t>& key) {
  const uint64_t h = hash_key(owner.get(), &m.function(), key);
  std::lock_guard<std::mutex> lock(g_entries_mu);
  auto& bucket = g_entries[h];
  for (const auto& e : bucket)
    if (e->owner._unsafe_get_target() == owner.get() && e->fn == &m.function() && e->key == key && !e->owner.expired())
      return e.get();
  auto e = std::make_unique<Entry>();
  e->owner = c10::weak_intrusive_ptr<c10::ivalue::Object>(owner);
  e->fn = &m.function();
  e->key = key;
  e->name = m.function().qualname().qualifiedName();
  if (std::string why = detail::graph_obstacle(m); !why.empty()) e->drop(why, true);
  bucket.push_back(std::move(e));
  return bucket.back().get();
}

/// Captures an instance for `e` on this call (Note [Forward graphs]: capture, check) and returns the eager result,
/// which the app gets whatever happens here. Caller holds e.mu.
c10::IValue capture(Entry& e, const ForwardGraphOptions& o, const torch::jit::Method& m,
                    const std::vector<c10::IValue>& stack, const Kwargs& kwargs, const std::vector<at::Tensor>& ins,
                    int device) {
  c10::IValue eager = call_torch(m, stack, kwargs);
  const uint64_t gen = change_generation();
  try {
    if (e.captures >= o.max_captures) {
      e.drop("captured " + std::to_string(e.captures) + " times", true);
      return eager;
    }
    ++e.captures;
    detail::ModuleSnapshot snap;
    std::string why;
    if (!snap.take(m.owner()._ivalue(), &why)) {
      e.drop(why, true);
      return eager;
    }
    bool grad_in = false;
    for (const at::Tensor& t : ins) grad_in = grad_in || t.requires_grad();
    if (c10::GradMode::is_enabled() && (grad_in || snap.any_requires_grad())) {
      e.drop("autograd would record the call (use torch::NoGradGuard or c10::InferenceMode)", true);
      return eager;
    }
    const auto dev = static_cast<c10::DeviceIndex>(device);
    c10::cuda::CUDAGuard on_device(dev);
    detail::flush_this_thread(detail::FlushReason::kOther);  // the eager forward's pending work runs now
    const c10::cuda::CUDAStream app = c10::cuda::getCurrentCUDAStream(dev);
    auto inst = std::make_unique<Instance>();
    int64_t static_bytes = 0;
    for (const at::Tensor& t : ins) {
      inst->statics.push_back(detail::normal_like(t));
      inst->statics.back().copy_(t);
      static_bytes += static_cast<int64_t>(t.nbytes());
    }
    std::vector<uint32_t> versions;
    for (const at::Tensor& t : inst->statics) versions.push_back(detail::version_of(t));
    const Result<c10::cuda::CUDAStream> side_or = detail::capture_stream(dev);
    if (!side_or.ok()) return e.drop(side_or.status().to_string(), true), eager;
    const c10::cuda::CUDAStream side = side_or.value();
    const int64_t reserved = detail::reserved_bytes(dev);
    inst->graph = std::make_unique<detail::Capture>();
    c10::IValue out;
    std::string failed;
    bool busy = false;
    detail::order(app, side);
    {
      c10::cuda::CUDAStreamGuard on_side(side);
      detail::ForwardCaptureScope capturing;
      try {
        inst->graph->begin(dev);
      } catch (const detail::CaptureBusy&) {
        busy = true;  // Note [Captures and context synchronisation]: a later call captures
        failed = "busy";
      } catch (const std::exception& ex) {
        failed = std::string("the capture could not begin: ") + ex.what();
      }
      if (failed.empty()) {
        try {
          out = call_torch(m, detail::with_tensors(stack, inst->statics), kwargs);
          detail::flush_this_thread(detail::FlushReason::kOther);  // the last region goes into the graph
        } catch (const std::exception& ex) {
          failed = ex.what();
        }
        try {
          inst->graph->end();
        } catch (const std::exception& ex) {
          if (failed.empty()) failed = ex.what();
        }
      }
    }
    if (!failed.empty()) {  // a region the failed forward left open runs now, eagerly, on the side stream
      c10::cuda::CUDAStreamGuard on_side(side);
      detail::flush_this_thread(detail::FlushReason::kOther);
    }
    detail::order(side, app);
    if (busy) {  // not a capture: it does not count against max_captures
      --e.captures;
      return eager;
    }
    if (!failed.empty()) {
      inst->graph.reset();
      g_totals.capture_failures.fetch_add(1);
      const auto nl = failed.find('\n');
      e.drop("the capture failed: " + failed.substr(0, nl), true);
      return eager;
    }
    if (!snap.same()) return e.drop("the forward changes its module's tensors or attributes", true), eager;
    for (size_t i = 0; i < versions.size(); ++i)
      if (detail::version_of(inst->statics[i]) != versions[i])
        return e.drop("the forward changes an input in place", true), eager;
    detail::tensors_of(out, &inst->outs);
    std::vector<at::Tensor> ref;
    detail::tensors_of(eager, &ref);
    if (ref.size() != inst->outs.size()) return e.drop("the captured outputs differ from the eager ones", true), eager;
    for (size_t i = 0; i < inst->outs.size(); ++i) {
      const at::Tensor& t = inst->outs[i];
      if (!t.is_cuda() || !t.has_storage()) return e.drop("an output is not a CUDA tensor", true), eager;
      for (const at::Tensor& s : inst->statics)
        if (s.storage().unsafeGetStorageImpl() == t.storage().unsafeGetStorageImpl())
          return e.drop("an output aliases an input", true), eager;
      if (t.sizes() != ref[i].sizes() || t.scalar_type() != ref[i].scalar_type())
        return e.drop("the captured outputs differ from the eager ones", true), eager;
    }
    inst->bytes = static_bytes + std::max<int64_t>(0, detail::reserved_bytes(dev) - reserved);
    if (g_totals.bytes.load() + inst->bytes > o.memory_budget) {
      return e.drop("over the forward graph memory budget (" + std::to_string(o.memory_budget >> 20) + " MiB)", true),
             eager;
    }
    // The check: the first replay (the statics still hold this call's inputs) against the eager result.
    inst->graph->replay();
    for (size_t i = 0; i < ref.size(); ++i)
      if (!detail::close_enough(inst->outs[i], ref[i])) {
        g_totals.check_failures.fetch_add(1);
        return e.drop("the graph's first replay differs from the eager forward", true), eager;
      }
    if (change_generation() != gen) {  // cudal1 changed what a call runs meanwhile: settle again
      e.drop("cudal1 changed a kernel during the capture", false);
      return eager;
    }
    {
      detail::RegionWorkScope ours;
      if (cudaEventCreateWithFlags(&inst->done, cudaEventDisableTiming) != cudaSuccess) inst->done = nullptr;
      if (inst->done) cudaEventRecord(inst->done, app.stream());
    }
    inst->stream = app.stream();
    inst->out = std::move(out);
    ref.clear();
    for (const at::Tensor& t : inst->outs) {
      inst->impl_refs.push_back(t.use_count());
      inst->storage_refs.push_back(t.storage().use_count());
    }
    g_totals.captures.fetch_add(1);
    g_totals.bytes.fetch_add(inst->bytes);
    CUDAL1_LOG(kInfo, "forward graph of " << e.name << " captured (" << (inst->bytes >> 20) << " MiB, "
                                          << inst->outs.size() << " outputs)");
    const bool first = e.inst.empty();
    e.inst.push_back(std::move(inst));
    e.snap = std::move(snap);
    e.gen = gen;
    if (first) {
      e.state = o.force ? State::kServe : State::kTrial;
      e.clear_marks();
    }
  } catch (const std::exception& ex) {
    e.drop(std::string("cudal1 error: ") + ex.what(), true);
  }
  return eager;
}

/// Runs `inst` for this call's inputs on the current stream; returns its outputs. Caller holds e.mu.
c10::IValue replay(Instance& inst, const std::vector<at::Tensor>& ins, int device) {
  const auto dev = static_cast<c10::DeviceIndex>(device);
  c10::cuda::CUDAGuard on_device(dev);
  const c10::cuda::CUDAStream app = c10::cuda::getCurrentCUDAStream(dev);
  {
    detail::RegionWorkScope ours;
    if (inst.done && inst.stream != app.stream()) cudaStreamWaitEvent(app.stream(), inst.done, 0);
  }
  for (size_t i = 0; i < ins.size(); ++i)
    if (!ins[i].is_same(inst.statics[i])) inst.statics[i].copy_(ins[i]);
  inst.graph->replay();
  {
    detail::RegionWorkScope ours;
    if (inst.done) cudaEventRecord(inst.done, app.stream());
  }
  inst.stream = app.stream();
  g_totals.replays.fetch_add(1, std::memory_order_relaxed);
  return fresh_containers(inst.out);
}

/// Note [Forward graphs], decision: marks the end of a trial call's work on the caller's stream (its regions
/// flushed first, so that the event follows all of it). `graph`: the mode the call ran in; `wanted`: its block's.
void trial_mark(Entry& e, bool graph, bool wanted, int block, int device) {
  detail::flush_this_thread(detail::FlushReason::kOther);
  detail::RegionWorkScope ours;
  cudaEvent_t ev = nullptr;
  if (cudaEventCreate(&ev) != cudaSuccess) throw std::runtime_error("cudaEventCreate failed");
  cudaEventRecord(ev, c10::cuda::getCurrentCUDAStream(static_cast<c10::DeviceIndex>(device)).stream());
  e.marks.push_back({ev, graph == wanted ? e.trial_n / block : -1, graph});
  ++e.trial_n;
}

/// The app's periods from the trial's marks: the GPU time between the ends of two consecutive calls of one block
/// (the first call of a block follows the other mode's call and is not counted). Waits for the last mark.
void trial_periods(Entry& e, std::vector<double>* graph_ms, std::vector<double>* eager_ms) {
  detail::RegionWorkScope ours;
  if (e.marks.empty() || cudaEventSynchronize(e.marks.back().end) != cudaSuccess) return;
  for (size_t i = 1; i < e.marks.size(); ++i) {
    const Entry::Mark &a = e.marks[i - 1], &b = e.marks[i];
    float ms = 0;
    if (a.block < 0 || a.block != b.block || cudaEventElapsedTime(&ms, a.end, b.end) != cudaSuccess) continue;
    (b.graph ? graph_ms : eager_ms)->push_back(ms);
  }
}

c10::IValue call_graphed(const torch::jit::Method& m, std::vector<c10::IValue> stack, const Kwargs& kwargs) {
  const Clock::time_point now = Clock::now();
  std::vector<int64_t> key;
  std::vector<at::Tensor> ins;
  int device = -1;
  std::string why;
  if (!detail::call_key(stack, &key, &ins, &device, &why) || device < 0 || stream_capturing(device) != 0) {
    CUDAL1_LOG(kDebug, "forward graphs: " << m.function().qualname().qualifiedName() << " runs as before: "
                                          << (why.empty() ? "no CUDA tensor input, or the app captures" : why));
    return call_torch(m, std::move(stack), kwargs);
  }
  const c10::intrusive_ptr<c10::ivalue::Object> owner = m.owner()._ivalue();
  Entry& e = *find_or_add(m, owner, key);
  std::unique_lock<std::mutex> lock(e.mu, std::try_to_lock);
  if (!lock.owns_lock() || e.state == State::kOff) {  // another thread has it, or it stays eager
    if (lock.owns_lock()) lock.unlock();
    return call_torch(m, std::move(stack), kwargs);
  }
  const ForwardGraphOptions o = options();
  ++e.calls;
  if (e.state == State::kSettling) {
    const uint64_t gen = change_generation();
    if (gen != e.gen || open_trials() > 0 || (o.busy && o.busy())) {
      e.gen = gen;
      e.stable = 0;
      e.changed = now;
    } else if (++e.stable >= o.settle_calls && e.calls >= static_cast<uint64_t>(o.min_calls) &&
               now - e.changed >= std::chrono::milliseconds(o.settle_ms)) {
      return capture(e, o, m, stack, kwargs, ins, device);
    }
    lock.unlock();
    return call_torch(m, std::move(stack), kwargs);
  }
  // kTrial or kServe: the graphs serve only the module state and kernels they were captured with.
  if (change_generation() != e.gen) {
    e.drop("cudal1 changed a kernel", false);
  } else if (!e.snap.same()) {
    e.drop("the module's tensors or attributes changed", false);
  }
  if (e.state == State::kSettling) {
    lock.unlock();
    return call_torch(m, std::move(stack), kwargs);
  }
  bool graph = true, wanted = true;
  const bool trial = e.state == State::kTrial;
  if (trial) {
    const int total = 2 * o.rounds * o.block;
    if (e.trial_n >= total) {
      std::vector<double> graph_ms, eager_ms;
      trial_periods(e, &graph_ms, &eager_ms);
      e.clear_marks();
      const double g = median(graph_ms), x = median(eager_ms);
      std::ostringstream s;
      s << "the app's period " << g << " ms with the graph, " << x << " ms without";
      if (graph_wins(graph_ms, eager_ms, o.margin)) {
        e.state = State::kServe;
        e.kept_graph_ms = g;
        e.kept_eager_ms = x;
        e.served = 0;
        g_totals.kept.fetch_add(1);
        CUDAL1_LOG(kInfo, "forward graph of " << e.name << " kept: " << s.str());
      } else {
        g_totals.given_up.fetch_add(1);
        CUDAL1_LOG(kInfo, "forward graph of " << e.name << " given up: " << s.str());
        e.drop(s.str(), true);
        lock.unlock();
        return call_torch(m, std::move(stack), kwargs);
      }
    } else {
      wanted = graph = (e.trial_n / o.block) % 2 == 0;  // graph blocks first: the check just ran
    }
  }
  const bool marking = trial && e.state == State::kTrial;
  if (e.state == State::kServe && ++e.served >= static_cast<uint64_t>(o.retrial_every)) {
    e.state = State::kTrial;  // judged again by the app's period now
    e.clear_marks();
  }
  if (graph) {
    for (const auto& i : e.inst)
      if (i->free()) {
        c10::IValue out = replay(*i, ins, device);
        if (marking) trial_mark(e, true, wanted, o.block, device);
        return out;
      }
    if (static_cast<int>(e.inst.size()) < o.instances && e.captures < o.max_captures) {
      c10::IValue out = capture(e, o, m, stack, kwargs, ins, device);  // the app keeps earlier outputs
      if (marking && e.state == State::kTrial) trial_mark(e, false, wanted, o.block, device);
      return out;
    }
  }
  if (marking) {  // the trial's eager block: the call's end is marked too
    c10::IValue out = call_torch(m, std::move(stack), kwargs);
    trial_mark(e, false, wanted, o.block, device);
    return out;
  }
  lock.unlock();
  return call_torch(m, std::move(stack), kwargs);
}

#endif  // CUDAL1_TORCH_CUDA

}  // namespace

namespace detail {

/// What cudal1's definition of Method::operator() runs.
c10::IValue forward_call(const torch::jit::Method& m, std::vector<c10::IValue> stack, const Kwargs& kwargs) {
  g_totals.calls.fetch_add(1, std::memory_order_relaxed);
  if (t_depth > 0 || !g_enabled.load(std::memory_order_relaxed) || !kwargs.empty())
    return call_torch(m, std::move(stack), kwargs);
#if defined(CUDAL1_TORCH_CUDA)
  DepthScope depth;
  return call_graphed(m, std::move(stack), kwargs);
#else
  return call_torch(m, std::move(stack), kwargs);
#endif
}

}  // namespace detail

Status configure_forward_graphs(const ForwardGraphOptions& o) {
  if (o.settle_calls < 1 || o.min_calls < 0 || o.settle_ms < 0 || o.block < 2 || o.rounds < 1 || o.instances < 1 ||
      o.max_captures < 1 || o.retrial_every < 1 || o.memory_budget < 0)
    return Status(Code::kInvalidArgument, "bad forward graph options");
  std::lock_guard<std::mutex> lock(g_opts_mu);
  g_opts = o;
  g_enabled.store(o.enabled);
  return Status();
}

void note_dispatch_change() noexcept { g_changes.fetch_add(1, std::memory_order_relaxed); }
uint64_t change_generation() noexcept { return g_changes.load(std::memory_order_relaxed); }

ForwardGraphCounters forward_graph_counters() noexcept {
  ForwardGraphCounters c;
  c.calls = g_totals.calls.load();
  c.replays = g_totals.replays.load();
  c.captures = g_totals.captures.load();
  c.capture_failures = g_totals.capture_failures.load();
  c.check_failures = g_totals.check_failures.load();
  c.kept = g_totals.kept.load();
  c.given_up = g_totals.given_up.load();
  c.dropped = g_totals.dropped.load();
  c.bytes = g_totals.bytes.load();
#if defined(CUDAL1_TORCH_CUDA)
  try {
    std::lock_guard<std::mutex> lock(g_entries_mu);
    for (const auto& [h, bucket] : g_entries)
      for (const auto& e : bucket) {
        if (e->owner.expired()) continue;  // its module is gone
        std::lock_guard<std::mutex> el(e->mu);
        c.undecided += e->state == State::kSettling || e->state == State::kTrial;
      }
  } catch (...) {
  }
#endif
  return c;
}

bool forward_graph_interposed(std::string* why) noexcept {
  const RealCall torch_fn = torch_definition();
  void* first = dlsym(RTLD_DEFAULT, kMethodCall);
  if (!torch_fn) {
    if (why) *why = "libtorch's torch::jit::Method::operator() was not found";
    return g_totals.calls.load() > 0;
  }
  if (first && first != reinterpret_cast<void*>(torch_fn)) return true;
  if (why)
    *why = "the app's calls to torch::jit::Method::operator() resolve to libtorch first: link libcudal1.so before "
           "torch, or preload it (LD_PRELOAD)";
  return false;
}

std::string forward_graph_report() {
#if defined(CUDAL1_TORCH_CUDA)
  std::ostringstream s;
  std::lock_guard<std::mutex> lock(g_entries_mu);
  for (const auto& [h, bucket] : g_entries)
    for (const auto& e : bucket) {
      std::lock_guard<std::mutex> el(e->mu);
      s << e->name << ": ";
      switch (e->state) {
        case State::kSettling: s << "settling" << (e->why.empty() ? "" : " (" + e->why + ")"); break;
        case State::kTrial: s << "on trial"; break;
        case State::kServe:
          s << "graph kept (the app's period " << e->kept_graph_ms << " ms with it, " << e->kept_eager_ms
            << " ms without; " << e->inst.size() << " graphs, " << (e->bytes() >> 20) << " MiB)";
          break;
        case State::kOff: s << "eager: " << e->why; break;
      }
      s << "\n";
    }
  return s.str();
#else
  return "";
#endif
}

std::string forward_graph_obstacle(const torch::jit::Method& m) {
  std::string why = detail::graph_obstacle(m);
  if (!why.empty()) return why;
  detail::ModuleSnapshot snap;
  if (!snap.take(m.owner()._ivalue(), &why)) return why;
  return "";
}

void release_forward_graphs() noexcept {
#if defined(CUDAL1_TORCH_CUDA)
  try {
    std::lock_guard<std::mutex> lock(g_entries_mu);
    for (auto& [h, bucket] : g_entries)
      for (auto& e : bucket) {
        std::lock_guard<std::mutex> el(e->mu);
        if (e->state != State::kOff) e->drop("released", false);
      }
  } catch (...) {
  }
#endif
}

}  // namespace cudal1::dispatcher

/// Note [Forward graphs]: the app's `Module::forward` (and every direct Method call) lands here when libcudal1.so
/// precedes libtorch in the symbol lookup order; libtorch's own definition runs from forward_call.
c10::IValue torch::jit::Method::operator()(std::vector<c10::IValue> stack, const torch::jit::Kwargs& kwargs) const {
  return cudal1::dispatcher::detail::forward_call(*this, std::move(stack), kwargs);
}
