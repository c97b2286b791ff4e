/// @brief Private: the reduction family (sum.dim_IntList, mean.dim, amax, amin, max.dim, min.dim, argmax, argmin,
/// var.correction, std.correction, linalg_vector_norm; fp32/fp16/bf16 in, the input's dtype out (or fp32 for a
/// norm's dtype=float of fp16/bf16), fp32 accumulation).
///
/// Note [Reductions]
/// Every accepted call is mapped onto "outputs x reduced": output o (row-major over the kept dims, in input order,
/// as ATen's contiguous output) reads elements at kept_off(o) + red_off(r), r row-major over the reduced dims in
/// input order. Both offsets are generated with the signature's sizes and strides as constants, after dropping
/// size-1 dims and merging neighbours that are contiguous in each other, so any strided input is served exactly
/// and a contiguous row or column reduction costs one multiply. r is also the index max.dim/argmax return (a
/// single dim, or every dim flattened for argmax with dim=None), so indices need no mapping back.
/// The technique only decides which threads combine which elements: a warp or a block per output (RowPerWarp,
/// RowPerBlock: rows, 16-byte vector loads when the reduced block is one stride-1 run), rows split over several
/// blocks with a second pass through a workspace (SplitRow: few long rows), or a thread per kept column looping
/// over r (ColumnThreads: kept dims contiguous, coalesced across threads, vector loads over neighbouring columns),
/// optionally with several threads per column (shared-memory combine) and r split over blockIdx.y (second pass), or
/// a column tile (ColumnTile: lane l of every warp owns vectors l, l + 32, ... of the block's 32 * CPT * VEC
/// neighbouring columns, the warps split r, UNR rows of loads in flight per thread; (value, index) runs as (float,
/// int32) with a two-compare push, see run_push; one shared-memory combine; a pipelined form, PipelinedTile, Note
/// [Column tiles in flight]; its split over a thread-block cluster, ClusterTile, Note [Column tiles in clusters]).
/// Every technique is correct for every layout; the space only offers the ones that can be fast.
/// Exactness: max/min/argmax/argmin use ATen's comparison (SharedReduceOps.h GreaterOrNan/LessOrNan: NaN wins,
/// the lowest index among equal values or among NaNs), a total order, so any combine order gives ATen's indices
/// bit for bit; amax/amin propagate NaN (MaxNanFunctor). mean multiplies the fp32 sum by ATen's factor
/// float(outputs) / numel; var/std use ATen's Welford (per element) and Chan (combine) in fp32 with ATen's divisor
/// max(0, n - correction). Sums differ from ATen's only in fp32 rounding order, bounded in output_tolerance.
/// linalg_vector_norm (ReduceNormKernel.cu, SharedReduceOps.h) is a sum or a max/min of a per-element term in
/// fp32 with a projection: ord 0 counts x != 0 (NaN counts), 1 sums |x|, 2 sums x*x then sqrtf, inf/-inf take
/// max/min |x| (NaN propagates), another finite p sums powf(|x|, float(p)) then powf(s, 1.f / float(p)); the
/// result is the input's dtype rounded once, or fp32 for dtype=float of fp16/bf16 input (ATen's gpu_lowp_to_f32
/// path reads the fp16/bf16 input itself). An empty dim list means every dim, as in ATen.
/// Declined: other dtypes, dtype= conversions (but a norm's to fp32), empty inputs, 0-dim inputs, an empty dim
/// list (but a norm's), repeated or out-of-range dims, bf16 before sm_80, inputs whose extent needs 64-bit
/// indexing, var/std and ord-0 norms over 2^24+ elements (fp32 counts), norms over one element (ATen returns
/// abs(x) or x != 0 without squaring: no overflow), norms of ord p outside 0.25 <= |p| <= 16 (below, the
/// tolerance grows as 1/|p|, see output_tolerance; above, |x|^p overflows fp32), anything the arguments do not
/// pin down.
///
/// Note [Column tiles in flight]
/// Why: without it the H200 rows var f32 [4096,4096] dim0, argmax f32 [128,4096,32] dim1 and vector_norm f32
/// [4096,4096] dim0 ord 1 (64 MB read; floor 16 us, a copy of the same bytes 20.7 us) run ~1.35-1.6x the copy in
/// mode 4. Nsight Compute (var, ty2 splits 8): DRAM 55%, 22% occupancy, no eligible warp 61% of cycles: latency-bound.
/// Little's law wants ~4.2 TB/s x ~1 us = 4+ MB in flight, ~32 KB per SM, all the time; a tile thread issues UNR loads,
/// then pushes them (Welford: a division each) with nothing in flight, and splits cost a second launch (2-4 us).
/// What (PipelinedTile, knob unr = U in {4, 8}; the plain tiles keep their ids):
/// - each thread loads rows r, r + NW, ..., r + (U - 1) NW of its CPT vectors, then loads the next U rows
///   before pushing these (U x CPT x VEC in 8..16 elements; registers for twice that), so a warp always has a
///   batch in flight while it computes. The pushes are the plain tile's, in the same order (increasing r per
///   column; the (value, index) run relies on it); rows past the last full batch go one at a time, so any K
///   (not a multiple of U, of NW or of the split) is served.
/// - splits in {1, 4, 16} over blockIdx.y (up to ~16 blocks per tile: several waves of small blocks on
///   narrow outputs) in ONE launch: each block writes its partials to ws as the two-launch form does, then
///   (threadFenceReduction) fences and counts itself in on its tile's counter; the block that sees S - 1 merges
///   the tile's columns with merge_partials, the very function of the second pass (acc_init, then acc_combine of
///   p = 0 .. S - 1 in increasing p: Chan for var, ATen's (value, index) order for arg, fp32 sums), so the bits
///   do not depend on which block arrives last nor on the launch form. Partials of other blocks are read with
///   ld.global.cg. The counters (one u32 per tile, padded to 16 bytes, ahead of the partials in the workspace)
///   are zeroed by cuMemsetD32Async on the call's stream before the launch (a memset node, cheaper than a
///   second kernel and its drain; fine under graph capture).
/// With it the var row runs ~1.5x the copy and vector_norm ord 1 ~1.3x, still latency-bound (Nsight Compute, var,
/// splits1 unr8 block 512: DRAM 54%, 128 blocks of 16 warps, occupancy 23%, no eligible warp 56% of cycles): one
/// block per SM of loads in flight is too few (128 x 512 threads x 8 floats = 2 MB against ~4 MB needed), and the
/// splits that add blocks pay the counters' memset and the merge. Note [Column tiles in clusters] fills the GPU.
///
/// Note [Column tiles in clusters]
/// Why: the column rows above need ~4 MB in flight (Little's law: 4.2 TB/s x ~1 us), so ~32 KB per SM on every SM for
/// the whole kernel: a grid that fills all SMs at once (no second wave, no tail) with every thread holding 32-128 bytes
/// of loads, and a split merge that costs neither a launch nor a memset. O = 4096 columns make only 32 tiles of 16-byte
/// vectors, so the rows of a tile must be split over ~16 blocks.
/// What (ClusterTile, knob cluster = 1, sm_90+ only; the other variants are unchanged): the S = splits blocks of a
/// tile form one thread-block cluster (a 1-d grid of tiles x S blocks, clusters of S along x, rank = chunk of rows;
/// Note [Clusters] in module.cpp). Each block runs the pipelined tile (CPT 1, VEC up to 16 bytes, UNR x VEC in 8..16
/// elements, the next batch loaded before this one is pushed) and merges its warps' partials in shared memory in a
/// fixed tree (log2 NW levels, every thread working; one warp merging NW partials per column in turn takes ~1000 cycles
/// for var); after a cluster barrier block `rank` gathers TILE / S columns of the S blocks through distributed shared
/// memory (one remote read a thread, all in flight at once: a loop of S dependent remote reads and merges would take ~S
/// x 250 cycles), merges them in a fixed tree and stores them; a second barrier keeps every block's partials alive
/// until read. No workspace, no memset, one launch; the bits do not depend on timing.
/// __launch_bounds__(BLOCK, 1024 / BLOCK): 64 registers, ~1024 threads per SM (ptxas, sm_90: 25-64 registers, no
/// spills; eight Welford runs a thread spilled, so var/std keep VEC <= 4). S is the largest cluster size (<= 16) whose
/// grid, tiles x S x BLOCK threads, fits one wave of a 132-SM part at 1024 threads per SM, and the next smaller one
/// (half of that). BLOCK in {192, 256, 512}: the clusters of 256 x 16 or 512 x 8 take 4 SMs each, so 32 of them fill
/// every slot of 8 GPCs of 16+ SMs, and a GPC of fewer SMs sends one into a second wave (~2x); 192 x 16 (5 blocks, 960
/// threads an SM: 3.2 SMs a cluster) fills 3/4 of the wave and fits 4 clusters in any GPC of 13+ SMs; the half-wave
/// variants have slack everywhere. Strata: 16-byte loads filling the wave, 3/4 of it (192), half of it or less,
/// narrower loads (Plan::stratum), so a 24-trial tuning run tries each.
/// var/std fold each column's batch of UNR rows (all in registers) as one Welford partial: mean as the sum of x / UNR
/// (exact scalings, no overflow), m2 by a second pass, then Chan's merge with the factor UNR / (n + UNR) shared by the
/// thread's columns (they have seen the same rows): ~3.5 instructions an element instead of ~18 with a division each
/// (at 4 elements per cycle per SM the division alone takes half the issue slots). Same rounding class as ATen's Chan
/// merges, within the (16 + K) eps bound; max/min/arg pushes are unchanged (increasing r per column), the cluster merge
/// keeps ATen's total order.
/// Speed: var and argmax ~1.4x the copy with vec 2, block 256, S 8, unr 4; vector_norm ord 1 keeps a plain mode-4
/// tile (~1.25x the copy).
///
/// Note [Column tiles in rings]
/// Why: the best var cluster tile (vec 2, block 256, S 8, unr 4) is still latency-bound (Nsight Compute: 21.2 us of
/// kernel, DRAM 68%, 50% occupancy, 69% of the stall cycles waiting on loads).
/// A thread holds one batch in flight while it folds the other (32 bytes at vec 2, unr 4), ~32 KB an SM.
/// What (knob ring = 1, cluster tiles of 4+ byte vectors and 32-byte batches; the others are unchanged): each
/// thread copies its own batches with cp.async (copy_in, Note [Async copies]) into a ring of RING stages (UNR x
/// VEC elements a thread a stage) in dynamic shared memory, issuing batch b + RING - 1 before it waits for batch b
/// (copy_wait<RING - 1>),
/// then reads batch b back into the registers the pushes use: the same values, the same pushes in the same
/// order, so the bits are those of the ring-less tile. RING = 4: three batches of 32 bytes are in flight while
/// one is folded, 96 bytes a thread (~96 KB an SM at 1024 threads, against ~32 KB), 128 bytes of shared memory.
/// A thread reads back only what it copied, so no barrier orders the ring; a stage is refilled one iteration
/// after it was read, when the pushes that used its values have issued. Empty commit groups past the last
/// batch keep the group count uniform; the rows past the last whole batch go one at a time, as in the plain tile.
/// Speed: the best ring variant (vec 2, block 512, S 2, unr 4) is the best variant of the var and argmax rows (~1.3x
/// the copy), though Nsight Compute gives its kernel the plain tile's time (~21 us, DRAM ~69%, one block of 16
/// warps on 128 SMs): the gain shows only in the bench's dirty-L2 timing. Kept as a knob for that.
/// Every ring has 4 stages of 32 bytes: 3 stages of 64 bytes are slower on most tiles (and never the best ring of
/// a row), 8 stages slower on all three rows; one stage size keeps the ring stratum small for the tuner.
/// What is left (bench/probes/column_read_probe.cu): reading 64 MB and nothing else takes 19.1-20.7 us in flat
/// chunks, these tiles' shapes or bands of whole row segments alike (3.2-3.5 TB/s; a copy's writes drain from L2
/// after its end event, so the 17.7 us copy is no bound for a reduction). The best var and argmax tiles (20.8 and
/// 21.3 us) are within ~10% of that read.
#pragma once

#include <iosfwd>
#include <variant>

#include "cudal1/optimizer/family.h"

namespace cudal1::optimizer::reduce {

/// The family object (a process-wide singleton).
const Family& reduce_family();

enum class Reduction { kSum, kMean, kAmax, kAmin, kMaxDim, kMinDim, kArgmax, kArgmin, kVar, kStd, kNorm };

/// linalg_vector_norm's ord classes (ATen's NormZeroOps, NormOneOps, NormTwoOps, AbsMaxOps, AbsMinOps, NormOps).
enum class NormOrd { kZero, kOne, kTwo, kInf, kNegInf, kP };

/// One planned signature (Note [Reductions]).
struct ReduceShape {
  Reduction op = Reduction::kSum;
  c10::ScalarType dtype = c10::ScalarType::Float;      ///< the input's
  c10::ScalarType out_dtype = c10::ScalarType::Float;  ///< the values' (the input's, or fp32 for a norm's dtype=)
  std::vector<int64_t> sizes, strides;  ///< the input as planned
  int64_t offset = 0;                   ///< the input's storage offset (elements)
  std::vector<int64_t> kept_sizes, kept_strides;  ///< merged kept dims, outermost first (empty: one output)
  std::vector<int64_t> red_sizes, red_strides;    ///< merged reduced dims, outermost first (empty: length 1)
  int64_t outputs = 1;  ///< O: number of results
  int64_t length = 1;   ///< K: elements reduced into each
  std::vector<int64_t> out_sizes;  ///< ATen's result sizes (keepdim applied); contiguous
  float mean_factor = 1.f;         ///< mean: float(O) / numel, as ATen computes it
  float correction = 1.f;          ///< var/std
  NormOrd ord = NormOrd::kTwo;     ///< linalg_vector_norm
  float norm_p = 2.f;              ///< ord kP: float(p), as ATen's acc_t(p)
  int row_vec = 1;  ///< widest vector over r (one stride-1 reduced run), 1 when none
  int col_vec = 1;  ///< widest vector over neighbouring outputs (innermost kept dim of stride 1), 1 when none

  bool has_values() const;   ///< writes values of the input's dtype
  bool has_indices() const;  ///< writes int64 indices
};

/// ClusterTile: resident threads per SM its launch bounds ask for (64 registers a thread).
constexpr int kClusterTileThreadsPerSm = 1024;

/// Bytes of the largest acc_t (value + int64 index): a workspace partial.
constexpr int64_t kAccBytes = 16;

/// The knobs every technique has.
struct ReduceLaunch {
  int vec = 1;      ///< elements per load: over r in the row techniques, over neighbouring outputs in the column ones
  int block = 256;  ///< threads per block
};

/// A technique's launches on a shape (make_reduce_kernel).
struct ReduceGrid {
  int64_t x = 1, y = 1;   ///< blocks of the first launch (phase 0); with `cluster`, x counts blocks
  int64_t second_x = 0;   ///< blocks of the second pass (phase 1); 0: one launch
  int64_t workspace = 0;  ///< bytes of workspace: the counters, then the partials; 0: none
  int64_t counters = 0;   ///< bytes at the workspace's start zeroed on the stream before the launch
  int cluster = 0;        ///< blocks per thread-block cluster along x; 0: a plain launch
  size_t smem = 0;        ///< dynamic shared memory per block
};

/// The techniques (Note [Reductions]), one interface: kMode, the technique's value of the variant knob "mode" (the
/// three column tiles share 4); kName, its name in the source's first line; chain, the input elements one thread's
/// accumulator takes, its serial chain (Note [Norm chains]); grid, its launches; source, which writes, after the
/// shared head, reduce_common.cuh, the accumulator and reduce_combine.cuh, the constants its device code adds, the
/// codegen_common fragments it uses and its .cuh (which defines the kernel). Sizing helpers are those of the plan,
/// the bound kernel and the tests.

/// A warp per output, its lanes striding over the row (vectors over r where the reduced block is one stride-1 run).
struct RowPerWarp : ReduceLaunch {
  static constexpr int kMode = 0;
  static constexpr const char* kName = "RowPerWarp";
  int64_t chain(const ReduceShape& s) const;
  ReduceGrid grid(const ReduceShape& s) const;
  void source(std::ostream& o, const ReduceShape& s) const;
};

/// A block per output, its threads striding over the row.
struct RowPerBlock : ReduceLaunch {
  static constexpr int kMode = 1;
  static constexpr const char* kName = "RowPerBlock";
  int64_t chain(const ReduceShape& s) const;
  ReduceGrid grid(const ReduceShape& s) const;
  void source(std::ostream& o, const ReduceShape& s) const;
};

/// A row split in `splits` chunks, a block each, their partials to the workspace; a second pass merges them (few
/// long rows).
struct SplitRow : ReduceLaunch {
  static constexpr int kMode = 2;
  static constexpr const char* kName = "SplitRow";
  int splits = 4;                                    ///< chunks per row
  int64_t chunk_vectors(const ReduceShape& s) const;  ///< vectors per chunk (the last may be shorter)
  int64_t chain(const ReduceShape& s) const;
  ReduceGrid grid(const ReduceShape& s) const;
  void source(std::ostream& o, const ReduceShape& s) const;
};

/// A thread per vector of neighbouring outputs (kept dims contiguous) looping over r, `threads` of them sharing a
/// column through shared memory, r split in `splits` chunks over blockIdx.y (then a second pass).
struct ColumnThreads : ReduceLaunch {
  static constexpr int kMode = 3;
  static constexpr const char* kName = "ColumnThreads";
  int threads = 1;                                ///< threads per column vector (knob ty)
  int splits = 1;                                 ///< chunks of r
  int64_t chunk_rows(const ReduceShape& s) const;  ///< reduced elements per chunk (the last may be shorter)
  int64_t chain(const ReduceShape& s) const;
  ReduceGrid grid(const ReduceShape& s) const;
  void source(std::ostream& o, const ReduceShape& s) const;
};

/// The knobs of the column tiles (a warp per 32 neighbouring vectors of columns, the warps split r).
struct TileLaunch : ReduceLaunch {
  int columns = 1;  ///< vectors of columns per thread (knob ty): tiles of 32 x columns x vec outputs
  int splits = 1;   ///< chunks of r: over blockIdx.y, or ClusterTile's blocks per cluster
  int64_t tiles(const ReduceShape& s) const;       ///< tiles (blocks along x, or clusters)
  int64_t chunk_rows(const ReduceShape& s) const;  ///< reduced elements per chunk (the last may be shorter)
  int64_t chain(const ReduceShape& s) const;
};

/// The column tile: lane l of every warp owns vectors l, l + 32, ... of the block's tile, 4 rows of loads in flight
/// (8 for single elements); splits > 1 meet in a second pass.
struct ColumnTile : TileLaunch {
  static constexpr int kMode = 4;
  static constexpr const char* kName = "ColumnTile";
  ReduceGrid grid(const ReduceShape& s) const;
  void source(std::ostream& o, const ReduceShape& s) const;
};

/// The pipelined tile (Note [Column tiles in flight]): `batch` rows of loads a batch, the next batch loaded before
/// this one is pushed; splits > 1 merged by the last block of a tile in the same launch.
struct PipelinedTile : TileLaunch {
  static constexpr int kMode = 4;
  static constexpr const char* kName = "PipelinedTile";
  int batch = 4;  ///< rows a batch (knob unr)
  /// Bytes of the per-tile arrival counters at the start of the workspace with splits > 1, else 0 (a multiple of
  /// 16, so the partials behind them stay aligned for any acc_t).
  int64_t counter_bytes(const ReduceShape& s) const;
  ReduceGrid grid(const ReduceShape& s) const;
  void source(std::ostream& o, const ReduceShape& s) const;
};

/// The cluster tile (sm_90+, Note [Column tiles in clusters]): the pipelined tile, one vector of columns a thread,
/// whose `splits` chunks are the blocks of one thread-block cluster, merged on chip; with `ring`, the batches
/// stream through a cp.async ring in shared memory (Note [Column tiles in rings]).
struct ClusterTile : TileLaunch {
  static constexpr int kMode = 4;
  static constexpr const char* kName = "ClusterTile";
  int batch = 4;      ///< rows a batch (knob unr)
  bool ring = false;  ///< through a ring (knob ring)
  int ring_stages() const { return ring ? 4 : 0; }  ///< stages of batch x vec elements a thread; 0 without a ring
  size_t ring_smem_bytes(const ReduceShape& s) const;  ///< dynamic shared memory of a block; 0 without a ring
  ReduceGrid grid(const ReduceShape& s) const;
  void source(std::ostream& o, const ReduceShape& s) const;
};

/// One variant's technique and knobs (default: RowPerWarp, vec 1, block 256).
using ReduceTechnique =
    std::variant<RowPerWarp, RowPerBlock, SplitRow, ColumnThreads, ColumnTile, PipelinedTile, ClusterTile>;

/// The variant of `t`: knobs {mode, vec, block, splits, ty} (splits 1 and ty 1 where a technique has no such knob;
/// ty is ColumnThreads' threads and the tiles' columns), then unr (the tiles' batch), cluster and ring, each only
/// where the technique has it: the ids that caches, policy data and replay fixtures know.
Variant variant_of(const ReduceTechnique& t);

/// Parses a call into a shape, or declines it with Unsupported (Note [Reductions]).
Result<ReduceShape> parse_reduction(const Problem& p);

/// CUDA source of one variant, exactly as NVRTC compiles it: the generated head (dtypes, typed constants, the offset
/// maps), reduce_common.cuh, the accumulator's file, reduce_combine.cuh, then the technique's constants and .cuh:
/// extern "C" cudal1_reduce(x, values, indices, workspace, phase).
KernelSource generate_reduce(const ReduceShape& s, const ReduceTechnique& t);

/// Binds a loaded module of technique `t` to `s`: its grid's launches on the call's stream, a workspace from torch's
/// allocator where it has one (counters zeroed first), cluster tiles through LoadedModule::launch_clusters.
std::unique_ptr<BoundKernel> make_reduce_kernel(const ReduceShape& s, const ReduceTechnique& t,
                                                std::shared_ptr<LoadedModule> module);

}  // namespace cudal1::optimizer::reduce
