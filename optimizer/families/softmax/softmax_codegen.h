/// @brief Private: what the softmax family's generators and bound kernels share beyond softmax_family.h: the head of
/// every source, each column technique's generator and bound kernel, and the lookup of a plan's technique.
#pragma once

#include <iosfwd>
#include <vector>

#include "softmax_family.h"

namespace cudal1::optimizer::softmax {

/// The head of every softmax technique's source, up to its own constants: the dtype (dtype_prelude), exact division,
/// the cluster and cp.async primitives where `primitives`, then, opening namespace softmax, the constants
/// softmax_common.cuh lists (kFastExp: Note [Softmax fast exp]'s forms where `fast_exp` and the output is 16-bit).
void device_head(std::ostream& o, c10::ScalarType dtype, bool log, int vec, int block, bool fast_exp, bool primitives);
/// A column technique's head: its first line (kName and variant `v`), then device_head.
void column_head(std::ostream& o, const ColumnShape& c, const char* name, const Variant& v, int vec, int block,
                 bool fast_exp, bool primitives);
/// One enumerator bound to a module variable (Notes [Softmax row constants], [Softmax column constants]):
/// `enum : <type> { <name> = ::<variable> };`.
void bound_constant(std::ostream& o, const char* type, const char* name, const char* variable);
/// `name` bound to `variable` where the head declares it (`declared`), else the plain constant `value`.
void bound_or_constant(std::ostream& o, const char* type, const char* name, const char* variable, bool declared,
                       int64_t value);
/// The enumerators that split columns and every tile read, bound to their column variables: kN = N,
/// kInnerVectors = IV, kOuterStride = OSV, kNStride = NSV (Note [Softmax column constants]).
void bound_column_constants(std::ostream& o);

/// The technique among `techniques` (a plan's space in its order) whose variant is `v`, else InvalidArgument.
template <class Technique>
Result<Technique> technique_in(const std::vector<Technique>& techniques, const Variant& v) {
  for (const Technique& t : techniques)
    if (variant_of(t).id() == v.id()) return t;
  return Status(Code::kInvalidArgument, "variant " + v.id() + " is not in this plan's space");
}

/// The column techniques' sources (generate_softmax_columns dispatches to them).
KernelSource generate_softmax_tiles(const ColumnShape& c, const ColumnTiles& t);
KernelSource generate_softmax_shared_tiles(const ColumnShape& c, const SharedTiles& t);
KernelSource generate_softmax_shared_tiles(const ColumnShape& c, const PairTiles& t);
KernelSource generate_softmax_held(const ColumnShape& c, const HeldSlabs& t);

/// The checks every column kernel makes of a call: one tensor argument of the planned sizes and strides, and
/// input and output aligned to `align` bytes; Unsupported otherwise (ATen serves the call).
Status check_column_call(const ColumnShape& c, uintptr_t align, const c10::IValue* args, size_t nargs,
                         const at::Tensor* outs);

/// The bound kernel of a tile variant: checks the call's layout and alignment (vec), allocates the workspace
/// of a chunked variant per call and launches its phases on the call's stream.
std::unique_ptr<BoundKernel> make_tile_kernel(const ColumnShape& c, const ColumnTiles& t,
                                              std::shared_ptr<LoadedModule> m);

/// The bound kernel of a held-slab variant: the workspace per call, one cooperative launch; declines (Unsupported)
/// every call on a device whose SM count is not c.sm_count, the one its source was sized for.
std::unique_ptr<BoundKernel> make_held_kernel(const ColumnShape& c, const HeldKnobs& k,
                                              std::shared_ptr<LoadedModule> m);

}  // namespace cudal1::optimizer::softmax
