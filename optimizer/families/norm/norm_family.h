/// @brief Private: the normalisation family (native_layer_norm and native_group_norm, forward, with their
/// mean/rstd outputs; fp32/fp16/bf16 with fp32 statistics; contiguous input, weight and bias of the input's dtype).
///
/// Note [Norm rows]
/// Both ops normalise "rows" of a contiguous tensor: layer norm has rows = prod(leading dims) of length
/// prod(normalized_shape) with the affine parameters indexed by the column; group norm has rows = N * groups of
/// length (C / groups) * HxW, with the affine parameters indexed by channel = (row % groups) * (C / groups) +
/// column / HxW. One generator serves both; the shape says which indexing the code uses.
///
/// Techniques, each a class below with only the knobs it uses and its own device code (norm_<technique>.cuh after
/// norm_common.cuh), named in a variant by the knob "mode" (the Notes below speak of them by it):
///   RowPerWarp (mode 0), RowPerBlock (1): a warp or a block per row; both may keep the row in registers (`cache`),
///                   so the input is read once.
///   SplitRow (2):   long rows split over `splits` blocks in two launches (partial Welford triples, then merge and
///                   normalise), so the input is read twice.
///   HeldCluster (7): a row over a cluster whose slices are held in registers and fed by bulk copies (Note [Norm
///                   held], sm_90+).
///   HeldGrid (8):   HeldCluster over a row's blocks of a cooperative grid, for rows up to 16 MB (Note [Norm held],
///                   mode 8).
/// The mode numbers are the ones variant ids have always carried, so that cached ids keep naming the same kernels;
/// 3 to 6 name no technique. Long rows (where SplitRow is offered) get the held rows on sm_90+ with 16-byte vectors
/// and SplitRow everywhere: it is what serves them where the held rows cannot run (sm_80, which has neither
/// clusters nor bulk copies; rows whose vectors are narrower than 16 bytes; pointers not 16-byte aligned, which the
/// held rows' bound kernel declines). Other ways to keep a row on chip (one cooperative launch over row groups sized
/// for L2, a row's slices in a cluster's shared memory, a shared-memory ring of row steps over a persistent grid,
/// row parts dealt by ticket) were measured and chosen for no benchmark row: they are not offered (docs/CHANGES.md).
///
/// Bytes, at the H200's ~4.15 TB/s (floor = input read once + output written once; mean/rstd, the affine
/// parameters and the workspace are < 0.1%). Mode 2 moves 3 tensor-sizes where the floor moves 2: 1.5x the floor
/// before any launch cost, about 1.65x in practice (layer norm f32 [16,64,256,256]: 217 us against 129 us). Only
/// the last ~50 MB of the first pass can still be in L2 when the second starts (`rev` reuses those, ~1%).
///
/// Note [Norm held]
/// Mode 7 splits a row over one thread-block cluster that reads it once, waits on no other cluster, and keeps HBM
/// loading while a row is reduced. A block is BLOCK consumer threads plus one producer warp (two with rereads,
/// below). The producer's first thread walks the block's chunk sequence (rows cid, cid + clusters, ...; slice
/// chunks of CHV = BLOCK x CPT 16-byte vectors, 16 or 32 KB) through a ring of NSLOT shared-memory slots: it waits
/// until a slot is empty (an mbarrier each warp of consumers arrives on), then arms the slot's full mbarrier with the
/// chunk's bytes and starts one bulk copy (cp.async.bulk global -> shared, completing on it; an empty chunk arms 0
/// bytes). Consumers wait on a chunk, copy their vectors into registers and free the slot at once, so the ring streams
/// the next row (up to NSLOT chunks ahead) through this row's statistics, exchange and output. Statistics: the block's
/// exact two-pass mean and squared deviations from registers (two sums over the consumers, named barrier 1), sent as
/// (n, mean, m2) by st.async to every block of the cluster, completing on the receiver's mbarrier (one per row parity;
/// no cluster barrier and no fence); each warp merges the CL triples in rank order with the same tree (bit-identical
/// statistics in every block); rank 0 writes mean and rstd = rsqrtf(m2 / cols + eps); the output goes from registers to
/// y with plain vector stores. An inbox slot is rewritten two rows later, by a block that has received this block's
/// triple of the row between, which this block sends only after it has read the slot. Clusters are independent (no
/// deadlock, whatever is resident): the grid is min(rows, clusters the device holds) clusters looping over rows.
/// Two passes over registers, not one: a one-pass form (per-thread shifted sums as the chunks arrive, one Welford
/// block reduction, half the barriers) is no faster, since the row's reductions are not what holds mode 7.
/// Rows too long for a cluster's registers (layer norm [64, 1048576] fp32: 256 KB a block at 16) keep their
/// first KEEP chunks and reread the other DROP (<= KEEP) after the exchange: the block's statistics are then
/// per-thread sums shifted by the thread's first element (merged with Chan's formula; the cancellation is bounded
/// by the thread's own m2, since the shift is one of its elements), the consumers' first thread arrives on a gate
/// mbarrier once the row has been read, and a second producer warp then copies the row's last DROP chunks, last
/// read first (most still in L2: ~70% measured), through a 64 KB ring of their own; consumers normalise
/// those first, then the registers.
/// Sizing: a slice keeps up to 128 KB in registers (16 vectors a thread at 512 consumers, 32 at 256), so a
/// cluster of 16 holds rows up to 2 MB and rereads up to 4 MB ones; the two smallest cluster sizes (1-16) that
/// fit are offered, with chunks of 16 and 32 KB and a tight (slice + 1 chunk) or deep (as many as fit 226 KB)
/// ring; with rereads, 512 consumers (two producer warps leave 113 registers a thread) and the deep ring only.
/// Offered where mode 2 is, on sm_90+, for 16-byte vectors (the bulk copies' alignment; the bound kernel checks
/// the pointers).
/// Probe (bench/probes/bulk_hold_probe.cu and bulk_hybrid_probe.cu, group norm g8's 2 MB rows in clusters
/// of 16): a bulk copy through such a ring alone runs at about a copy's pace; slices held in shared memory with a
/// cluster barrier a row are ~1.6-1.9x slower, st.async instead of the barrier ~1.3x, slices held in registers with
/// the ring streaming through the exchange ~1.1-1.2x. The 4 MB rows run slower than the 2 MB ones: a slice takes
/// 256 KB of the SM's ~354 KB on chip, so the ring holds less than one next slice while the row is written; and 64
/// rows over 7 clusters leave one row alone at the end. Mode 8 removes both.
/// Mode 8 is mode 7 with the cluster replaced by GP consecutive blocks of a cooperative grid: GP = the fewest
/// blocks whose registers hold the row (128 KB each, 2..132), so no chunk is reread, and rows of 16 MB (132 x
/// 128 KB) fit. The grid is floor(SMs / GP) groups of GP blocks (rows cid, cid + groups, ...), one block an SM;
/// co-residency, without which a wait deadlocks, from cuLaunchCooperativeKernel (a grid that cannot be resident
/// fails to launch and ATen serves the call, as do captured streams). Not bound to a GPC, so 4 MB rows run 4 at once
/// on 128 SMs (16 even waves of 64 rows) where clusters of 16 ran 7 on 112 SMs and reread half of each slice.
/// The exchange goes through the workspace (rows x GP triples, then a counter per row zeroed on the call's stream)
/// and is kept off the consumers' path twice over. A row ahead: while row r is in registers, the consumers wait
/// for row r + 1's chunks in the ring (which holds a whole slice: tight = slice + 1 chunk), sum them from shared
/// memory without freeing the slots (per-thread sums shifted by the thread's first element, Chan merges, as mode
/// 7's rereads), publish r + 1's triple (thread 0: store, fence, atomicAdd) and only then write row r, moving r + 1
/// into registers chunk by chunk as they free ("Interleaved", below). An exchange warp: for each row in turn it
/// spins on the row's counter until GP blocks arrived, merges the GP triples (lane l takes l, l + 32, ... in order,
/// then the warp's tree: the same bits in every block), writes mean and rstd (rank 0) and hands (mean, rstd) to the
/// consumers in shared memory on a per-parity mbarrier (a parity's slot is rewritten two rows later, after the row
/// between arrived everywhere, so after the consumers read it). Both are needed: with the wait in the consumers
/// every block stops on it every row (~1.2x slower), and the row ahead alone leaves the merge on their path.
/// Interleaved: chunk k of row r is written and chunk k of row r + 1 taken into the registers it freed, at once, so
/// each slot frees as soon as its registers do and the producer loads row r + 2 during row r's write. Writing row r
/// whole before moving row r + 1 would keep the ring full through the write (the deep ring then loads at most part
/// of row r + 2 meanwhile, and the next triple waits for the rest: ~1-2 us a row; at 16 MB rows, where all 128
/// blocks run in step, HBM would see a read phase and a write phase a row).
/// Speed (H200): ~1.1x a copy of the same bytes on the 4 MB and 2 MB rows (layer norm f32 [64,1048576], group norm
/// g8), ~1.2x on the 16 MB KernelBench layer-norm rows, which run one at a time on all 128 blocks, in step.
#pragma once

#include <iosfwd>
#include <variant>

#include "cudal1/optimizer/family.h"

namespace cudal1::optimizer::norm {

/// The family object (a process-wide singleton).
const Family& norm_family();

/// One planned signature.
struct NormShape {
  bool group = false;  ///< native_group_norm, else native_layer_norm
  c10::ScalarType dtype = c10::ScalarType::Float;
  c10::ScalarType stat_dtype = c10::ScalarType::Float;  ///< mean/rstd: fp32 for layer norm, the input's for group norm
  std::vector<int64_t> sizes, strides;  ///< the input as planned
  std::vector<int64_t> stat_sizes;      ///< mean/rstd sizes (contiguous)
  int64_t rows = 0, cols = 0;           ///< Note [Norm rows]
  int64_t groups = 1, channels_per_group = 1, hw = 1;
  bool has_weight = false, has_bias = false;
  int sm = 0;         ///< compute capability x 10 planned for (the held rows need 90+)
  float eps = 1e-5f;  ///< as ATen uses it (group norm in fp16/bf16: rounded to the input's dtype)
  /// Group norm in fp16/bf16: ATen keeps mean and rstd in the input's dtype and normalises with those rounded
  /// values (y = a * x + b, a = rstd * w, b = bias - a * mean), so the kernel does the same.
  bool round_stats = false;
  int max_vec = 1;
};

/// Elements one thread may keep in registers.
constexpr int kMaxCachedElements = 64;

/// The knobs every technique has.
struct NormLaunch {
  int vec = 1;      ///< elements per load/store
  int block = 256;  ///< threads per block (the held rows: consumer threads)
  /// Threads of a row's reductions (the generated kTpr and kRowReduceThreads).
  int row_threads() const { return block; }
  /// The kernel's __launch_bounds__: threads per block and blocks per SM (0: none asked).
  int threads(const NormShape&) const { return block; }
  int min_blocks() const { return 0; }
};

/// The techniques (Note [Norm rows] and the Notes above), one interface: kMode, the technique's value of the
/// variant knob "mode"; kName, its name in the source's first line; row_threads, threads and min_blocks (NormLaunch
/// unless the technique says otherwise); source, which writes, after the shared head and norm_common.cuh, the
/// constants its device code adds, the codegen_common fragments it uses and its .cuh files (they define
/// rownorm::rows). Sizing helpers are those of the bound kernel and the plan.

/// A warp per row (rows of up to 16384 elements), kept in registers with `cache`.
struct RowPerWarp : NormLaunch {
  static constexpr int kMode = 0;
  static constexpr const char* kName = "RowPerWarp";
  bool cache = false;  ///< the row kept in registers between its statistics and its output
  int row_threads() const { return 32; }
  void source(std::ostream& o, const NormShape& s) const;
};

/// A block per row, kept in registers with `cache`.
struct RowPerBlock : NormLaunch {
  static constexpr int kMode = 1;
  static constexpr const char* kName = "RowPerBlock";
  bool cache = false;  ///< the row kept in registers between its statistics and its output
  void source(std::ostream& o, const NormShape& s) const;
};

/// A row split over `splits` blocks in two launches (partial triples to the workspace, then merge and normalise).
struct SplitRow : NormLaunch {
  static constexpr int kMode = 2;
  static constexpr const char* kName = "SplitRow";
  int splits = 1;        ///< chunks per row
  bool reverse = false;  ///< the second launch walks the chunks last-read-first (L2 reuse)
  int64_t chunk_vectors(const NormShape& s) const;  ///< vectors per chunk (the last may be shorter)
  void source(std::ostream& o, const NormShape& s) const;
};

/// A row per cluster, held in registers, fed by bulk copies (Note [Norm held]).
struct HeldCluster : NormLaunch {
  static constexpr int kMode = 7;
  static constexpr const char* kName = "HeldCluster";
  int cluster = 1;      ///< blocks per row, one thread-block cluster
  int chunk_kb = 16;    ///< KB a bulk copy moves
  bool deep = false;    ///< as many ring slots as fit, else one more than a slice's chunks
  /// Consumers, a producer warp, and a second one for the rereads; one block an SM.
  int threads(const NormShape& s) const;
  int min_blocks() const { return 1; }
  /// Whether it is offered: sm_90+, 16-byte vectors, blocks of 256 or 512 consumer threads, chunks of 16 or 32 KB,
  /// a power-of-two cluster of 1-16, a slice of at least a block of vectors, and either a slice that fits 128 KB
  /// of registers with a ring of more slots than its chunks, or (512 consumers, deep ring) one that rereads at
  /// most as many chunks as it keeps.
  bool fits(const NormShape& s) const;
  unsigned smem_bytes(const NormShape& s) const;  ///< dynamic shared memory per block (the rings)
  void source(std::ostream& o, const NormShape& s) const;
};

/// HeldCluster over `parts` consecutive blocks of a cooperative grid (Note [Norm held], mode 8).
struct HeldGrid : NormLaunch {
  static constexpr int kMode = 8;
  static constexpr const char* kName = "HeldGrid";
  int parts = 2;        ///< blocks per row of the cooperative grid
  int chunk_kb = 16;    ///< KB a bulk copy moves
  bool deep = false;    ///< as many ring slots as fit, else one more than a slice's chunks
  /// Consumers, a producer warp and the exchange warp; one block an SM.
  int threads(const NormShape& s) const;
  int min_blocks() const { return 1; }
  /// The fewest blocks whose registers hold a row of `vec`-element vectors (128 KB each): the row's parts.
  static int64_t parts_for(const NormShape& s, int vec);
  /// Whether it is offered: sm_90+, 16-byte vectors, 2 to 132 blocks per row (the SMs of H100 SXM/H200), every
  /// slice wholly in registers (no rereads), a ring as HeldCluster's.
  bool fits(const NormShape& s) const;
  unsigned smem_bytes(const NormShape& s) const;  ///< dynamic shared memory per block (the ring)
  void source(std::ostream& o, const NormShape& s) const;
};

/// One variant's technique and knobs (default: RowPerWarp, vec 1, block 256, streamed).
using NormTechnique = std::variant<RowPerWarp, RowPerBlock, SplitRow, HeldCluster, HeldGrid>;

/// The variant of `t`: knobs {mode, vec, block, cache, splits, rev} (cache 0 outside the row techniques, splits 1
/// and rev 0 outside SplitRow), then HeldCluster's {cluster, ckb, deep} or HeldGrid's {parts, ckb, deep}: the ids
/// that caches, policy data and replay fixtures know.
Variant variant_of(const NormTechnique& t);

/// CUDA source of one variant, exactly as NVRTC compiles it: the generated head (dtypes, the shared reductions'
/// macros and typed constants), codegen_common's row reductions, norm_common.cuh, the technique's constants and
/// device code, then norm_entry.cuh: extern "C" cudal1_norm(x, w, b, y, mean, rstd, workspace, phase).
KernelSource generate_norm(const NormShape& s, const NormTechnique& t);

/// Binds a loaded module of technique `t` to `s`: launches once (RowPerWarp, RowPerBlock) or twice with a fp32
/// workspace of rows * splits * 3 floats from torch's allocator (SplitRow); HeldCluster in clusters of `cluster`
/// blocks of `threads` threads with smem_bytes of dynamic shared memory, as many clusters as the device holds (at
/// most one a row), Unsupported where it holds none; HeldGrid cooperatively, as many rows at once as the device's
/// SMs hold groups of `parts` blocks, with rows * parts triples and a counter per row, Unsupported where the device
/// has fewer SMs than a row's parts.
std::unique_ptr<BoundKernel> make_norm_kernel(const NormShape& s, const NormTechnique& t,
                                              std::shared_ptr<LoadedModule> module);

}  // namespace cudal1::optimizer::norm
