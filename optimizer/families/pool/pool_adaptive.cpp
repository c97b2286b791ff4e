/// @brief AdaptiveStaging: adaptive_avg_pool2d with uniform windows over a dense NCHW input, staged through shared
/// memory in coalesced 16-byte vectors (knob flat, Note [Pooling adaptive staging]); its device code is
/// pool_adaptive_staging.cuh.
#include <algorithm>
#include <numeric>
#include <ostream>

#include "codegen_common.h"
#include "pool_cuda.h"
#include "pool_family.h"

namespace cudal1::optimizer::pool {

bool flat_fits(const PoolShape& s) {
  if (s.kind != PoolKind::kAdaptiveAvg || s.h % s.oh || s.w % s.ow) return false;
  // A thread sums its window serially, fully unrolled: small windows only (a global pooling would leave one
  // thread of a block summing a whole plane).
  if ((s.h / s.oh) * (s.w / s.ow) > kMaxPatch) return false;
  // Dense NCHW: every dim of size > 1 has the contiguous stride (so (plane, output row) blocks are contiguous).
  const int64_t sizes[] = {s.n, s.c, s.h, s.w}, strides[] = {s.sn, s.sc, s.sh, s.sw};
  int64_t want = 1;
  for (int d = 3; d >= 0; --d) {
    if (sizes[d] > 1 && strides[d] != want) return false;
    want *= sizes[d];
  }
  return true;
}

FlatGeometry AdaptiveStaging::geometry(const PoolShape& s) const {
  FlatGeometry g;
  const int64_t es = elem_size(s.dtype), ve = 16 / es;
  g.row_elems = (s.h / s.oh) * s.w;
  const int64_t align = ve / std::gcd(ve, g.row_elems);  // rows whose inputs are whole vectors
  const int64_t target = static_cast<int64_t>(block) * flat * ve / g.row_elems / align * align;
  g.rows = std::max(align, target);
  g.bytes = g.rows * g.row_elems * es;
  g.blocks = (s.n * s.c * s.oh + g.rows - 1) / g.rows;
  return g;
}

void AdaptiveStaging::source(std::ostream& o, const PoolShape& s) const {
  const FlatGeometry g = geometry(s);
  const int64_t ve = 16 / elem_size(s.dtype);
  o << "namespace pool {\n";
  constant(o, "int", "kWinH", s.h / s.oh);
  constant(o, "int", "kWinW", s.w / s.ow);
  constant(o, "int", "kRowElems", g.row_elems);
  constant(o, "int", "kBlockRows", g.rows);
  constant(o, "int", "kVecElems", ve);
  constant(o, "int", "kChunk", g.rows * g.row_elems);
  constant(o, "int", "kLoads", (g.rows * g.row_elems / ve + block - 1) / block);
  constant(o, "index_t", "kOutRows", s.n * s.c * s.oh);
  constant(o, "index_t", "kTotal", s.n * s.c * s.h * s.w);
  o << "}  // namespace pool\n" << device_sources::kPoolAdaptiveStaging;
}

std::optional<AdaptiveStaging> adaptive_staging(const PoolKnobs& k) {
  if (!k.flat) return std::nullopt;
  return AdaptiveStaging{k.block, k.flat};
}

}  // namespace cudal1::optimizer::pool
