/// @brief RegisterTiles and SharedTiles: NCHW pooling in tiles of OPH x OPW outputs a thread, from a register
/// patch of the input read from global memory or from the block's input rectangle staged in shared memory (Note
/// [Pooling smem]); their device code is pool_tiles.cuh.
#include <ostream>

#include "codegen_common.h"
#include "pool_cuda.h"
#include "pool_family.h"

namespace cudal1::optimizer::pool {

int64_t patch_rows(const PoolShape& s, int oph) {
  return static_cast<int64_t>(oph - 1) * s.dh + static_cast<int64_t>(s.kh - 1) * s.dil_h + 1;
}

int64_t patch_cols(const PoolShape& s, int opw) {
  return static_cast<int64_t>(opw - 1) * s.dw + static_cast<int64_t>(s.kw - 1) * s.dil_w + 1;
}

namespace {

int64_t tiles_w(const PoolShape& s, int opw) { return (s.ow + opw - 1) / opw; }
int64_t tiles_h(const PoolShape& s, int oph) { return (s.oh + oph - 1) / oph; }

/// The constants pool_tiles.cuh reads, then its text; `staged` the shared-memory geometry (SharedTiles), null
/// for RegisterTiles (whose staging constants are 1).
void tiles_source(std::ostream& o, const PoolShape& s, int opw, int oph, const SmemTile* staged) {
  const bool patch = s.kind != PoolKind::kAdaptiveAvg && (opw > 1 || oph > 1 || staged);
  const SmemTile g = staged ? *staged : SmemTile{};
  o << "namespace pool {\n";
  constant(o, "int", "kOpw", opw);
  constant(o, "int", "kOph", oph);
  constant(o, "int", "kTilesW", tiles_w(s, opw));
  constant(o, "int", "kTilesH", tiles_h(s, oph));
  constant(o, "bool", "kPatch", patch);
  constant(o, "int", "kPatchRows", patch_rows(s, oph));
  constant(o, "int", "kPatchCols", patch_cols(s, opw));
  constant(o, "bool", "kStoreVec", opw > 1 && s.ow % opw == 0);
  constant(o, "bool", "kStaged", staged != nullptr);
  constant(o, "int", "kBx", g.bx);
  constant(o, "int", "kBy", g.by);
  constant(o, "int", "kBlockTilesW", staged ? (tiles_w(s, opw) + g.bx - 1) / g.bx : 1);
  constant(o, "int", "kBlockTilesH", staged ? (tiles_h(s, oph) + g.by - 1) / g.by : 1);
  constant(o, "int", "kTileRows", staged ? g.rows : 1);
  constant(o, "int", "kTileCols", staged ? g.cols : 1);
  constant(o, "int", "kPitch", staged ? g.pitch : 1);
  constant(o, "int", "kVec", g.vec);
  constant(o, "int", "kPatchVecs", staged ? (patch_cols(s, opw) + g.vec - 1) / g.vec : 1);
  o << "}  // namespace pool\n" << device_sources::kPoolTiles;
}

}  // namespace

int64_t RegisterTiles::threads(const PoolShape& s) const { return s.n * s.c * tiles_h(s, oph) * tiles_w(s, opw); }

void RegisterTiles::source(std::ostream& o, const PoolShape& s) const { tiles_source(o, s, opw, oph, nullptr); }

SmemTile SharedTiles::geometry(const PoolShape& s) const {
  SmemTile g;
  const int64_t tw = tiles_w(s, opw);
  while (g.bx < 32 && g.bx < tw && g.bx < block) g.bx *= 2;
  g.by = block / g.bx;
  g.rows = static_cast<int64_t>(g.by * oph - 1) * s.dh + static_cast<int64_t>(s.kh - 1) * s.dil_h + 1;
  g.cols = static_cast<int64_t>(g.bx * opw - 1) * s.dw + static_cast<int64_t>(s.kw - 1) * s.dil_w + 1;
  const int64_t step = static_cast<int64_t>(opw) * s.dw;  // tile columns between adjacent threads' patches
  g.vec = step % 4 == 0 ? 4 : step % 2 == 0 ? 2 : 1;
  const int64_t pc = patch_cols(s, opw);
  g.patch_cols = (pc + g.vec - 1) / g.vec * g.vec;
  g.pitch = (g.bx - 1) * step + g.patch_cols;  // >= cols, a multiple of vec
  g.bytes = g.rows * g.pitch * static_cast<int64_t>(sizeof(float));
  return g;
}

int64_t SharedTiles::threads(const PoolShape& s) const {
  const SmemTile g = geometry(s);
  return s.n * s.c * ((tiles_h(s, oph) + g.by - 1) / g.by) * ((tiles_w(s, opw) + g.bx - 1) / g.bx) * block;
}

void SharedTiles::source(std::ostream& o, const PoolShape& s) const {
  const SmemTile g = geometry(s);
  tiles_source(o, s, opw, oph, &g);
}

}  // namespace cudal1::optimizer::pool
