/// @brief SlidingWindows: NCHW max/avg with stride-1 overlapping windows (Note [Pooling slide]); each thread owns
/// VEC adjacent columns of one plane and walks down a segment of output rows; its device code is
/// pool_sliding_windows.cuh.
#include <algorithm>
#include <ostream>

#include "codegen_common.h"
#include "pool_cuda.h"
#include "pool_family.h"

namespace cudal1::optimizer::pool {

SlideGeometry SlidingWindows::geometry(const PoolShape& s) const {
  SlideGeometry g;
  if (vec <= 0) return g;
  g.chunks = (std::max(s.w, s.ow) + vec - 1) / vec;
  g.seg = seg > 0 ? std::min<int64_t>(seg, s.oh) : s.oh;
  g.segments = (s.oh + g.seg - 1) / g.seg;
  const int64_t row = vec + s.kw - 1;  // columns of one window row: left halo, own VEC, right halo
  // max keeps the KH row summaries (value, and index when asked) plus the current row; avg the KH raw rows.
  g.ring = s.kind == PoolKind::kMax ? int64_t{s.kh} * vec * (s.indices ? 2 : 1) + row : int64_t{s.kh} * row;
  return g;
}

bool slide_fits(const PoolShape& s, int vec) {
  if (s.channels_last || s.kind == PoolKind::kAdaptiveAvg) return false;
  if (s.dh != 1 || s.dw != 1 || s.dil_h != 1 || s.dil_w != 1 || (s.kh == 1 && s.kw == 1)) return false;
  if (s.sw != 1 || s.w % vec != 0 || s.pw > vec || s.kw - 1 - s.pw > vec) return false;
  // Every row's chunk must start on a vec boundary (the data pointer's alignment is checked at the launch).
  if ((s.h > 1 && s.sh % vec) || (s.c > 1 && s.sc % vec) || (s.n > 1 && s.sn % vec)) return false;
  return SlidingWindows{256, vec, 0}.geometry(s).ring <= kMaxPatch;
}

int64_t SlidingWindows::threads(const PoolShape& s) const {
  const SlideGeometry g = geometry(s);
  return s.n * s.c * g.segments * g.chunks;
}

void SlidingWindows::source(std::ostream& o, const PoolShape& s) const {
  const SlideGeometry g = geometry(s);
  // Rows loaded ahead, and the row loop's unroll: max keeps 4 and KH (measured); avg unrolls a multiple of both
  // KH and the rows ahead so that neither the window ring nor the prefetch ring is moved (Note [Pooling exact
  // division]).
  // The unroll is the namespace-scope variable RING_UNROLL, which `#pragma unroll` reads: a global of the module
  // (Note [Device constants]) that the slide's cubins hold, so it stays one.
  const int ahead = s.kind == PoolKind::kAvg && s.kh >= 3 ? s.kh : 4;
  o << "static constexpr int RING_UNROLL = " << (s.kind == PoolKind::kAvg ? ahead : s.kh) << ";\n";
  o << "namespace pool {\n";
  constant(o, "int", "kVec", vec);
  constant(o, "int", "kSeg", g.seg);
  constant(o, "int", "kSegments", g.segments);
  constant(o, "int", "kChunks", g.chunks);
  constant(o, "int", "kRightHalo", s.kw - 1 - s.pw);
  constant(o, "int", "kRunCols", vec + s.kw - 1);
  constant(o, "int", "kLeftSlots", std::max(s.pw, 1));
  constant(o, "int", "kRightSlots", std::max(s.kw - 1 - s.pw, 1));
  constant(o, "int", "kWords", vec * elem_size(s.dtype) / 4);
  constant(o, "bool", "kStoreVec", s.ow % vec == 0);
  constant(o, "int", "kPrefetch", ahead);
  o << "}  // namespace pool\n" << device_sources::kPoolSlidingWindows;
}

}  // namespace cudal1::optimizer::pool
