/// @brief Source generation for the softmax family's held slabs (HeldSlabs, Note [Softmax held slabs]): the head of
/// typed constants and column variables, its grid compiled in for the plan's SM count, before
/// softmax_held_slabs.cuh.
#include <sstream>

#include "codegen_common.h"
#include "softmax_codegen.h"
#include "softmax_cuda.h"

namespace cudal1::optimizer::softmax {

int held_threads(const HeldKnobs& k) { return (k.stats + k.out + 3) * 32; }

int64_t held_red_bytes(const ColumnShape& c, const HeldKnobs& k) { return 2 * int64_t{k.stats} * c.inner * 8; }

KernelSource generate_softmax_held(const ColumnShape& c, const HeldSlabs& t) {
  std::ostringstream o;
  // 16-byte lanes of 8 elements; 16-bit outputs take Note [Softmax fast exp]'s forms.
  column_head(o, c, HeldSlabs::kName, variant_of(t), 4, held_threads(t), true, false);
  constant(o, "bool", "kBfloat16", c.dtype == c10::ScalarType::BFloat16);
  constant(o, "int", "kStats", t.stats);
  constant(o, "int", "kOut", t.out);
  constant(o, "int", "kMerge", t.merge);
  constant(o, "int", "kPrefetch", t.prefetch);
  constant(o, "int", "kHold", t.hold);
  constant(o, "int", "kMaxSlots", kHeldMaxSlots);
  o << "}  // namespace softmax\n";
  const HeldGrid g = held_grid(c, t, c.sm_count);
  o << "static constexpr int N = " << c.n << ", INNER = " << c.inner << ", LPR = " << c.inner / 8
    << ";  // lanes a row: 16 bytes each\nstatic constexpr int OUTER = " << c.outer << ", P = " << g.parts
    << ", R = " << g.rows << ", NB = " << g.slots << ";  // parts a slab, rows a part, slots: held_grid for "
    << c.sm_count << " SMs\n";
  o << "namespace softmax {\n";
  bound_constant(o, "int", "kN", "N");
  bound_constant(o, "int", "kInner", "INNER");
  bound_constant(o, "int", "kLanesPerRow", "LPR");
  bound_constant(o, "int", "kOuter", "OUTER");
  bound_constant(o, "int", "kParts", "P");
  bound_constant(o, "int", "kPartRows", "R");
  bound_constant(o, "int", "kSlots", "NB");
  o << "}  // namespace softmax\n" << device_sources::kSoftmaxCommon << device_sources::kSoftmaxColumnCommon
    << device_sources::kSoftmaxPackedPairs << device_sources::kSoftmaxHeldSlabs;
  return KernelSource{o.str(), "cudal1_softmax"};
}

}  // namespace cudal1::optimizer::softmax
