/// @brief ChannelsLastWalk: channels-last avg_pool2d walking down the image (knob walk, Note [Pooling channels-last
/// walk]): a thread takes OPW channels of CPX adjacent output columns and walks WALK output rows, loading each input
/// row of its columns once; its device code is pool_channels_last_walk.cuh.
#include <algorithm>
#include <ostream>

#include "codegen_common.h"
#include "pool_cuda.h"
#include "pool_family.h"

namespace cudal1::optimizer::pool {

int ChannelsLastWalk::registers(const PoolShape& s) const {
  const int rc = cpx + s.kw - 1;
  const int wpv = opw * elem_size(s.dtype) / 4;
  return s.kh * cpx * opw + 2 * rc * wpv;  // the accumulators, the current and the next row's words
}

int64_t ChannelsLastWalk::threads(const PoolShape& s) const {
  return s.n * ((s.oh + rows(s) - 1) / rows(s)) * ((s.ow + cpx - 1) / cpx) * (s.c / opw);
}

void ChannelsLastWalk::source(std::ostream& o, const PoolShape& s) const {
  o << "namespace pool {\n";
  constant(o, "int", "kOpw", opw);
  constant(o, "int", "kCpx", cpx);
  constant(o, "int", "kWalkRows", rows(s));
  constant(o, "int", "kGroups", s.c / opw);
  constant(o, "int", "kRunCols", cpx + s.kw - 1);
  constant(o, "int", "kWalks", (s.oh + rows(s) - 1) / rows(s));
  constant(o, "int", "kRuns", (s.ow + cpx - 1) / cpx);
  constant(o, "int", "kWords", opw * 8 * elem_size(s.dtype) / 32);
  constant(o, "int", "kMinBlocks", std::max(1, 65536 / (block * 128)));
  constant(o, "bool", "kSeparable", separable);
  o << "}  // namespace pool\n" << device_sources::kPoolChannelsLastWalk;
}

std::optional<ChannelsLastWalk> channels_last_walk(const PoolKnobs& k) {
  if (!k.walk) return std::nullopt;
  return ChannelsLastWalk{k.block, k.opw, k.cpx, k.walk, k.sep != 0};
}

}  // namespace cudal1::optimizer::pool
