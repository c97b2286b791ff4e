/// @brief Deferred regions' public side (regions.h): enabling deferral, fusing a chain, the ATen replay of a
/// chain, and the DeferredInit key that flushes a thread's region before any other dispatcher op.
#include <ATen/ATen.h>
#include <c10/core/impl/LocalDispatchKeySet.h>

#include <algorithm>
#include <map>
#include <mutex>

#include "cudal1/core/log.h"
#include "cudal1/dispatcher/cuda_glue.h"
#include "cudal1/dispatcher/forward_graphs.h"
#include "hook_state.h"
#include "region.h"

namespace cudal1::dispatcher {
namespace detail {
namespace {

struct Deferral {
  std::mutex mu;
  bool enabled = false;
  bool cpu = false;
  Status cuda;  // ok when CUDA tensors may be deferred (the CUPTI guard is armed)
  torch::Library* fallback = nullptr;
  torch::Library* fallthroughs = nullptr;
  std::vector<std::unique_ptr<ChainKernel>> kernels;  // kept until exit: a flush may be running one
};
Deferral& deferral() {
  static auto* d = new Deferral();  // leaked: regions may flush during static destruction
  return *d;
}
std::atomic<bool> g_cpu{false}, g_cuda{false}, g_poison{false};

/// True for ops that read no values, only sizes and strides, and return aliases: the view ops, and
/// `_unsafe_view` (matmul's reshape of its bmm's result, an alias its schema does not annotate).
bool reads_no_values(const c10::OperatorHandle& op) {
  if (is_view_op(op.schema())) return true;
  const auto& s = op.schema();
  return s.name() == "aten::_unsafe_view" && s.overload_name().empty();
}

/// The DeferredInit fallback: this thread's region runs, then the op continues as if the key were not there.
/// A view of tensors the region does not write (Note [Views in regions]) continues without it, and so does a
/// view of a pending tensor: it reads no value, and whatever reads through it later flushes first (any
/// other op, a hooked call that is not the chain's next node, an external aliasing a pending output: matches()
/// in region.cpp, a CUDA call: the CUPTI guard). A chain node may read it as a view (Note [Matmul views]).
void region_fallback(const c10::OperatorHandle& op, c10::DispatchKeySet ks, torch::jit::Stack* stack) {
  if (!reads_no_values(op)) flush_this_thread(FlushReason::kOp);
  static const c10::DispatchKeySet kAfter(c10::DispatchKeySet::FULL_AFTER, c10::DispatchKey::DeferredInit);
  op.redispatchBoxed(ks & kAfter, stack);
}

}  // namespace

/// Note [Unsafe out overloads]
/// An early flush or a verification replays a chain into given outputs through each op's out= overload. One
/// overload is not safe to call that way: torch 2.11's cudnn_batch_norm.out, which hands back a reserve tensor
/// other than its out3 argument (FlagGems skips it on 2.11 for failing on repeated calls). In 4 of 4 ResNet-50
/// tune processes under ASan (H100, 2026-12-07), destroying replay_chain's stack after a boxed out= call read
/// a tensor the call had freed (heap-use-after-free), at the first chain's verification; without ASan the
/// corrupted heap aborted one tune process in two, 5-10 s in. With this overload excluded and nothing else
/// changed, 4 of 4 ran clean (45 s each, the chains verified and fused). Such ops take the functional op and a
/// copy instead (replay_chain).
static bool unsafe_out_overload(const c10::FunctionSchema& functional) {
  return functional.name() == "aten::cudnn_batch_norm";
}

/// The out= overload of `op` with `outs` trailing out arguments after exactly `op`'s arguments (add.Tensor ->
/// add.out, mul.Scalar -> mul.Scalar_out, sigmoid -> sigmoid.out); null when it has none or it is unsafe (Note
/// [Unsafe out overloads]). Cached per op.
const c10::OperatorHandle* out_overload(const c10::OperatorHandle& op, size_t outs) {
  static std::mutex mu;
  static std::map<std::string, std::unique_ptr<c10::OperatorHandle>>* cache =
      new std::map<std::string, std::unique_ptr<c10::OperatorHandle>>();
  const auto& schema = op.schema();
  if (unsafe_out_overload(schema)) return nullptr;
  const std::string key = schema.name() + "." + schema.overload_name() + "/" + std::to_string(outs);
  std::lock_guard<std::mutex> lock(mu);
  if (auto it = cache->find(key); it != cache->end()) return it->second.get();
  std::unique_ptr<c10::OperatorHandle> found;
  const std::string ov = schema.overload_name();
  std::vector<std::string> names;
  if (ov.empty() || ov == "Tensor") names.push_back("out");
  if (!ov.empty()) names.push_back(ov + "_out");
  for (const auto& n : names) {
    auto h = c10::Dispatcher::singleton().findSchema(c10::OperatorName(schema.name(), n));
    if (!h) continue;
    const auto& a = h->schema().arguments();
    const auto& f = schema.arguments();
    bool ok = a.size() == f.size() + outs;
    for (size_t i = 0; ok && i < f.size(); ++i) ok = a[i].name() == f[i].name() && !a[i].is_out();
    for (size_t i = f.size(); ok && i < a.size(); ++i) ok = a[i].is_out();
    if (ok) {
      found = std::make_unique<c10::OperatorHandle>(*h);
      break;
    }
  }
  auto& slot = (*cache)[key];
  slot = std::move(found);
  return slot.get();
}

namespace {

class AtenChainKernel final : public ChainKernel {
 public:
  explicit AtenChainKernel(const ChainRecord& c) : chain_(c) {}
  Status run(const std::vector<at::Tensor>& externals,
             const std::vector<std::vector<at::Tensor>>& outputs) noexcept override {
    return replay_chain(chain_, chain_.nodes.size(), externals, outputs);
  }
  std::string describe() const override { return "aten replay"; }

 private:
  const ChainRecord& chain_;
};

}  // namespace

bool region_poison() { return g_poison.load(std::memory_order_relaxed); }

bool region_deferral_allowed(const c10::Device& d) {
  return d.is_cuda() ? g_cuda.load(std::memory_order_relaxed) : d.is_cpu() && g_cpu.load(std::memory_order_relaxed);
}

std::vector<c10::OperatorName> composite_only_ops() {
  auto& dispatcher = c10::Dispatcher::singleton();
  const c10::DispatchKeySet kernels({c10::DispatchKey::CPU, c10::DispatchKey::CUDA, c10::DispatchKey::Meta,
                                     c10::DispatchKey::CompositeExplicitAutograd, c10::DispatchKey::DeferredInit,
                                     c10::DispatchKey::BackendSelect});
  std::vector<c10::OperatorName> out;
  for (const auto& n : dispatcher.getAllOpNames()) {
    if (n.name.rfind("aten::", 0) != 0) continue;
    auto h = dispatcher.findOp(n);
    if (!h || !h->hasSchema()) continue;
    if (h->hasKernelForDispatchKey(c10::DispatchKey::CompositeImplicitAutograd) && !h->hasKernelForAnyDispatchKey(kernels))
      out.push_back(n);
  }
  return out;
}

Status register_region_key(const std::vector<std::string>& typed_ops) {
  Deferral& d = deferral();
  if (d.fallback) return Status();
  try {
    auto fb = std::make_unique<torch::Library>(torch::Library::IMPL, "_", c10::DispatchKey::DeferredInit,
                                               __FILE__, __LINE__);
    fb->fallback(torch::CppFunction::makeFromBoxedFunction<&region_fallback>());
    auto ft = std::make_unique<torch::Library>(torch::Library::IMPL, "aten", c10::DispatchKey::DeferredInit,
                                               __FILE__, __LINE__);
    for (const auto& op : typed_ops) ft->impl(op.c_str(), torch::CppFunction::makeFallthrough());
    // Composite-only ops (layer_norm, batch_norm, softmax.int, max_pool2d, ...) compute only through the ops they
    // call, each of which flushes or defers on its own: they pass too, so a chain hidden behind one stays whole.
    // So does `convolution` (explicit-autograd, but computing only through `_convolution`: an eager Conv2d).
    // And allocations, which read no tensor's values (CPU batch norm allocates its empty reserve after the op).
    for (const char* op : {"convolution", "empty.memory_format", "empty_strided", "empty_like"})
      if (std::find(typed_ops.begin(), typed_ops.end(), op) == typed_ops.end())
        ft->impl(op, torch::CppFunction::makeFallthrough());
    for (const auto& name : composite_only_ops()) {
      const std::string spec = name.name.substr(6) + (name.overload_name.empty() ? "" : "." + name.overload_name);
      if (std::find(typed_ops.begin(), typed_ops.end(), spec) == typed_ops.end())
        ft->impl(spec.c_str(), torch::CppFunction::makeFallthrough());
    }
    d.fallback = fb.release();  // kept until exit, like the hook's own library
    d.fallthroughs = ft.release();
  } catch (const std::exception& e) {
    return Status(Code::kUnavailable, std::string("the DeferredInit dispatch key is taken (") + e.what() + ")");
  }
  return Status();
}

}  // namespace detail

namespace {

/// The boxed arguments of `node`: tensors from `arg`, everything else as its signature recorded it.
torch::jit::Stack node_stack(const ChainNode& node, const std::function<at::Tensor(const ChainInput&)>& arg) {
  const SigRecord& rec = *node.rec;
  const auto& args = rec.op.schema().arguments();
  torch::jit::Stack stack;
  size_t ti = 0;
  for (size_t a = 0; a < args.size(); ++a) {
    if (!is_tensor_argument(args[a])) {
      if (a >= rec.args.size()) throw std::runtime_error("replay: the record lacks arguments");
      stack.push_back(rec.args[a].value);
      continue;
    }
    if (ti >= node.inputs.size()) throw std::runtime_error("replay: node inputs do not match its op");
    const ChainInput in = node.inputs[ti++];
    if (in.producer < 0 && in.index < 0) {
      stack.emplace_back();
    } else if (in.view) {  // Note [Matmul views]: the reshape the call read, of the producer's output
      const TensorSpec& s = rec.args[a].tensor;
      stack.emplace_back(arg(in).as_strided(s.sizes, s.strides));
    } else {
      stack.emplace_back(arg(in));
    }
  }
  return stack;
}

}  // namespace

void run_chain_node(const ChainNode& node, const std::function<at::Tensor(const ChainInput&)>& arg,
                    std::vector<at::Tensor>* produced) {
  BypassScope bypass;
  torch::jit::Stack stack = node_stack(node, arg);
  node.rec->op.callBoxed(&stack);
  produced->clear();
  for (auto& v : stack) produced->push_back(v.isTensor() ? v.toTensor() : at::Tensor());
}

Status replay_chain(const ChainRecord& chain, size_t nodes, const std::vector<at::Tensor>& externals,
                    const std::vector<std::vector<at::Tensor>>& outputs) noexcept {
  try {
    c10::impl::ExcludeDispatchKeyGuard no_key(c10::DispatchKey::DeferredInit);
    BypassScope bypass;
    std::vector<std::vector<at::Tensor>> produced(std::min(nodes, chain.nodes.size()));
    auto arg = [&](const ChainInput& in) -> at::Tensor {
      return in.producer >= 0 ? produced.at(static_cast<size_t>(in.producer)).at(static_cast<size_t>(in.index))
                              : externals.at(static_cast<size_t>(in.index));
    };
    for (size_t k = 0; k < produced.size(); ++k) {
      const ChainNode& node = chain.nodes[k];
      // Every output given: the op's out= overload writes them in place, allocating nothing (an early flush
      // may run inside another thread's CUDA call). Otherwise the functional op, copied into what is given. An
      // in-place node runs as itself on the tensor its producer wrote (Note [In-place nodes]).
      const bool given = !node.inplace && k < outputs.size() && !outputs[k].empty() &&
                         std::all_of(outputs[k].begin(), outputs[k].end(), [](const at::Tensor& t) { return t.defined(); });
      const c10::OperatorHandle* out_op = given ? detail::out_overload(node.rec->op, outputs[k].size()) : nullptr;
      if (out_op) {
        torch::jit::Stack stack = node_stack(node, arg);
        for (const at::Tensor& o : outputs[k]) stack.emplace_back(o);
        try {
          out_op->callBoxed(&stack);
          produced[k] = outputs[k];
          continue;
        } catch (const std::exception&) {
          // An out= overload without a kernel for this backend (LibTorch 1.13's native_batch_norm.out on the
          // CPU) fails before writing: the functional op below computes it instead.
        }
      }
      run_chain_node(node, arg, &produced[k]);
      if (k >= outputs.size()) continue;
      for (size_t m = 0; m < outputs[k].size() && m < produced[k].size(); ++m)
        if (outputs[k][m].defined() && produced[k][m].defined() && !outputs[k][m].is_same(produced[k][m]))
          outputs[k][m].copy_(produced[k][m]);
    }
    return Status();
  } catch (const std::exception& e) {
    return Status(Code::kInternal, std::string("replaying a chain through ATen failed: ") + e.what());
  } catch (...) {
    return Status(Code::kInternal, "replaying a chain through ATen failed");
  }
}

std::unique_ptr<ChainKernel> aten_chain_kernel(const ChainRecord& chain) {
  return std::make_unique<detail::AtenChainKernel>(chain);
}

Status enable_deferral(const DeferralOptions& opts) {
  detail::HookState* st = detail::g_state.load();
  if (!st) return Status(Code::kInvalidArgument, "enable_deferral: the hook is not installed");
  if (!st->chains) return Status(Code::kInvalidArgument, "enable_deferral: the hook records no chains");
  auto& d = detail::deferral();
  std::lock_guard<std::mutex> lock(d.mu);
  if (!d.enabled) {
    std::vector<std::string> typed;
    {
      std::lock_guard<std::mutex> reg(st->registration_mu);
      typed = st->typed_ops;
    }
    CUDAL1_RETURN_IF_ERROR(detail::register_region_key(typed));
    d.cuda = has_torch_cuda() ? detail::arm_cupti_guard(opts.cupti_full, opts.device)
                              : Status(Code::kUnavailable, "this build has no torch-CUDA glue");
    d.enabled = true;
  }
  d.cpu = d.cpu || (opts.cpu && st->opts.profile_cpu);
  detail::g_poison.store(opts.poison);
  detail::g_cpu.store(d.cpu);
  detail::g_cuda.store(d.cuda.ok());
  return Status();
}

std::string deferral_status() {
  auto& d = detail::deferral();
  std::lock_guard<std::mutex> lock(d.mu);
  if (!d.enabled) return "off (not enabled)";
  std::string s = d.cuda.ok() ? "CUDA: on (CUPTI guard armed, " + detail::cupti_guard_watch() + ")"
                               : "CUDA: off (" + d.cuda.message() + ")";
  return s + (d.cpu ? "; CPU: on (tests)" : "; CPU: off");
}

Status fuse_chain(ChainRecord& chain, std::unique_ptr<ChainKernel> kernel) {
  if (!kernel) return Status(Code::kInvalidArgument, "fuse_chain: no kernel");
  auto& d = detail::deferral();
  std::lock_guard<std::mutex> lock(d.mu);
  if (!d.enabled) return Status(Code::kInvalidArgument, "fuse_chain: deferral is not enabled");
  for (const ChainNode& n : chain.nodes) {
    if (n.outputs.empty()) return Status(Code::kInvalidArgument, "fuse_chain: a node has no tensor output");
    for (const TensorSpec& s : n.outputs)
      if (!s.defined || s.storage_offset != 0)
        return Status(Code::kInvalidArgument, "fuse_chain: an output is undefined or has a storage offset");
  }
  SigRecord* head = chain.nodes.front().rec;
  ChainRecord* prev = nullptr;
  if (!head->chain_head.compare_exchange_strong(prev, &chain) && prev != &chain)
    return Status(Code::kInvalidArgument, "fuse_chain: another fused chain starts with the same signature");
  d.kernels.push_back(std::move(kernel));
  chain.kernel.store(d.kernels.back().get(), std::memory_order_release);
  chain.state.store(ChainState::kFused);
  detail::g_regions_live.store(true);
  note_dispatch_change();  // Note [Forward graphs]
  return Status();
}

bool unfuse_chain(ChainRecord& chain, ChainState to) noexcept {
  ChainState fused = ChainState::kFused;
  if (!chain.state.compare_exchange_strong(fused, to)) return false;
  ChainRecord* self = &chain;
  chain.nodes.front().rec->chain_head.compare_exchange_strong(self, nullptr);
  note_dispatch_change();
  return true;
}

}  // namespace cudal1::dispatcher
