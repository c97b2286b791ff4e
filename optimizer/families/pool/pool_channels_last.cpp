/// @brief Channels-last pooling (Note [Pooling]): ChannelsLastVectors, OPW channels of one output pixel a thread,
/// and ChannelsLastTiles, the same in blocks of 2-d pixel tiles (Note [Pooling channels-last tiles]), whose device
/// code is pool_channels_last.cuh; and ChannelsLastRuns, for avg with stride-1 columns, runs of CPX pixels (Note
/// [Pooling exact division]), whose device code is pool_channels_last_runs.cuh.
#include <algorithm>
#include <ostream>

#include "codegen_common.h"
#include "pool_cuda.h"
#include "pool_family.h"

namespace cudal1::optimizer::pool {
namespace {

/// The constants pool_channels_last.cuh reads, then its text; `tile` the pixel-tile geometry (ChannelsLastTiles,
/// px output pixels along a row), null for ChannelsLastVectors (whose tile constants are 1).
void channels_last_source(std::ostream& o, const PoolShape& s, int opw, const PixelTile* tile, int px) {
  o << "namespace pool {\n";
  constant(o, "int", "kOpw", opw);
  constant(o, "bool", "kLoadVec", opw > 1 && opw <= s.max_vec);
  constant(o, "int", "kGroups", s.c / opw);
  constant(o, "bool", "kPixelTiles", tile != nullptr);
  constant(o, "int", "kSlices", tile ? tile->sg : 1);
  constant(o, "int", "kTileW", tile ? px : 1);
  constant(o, "int", "kTileH", tile ? tile->py : 1);
  constant(o, "int", "kTilesW", tile ? (s.ow + px - 1) / px : 1);
  constant(o, "int", "kTilesH", tile ? (s.oh + tile->py - 1) / tile->py : 1);
  o << "}  // namespace pool\n" << device_sources::kPoolChannelsLast;
}

}  // namespace

int64_t ChannelsLastVectors::threads(const PoolShape& s) const { return s.n * s.oh * s.ow * (s.c / opw); }

void ChannelsLastVectors::source(std::ostream& o, const PoolShape& s) const {
  channels_last_source(o, s, opw, nullptr, 0);
}

PixelTile ChannelsLastTiles::geometry(const PoolShape& s) const {
  PixelTile g;
  const int64_t groups = s.c / opw;
  while (groups % (2 * g.sg) == 0 && 2 * g.sg * opw * elem_size(s.dtype) <= 128 && 2 * g.sg <= block) g.sg *= 2;
  g.py = std::max(1, block / g.sg / std::max(1, px));
  return g;
}

int64_t ChannelsLastTiles::threads(const PoolShape& s) const {
  const PixelTile g = geometry(s);
  return s.n * (s.c / opw / g.sg) * ((s.oh + g.py - 1) / g.py) * ((s.ow + px - 1) / px) * block;
}

void ChannelsLastTiles::source(std::ostream& o, const PoolShape& s) const {
  const PixelTile g = geometry(s);
  channels_last_source(o, s, opw, &g, px);
}

int64_t ChannelsLastRuns::threads(const PoolShape& s) const {
  return s.n * s.oh * ((s.ow + cpx - 1) / cpx) * (s.c / opw);
}

void ChannelsLastRuns::source(std::ostream& o, const PoolShape& s) const {
  o << "namespace pool {\n";
  constant(o, "int", "kOpw", opw);
  constant(o, "int", "kCpx", cpx);
  constant(o, "int", "kGroups", s.c / opw);
  constant(o, "int", "kRuns", (s.ow + cpx - 1) / cpx);
  o << "}  // namespace pool\n" << device_sources::kPoolChannelsLastRuns;
}

}  // namespace cudal1::optimizer::pool
