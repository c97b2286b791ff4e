/// @brief Features every family's variants share (Note [Shared features]): what the cross-family policy (Note
/// [Cross-family policy] in policy.h) learns from and scores, whatever family a signature belongs to.
///
/// Note [Shared features]
/// A family's own features (Plan::features) name its knobs and its techniques ("mode 4", "cache 1"), so what one
/// family's policy learns means nothing to another's. The shared schema describes a variant by what kernels of
/// every family have in common, read from its knob names and values and the problem's class (no family code):
///   where the variant sits in its own space: the widest or narrowest vector (knob `vec`; none: one element), the
///   largest or smallest block (`block`), the most or least work per thread (the product of `unroll`, `unr`, `ty`,
///   `per`, `opw` x `oph`, `chunk`; 1 where absent), each only where the space has more than one value;
///   and what it does: split across blocks (`splits` > 1), a thread-block cluster (`cluster` > 0), a ring of stages
///   (`ring` > 0), a grid-stride loop (`grid` = 1), data staged in shared memory (`cache`, `smem` or `async` = 1);
/// each crossed with the problem's class: always, 2-byte elements, fewer than 2^22 elements, an innermost extent of
/// at most 1024, compute-bound (a GEMM: mm, addmm, bmm).
/// Why positions in the space rather than absolute sizes: what wins in absolute terms differs by family (128-thread
/// blocks and 16-byte vectors for the elementwise rows, 512-1024 threads and 4-byte column vectors for the column
/// reductions); with whole families left out of the teaching (docs/PERF.md, "Tuner replay") a policy over absolute
/// sizes (vector bytes, threads and work as one-hot classes) needed 12.9 trials to 95% of the best, as many as the
/// default search, this schema 10.4 (chosen among six schemas on those same landscapes). A knob name a family uses
/// for something else reads the same way (the schema is a convention the families' knob names follow, not a
/// per-family table); a new meaning bumps kSharedFeaturesVersion, so a stored cross-family policy is never read
/// against another layout.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "cudal1/optimizer/family.h"

namespace cudal1::optimizer {

/// The layout of shared_features(): bumped whenever it changes (part of the stored policy's name).
constexpr int kSharedFeaturesVersion = 1;

/// What the shared features read from a problem.
struct ProblemClass {
  int elem_bytes = 4;      ///< element size of the first tensor argument
  int64_t elements = 0;    ///< its element count
  int64_t inner = 0;       ///< its innermost extent (last dimension)
  bool compute_bound = false;  ///< a GEMM (mm, addmm, bmm); every other family moves bytes
};

/// The class of `p` (its first tensor argument; a problem without one: the defaults).
ProblemClass problem_class(const Problem& p);

/// The smallest and largest vector width, block and work per thread of a space (Note [Shared features]).
struct SpaceRange {
  std::array<int64_t, 3> lo{}, hi{};
};
SpaceRange space_range(const std::vector<Variant>& space);

/// Length of shared_features().
size_t shared_feature_dim();

/// The shared features of `v`, a variant of a space of range `r`, on a problem of class `c` (values 0 or 1, length
/// shared_feature_dim()).
std::vector<float> shared_features(const Variant& v, const ProblemClass& c, const SpaceRange& r);

/// The cross-family policy shipped for compute capability `sm` (Note [Cross-family policy] in policy.h): its JSON
/// (Policy::to_json over shared_features), or empty when none is shipped. sm 90 (H100, H200): taught by the recorded
/// landscapes of bench/replay (framework/shared_prior_sm90.inc, written by `bench_tuner_replay bench/replay
/// --write-prior`).
std::string_view shipped_shared_prior(int sm);

/// Readable name of shared feature `i` ("widest-vec", "largest-block x 2-byte", ...), for reports and tests.
std::string shared_feature_name(size_t i);

}  // namespace cudal1::optimizer
