/// @brief The column tiles of the reduction family (Note [Reductions]): ColumnTile, PipelinedTile (Note [Column
/// tiles in flight]) and ClusterTile (Note [Column tiles in clusters], Note [Column tiles in rings]), their sizing,
/// launches and source: their constants, then reduce_column_tile.cuh, which all three share.
#include <ostream>

#include "codegen_common.h"
#include "reduce_cuda.h"
#include "reduce_family.h"

namespace cudal1::optimizer::reduce {
namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

/// What reduce_column_tile.cuh reads beyond the shared head.
struct TileConstants {
  int unr = 0;             ///< rows a batch of loads
  bool pipe = false;       ///< the next batch is loaded before this one is pushed
  int64_t counters = 0;    ///< one-launch arrival counters' bytes (0: none)
  bool cluster = false;    ///< a tile's chunks are the blocks of one cluster
  int ring_stages = 0;     ///< stages of the cp.async ring (0: none)
};

/// The tile's constants, then codegen_common's cluster primitives and cp.async copies (whole vec_t vectors) and
/// reduce_column_tile.cuh. The tile names both in its kCluster and kRing branches, so every tile's source carries
/// them; those a variant does not call compile to nothing.
void tile_source(std::ostream& o, const ReduceShape& s, const TileLaunch& k, const TileConstants& c) {
  o << "namespace reduce {\n";
  constant(o, "int", "kColumns", k.columns);
  constant(o, "int", "kWarps", k.block / 32);
  constant(o, "int", "kTile", 32 * k.columns * k.vec);
  constant(o, "int", "kUnr", c.unr);
  constant(o, "index_t", "kChunk", k.chunk_rows(s));
  constant(o, "bool", "kPipe", c.pipe);
  constant(o, "bool", "kOneLaunch", c.counters > 0);
  constant(o, "int", "kCounterBytes", c.counters);
  constant(o, "bool", "kCluster", c.cluster);
  constant(o, "bool", "kRing", c.ring_stages > 0);
  constant(o, "int", "kRingStages", c.ring_stages > 0 ? c.ring_stages : 1);
  o << "}  // namespace reduce\n"
    << cluster_primitives_source() << async_copy_source() << vector_copy_source() << device_sources::kReduceColumnTile;
}

/// A tile's first launch: tiles along x, its chunks along y.
ReduceGrid tile_grid(const ReduceShape& s, const TileLaunch& k) {
  ReduceGrid g;
  g.x = k.tiles(s);
  g.y = k.splits;
  return g;
}

}  // namespace

int64_t TileLaunch::tiles(const ReduceShape& s) const { return ceil_div(s.outputs / vec, 32 * int64_t{columns}); }

int64_t TileLaunch::chunk_rows(const ReduceShape& s) const { return ceil_div(s.length, splits); }

int64_t TileLaunch::chain(const ReduceShape& s) const { return ceil_div(chunk_rows(s), block / 32); }

ReduceGrid ColumnTile::grid(const ReduceShape& s) const {
  ReduceGrid g = tile_grid(s, *this);
  if (splits > 1) {
    g.second_x = ceil_div(s.outputs, block);
    g.workspace = s.outputs * splits * kAccBytes;
  }
  return g;
}

void ColumnTile::source(std::ostream& o, const ReduceShape& s) const {
  tile_source(o, s, *this, TileConstants{columns * vec >= 2 ? 4 : 8});
}

int64_t PipelinedTile::counter_bytes(const ReduceShape& s) const {
  return splits == 1 ? 0 : (tiles(s) * 4 + 15) / 16 * 16;
}

ReduceGrid PipelinedTile::grid(const ReduceShape& s) const {
  ReduceGrid g = tile_grid(s, *this);
  g.counters = counter_bytes(s);
  if (g.counters > 0) g.workspace = g.counters + s.outputs * splits * kAccBytes;
  return g;
}

void PipelinedTile::source(std::ostream& o, const ReduceShape& s) const {
  tile_source(o, s, *this, TileConstants{batch, true, counter_bytes(s)});
}

size_t ClusterTile::ring_smem_bytes(const ReduceShape& s) const {
  return static_cast<size_t>(ring_stages()) * batch * columns * block * vec * elem_size(s.dtype);
}

ReduceGrid ClusterTile::grid(const ReduceShape& s) const {
  ReduceGrid g;
  g.x = tiles(s) * splits;
  g.cluster = splits;
  g.smem = ring_smem_bytes(s);
  return g;
}

void ClusterTile::source(std::ostream& o, const ReduceShape& s) const {
  tile_source(o, s, *this, TileConstants{batch, true, 0, true, ring_stages()});
}

}  // namespace cudal1::optimizer::reduce
