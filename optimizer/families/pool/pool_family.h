/// @brief Private: the pooling family (max_pool2d with or without indices, avg_pool2d, _adaptive_avg_pool2d;
/// fp32/fp16/bf16 with fp32 arithmetic; NCHW or channels-last output as ATen picks it).
///
/// Note [Pooling]
/// Every output element is computed exactly as ATen's CUDA kernel computes it, so results are bit-identical
/// (except the separable walk variants, which state a tolerance: Note [Pooling separable sums]):
/// - max: the window is scanned row by row (h outer, w inner, dilation steps, out-of-image positions
///   skipped); an element replaces the running maximum when it is greater or NaN, so the first maximum wins
///   and the last NaN wins. The running maximum starts at -Inf with index "first in-image position" in ATen's
///   NCHW kernel and index 0 in its channels-last kernel (which differ only for windows of -Inf or empty
///   windows, both possible: dilation can leave a window entirely in the padding).
/// - avg: the in-image part of the window is summed in fp32 in the same order and divided by the ATen divisor
///   (divisor_override, else the padded window clipped to image + padding, or the in-image count).
/// - adaptive avg: windows [floor(o*I/O), ceil((o+1)*I/O)), fp32 sum in order, then sum / kH / kW.
/// Technique space: NCHW outputs are computed in tiles of OPH x OPW outputs per thread from a patch of the input
/// held in registers (each input element loaded once per tile, which matters when windows overlap: a 4x4
/// stride-1 window reads 16 elements per output untiled, about 3 in a 4x4 tile), with vector stores of the
/// tile's rows; channels-last outputs give each thread OPC adjacent channels of one output pixel (16-byte
/// vector loads where the input is channels-last dense). Block size is the third knob. The index arithmetic
/// uses compile-time sizes (no runtime division). Channels-last outputs with overlapping windows may map
/// blocks onto 2-d pixel tiles (Note [Pooling channels-last tiles]); NCHW max/avg with stride-1 overlapping
/// windows may slide a thread's VEC columns down the plane (Note [Pooling slide]); channels-last
/// avg with stride-1 columns may give a thread runs of CPX pixels (Note [Pooling exact division]), and with stride
/// 1 both ways walk them down the image (Note [Pooling channels-last walk]); 16-bit NCHW max at column stride 2
/// may compare two outputs' windows as packed pairs (Note [Pooling packed pairs], in pool_pairs.cpp); adaptive avg
/// with uniform windows over a dense NCHW input may stage its rows through shared memory (Note [Pooling adaptive
/// staging]).
/// Declines: other dtypes, empty tensors, arguments ATen rejects (it raises the error then), adaptive pooling of
/// channels-last inputs, sizes needing 64-bit indices.
///
/// Note [Pooling techniques]
/// A variant is named by the knobs of PoolKnobs (its id, which caches, policy data and tests know; the space's
/// order is that of knob_space); pool_technique maps it to one technique class, which carries only the knobs it
/// uses, its geometry, its launch size and its source. Each keeps its device code in a .cuh file embedded at build
/// time (cmake/EmbedCuda.cmake), written against typed constants (enumerators, Note [Device constants]): the head's
/// pool_constants, then the technique's own; a choice the constants make is an `if constexpr` (only __CUDA_ARCH__
/// stays a #if). `cudal1 source` prints the whole text NVRTC compiles. They are
///   RegisterTiles       (knobs opw, oph; pool_tiles.cuh)                   Note [Pooling]
///   SlidingWindows      (knobs slide, seg; pool_sliding_windows.cuh)       Note [Pooling slide]
///   ChannelsLastVectors (knob opw; px 0; pool_channels_last.cuh)           Note [Pooling]
///   ChannelsLastTiles   (knobs opw, px; pool_channels_last.cuh)            Note [Pooling channels-last tiles]
///   ChannelsLastRuns    (knobs cpx, opw; pool_channels_last_runs.cuh)      Note [Pooling exact division]
///   ChannelsLastWalk    (knobs walk, opw, cpx, sep; pool_channels_last_walk.cuh)
///                                                                          Note [Pooling channels-last walk]
///   PackedPairs         (knob pair; pool_packed_pairs.cuh)                 Note [Pooling packed pairs]
///   AdaptiveStaging     (knob flat; pool_adaptive_staging.cuh)             Note [Pooling adaptive staging]
/// ChannelsLastVectors and ChannelsLastTiles share a .cuh and differ by one constant (kPixelTiles); ChannelsLastVectors
/// writes ChannelsLastTiles' tile constants as 1. Knob smem is 0 in every variant: it stays in the ids so that cached
/// ids keep naming the same kernels (no technique stages NCHW tiles in shared memory: docs/CHANGES.md). Every
/// kernel's source starts with the same head (generate_pool): the first line (signature, knobs, technique), the
/// dtype prelude, the signature's typed constants (pool_constants) and pool_common.cuh, the window code every kernel
/// may call. The only namespace-scope variables are WU (pool_common.cuh) and RING_UNROLL (written by
/// SlidingWindows), which `#pragma unroll` reads: NVRTC makes each a global of the module, a symbol those cubins
/// hold.
///
/// Note [Pooling channels-last tiles]
/// Knob px (channels-last, overlapping windows only). With px=0 thread t takes channel group t % (C/OPW) of
/// pixel t / (C/OPW): a block of 256 threads x 8 bf16 channels covers 4 adjacent pixels of a 512-channel
/// image, so its 3x3 stride-1 windows need 3 x 6 input pixels for 4 outputs: 4.5 input reads per output from
/// L2 (vertical neighbours sit in other blocks, whose lines L1 rarely still holds). That is why avg_pool2d
/// bf16 channels-last [64,512,28,28] k3 s1 runs at ~2.2x the floor with px=0. With px > 0 a block is SG channel groups
/// (a power of two dividing C/OPW, at most 128 bytes of channels: one full line per pixel) x PY x px output
/// pixels (SG * PY * px = block): its windows meet in L1, and L2 reads fall to (PY+2)(px+2)/(PY*px) per
/// output for k3 s1: 8 x 4 pixels 1.9, 4 x 8 1.9, 8 x 8 (block 512) 1.56; for the k3 s2 stem from 6.75/4 to
/// 9 x 17 / (4 * 8) / 4 = 1.2x the input bytes. A warp still reads whole 128-byte lines (4 pixels x 8 groups x
/// 16 bytes). Only the thread-to-(pixel, channels) map changes; each output's window loop is the px=0 one, so
/// results are identical. On 28-wide images an 8-wide tile idles 1/8 of its threads; the 4 x 8 tile fits 28 = 7 x 4
/// columns exactly but not the rows. px pays on the bf16 channels-last k3 s2 max_pool2d stem (~1.2x the floor,
/// against ~1.37x with px=0), not on the k3 s1 avg pool row (Note [Pooling channels-last walk] serves that).
/// Not done here: adaptive_avg_pool2d f32 [128,512,14,14] -> 7x7 (its 2x2 windows do not overlap, so neither
/// knob applies; see Note [Pooling adaptive staging]).
///
/// Note [Pooling slide]
/// Knobs slide = VEC (4: fp32 16-byte or 16-bit 8-byte loads; 8: 16-bit only) and seg (output rows per walk: 8,
/// 32, or 0 for the whole plane). Scope: NCHW max/avg, stride 1, dilation 1, an overlapping window, unit column
/// stride, W and the row/plane/batch strides multiples of VEC (the data pointer's alignment is checked at the
/// launch), both halos within one chunk (PW <= VEC, KW-1-PW <= VEC) and the ring <= kMaxPatch floats. Each
/// segment length is a stratum of its own (8, 9, 10), so that the tuner's first trials reach the technique.
/// Why: the register-patch tiles issue (OPH-1+KH) x (OPW-1+KW) scalar loads per thread (49 per 16 outputs for
/// k4 s1), each warp load spanning 4 wavefronts, and the tile below re-reads the vertical halo: the L1/LSU pipe
/// carries ~3x the input. Staging a block's input in shared memory instead adds a barrier and a scalar fill and runs
/// slower still.
/// How: thread t owns chunk t % CW (VEC columns; CW = ceil(max(W, OW) / VEC), so OW = W + 1 from pad = k/2 with
/// even k gets one more chunk) of segment (t / CW) % NSEG of plane t / CW / NSEG, and walks SEG + KH - 1 input
/// rows (the first KH - 1 only fill its ring). Per input row it issues ONE aligned vector load of its own
/// columns, PFD = 4 rows ahead (a warp keeps ~2 KB in flight at ~100 registers: 16-24 warps an SM cover the
/// ~20-30 KB that 4.2 TB/s x the DRAM latency needs); the KW-1 halo columns come from the neighbouring lanes
/// by __shfl_up/down_sync, lanes 0 and 31 load theirs (the neighbouring warp's) as scalars. Consecutive lanes
/// are consecutive chunks of one row; where a neighbour holds another row, segment or plane (W < 32 x VEC puts
/// several rows in a warp) the halo column it supplies lies outside the image and is masked with the receiver's
/// own column and row tests. Every lane runs the same iterations and every shuffle (threads past the work load
/// nothing and store nothing); out-of-image cells hold -Inf (max: never replaces, as skipping it) or -0 (avg:
/// x + -0 == x for every x, +0 and NaN included, so the sum is ATen's sum of the in-image cells).
/// Exactness: avg keeps the KH raw rows in a register ring and sums each window in ATen's row-major order from
/// 0, then ATen's divisor. max keeps per input row and output the row's maximum over the output's KW columns
/// (scan left to right, greater-or-NaN replaces, starting at -Inf) with its index, and combines the KH row
/// summaries top to bottom with the same rule, starting at -Inf with the window's first in-image index. This
/// is ATen's row-major scan: without NaN that scan keeps the first maximum, which lies in the first row whose
/// row maximum is the window's, at that row's first maximum; with NaN it keeps the last NaN, the last NaN of the
/// last row holding one, which that row's summary is (after a NaN only a NaN replaces); a row of -Inf (or out of
/// the image) never replaces, as its elements would not. Row summaries are shared by the KH outputs below them:
/// KW + KH instead of KW x KH compare-selects per output.
/// Fewer combines (values only: max_pool2d without indices): as a selection, "the last NaN, else the first
/// maximum", the step is associative (combining an earlier part's result L with a later part's R: R if R is
/// NaN, else L if L is NaN, else R only if R > L), so contiguous parts may be reduced first, in order: the
/// row pass takes the maxima of neighbouring column pairs once (RC - 1 combines) and each output folds its
/// KW / 2 pairs, and the column pass starts from the first row summary instead of -Inf (the first combine
/// gives exactly that value). k4 s1 VEC 4: 10 + 12 combines per input row instead of 16 + 16, on a kernel that
/// is issue-bound (Nsight Compute: SM 78%, DRAM 62%): ~10% off the k4 s1 inference row. With indices the loops
/// stay as above (the first-in-image start index needs the -Inf step).
/// Bytes (H200 floor = input read once + outputs written once, ~4.2 TB/s): DRAM reads the input once (a
/// segment's first KH - 1 rows, (KH-1)/SEG = 9% at SEG 32, are the segment above's, mostly from L2); per VEC
/// outputs a row costs 1 vector load (+ KW-1 shuffles, lanes 0/31 KW-1 scalars): 4-5 wavefronts a warp-row for
/// 128 fp32 outputs against ~50 for the 4x4 register tile. Stores are vectors where OW % VEC == 0; otherwise
/// (OW = 511 for k4 p1) VEC-strided scalar stores would send every 32-byte sector to L2 VEC times partly
/// filled (4x the output's L2 write traffic, 8x-spread 8-byte index stores), so the warp's outputs go through
/// a per-warp shared-memory buffer (a __syncwarp each side) and store e of lane L writes slot 32e + L:
/// consecutive addresses within a row, whole sectors. Instructions per output (fp32 VEC 4): max ~30 (k4, ~50
/// with indices), avg k3 ~30 (9 adds, the divisor, an IEEE division) against ~33 T thread-instructions/s.
/// Not done: channels-last (Note [Pooling channels-last walk] covers channels-last avg).
/// Speed: max_pool2d f32 [32,64,512,512] k4 s1 p1 ~1.16x the floor with indices (slide4 seg8), ~1.24x without
/// (slide4 seg32, fewer combines). 16-bit rows need Note [Pooling exact division]'s packed stores (NVVM splits a
/// struct of 16-bit conversions into 2-byte scalar stores) for the slide to beat the register tiles.
/// Not offered at column stride 2: a walk whose thread takes VEC outputs from one 16-byte load of VEC x 2 input
/// columns a row runs the fp16 ResNet stem max_pool2d [64,64,112,112] k3 s2 p1 no faster than the register tile
/// (both at ~3.1 TB/s; the walk needs 80 registers against 27). Nor do pair loads with the left column shuffled in
/// help that tile (slower: 87-108 us against 70-78 us). Note [Pooling packed pairs] (pool_pairs.cpp) serves that
/// stem.
/// Probed, not built (bench/probes/stem_probe.cu): blocks that stage whole-sector output rows of the stem in shared
/// memory cut its L2 sectors but lower occupancy and run slower, and the L2 prefetch-size hint on the tile's loads
/// slows it too: the tile's loads' latency holds it, not L2 sectors.
///
/// Note [Pooling exact division]
/// The avg kernels are issue-bound without these (Nsight Compute: SM 84-86%, DRAM 30-35%, ~55-66 instructions per
/// output where ~35 fit 1.25x the floor), so they cut the instructions around ATen's fp32 sum (whose order is
/// kept: h outer, w inner, from +0):
/// - Division: ATen computes RN(sum / (float)divisor) with div.rn. With y = RN(1/d) (compile time: d is
///   CONST_DIV, the signature's divisor where every window has the same one: divisor_override, or
///   count_include_pad where the last window does not overhang the padded image; else INNER_DIV for windows
///   wholly in the image), q0 = RN(s*y), r = fma(-q0, d, s), q = fma(r, y, q0) is RN(s/d) (Markstein: y within
///   half an ulp of 1/d, q0 within an ulp of s/d, so r is exact and the correction rounds correctly), provided
///   nothing underflows or overflows: 2^-60 < |s| < 2^100 and 1 <= |d| < 2^31 keep q, r and r*y normal. A sum
///   of 0 (always +0: see zero fill) also stays: q0 = +0 * y, r = +0, q = ±0 with the sign of d, as +0 / d.
///   Any other sum (NaN, Inf, tiny, huge) takes s / d itself (one rarely taken branch per thread's outputs;
///   all-zero windows, common after a ReLU, do not take it).
///   Checked on the CPU with fmaf: all 2^23 significands of s against d = 1..300, and 100 random d up to 2^30
///   on every 7th significand: 2.6e9 quotients, 0 differences (the GPU fuzz compares within a tolerance and
///   would not see a last-bit error, so this argument is what holds it). Windows are never empty for the
///   arguments ATen accepts (pad <= k/2: a window starts at >= -PH and ends at >= KH - PH >= 1; it starts below
///   H, in ceil mode by ATen's rule), so the constant-divisor paths skip ATen's empty test.
/// - Zero fill: a patch or sliding-window cell outside the image holds +0, and the running sum, starting at +0,
///   is never -0 (x + y is -0 only when both are -0), so adding +0 is adding nothing: no in-image test per cell
///   (the register tiles and the slide walk; the untiled kernel still reads memory, so it tests).
/// - 16-bit vectors: NVVM splits the tile and slide stores of a struct of 16-bit conversions into 2-byte scalar
///   stores (PTX: 7 stores per 8 f16 outputs, each warp store a strided partial-sector write), so values are
///   packed in pairs (cvt.rn.f16x2/bf16x2 on sm_80+, the same rounding) and stored as one 4/8/16-byte vector;
///   loads keep pairs packed as words and unpack at use (bf16: a shift or a mask; f16: cvt each half). The
///   slide walk's prefetch ring holds words, and avg unrolls the row loop by PFD = KH (>= 3; else 4), a
///   multiple of both rings, so no ring is moved (max keeps PFD 4, unroll KH, as measured).
/// - Channels-last: a pixel whose window lies in the image sums its KH x KW vector loads without tests and
///   divides by INNER_DIV (ATen's divisor for such a window whatever count_include_pad says).
/// - Channels-last runs (knob cpx = 2 or 4; avg, column stride 1, a window wider than one column, 16-byte channel
///   vectors): a thread takes OPW channels of CPX adjacent output pixels of a row and loads and unpacks each of
///   the KH x (CPX + KW - 1) input pixels once (k3, cpx 4: 18 vector loads and unpacks for 4 outputs instead of
///   36), adding it to every output whose window holds it; for output p, column j is window column j - p, and
///   the loops run rows outer, columns inner, so each output's additions are in ATen's order. Pixels outside the
///   image are loaded as +0 (one test per input pixel; borders cost only their per-window divisor). The runs are
///   a stratum of their own, so the tuner's first trials reach them; the fuzz draws a class for them.
/// Instructions (sm_90 cubin .text, nvcc 12 -O3, the rare division path stubbed out; no disassembler here, so
/// counted as the .text growth per unrolled loop iteration, or as the whole kernel on its fast path):
/// slide8 f16 k3 s1 p1 ~187 per row of 8 outputs (~23 per output: 9 FADD, 3 for the division, 3 guard
/// compares, ~1 unpack, ~0.5 pack, the rest shared by the row) against ~45 without these techniques (~363 per row,
/// with 8 scalar stores, 60 16-bit ring moves and div.rn per output); the opw4.oph4 tile's whole kernel 824
/// instructions for 16 outputs against 1104 (140 selects and 16 scalar stores against 4 vector stores);
/// channels-last opw8 ~36 per output (whole kernel / 8; ~65 without), cpx 4 ~27, cpx 2 ~30. The scalar 2-byte
/// stores (8 store instructions per 8 outputs, each a partial-sector write, ~8x the L2 write transactions) on top
/// of ~45 instructions per output are what make a 16-bit slide walk without them slower than the register tile.
/// Speed: avg_pool2d f16 [64,128,112,112] k3 s1 p1 ~1.2x both the floor and the device copy (slide8 seg8, block 256).
/// On avg_pool2d bf16 channels-last [64,512,28,28] k3 s1 p1 the cpx runs do not beat opw8 (~1.9x the floor),
/// which is issue-bound: Note [Pooling channels-last walk] serves that row.
/// Not done: adaptive_avg_pool2d's two divisions by window extents are left as ATen's (compile-time powers of two
/// in the staged kernel, Note [Pooling adaptive staging]), channels-last max.
///
/// Note [Pooling separable sums]
/// Knob sep (walk variants only; 0 off). The one pooling technique that gives up ATen's bits: a walk with sep=1
/// sums each input row's KW cells once per output column, adds those row sums down the KH output rows that
/// hold them (the first sets its slot), and multiplies the sum by y = RN(1/d) instead of the exact division.
/// Why: the walk kernel is issue-bound (Nsight Compute: SM 71%, 0.76 instructions issued a cycle a
/// scheduler, DRAM 50%, 35.1 us of kernel on avg_pool2d bf16 channels-last [64,512,28,28] k3 s1 p1), and of its
/// ~24.6 instructions an output, 9 FADD keep ATen's order and ~6 make the division exact (Note [Pooling
/// channels-last walk]).
/// Instructions (counted from the walk's, bf16 opw8 cpx2 k3, a step of 48 outputs): FADD 432 -> 192 (per row
/// 2 x CPX x OPW for the row sums, 2 x CPX x OPW down the rows), the division 288 -> 48 FMUL: ~1090 -> ~610,
/// ~13.7 an output. The registers grow by the row sums (CPX x OPW floats, live only within a row).
/// Results: fp32 sums in another order, then an fp32 multiplication within an ulp of RN(s / d). Two orders of
/// n = KH x KW fp32 additions differ by at most (n - 1) eps32 sum|x|, and sum|x| / |d| <= max|x| x max(1, n /
/// |d|) (d counts at least the window's in-image cells unless divisor_override sets it); so the bound kernel
/// states an input-scaled tolerance of 2n x max(1, n / |d|) eps32 x max|input| (OutputTolerance), beyond the
/// dtype's rtol, which covers the one-ulp flips of the 16-bit rounding. The verifier holds every variant to it
/// on fresh inputs (the tuner keeps only what passes), and the tuner weighs sep=1 like any knob value. Sums
/// that overflow fp32 in one order only (cells near 3.4e38) can be Inf in one and finite in the other.
/// Speed (avg_pool2d bf16 channels-last [64,512,28,28] k3 s1 p1): every separable variant beats every walk in
/// ATen's order; the best (opw8 cpx2 walk2, block 128) runs ~1.2x a copy of the same bytes against ~1.45x. It is no
/// longer issue-bound but latency-bound (Nsight Compute: SM 48%, DRAM 57%, 39.5% occupancy at 72 registers).
#pragma once

#include <memory>
#include <ostream>
#include <variant>

#include "cudal1/optimizer/family.h"

namespace cudal1::optimizer::pool {

/// The family object (a process-wide singleton).
const Family& pool_family();

enum class PoolKind { kMax, kAvg, kAdaptiveAvg };

/// One planned signature (4-d view: a 3-d input has N = 1 and sN = 0).
struct PoolShape {
  PoolKind kind = PoolKind::kMax;
  bool indices = false;  ///< max_pool2d_with_indices: also writes int64 indices
  c10::ScalarType dtype = c10::ScalarType::Float;
  std::vector<int64_t> in_sizes, in_strides, out_sizes, out_strides;
  int64_t n = 1, c = 1, h = 1, w = 1, oh = 1, ow = 1;
  int64_t sn = 0, sc = 0, sh = 0, sw = 0;  ///< input strides (elements)
  int kh = 1, kw = 1, dh = 1, dw = 1, ph = 0, pw = 0, dil_h = 1, dil_w = 1;  ///< kernel, stride, pad, dilation
  bool count_include_pad = true;
  int64_t divisor = 0;         ///< avg: divisor_override, 0 when absent
  bool channels_last = false;  ///< output layout (ATen's suggest_memory_format of the input)
  int max_vec = 1;             ///< channels-last: widest channel vector the input layout allows
};

/// Technique knobs of one variant.
struct PoolKnobs {
  int opw = 1;    ///< outputs per thread along the output's fastest dim (ow for NCHW, c for channels-last)
  int oph = 1;    ///< NCHW: output rows per thread
  int block = 256;
  int smem = 0;   ///< always 0 (Note [Pooling techniques]): a knob of the ids only
  int px = 0;     ///< channels-last: 0 channel-fastest order, else blocks of PY x px output pixels (Note below)
  int slide = 0;  ///< NCHW: 0 off, else VEC columns per thread walking down the plane (Note [Pooling slide])
  int seg = 0;    ///< slide: output rows per walk (0: the whole plane)
  int cpx = 1;    ///< channels-last avg, stride-1 columns: adjacent output pixels per thread
                  ///< (Note [Pooling exact division])
  int walk = 0;   ///< channels-last avg, stride 1: 0 off, else steps of KH input rows a thread walks
                  ///< (Note [Pooling channels-last walk])
  int flat = 0;   ///< adaptive avg, uniform windows: 0 off, else 16-byte vectors a thread stages
                  ///< (Note [Pooling adaptive staging])
  int sep = 0;    ///< walk: 1 sums rows then columns and multiplies by 1/divisor (Note [Pooling separable sums])
  int pair = 0;   ///< NCHW 16-bit max, column stride 2: 0 off, else output rows a warp (Note [Pooling packed pairs])
};

/// Geometry of a channels-last pixel-tile variant: sg channel groups of OPW channels (a power of two dividing
/// C / OPW, at most 128 bytes) times py x px output pixels per block.
struct PixelTile {
  int sg = 1, py = 1;
};

/// Static shared memory a variant may take (the default per-block limit without opting in to more).
constexpr int64_t kMaxSmemBytes = 48 * 1024;

/// Registers one tile's input patch may take; larger tiles are not offered.
constexpr int kMaxPatch = 64;

/// Geometry of a sliding-window variant (Note [Pooling slide]): `chunks` VEC-column chunks per row (covering
/// max(W, OW)), segments of `seg` output rows, and the floats its ring of window rows keeps in registers.
struct SlideGeometry {
  int64_t chunks = 0, seg = 0, segments = 0, ring = 0;
};

/// Whether `s` admits sliding-window variants of VEC = `vec` (NCHW max/avg, stride 1, dilation 1, overlapping
/// windows, unit column stride, W and the row/plane/batch strides multiples of vec, halos within one
/// neighbouring chunk, the ring within kMaxPatch).
bool slide_fits(const PoolShape& s, int vec);

/// Registers a walk variant may take (of the 128 its launch bounds allow).
constexpr int kMaxWalkRegisters = 80;

/// Geometry of a packed-pair variant (Note [Pooling packed pairs]): `lanes` 4-column groups a row (W / 4) in
/// `chunks` warps, `segments` of the variant's output rows a plane, the input `rows` a segment loads and the
/// 32-bit words a lane keeps of them (its own 2, and a halo word on each side its windows reach).
struct PairGeometry {
  int64_t lanes = 0, chunks = 0, segments = 0, rows = 0, words = 0;
};

/// Words of input a packed-pair lane may keep in registers.
constexpr int64_t kMaxPairWords = 64;

/// Whether `s` admits packed-pair variants (16-bit NCHW max, column stride 2, dilation 1 across, unit column
/// stride, W and the row/plane/batch strides multiples of 4, left padding <= 2 and KW - PW <= 4, OW <= W / 2,
/// window-relative indices within 16 bits).
bool pair_fits(const PoolShape& s);

/// Whether `s` admits staged adaptive variants (adaptive avg, H % OH == 0 and W % OW == 0, windows of at most
/// kMaxPatch elements, dense NCHW).
bool flat_fits(const PoolShape& s);

/// Geometry of a staged adaptive variant: `rows` output rows a block (their inputs, `row_elems` elements each,
/// are contiguous and start 16-byte aligned), the shared memory they take and the blocks of a launch.
struct FlatGeometry {
  int64_t row_elems = 0, rows = 0, bytes = 0, blocks = 0;
};

/// The techniques (Note [Pooling techniques]): kName, the technique's name in the source's first line; their own
/// typed knobs; threads, the threads of one launch on a shape; source, which writes, after the shared head of
/// generate_pool (pool_constants and pool_common.cuh), the constants its device code adds and its .cuh's text
/// (which defines the kernel cudal1_pool).

/// NCHW tiles of oph x opw outputs a thread, from a register patch of the input where windows are tiled (Note
/// [Pooling]); also adaptive avg without staging.
struct RegisterTiles {
  static constexpr const char* kName = "RegisterTiles";
  int block = 256;
  int opw = 1;  ///< outputs a thread along a row
  int oph = 1;  ///< output rows a thread
  int64_t threads(const PoolShape& s) const;
  void source(std::ostream& o, const PoolShape& s) const;
};

/// NCHW max/avg sliding VEC columns down the plane (Note [Pooling slide]); knobs slide and seg.
struct SlidingWindows {
  static constexpr const char* kName = "SlidingWindows";
  int block = 256;
  int vec = 4;  ///< knob slide: columns a thread
  int seg = 0;  ///< output rows a walk (0: the whole plane)
  SlideGeometry geometry(const PoolShape& s) const;
  int64_t threads(const PoolShape& s) const;
  void source(std::ostream& o, const PoolShape& s) const;
};

/// Channels-last max/avg: opw channels of one output pixel a thread, channel groups fastest (Note [Pooling]).
struct ChannelsLastVectors {
  static constexpr const char* kName = "ChannelsLastVectors";
  int block = 256;
  int opw = 1;  ///< channels a thread
  int64_t threads(const PoolShape& s) const;
  void source(std::ostream& o, const PoolShape& s) const;
};

/// Channels-last max/avg in blocks of 2-d pixel tiles (Note [Pooling channels-last tiles]); knob px.
struct ChannelsLastTiles {
  static constexpr const char* kName = "ChannelsLastTiles";
  int block = 256;
  int opw = 1;  ///< channels a thread
  int px = 4;   ///< output pixels of a tile along a row
  PixelTile geometry(const PoolShape& s) const;
  int64_t threads(const PoolShape& s) const;
  void source(std::ostream& o, const PoolShape& s) const;
};

/// Staged adaptive avg (Note [Pooling adaptive staging]); knob `flat`.
struct AdaptiveStaging {
  static constexpr const char* kName = "AdaptiveStaging";
  int block = 256;
  int flat = 1;  ///< 16-byte vectors a thread stages
  FlatGeometry geometry(const PoolShape& s) const;
  int64_t threads(const PoolShape& s) const { return geometry(s).blocks * block; }
  void source(std::ostream& o, const PoolShape& s) const;
};

/// Packed-pair max, 16-bit NCHW at column stride 2 (Note [Pooling packed pairs]); knob pair.
struct PackedPairs {
  static constexpr const char* kName = "PackedPairs";
  int block = 128;
  int rows = 4;  ///< knob pair: output rows a segment (a warp's)
  PairGeometry geometry(const PoolShape& s) const;
  int64_t threads(const PoolShape& s) const;
  void source(std::ostream& o, const PoolShape& s) const;
};

/// Channels-last avg in runs of adjacent output pixels (Note [Pooling exact division], "Channels-last runs");
/// knob cpx (2 or 4) without walk.
struct ChannelsLastRuns {
  static constexpr const char* kName = "ChannelsLastRuns";
  int block = 256;
  int opw = 8;  ///< channels a thread (one 16-byte vector)
  int cpx = 2;  ///< adjacent output pixels a thread
  int64_t threads(const PoolShape& s) const;
  void source(std::ostream& o, const PoolShape& s) const;
};

/// Channels-last avg walking down the image (Note [Pooling channels-last walk]); knob `walk`.
struct ChannelsLastWalk {
  static constexpr const char* kName = "ChannelsLastWalk";
  int block = 128;
  int opw = 8;             ///< channels a thread (one 16- or 8-byte vector)
  int cpx = 1;             ///< adjacent output columns a thread
  int walk = 2;            ///< steps of KH output rows a thread walks
  bool separable = false;  ///< knob sep: row sums, then column sums (Note [Pooling separable sums])
  /// Output rows one walk covers (walk x KH, from walk x KH + KH - 1 input rows).
  int rows(const PoolShape& s) const { return walk * s.kh; }
  /// Floats it keeps in registers: accumulators of KH output rows, the current and the next input row's words.
  int registers(const PoolShape& s) const;
  int64_t threads(const PoolShape& s) const;
  void source(std::ostream& o, const PoolShape& s) const;
};

/// One variant's technique and its knobs.
using PoolTechnique = std::variant<RegisterTiles, SlidingWindows, ChannelsLastVectors, ChannelsLastTiles,
                                   ChannelsLastRuns, ChannelsLastWalk, PackedPairs, AdaptiveStaging>;

/// The technique that variant `k` of `s` names: pair, flat, walk, cpx > 1 or slide where set, else by layout
/// (channels-last: px; NCHW: RegisterTiles).
PoolTechnique pool_technique(const PoolShape& s, const PoolKnobs& k);

/// The head's typed constants of the signature and launch, in namespace pool (written by codegen_common's
/// constant(), Note [Device constants]), which pool_common.cuh and the techniques' .cuh files read: bool kMaxPool,
/// kAvgPool, kAdaptivePool (the op: max_pool2d with or without indices, avg_pool2d, _adaptive_avg_pool2d), int kN,
/// kC, kH, kW, kOh, kOw (sizes), index_t kSn, kSc, kSh, kSw (input strides), int kKh, kKw, kDh, kDw, kPh, kPw
/// (window, strides and padding), int kDlh, kDlw (dilation), int kDivisor (divisor_override, 0 without), bool
/// kCountPad, int kConstDiv, kInnerDiv (Note [Pooling exact division]), int kStorageBits, bool kStorageBf16, bool
/// kIndices (max_pool2d_with_indices), bool kChannelsLast (the output's layout), int kBlock, index_t kThreads.
void pool_constants(std::ostream& o, const PoolShape& s, int block, int64_t threads);

/// Input elements (rows x cols) a tile of oph x opw outputs reads in NCHW form.
int64_t patch_rows(const PoolShape& s, int oph);
int64_t patch_cols(const PoolShape& s, int opw);

/// Threads one launch of variant `k` needs.
int64_t pool_threads(const PoolShape& s, const PoolKnobs& k);

/// CUDA source of `k` for `s`, exactly as NVRTC compiles it: the head (the first line, the dtype prelude,
/// pool_constants, pool_common.cuh), then the technique's constants and device code, which defines
/// `cudal1_pool(const storage_t* in, storage_t* out, long long* idx)`.
KernelSource generate_pool(const PoolShape& s, const PoolKnobs& k);

/// The bound kernel of a variant.
std::unique_ptr<BoundKernel> make_pool_kernel(const PoolShape& s, const PoolKnobs& k,
                                              std::shared_ptr<LoadedModule> module);

}  // namespace cudal1::optimizer::pool
