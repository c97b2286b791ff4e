/// @brief RegisterTiles: NCHW pooling in tiles of OPH x OPW outputs a thread, from a register patch of the input
/// (Note [Pooling]); its device code is pool_tiles.cuh.
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

}  // namespace

int64_t RegisterTiles::threads(const PoolShape& s) const { return s.n * s.c * tiles_h(s, oph) * tiles_w(s, opw); }

void RegisterTiles::source(std::ostream& o, const PoolShape& s) const {
  const bool patch = s.kind != PoolKind::kAdaptiveAvg && (opw > 1 || oph > 1);
  o << "namespace pool {\n";
  constant(o, "int", "kOpw", opw);
  constant(o, "int", "kOph", oph);
  constant(o, "int", "kTilesW", tiles_w(s, opw));
  constant(o, "int", "kTilesH", tiles_h(s, oph));
  constant(o, "bool", "kPatch", patch);
  constant(o, "int", "kPatchRows", patch_rows(s, oph));
  constant(o, "int", "kPatchCols", patch_cols(s, opw));
  constant(o, "bool", "kStoreVec", opw > 1 && s.ow % opw == 0);
  o << "}  // namespace pool\n" << device_sources::kPoolTiles;
}

}  // namespace cudal1::optimizer::pool
