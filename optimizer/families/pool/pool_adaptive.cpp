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

/// Note [Pooling adaptive staging]
/// Knob flat (1, 2, 4; 0 off): adaptive avg whose windows are uniform (H % OH == 0 and W % OW == 0: window
/// AKH x AKW = H/OH x W/OW, ATen's start/end indices give exactly these) and small (<= kMaxPatch elements: a
/// thread sums one serially, unrolled) over a dense NCHW input (every dim of
/// size > 1 at its contiguous stride), so that the AKH x W input elements of each output row are contiguous and
/// consecutive (plane, output row) pairs follow each other in memory.
/// Why: without it adaptive_avg_pool2d f32 [128,512,14,14] -> 7x7 runs at ~1.8x the floor (~1.4x the device
/// copy). Its opw2 kernel loads scalars: per warp instruction 32 lanes at 8-byte steps over
/// parts of 8 rows of 56 bytes (rows are only 8-byte aligned), ~28 sectors a request each used 4 bytes at a
/// time, 8 such requests for every 2 outputs a thread; the window bounds at run time (divisions by constants,
/// loops not unrolled), two IEEE divisions an output, and OW = 7 in tiles of 2 idles 1/8 of the threads.
/// How: block b owns output rows [b RB, b RB + RB) of the flat (plane, output row) order, i.e. the CHUNK = RB x
/// AKH x W input elements from b x RB x AKH x W; RB is a multiple of the rows that make whole 16-byte vectors
/// (so every block starts 16-byte aligned; the launch checks the data pointer) and as many as block x flat
/// vectors hold (bytes <= kMaxSmemBytes). Its threads issue all their 16-byte loads (consecutive threads,
/// consecutive vectors: a warp request is 512 contiguous bytes, whole lines), then store them to shared memory
/// (a vector past the tensor's end goes element by element), sync, and each thread computes outputs o, o +
/// block, ...: ATen's sum (rows outer, columns inner, from +0, fp32) of the window read from shared memory and
/// ATen's sum / AKH / AKW (compile-time: powers of two become exact multiplications), stored to consecutive
/// addresses (the output is dense). Values and order are ATen's: bit-identical.
/// Instructions: ~20 an output (2x2 f32: 1 load and 1 shared store a vector, 4 shared loads, 4 FADD, 2 FMUL,
/// the store, index arithmetic); 0.1M warp-outputs: ~2 us of issue. Shared memory: block 256 x flat 4 = 146
/// rows of 112 bytes (16 KB): 8 blocks an SM, ~128 KB in flight.
/// Speed: that row ~1.4x the floor with flat 2, about a copy of the same bytes; bit-identical.

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

}  // namespace cudal1::optimizer::pool
