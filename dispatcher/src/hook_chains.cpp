/// @brief The hook's side of chain profiling (Note [Chain profiling] in chains.h): each thread's builder, the
/// carriers' entry point, and the public queries over the hook's chain table.
#include <ATen/core/ivalue.h>

#include <algorithm>

#include "cudal1/core/log.h"
#include "hook_state.h"

namespace cudal1::dispatcher {
namespace detail {
namespace {

/// Note [Thread-local lifetime]: at process exit glibc runs the main thread's thread_local destructors *before*
/// the atexit handlers and static destructors (cudal1's shutdown, an app's own), and on any thread a
/// thread_local may be destroyed before another one whose destructor still makes hooked calls. A thread_local
/// used after its destructor ran is undefined behaviour (the builder's freed vectors of weak TensorImpl
/// references crashed the serve-mode exit on the GPU, 2026-12-05), so each of cudal1's thread-local states sets
/// a trivially destructible flag when it dies, and is not handed out after that: a late call is not recorded.
thread_local bool t_builder_gone = false;
struct BuilderSlot {
  ChainBuilder b;
  ChainBuilder programs{/*programs=*/true};  // Note [Program chains]
  ~BuilderSlot() { t_builder_gone = true; }
};

/// This thread's builders; null once they were destroyed (Note [Thread-local lifetime]).
BuilderSlot* this_thread_slot() {
  if (t_builder_gone) return nullptr;
  thread_local BuilderSlot slot;
  return &slot;
}

/// Set at the first convolution the hook sees: program chains are recorded from then on (a model without one
/// pays nothing for them).
std::atomic<bool> g_programs{false};

}  // namespace

bool recording_programs() noexcept { return g_programs.load(std::memory_order_relaxed); }

void observe_chain(HookState& st, const ChainBuilder::Call& call) noexcept {
  try {
    BuilderSlot* slot = this_thread_slot();
    if (!slot) return;
    slot->b.observe(call, *st.chains);
    if (call.conv && !g_programs.load(std::memory_order_relaxed)) g_programs.store(true);
    if (g_programs.load(std::memory_order_relaxed)) slot->programs.observe(call, *st.chains);
  } catch (const std::exception& e) {  // Note [Hook firewall]: profiling never reaches the app
    if (first_time("chain-observe")) CUDAL1_LOG(kWarn, "chain profiling failed on one call (" << e.what() << ")");
  } catch (...) {
  }
}

void observe_boxed_chain(HookState& st, SigRecord* rec, const c10::OperatorHandle& op,
                         const c10::SmallVector<at::Tensor, 6>& inputs, const torch::jit::Stack& stack) noexcept {
  try {
    ChainBuilder::Call call;
    call.rec = rec;
    call.inplace = rec && rec->op.schema().is_mutable();  // only is_inplace ops among the hooked mutable ones
    call.conv = op.schema().name() == "aten::_convolution" && op.schema().overload_name().empty();
    call.bmm = op.schema().name() == "aten::bmm" && op.schema().overload_name().empty();
    for (const auto& t : inputs) call.args.push_back(&t);
    const size_t nret = op.schema().returns().size();
    for (size_t i = stack.size() >= nret ? stack.size() - nret : 0; i < stack.size(); ++i)
      if (stack[i].isTensor()) call.outputs.push_back(&stack[i].toTensor());
    observe_chain(st, call);
  } catch (...) {
  }
}

void boxed_chain_inputs(const c10::OperatorHandle& op, const torch::jit::Stack& stack, size_t nargs,
                        c10::SmallVector<at::Tensor, 6>* out) noexcept {
  try {
    const auto& schema_args = op.schema().arguments();
    if (stack.size() < nargs) return;
    for (size_t i = 0; i < nargs && i < schema_args.size(); ++i) {
      const c10::IValue& a = stack[stack.size() - nargs + i];
      if (a.isTensor()) {
        out->push_back(a.toTensor());
      } else if (a.isNone()) {
        const auto& type = schema_args[i].type();
        if (type->kind() == c10::TypeKind::OptionalType &&
            type->castRaw<c10::OptionalType>()->getElementType()->kind() == c10::TypeKind::TensorType)
          out->push_back(at::Tensor());
      }
    }
  } catch (...) {
    out->clear();
  }
}

}  // namespace detail

void for_each_chain(const std::function<void(ChainRecord&)>& fn) {
  detail::HookState* st = detail::g_state.load();
  if (st && st->chains) st->chains->for_each(fn);
}

ChainRecord* prefix_chain(const ChainRecord& chain, size_t nodes) {
  detail::HookState* st = detail::g_state.load();
  if (!st || !st->chains || nodes < 2 || nodes > chain.nodes.size()) return nullptr;
  std::vector<ChainNode> prefix(chain.nodes.begin(), chain.nodes.begin() + static_cast<std::ptrdiff_t>(nodes));
  return st->chains->find_or_insert(prefix, externals_read(prefix));
}

std::vector<ChainNode> suffix_nodes(const ChainRecord& chain, size_t from, int* externals) {
  return segment_nodes(chain, from, chain.nodes.size(), externals);
}

std::vector<ChainNode> segment_nodes(const ChainRecord& chain, size_t from, size_t to, int* externals) {
  std::vector<ChainNode> out;
  // Sources by first use: an earlier node's output (producer, index) or an external slot (-1, slot).
  std::vector<std::pair<int, int>> slots;
  auto slot_of = [&](int producer, int index) {
    const auto key = std::make_pair(producer, index);
    const auto it = std::find(slots.begin(), slots.end(), key);
    if (it != slots.end()) return static_cast<int>(it - slots.begin());
    slots.push_back(key);
    return static_cast<int>(slots.size()) - 1;
  };
  const int f = static_cast<int>(from);
  for (size_t k = from; k < std::min(to, chain.nodes.size()); ++k) {
    ChainNode n = chain.nodes[k];
    for (ChainInput& in : n.inputs) {
      if (in.producer >= f) in.producer -= f;  // a node of the suffix
      else if (in.producer >= 0)                // computed before it: an external (a view of it is another tensor)
        in = {-1, slot_of(in.producer, in.view ? -2 - in.index : in.index)};
      else if (in.index >= 0) in = {-1, slot_of(-1, in.index)};             // an external of the chain
    }
    out.push_back(std::move(n));
  }
  *externals = static_cast<int>(slots.size());
  return out;
}

ChainRecord* segment_chain(const ChainRecord& chain, size_t from, size_t to) {
  detail::HookState* st = detail::g_state.load();
  if (!st || !st->chains || to > chain.nodes.size() || from + 2 > to) return nullptr;
  int externals = 0;
  const std::vector<ChainNode> nodes = segment_nodes(chain, from, to, &externals);
  return st->chains->find_or_insert(nodes, externals);
}

ChainRecord* suffix_chain(const ChainRecord& chain, size_t from) {
  return from < 1 ? nullptr : segment_chain(chain, from, chain.nodes.size());
}

void set_chain_recording(bool on) noexcept {
  if (detail::HookState* st = detail::g_state.load()) st->chains_on.store(on);
}

void close_chain_on_this_thread() noexcept {
  try {
    detail::HookState* st = detail::g_state.load();
    if (st && st->chains)
      if (detail::BuilderSlot* slot = detail::this_thread_slot()) {
        slot->b.close(*st->chains);
        slot->programs.close(*st->chains);
      }
  } catch (...) {
  }
}

size_t update_hot_chains(int64_t hot_calls, double share) {
  double total_us = 0;
  for_each_record([&](SigRecord& r) { total_us += r.mean_us() * static_cast<double>(r.calls.load()); });
  size_t hot = 0;
  for_each_chain([&](ChainRecord& c) {
    // Compare-and-swap: the app's thread (wait_idle, flush) and the tuner's both get here, and the tuner may take
    // the chain past kHot meanwhile (tuned, fused); a plain store would send a fused chain back to be tuned again.
    ChainState cold = ChainState::kCold;
    if (c.state.load() == ChainState::kCold && c.count.load() >= static_cast<uint64_t>(hot_calls) &&
        c.est_total_us() >= share * total_us)
      c.state.compare_exchange_strong(cold, ChainState::kHot);
    hot += c.state.load() != ChainState::kCold;
  });
  return hot;
}

}  // namespace cudal1::dispatcher
