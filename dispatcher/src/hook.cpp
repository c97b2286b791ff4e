/// @brief Installing, suspending and resuming the hook, and its public queries (hook.h). The per-call logic is
/// in hook_state.cpp; the two carriers in boxed_hook.cpp and typed_hook.cpp.
#include "cudal1/dispatcher/hook.h"

#include <algorithm>

#include "cudal1/core/log.h"
#include "hook_state.h"
#include "region.h"

namespace cudal1::dispatcher {

using detail::g_state;
using detail::HookState;

namespace {

bool returns_tensor(const c10::FunctionSchema& schema) {
  for (const auto& r : schema.returns())
    if (r.type()->kind() == c10::TypeKind::TensorType) return true;
  return false;
}

/// Registers the hook for st.ops in a new torch::Library: typed kernels where one exists, the boxed one
/// otherwise. Kept until suspend_hooks; otherwise leaked on purpose (deregistering at exit could run after the
/// dispatcher is gone).
Status register_kernels(HookState& st) {
  std::lock_guard<std::mutex> lock(st.registration_mu);
  if (st.lib) return Status();
  auto lib = std::make_unique<torch::Library>(torch::Library::IMPL, "aten", c10::DispatchKey::BackendSelect,
                                               __FILE__, __LINE__);
  try {
    st.typed_ops.clear();
    for (const auto& spec : st.ops) {
      bool typed = false;
      try {
        typed = detail::register_typed(*lib, spec);
      } catch (const std::exception& e) {  // a torch whose schema differs from our typed kernel: use the boxed one
        CUDAL1_LOG(kWarn, "typed hook for " << spec << " refused (" << e.what() << "); using the boxed one");
      }
      if (typed) st.typed_ops.push_back(spec);
      if (!typed) lib->impl(spec.c_str(), torch::CppFunction::makeFromBoxedFunction<&detail::boxed_hook>());
    }
  } catch (const std::exception& e) {
    return Status(Code::kInternal, std::string("registering the hook failed: ") + e.what());
  }
  st.lib = lib.release();
  return Status();
}

}  // namespace

bool is_functional(const c10::FunctionSchema& schema) {
  if (schema.is_mutable() || schema.is_vararg() || schema.is_varret()) return false;
  for (const auto& a : schema.arguments())
    if (a.alias_info()) return false;
  for (const auto& r : schema.returns())
    if (r.alias_info()) return false;
  return returns_tensor(schema);
}

bool is_inplace(const c10::FunctionSchema& schema) {
  if (schema.is_vararg() || schema.is_varret() || schema.arguments().empty() || schema.returns().size() != 1)
    return false;
  const auto& args = schema.arguments();
  const c10::AliasInfo* self = args[0].alias_info();
  const c10::AliasInfo* ret = schema.returns()[0].alias_info();
  if (!self || !self->isWrite() || !ret || !ret->isWrite() || self->beforeSets() != ret->beforeSets()) return false;
  if (args[0].type()->kind() != c10::TypeKind::TensorType || args[0].is_out()) return false;
  for (size_t i = 1; i < args.size(); ++i)
    if (args[i].alias_info()) return false;
  return true;
}

bool is_view_op(const c10::FunctionSchema& schema) {
  if (schema.is_mutable() || schema.is_vararg() || schema.is_varret() || schema.returns().empty()) return false;
  for (const auto& a : schema.arguments())
    if (a.alias_info() && a.alias_info()->isWrite()) return false;
  for (const auto& r : schema.returns())
    if (!r.alias_info() || r.alias_info()->isWrite() || r.type()->kind() != c10::TypeKind::TensorType) return false;
  return true;
}

Status install_hooks(const HookOptions& opts, HookCallbacks callbacks) {
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  if (g_state.load()) return Status(Code::kInvalidArgument, "cudal1 hooks are already installed");
  if (opts.hot_calls < 1 || opts.sample_every < 1) return Status(Code::kInvalidArgument, "bad hook options");
  auto& dispatcher = c10::Dispatcher::singleton();

  std::vector<c10::OperatorName> names;
  if (opts.ops.empty()) {
    for (const auto& n : dispatcher.getAllOpNames()) {
      if (n.name.rfind("aten::", 0) != 0) continue;
      auto h = dispatcher.findOp(n);
      if (!h || !h->hasSchema() || h->hasKernelForDispatchKey(c10::DispatchKey::BackendSelect)) continue;
      if (is_functional(h->schema())) names.push_back(n);
    }
    if (opts.chains)  // Note [In-place nodes]: profile runs see relu_ and += inside chains too
      for (const auto& spec : chain_ops()) {
        const auto dot = spec.find('.');
        c10::OperatorName n("aten::" + spec.substr(0, dot), dot == std::string::npos ? "" : spec.substr(dot + 1));
        auto h = dispatcher.findSchema(n);
        if (h && is_inplace(h->schema())) names.push_back(n);
      }
  } else {
    for (const auto& spec : opts.ops) {
      const auto dot = spec.find('.');
      c10::OperatorName n("aten::" + spec.substr(0, dot), dot == std::string::npos ? "" : spec.substr(dot + 1));
      auto h = dispatcher.findSchema(n);
      if (!h) return Status(Code::kNotFound, "no ATen operator " + spec);
      const bool inplace_chain_op =
          opts.chains && is_inplace(h->schema()) &&
          std::find(chain_ops().begin(), chain_ops().end(), spec) != chain_ops().end();
      if (!is_functional(h->schema()) && !inplace_chain_op)
        return Status(Code::kInvalidArgument, spec + " is a view, in-place, out= or mutable op; not hooked");
      if (h->hasKernelForDispatchKey(c10::DispatchKey::BackendSelect))
        return Status(Code::kInvalidArgument, spec + " already has a BackendSelect kernel (a factory op)");
      names.push_back(n);
    }
  }

  auto* st = new HookState();
  st->opts = opts;
  st->cb = std::move(callbacks);
  for (const auto& n : names) {
    std::string spec = n.name.substr(6);
    if (!n.overload_name.empty()) spec += "." + n.overload_name;
    st->ops.push_back(spec);
  }
  if (opts.chains) st->chains = std::make_unique<ChainTable>();
  CUDAL1_RETURN_IF_ERROR(register_kernels(*st));
  g_state.store(st, std::memory_order_release);
  return Status();
}

Status suspend_hooks() {
  HookState* st = g_state.load();
  if (!st) return Status(Code::kInvalidArgument, "hooks are not installed");
  detail::flush_all(detail::FlushReason::kOther);  // Note [Deferred regions]: nothing stays pending unhooked
  std::lock_guard<std::mutex> lock(st->registration_mu);
  delete st->lib;  // deregisters every kernel it registered
  st->lib = nullptr;
  return Status();
}

Status resume_hooks() {
  HookState* st = g_state.load();
  if (!st) return Status(Code::kInvalidArgument, "hooks are not installed");
  return register_kernels(*st);
}

bool hooks_installed() noexcept { return g_state.load() != nullptr; }

std::vector<std::string> hooked_ops() {
  HookState* st = g_state.load();
  return st ? st->ops : std::vector<std::string>{};
}

void for_each_record(const std::function<void(SigRecord&)>& fn) {
  HookState* st = g_state.load();
  if (!st) return;
  for (auto& slot : st->tables)
    if (SigTable* t = slot.load(std::memory_order_acquire)) t->for_each(fn);
}

HookCounters hook_counters() noexcept {
  HookCounters c;
  if (HookState* st = g_state.load()) {
    for_each_record([&](SigRecord& r) { c.hooked_calls += r.calls.load(std::memory_order_relaxed); });
    c.signatures = st->signatures.load();
    c.replaced_calls = st->replaced_calls.load();
    c.fallbacks = st->fallbacks.load();
  }
  return c;
}

void collect_samples() noexcept {
  if (HookState* st = g_state.load()) st->sampler.collect();
}

uint64_t nested_calls_on_this_thread() noexcept { return detail::t_nested; }

void push_bypass() noexcept {
  // Note [Deferred regions]: calls made while bypassed go straight to ATen, so this thread's region runs first.
  if (detail::g_regions_live.load(std::memory_order_relaxed)) detail::flush_this_thread(detail::FlushReason::kOther);
  ++detail::t_bypass;
}
void pop_bypass() noexcept {
  if (detail::t_bypass > 0) --detail::t_bypass;
}

}  // namespace cudal1::dispatcher
