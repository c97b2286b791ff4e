/// @brief The boxed carrier: one kernel for any op (profile mode hooks every functional aten op with it).
#include "hook_state.h"

namespace cudal1::dispatcher::detail {

void boxed_hook(const c10::OperatorHandle& op, c10::DispatchKeySet ks, torch::jit::Stack* stack) {
  HookState* st = active_state();
  if (!st) return op.redispatchBoxed(after_hook(ks), stack);
  DepthGuard depth;
  Visit v;
  SigKey key;
  const size_t nargs = op.schema().arguments().size();
  // Note [Chain profiling]: the inputs are taken before anything runs, since a replacement (or ATen) leaves
  // its outputs where the arguments were.
  c10::SmallVector<at::Tensor, 6> chain_inputs;
  const bool chain_on = recording_chains(*st);
  if (chain_on) boxed_chain_inputs(op, *stack, nargs, &chain_inputs);
  if (encode_call(op, *stack, nargs, &key)) visit_call(*st, op, key, nargs, [&] { return stack; }, &v);
  const bool chain = chain_on && v.rec;
  if (v.served) {
    v.sample->finish();
    if (chain) observe_boxed_chain(*st, v.rec, op, chain_inputs, *stack);
    return;
  }
  op.redispatchBoxed(after_hook(ks), stack);  // ATen's own errors propagate to the app unchanged
  if (v.sample) v.sample->finish();
  if (chain) observe_boxed_chain(*st, v.rec, op, chain_inputs, *stack);
}

}  // namespace cudal1::dispatcher::detail
