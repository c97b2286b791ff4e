/// @brief Source generation for the softmax family's column techniques (Note [Softmax columns]): the head they
/// share, SplitColumns' source, their variants, and the dispatch to each technique's generator.
#include <ostream>
#include <sstream>
#include <type_traits>

#include "codegen_common.h"
#include "softmax_codegen.h"
#include "softmax_cuda.h"

namespace cudal1::optimizer::softmax {

// Note [Softmax column constants]
// A column technique's head declares the column's sizes and strides as the constexpr variables the family's column
// cubins have always held (each a global of the module: Note [Softmax row constants] in softmax_codegen.cpp), with
// their names, types, values and order, where its technique declared them, and nothing beside them: N, IV, COLS,
// OSV, NSV and, cached, PER (SplitColumns); N, NC, IV, TILES, BLOCKS, OSV, NSV, then PER where cached and COLS where
// chunked (ColumnTiles); N, NB, NK, NS, IV, TILES, OSV, NSV (SharedTiles, PairTiles); N, INNER, LPR, OUTER, P, R,
// NB (HeldSlabs). The device code reads them through enumerators bound to them (bound_constant); a technique's
// enumerator whose variable it does not declare is a plain constant (kPer = 1 uncached).

namespace {

KernelSource split_columns(const ColumnShape& c, const SplitColumns& t) {
  const int64_t iv = c.inner / t.vec;
  std::ostringstream o;
  column_head(o, c, SplitColumns::kName, variant_of(t), t.vec, t.block, false, false);
  constant(o, "int", "kSplit", t.split);
  constant(o, "bool", "kCache", t.cache);
  o << "}  // namespace softmax\n";
  o << "static constexpr int N = " << c.n << ";\n"
    << "static constexpr index_t IV = " << iv << ";  // vectors along inner\n"
    << "static constexpr index_t COLS = " << c.outer * iv << ";  // column vectors\n"
    << "static constexpr index_t OSV = " << c.outer_stride / t.vec << ", NSV = " << c.n_stride / t.vec
    << ";  // input strides in vectors\n";
  if (t.cache) o << "static constexpr int PER = " << (c.n + t.split - 1) / t.split << ";  // vectors a thread keeps\n";
  o << "namespace softmax {\n";
  bound_column_constants(o);
  bound_constant(o, "index_t", "kColumns", "COLS");
  bound_or_constant(o, "int", "kPer", "PER", t.cache, 1);
  o << "}  // namespace softmax\n"
    << device_sources::kSoftmaxCommon << device_sources::kSoftmaxColumnCommon << device_sources::kSoftmaxSplitColumns;
  return KernelSource{o.str(), "cudal1_softmax"};
}

/// The knobs keep 1 where set, two 1 (every shared tile has two passes; the id keeps the knob), async 1 where set
/// of a shared tile's variant.
void shared_knobs(Variant& v, bool keep, bool async) {
  if (keep) v.knobs.emplace_back("keep", 1);
  v.knobs.emplace_back("two", 1);
  if (async) v.knobs.emplace_back("async", 1);
}

}  // namespace

void bound_column_constants(std::ostream& o) {
  bound_constant(o, "int", "kN", "N");
  bound_constant(o, "index_t", "kInnerVectors", "IV");
  bound_constant(o, "index_t", "kOuterStride", "OSV");
  bound_constant(o, "index_t", "kNStride", "NSV");
}

void column_head(std::ostream& o, const ColumnShape& c, const char* name, const Variant& v, int vec, int block,
                 bool fast_exp, bool primitives) {
  o << "// cudal1 softmax columns: " << name << " " << v.id() << " log=" << c.log << " " << c10::toString(c.dtype)
    << " outer=" << c.outer << " n=" << c.n << " inner=" << c.inner << "\n";
  device_head(o, c.dtype, c.log, vec, block, fast_exp, primitives);
}

Variant variant_of(const ColumnTechnique& t) {
  return std::visit(
      [](const auto& k) {
        using T = std::decay_t<decltype(k)>;
        if constexpr (std::is_same_v<T, SplitColumns>) {
          return Variant{{{"vec", k.vec}, {"block", k.block}, {"split", k.split}, {"cache", k.cache ? 1 : 0}}};
        } else if constexpr (std::is_same_v<T, ColumnTiles>) {
          Variant v{
              {{"vec", k.vec}, {"block", k.block}, {"tile", 1}, {"chunks", k.chunks}, {"cache", k.cache ? 1 : 0}}};
          if (k.fast) v.knobs.emplace_back("fast", 1);
          return v;
        } else if constexpr (std::is_same_v<T, SharedTiles>) {
          Variant v{{{"vec", k.vec}, {"block", k.block}, {"tile", 2}, {"cluster", k.cluster}}};
          shared_knobs(v, k.keep, k.async);
          return v;
        } else if constexpr (std::is_same_v<T, PairTiles>) {
          Variant v{{{"vec", k.vec}, {"block", k.block}, {"tile", 2}, {"cluster", k.cluster}}};
          shared_knobs(v, k.keep, true);
          v.knobs.emplace_back("pair", 1);
          return v;
        } else {
          return Variant{{{"tile", 3}, {"stats", k.stats}, {"out", k.out}, {"merge", k.merge}, {"pf", k.prefetch},
                          {"hold", k.hold}}};
        }
      },
      t);
}

KernelSource generate_softmax_columns(const ColumnShape& c, const ColumnTechnique& t) {
  return std::visit(
      [&](const auto& k) {
        using T = std::decay_t<decltype(k)>;
        if constexpr (std::is_same_v<T, SplitColumns>)
          return split_columns(c, k);
        else if constexpr (std::is_same_v<T, ColumnTiles>)
          return generate_softmax_tiles(c, k);
        else if constexpr (std::is_same_v<T, HeldSlabs>)
          return generate_softmax_held(c, k);
        else
          return generate_softmax_shared_tiles(c, k);
      },
      t);
}

}  // namespace cudal1::optimizer::softmax
