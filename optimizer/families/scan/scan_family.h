/// @brief Private: the scan family (cumsum and cumprod along any dimension; fp32/fp16/bf16; any input strides;
/// contiguous output as ATen allocates it).
///
/// Note [Scans]
/// ATen (ScanUtils.cuh, scan_dim) scans in the storage type: every partial of an fp16/bf16 scan is rounded to
/// the dtype (at::Half + at::Half is a float add rounded back), and it takes one of three paths:
///   - one row (numel == size(dim)): cub::DeviceScan, an association we do not reproduce;
///   - dim == ndim - 1: tiles of 2*Tx elements per row, each tile's first element combined with the carry,
///     then a Sklansky scan (Tx = 16 in torch 1.13; in torch 2.x Tx = 16 exactly when
///     ceil_log2(rows) - 9 <= ceil_log2(size) <= ceil_log2(rows), see aten_tile_threads);
///   - otherwise: one thread per column walking the dimension serially.
/// Three of our techniques reproduce those associations step for step, rounding like ATen: RowExact (a warp
/// per row, tiles of 32 = 2 x 16, Sklansky by shuffles), RowLanes (the same combines, a tile per lane, see
/// below) and Column (serial per column). They are exact (only
/// the last bit of NaN payloads or the sign of a zero sum may differ) wherever the association is the same:
/// scan_exactness() says where. fp16/bf16 and cumprod are planned only with exact variants: an fp32-accumulated
/// fp16 scan differs from ATen's by ATen's own rounding, which grows with the length (up to n * 2 u(dtype) *
/// max|prefix|; bf16 at n = 4096 that is 32 x max|output|, no usable tolerance), and a reassociated product may
/// overflow or underflow where ATen's does not. fp32 cumsum also gets the fast reassociated techniques (warp /
/// block per row with VEC serial elements per thread, reduce-then-scan over split rows, tiled columns); their
/// tolerance is the first-order bound, tightened for long rows to the random-walk size of rounding errors on the
/// random inputs verification uses (so that a lost element still shows), see scan_output_scaled_tolerance().
/// Declined: other dtypes, a dtype argument that converts, 0-d and empty tensors, bf16 below sm_80, fp16/bf16
/// and cumprod shapes where no variant is exact, sizes past 32-bit grid/loop limits.
///
/// Reaching the memory floor (floor = input read once + output written once at ~4.15 TB/s on the H200):
///   - Outer dims (ColumnSplit, [4096, 8192] f32 dim 0: 256 MiB moved, floor 64.5 us) read the input twice
///     (chunk totals, then the scan from the carries): 3 passes, 1.5x the floor at best, ~1.8x in practice. Too few
///     columns (8192) to stream without splitting the dimension: 62 columns per SM cannot keep the ~32 KiB per SM
///     in flight that the floor needs. ColumnLookback keeps a tile (32 x VEC columns x BLOCK/32 x R rows) in
///     registers (R x VEC <= 64 values per thread), publishes its column totals as 64-bit (flag, value) status
///     words, sums the totals of the chunks before it (warp w takes chunks w, w + NW, ..., so the association is
///     fixed and the result does not depend on timing, unlike a look-back that stops at the first inclusive
///     prefix) and writes. Bytes: one read, one write, plus status: chunks x lines x 8 B written (2 MiB for 32
///     chunks of 128 rows over 8192 columns) and sum_c c x that / chunks read from L2 (31 MiB), the memset of
///     the status words (2 MiB); 100 registers, 2 blocks of 256 per SM: 128 KiB of loads in flight per SM. At
///     most 64 chunks: the look-back reads grow with chunks^2. A tile waits only
///     on tiles of lower chunks, which have lower block indices and were dispatched first (CUB's assumption),
///     and publishes before it waits: no deadlock.
///   - Exact rows (ATen's Tx = 16 tiles, [8192, 4096] bf16: floor 32.3 us; cumprod f32 [4096, 4096] too).
///     ATen (ScanUtils.cuh, tensor_kernel_scan_innermost_dim): tile t's element 0 becomes op(x0, carry), then
///     Sklansky steps s = 1..Tx: element ti = (k / s) * 2s + s + k % s takes op(buf[ti], buf[ti - k % s - 1]),
///     each combine rounded to the dtype; the carry is the tile's last element. RowExact runs that with a warp
///     per tile (5 shuffle levels plus a carry shuffle on the serial path, ~230 cycles a tile): a row is 128
///     tiles, the 8192 rows are one wave of warps, so the kernel time is one row's latency (~2.35x the
///     floor); it also needs 6 shuffles per 32 elements (~24 us of shuffle throughput for this tensor). The
///     association itself is cheap enough: element e > 0 is op(S_e, out[2^hb(e) - 1]) where S_e (e's value
///     before the step at its highest bit) does not depend on the carry, and the carry reaches the next tile
///     through the six combines of elements 0, 1, 3, 7, 15, 31. RowLanes gives each lane a whole tile in
///     registers (16-byte loads where the row allows): 80 combines per tile (Sklansky's 2.5 per element,
///     inherent to ATen's order) + 6 x SPLITS per step on the carry path (every lane evaluates the chain while
///     the carry walks its row's SPLITS lanes), no shuffle inside a tile, one per tile on the carry path; the
///     next tiles' loads are in flight meanwhile. Checked bit for bit on the host against a transcription of
///     ATen's loop (fp16 sums and products, lengths 1-700, 4/8/16 lanes). Offered only where the exact order is
///     required (fp32 cumsum rows are at the floor reassociated). bf16 costs 3-4 instructions a
///     rounded combine: ~0.6 warp-instructions per element, ~19 us of issue for [8192, 4096] against the 32 us
///     floor, so the exact order does not pin the speed above the floor. A warp's
///     16-byte accesses are 64/128 bytes apart (2x the L2 sector writes of coalesced stores), so vec 1 on
///     contiguous rows is a staged variant instead: coalesced element loads and stores, transposed through 33
///     floats of shared memory per lane (+~0.2 warp-instructions per element). cumprod f32 rounds for free.
///   - Native combines (knob nat, RowLanes fp16/bf16 cumsum). A rounded combine in fp32 is an FADD, a cvt.rn to
///     the dtype and a shift or cvt back (3 instructions, ~15 a element with the unpacking and packing); kept in
///     the dtype's bits it is one fma.rn.bf16 / fma.rn.f16 (sm_80 / sm_53) of a x 1 + b: an exact product, one
///     rounding, RN(a + b). That is the same value: a sum of two p-bit floats rounded to p' >= 2p + 2 bits and
///     then to p rounds like the sum rounded once to p (double rounding is innocuous for + at p' >= 2p + 2:
///     bf16 p = 8, f16 p = 11, fp32 p' = 24; a sum does not underflow harmfully: subnormal sums are exact), and
///     ATen's at::BFloat16 / at::Half + is exactly that fp32 sum rounded. The GPU test ScanNative checks every
///     one of the 2^32 operand pairs of both dtypes on the device against RND(a + b) (NaN payloads aside), the
///     same test that holds the claim on subnormals (the hardware could flush them). Products are left in fp32:
///     a bf16 product can fall below fp32's normal range, where double rounding is not innocuous. ~5
///     instructions an element instead of ~15: bf16 [8192, 4096] runs ~1.16x the copy (8 lanes, block 128; ~1.35x
///     without), and the kernel is then latency-bound (DRAM 59%, 15.5 warps an SM). ScanNative finds 0 differing
///     pairs of 2^32 for each dtype.
///   - Loads ahead (knob ahead = 2, RowLanes with vector loads). Two register tiles a lane, the step loop unrolled
///     twice so each copy uses its own tile; the loads take no predicate (an index past the row reads the row's
///     element 0) so nothing but the load writes a tile (a tile copied between steps, or merged with the identity
///     right after its load, makes every step wait for its own loads), and the step picks the identity past the
///     row where it reads the tile. Registers (sm_90, bf16, native): 96-124, against 51-62 with one tile. It pays
///     only where a warp has too few tiles in flight: on [8192, 4096] 16 lanes (2 rows a warp) gain ~15-25% but
///     8 lanes lose ~10-15% and stay the best with one tile; rows that are not a whole number of 8-lane steps gain
///     ~6-10% ([8192, 4032] at 4 lanes, [8192, 4160] at 16). Kept in the space for those rows (12 more variants a
///     16-bit cumsum row). At 8 lanes it is not memory latency that holds the step.
///   - Long fp32 rows ([32768, 32768] dim 1, RowBlock) are at ~1.04x the floor.
///   - Whole-sector stores (knob st, RowLanes with vector loads, ahead 1). Why: on the H200 every kernel Nsight
///     Compute profiles, the relu at the floor included, runs at 178-208K L2 sectors a microsecond, so a kernel's
///     L2 sectors per DRAM sector set its pace: relu 1.60, the unstaged bf16 cumsum 2.16. Of the cumsum's, 2.89M
///     store sectors carry a 2.1M-sector output: each 16-byte store instruction writes a half sector of 32 tiles
///     64 bytes apart, and L2 takes most sectors twice. (Lanes 2m and 2m + 1 swapping half their chunks by
///     shuffles instead is far slower.) What: a step's outputs go through a per-warp shared-memory buffer (lane
///     k's tile as 32 / VEC vectors, one of padding a lane), and store i of lane L writes vector 32 i + L of the
///     warp's step in row order: each store instruction writes SPLITS x 32 contiguous elements (a 512-byte row
///     step at 8 lanes), whole sectors. Same values, same combines: only where they are written from changes.
///     Cost: per step and lane 2 x 32 / VEC shared-memory vectors and two __syncwarp, against ~190 instructions of
///     scan. Speed: bf16 [8192, 4096] ~1.12x the copy (8 lanes, block 256; ~1.3x unstaged), and every 8- and
///     16-lane staged variant beats every unstaged one; L2 sectors 7.58M -> 6.38M (stores 2.90M -> 2.10M, the
///     output's own).
/// Eight techniques, each its own class below with only the knobs it uses and its own device code
/// (scan_<technique>.cuh after scan_common.cuh): RowWarp, RowBlock, RowSplit, RowExact, Column, ColumnSplit,
/// RowLanes, ColumnLookback. A variant names its technique by the knob "mode" (0 to 7 in that order) with knobs
/// vec, block and splits (RowSplit's and ColumnSplit's chunks, RowLanes' lanes, ColumnLookback's rows; else 1), then
/// RowLanes' nat, ahead and st where they are not their defaults: the ids that caches, policy data and replay
/// fixtures know.
#pragma once

#include <iosfwd>
#include <variant>

#include "cudal1/optimizer/family.h"

namespace cudal1::optimizer::scan {

/// The family object (a process-wide singleton).
const Family& scan_family();

/// One planned signature, viewed as [outer, n, inner] (the output is contiguous in that view).
struct ScanShape {
  bool prod = false;  ///< cumprod, else cumsum
  c10::ScalarType dtype = c10::ScalarType::Float;
  std::vector<int64_t> sizes, in_strides;  ///< the input as planned
  int64_t dim = 0;                         ///< wrapped
  int64_t outer = 1, n = 1, inner = 1;
  int64_t sd = 1;           ///< input stride along dim
  int max_vec_row = 1;      ///< vector width for rows (inner == 1): contiguous, aligned rows
  int max_vec_col = 1;      ///< vector width for columns: contiguous, aligned inner block
  bool row_exact = false;   ///< RowExact and RowLanes reproduce ATen's association (Note [Scans])
  bool column_exact = false;///< Column reproduces ATen's association
  bool reassociate = false; ///< fp32 cumsum: reassociated techniques allowed (with a length-scaled tolerance)
};

/// The knobs every technique but RowExact has.
struct ScanLaunch {
  int vec = 1;      ///< elements per vector load/store
  int block = 256;  ///< threads per block
};

/// A technique's launch on a shape.
struct ScanGrid {
  int64_t x = 1, y = 1;         ///< blocks
  int64_t workspace = 0;        ///< fp32 words of workspace
  bool zero_workspace = false;  ///< the workspace is zeroed before the launch (ColumnLookback's status words)
  bool two_phase = false;       ///< launched twice: phase 0 (chunk totals), then phase 1; else once, phase 1
};

/// The techniques (Note [Scans]), one interface: kMode, its value of the variant knob "mode"; kName, its name in
/// the source's first line; exact(s), whether it reproduces ATen's association for `s`; grid, its launch on a
/// shape; source, which writes, after the shared head and scan_common.cuh, the constants its device code adds and
/// its .cuh's text (scan_<technique>.cuh, which defines scan::walk).

/// A warp per row, `vec` elements per lane serially, a warp scan, the carry across the row's chunks.
struct RowWarp : ScanLaunch {
  static constexpr int kMode = 0;
  static constexpr const char* kName = "RowWarp";
  static bool exact(const ScanShape&) { return false; }
  ScanGrid grid(const ScanShape& s) const;
  void source(std::ostream& o, const ScanShape& s) const;
};

/// A block per row, block-wide scans of block x vec elements a step, the carry across steps.
struct RowBlock : ScanLaunch {
  static constexpr int kMode = 1;
  static constexpr const char* kName = "RowBlock";
  static bool exact(const ScanShape&) { return false; }
  ScanGrid grid(const ScanShape& s) const;
  void source(std::ostream& o, const ScanShape& s) const;
};

/// RowBlock over `splits` chunks of a row, a block each: chunk totals (phase 0), then each chunk scanned from its
/// carry (phase 1).
struct RowSplit : ScanLaunch {
  static constexpr int kMode = 2;
  static constexpr const char* kName = "RowSplit";
  int splits = 8;  ///< chunks per row
  static bool exact(const ScanShape&) { return false; }
  ScanGrid grid(const ScanShape& s) const;
  void source(std::ostream& o, const ScanShape& s) const;
};

/// ATen's tile-of-32 Sklansky scan by shuffles, a warp per row, rounded per step like ATen.
struct RowExact {
  static constexpr int kMode = 3;
  static constexpr const char* kName = "RowExact";
  static constexpr int vec = 1;  ///< one element a lane
  int block = 256;               ///< threads per block
  static bool exact(const ScanShape& s) { return s.row_exact; }
  ScanGrid grid(const ScanShape& s) const;
  void source(std::ostream& o, const ScanShape& s) const;
};

/// A thread per `vec` adjacent lines, serial along the dimension, rounded per step like ATen.
struct Column : ScanLaunch {
  static constexpr int kMode = 4;
  static constexpr const char* kName = "Column";
  static bool exact(const ScanShape& s) { return s.column_exact; }
  ScanGrid grid(const ScanShape& s) const;
  void source(std::ostream& o, const ScanShape& s) const;
};

/// Column over `splits` chunks of the dimension (grid y): chunk totals (phase 0), then serial from the carries.
struct ColumnSplit : ScanLaunch {
  static constexpr int kMode = 5;
  static constexpr const char* kName = "ColumnSplit";
  int splits = 4;  ///< chunks of the dimension
  static bool exact(const ScanShape&) { return false; }
  ScanGrid grid(const ScanShape& s) const;
  void source(std::ostream& o, const ScanShape& s) const;
};

/// RowExact's association with a tile of 32 per lane, `lanes` lanes per row (Note [Scans]).
struct RowLanes : ScanLaunch {
  static constexpr int kMode = 6;
  static constexpr const char* kName = "RowLanes";
  int lanes = 8;                ///< lanes per row (variant knob "splits")
  bool native = false;          ///< fp16/bf16 cumsum: combines in the dtype's own arithmetic (knob "nat")
  int ahead = 1;                ///< with vector loads: steps whose tiles are in flight ("Loads ahead")
  bool staged_stores = false;   ///< with vector loads: a step's outputs go through shared memory so that each
                                ///< store instruction writes whole 32-byte sectors (knob "st", "Whole-sector stores")
  static bool exact(const ScanShape& s) { return s.row_exact; }
  ScanGrid grid(const ScanShape& s) const;
  void source(std::ostream& o, const ScanShape& s) const;
};

/// One launch over tiles of 32 x vec columns x (block / 32) x rows rows, each chunk publishing its column totals
/// and adding those of the chunks before it (Note [Scans]).
struct ColumnLookback : ScanLaunch {
  static constexpr int kMode = 7;
  static constexpr const char* kName = "ColumnLookback";
  int rows = 16;  ///< rows a thread holds (variant knob "splits")
  int64_t chunk() const { return static_cast<int64_t>(block / 32) * rows; }  ///< rows of a tile
  int64_t groups(const ScanShape& s) const;                                   ///< tiles across the lines
  int64_t chunks(const ScanShape& s) const;                                   ///< tiles along the dimension
  static bool exact(const ScanShape&) { return false; }
  ScanGrid grid(const ScanShape& s) const;
  void source(std::ostream& o, const ScanShape& s) const;
};

/// One variant's technique and knobs, alternatives in the order of kMode (default: RowWarp, vec 1, block 256).
using ScanTechnique =
    std::variant<RowWarp, RowBlock, RowSplit, RowExact, Column, ColumnSplit, RowLanes, ColumnLookback>;

/// The variant of `t`: knobs {mode, vec, block, splits} in that order, then RowLanes' nat, ahead and st, each
/// only where it is not its default (0, 1, 0).
Variant variant_of(const ScanTechnique& t);

/// Threads per tile row ATen 2.x uses for an innermost scan of `rows` rows of `size` (torch 1.13: always 16).
int aten_tile_threads(int64_t rows, int64_t size);

/// Fills row_exact / column_exact / reassociate of `s` from its op, dtype, rank and dimension (Note [Scans]).
void scan_exactness(ScanShape& s, int64_t ndim);

/// Extra absolute tolerance of technique `t`, in fp32 eps x max|finite ATen output| (OutputTolerance), 0 for
/// exact variants.
double scan_output_scaled_tolerance(const ScanShape& s, const ScanTechnique& t);

/// Device source of the combine a variant uses, at global scope: the dtype prelude, the constant kProd,
/// scan_combine.cuh (kFull; OP, the fp32 combine; ident(); rnd(), rounding to the dtype) and RowLanes' lane
/// values: lv_t, lv_ident(), lv_from / lv_to (storage), lv_op (the rounded combine: rnd(OP(a, b)) in fp32, or
/// with `native` (fp16/bf16 cumsum only) one fma.rn in the dtype, bit for bit the same sum, Note [Scans]) and
/// lv_shfl. Also compiled alone by the GPU test that checks `native` exhaustively.
std::string combine_source(const ScanShape& s, bool native);

/// CUDA source of one variant, exactly as NVRTC compiles it: the generated head (dtype, combine, typed constants
/// and in_base), scan_common.cuh, then the technique's constants and .cuh. Its kernel is extern "C"
/// cudal1_scan(in, out, workspace, phase).
KernelSource generate_scan(const ScanShape& s, const ScanTechnique& t);

/// Binds a loaded module of technique `t` to `s`: one launch, or two with an fp32 workspace (split techniques), or
/// a zeroed status workspace and one launch (ColumnLookback).
std::unique_ptr<BoundKernel> make_scan_kernel(const ScanShape& s, const ScanTechnique& t,
                                              std::shared_ptr<LoadedModule> module);

}  // namespace cudal1::optimizer::scan
