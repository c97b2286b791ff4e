/// @brief PackedPairs: max pooling for 16-bit NCHW inputs with column stride 2 (Note [Pooling packed pairs]): a lane
/// owns two adjacent outputs of a row and compares both windows' candidates as one 16-bit pair; its device code is
/// pool_packed_pairs.cuh.
#include <algorithm>
#include <ostream>

#include "codegen_common.h"
#include "pool_cuda.h"
#include "pool_family.h"

namespace cudal1::optimizer::pool {

/// Note [Pooling packed pairs]
/// Knob pair (RS = 4 or 8 output rows a warp; 0 off). Scope: max_pool2d with or without indices, fp16/bf16, NCHW,
/// column stride 2, no column dilation, unit column stride, W and the row/plane/batch strides multiples of 4 (the
/// data pointer's 8-byte alignment is checked at the launch), PW <= 2, KW - PW <= 4, OW <= W / 2; any rows (KH,
/// DH, PH, dilation, ceil mode). Its own stratum (16).
/// Why (H200; bench/probes/stem_probe.cu k16-k18): the fp16 ResNet stem [64,64,112,112] k3 s2 p1 with indices
/// runs at ~70 us (1.28x the copy) in every tile, walk, staging and load-width variant of pool_family.h, all
/// at ~3.1 TB/s. A flat stream of the same bytes (8-byte loads, one
/// fp16 and one int64 store a thread) ran 60 us, so the bytes allowed more. The register tile makes each output
/// from 9 scalar loads (3 overlapping ones a row, ~58% L1 hits) and ~5 instructions a candidate in fp32.
/// How: lane L of a warp owns input columns 4 jg .. 4 jg + 3 (jg = 32 x chunk + L) and outputs 2 jg, 2 jg + 1 of
/// its segment's RS output rows: one 8-byte load a row (a warp reads whole rows, each once; all the segment's
/// rows, (RS - 1) DH + (KH - 1) DLH + 1, are loaded before the first window), the 2-column halo word on the left
/// (PW > 0) and on the right (KW - PW > 2) from the neighbouring lanes by shuffles, a chunk's edge lanes loading
/// theirs. Window column kw of both outputs is one 16-bit pair (columns 4 jg - PW + kw and 4 jg + 2 - PW + kw: one
/// PRMT of two words), and ATen's step "greater or NaN replaces" is one mask for both outputs (set.gt | set.neu
/// on the pair: the comparison ATen makes in fp32, exact for 16-bit values), which selects the maximum and the
/// window-relative index kh x DLH x W + kw (16 bits a half) by LOP3. The scan is ATen's (rows outer, columns
/// inner); cells outside the image are -Inf pairs (never replace, as skipping them); the index starts at the
/// window's first in-image position (first_in), as ATen's NCHW kernel. Values keep their bits, except that a
/// NaN maximum is converted through fp32 as ATen stores it (canonical NaN). Pairs of fp16 values and 16-byte
/// index pairs are stored as vectors where OW is even, else element by element. bf16 on sm_80 compares through
/// fp32 (set.*.bf16x2 is sm_90+).
/// Instructions: ~5 a candidate for two outputs (2 compares, 3 LOP3) against ~5 for one in the register tile; at
/// row stride 2 a lane's two outputs of a row take 2 new 8-byte loads and 2 shuffles, where the tile's two outputs
/// (a column, two rows) take 15 scalar loads. Registers: the stem at RS 8 keeps 17 rows x 3 words (64 registers,
/// no spills; kMaxPairWords caps the words).
/// Speed: the stem ~58.5 us (pair 4, block 128; 1.06x the copy, 1.07x the floor) against ~70 us for the register
/// tile; every pair variant within 1% of that. The probe's kernels give outputs and indices bit for bit the
/// generator tile's on inputs with NaN, +-Inf, a plane of -Inf, one of NaN and one constant; the GPU sweep
/// (PoolPairs) and the pool fuzz check the generated ones.

PairGeometry PackedPairs::geometry(const PoolShape& s) const {
  PairGeometry g;
  if (rows <= 0) return g;
  g.lanes = s.w / 4;
  g.chunks = (g.lanes + 31) / 32;
  g.segments = (s.oh + rows - 1) / rows;
  g.rows = static_cast<int64_t>(rows - 1) * s.dh + static_cast<int64_t>(s.kh - 1) * s.dil_h + 1;
  g.words = g.rows * (2 + (s.pw > 0 ? 1 : 0) + (s.kw - s.pw > 2 ? 1 : 0));
  return g;
}

int64_t PackedPairs::threads(const PoolShape& s) const {
  const PairGeometry g = geometry(s);
  return s.n * s.c * g.segments * g.chunks * 32;
}

bool pair_fits(const PoolShape& s) {
  if (s.kind != PoolKind::kMax || s.channels_last || elem_size(s.dtype) != 2) return false;
  if (s.dw != 2 || s.dil_w != 1 || s.sw != 1 || s.w % 4 != 0) return false;
  // A lane's candidates lie in its own 4 columns and at most one 2-column word on each side.
  if (s.pw > 2 || s.kw - s.pw > 4 || s.ow > s.w / 2) return false;
  // Every row's 4-column group starts on 8 bytes (the data pointer's alignment is checked at the launch).
  if ((s.h > 1 && s.sh % 4) || (s.c > 1 && s.sc % 4) || (s.n > 1 && s.sn % 4)) return false;
  // Window-relative indices (the first in-image start included) fit the 16 bits of a pair's half.
  return (static_cast<int64_t>(s.kh - 1) * s.dil_h + s.ph + s.dil_h) * s.w + s.kw < 65536;
}

void PackedPairs::source(std::ostream& o, const PoolShape& s) const {
  const PairGeometry g = geometry(s);
  o << "namespace pool {\n";
  constant(o, "int", "kRowsPerSeg", rows);
  constant(o, "int", "kLanes", g.lanes);
  constant(o, "int", "kChunks", g.chunks);
  constant(o, "int", "kSegments", g.segments);
  constant(o, "int", "kRows", g.rows);
  constant(o, "bool", "kNeedLeft", s.pw > 0);
  constant(o, "bool", "kNeedRight", s.kw - s.pw > 2);
  constant(o, "unsigned", "kNeg2", s.dtype == c10::ScalarType::BFloat16 ? "0xFF80FF80u" : "0xFC00FC00u");
  o << "}  // namespace pool\n" << device_sources::kPoolPackedPairs;
}

}  // namespace cudal1::optimizer::pool
