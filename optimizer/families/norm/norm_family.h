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
///   RowGroups (3):  the same split in one cooperative launch over groups of rows sized for L2, so the second read
///                   hits L2 (Note [Norm groups]).
///   ClusterSlices (4): a row split over a thread-block cluster that keeps it on chip, so the input is read once
///                   (Note [Norm clusters], sm_90+).
///   RingSteps (5):  steps of whole rows dealt over a persistent cooperative grid whose blocks keep their parts in
///                   a shared-memory ring that loads the next steps while one is reduced, so the input is read once
///                   (Note [Norm ring], sm_80 and sm_90+).
///   TicketParts (6): parts of rows dealt by ticket over a persistent cooperative grid, kept in registers (Note
///                   [Norm parts], sm_80 and sm_90+).
///   HeldCluster (7): a row over a cluster whose slices are held in registers and fed by bulk copies (Note [Norm
///                   held], sm_90+).
///   HeldGrid (8):   HeldCluster over a row's blocks of a cooperative grid, for rows up to 16 MB (Note [Norm held],
///                   mode 8).
///
/// Bytes, at the H200's ~4.15 TB/s (floor = input read once + output written once; mean/rstd, the affine
/// parameters and the workspace are < 0.1%). Mode 2 moves 3 tensor-sizes where the floor moves 2: 1.5x the floor
/// before any launch cost, about 1.65x in practice (layer norm f32 [16,64,256,256]: 217 us against 129 us). Only
/// the last ~50 MB of the first pass can still be in L2 when the second starts (`rev` reuses those, ~1%).
///
/// Note [Norm groups]
/// Mode 3 walks the rows in groups of ~`chunk_mb` MB (whole rows; one row when a row is larger): every block
/// of a persistent grid computes Welford triples of its parts of group g, arrives on group g's counter, waits
/// until all blocks have arrived, then merges the row's triples and normalises its parts. A group is reread
/// while it is still in L2, so HBM moves the floor's bytes; the cost is one grid-wide wait per group.
/// Co-residency, without which the wait deadlocks, comes from cuLaunchCooperativeKernel (the launch fails
/// instead of hanging when the grid cannot be resident: the call then stays on ATen); the grid is at most
/// sm_count x max_blocks_per_sm and the parts of a group are dealt evenly over it. Counters are zeroed by a
/// cuMemsetD32Async on the call's stream; partials written by other blocks are read with ld.global.cg (L1 is
/// not coherent). Every block merges a row's triples in the same order, so all parts use the same statistics,
/// and the statistics are mode 2's (fp32 Welford per thread, Chan merges). Each part rereads its row's
/// `splits` triples (12 x splits bytes, 3 KB at 256), so splits stay <= 256, and a group must have >= 128
/// parts (one row of 16 MB: splits 256 only), else SMs sit idle. Streams being captured into a graph are
/// declined at the call (no cooperative graph nodes).
/// `ahead` reads group g + 1 before waiting on group g: the wait is then almost always over when reached
/// (no drain at the barrier), but L2 must hold two groups of input plus the output in flight, so it suits
/// `chunk_mb` = 8 (~24 MB live), not rows of 16 MB (~48 MB live: the reread misses).
/// Rejected: one stats launch and one normalise launch per L2-sized group (the same bytes) costs 2 kernel
/// boundaries (~2-4 us each: launch gap, tail, ramp-up) per group: 32 boundaries for 268 MB in 16 MB groups,
/// 64-128 us against the 64 us of HBM reads it saves. A thread-block cluster holds rows up to ~4.6 MB (Note
/// [Norm clusters]), not the 16 MB rows.
/// In practice mode 3 runs level with mode 2 (about 1.66x the floor on layer norm f32 [64,1048576]) and stays a
/// knob: its blocks step through the groups in turn, each part's loads, Welford, reduction and wait in series.
/// The reread is not what holds it back: with evict-first hints on the reread and the output the whole reread
/// hits L2 and the kernel is no faster, so the loads carry no cache hints.
///
/// Note [Norm clusters]
/// Mode 4 splits a row over one cluster of `cluster` (2-16) blocks; block r of the cluster holds vectors
/// [r x CHV, (r + 1) x CHV) of it (CHV = ceil(vectors / cluster); the last blocks may hold fewer or none) from
/// the statistics to the output, so HBM moves the floor's bytes. A thread's vectors are j0 + tid + i x block:
/// the first REGS in registers (plain loads), the rest in dynamic shared memory in the input's dtype at
/// (i - REGS) x block + tid, copied by cp.async (4/8/16-byte vectors; 2-byte ones by load and store) in two
/// commit groups so the first half's Welford overlaps the second half's arrival. Each thread only reads back
/// what it copied, so no block barrier orders the copies. Statistics: per-thread Welford in vector order and
/// the block's Chan merges, as mode 2; thread 0 publishes the block triple in shared memory (two slots,
/// alternating by row), a cluster barrier (arrive.release / wait.acquire), then every warp loads the cluster's
/// triples through distributed shared memory (lane r from rank r) and merges them with the same shuffle tree:
/// every block gets bit-identical statistics; rank 0 writes mean and rstd = rsqrtf(m2 / cols + eps). One
/// barrier a row suffices: a slot is rewritten two rows later, after every block has passed the barrier of
/// the row between, i.e. finished its reads; a final barrier keeps blocks alive until the last remote read.
/// Clusters loop over rows (grid <= 2^31 - 1 blocks). No cluster waits on another: no deadlock, whatever is
/// resident. The launch fails (Unsupported, ATen serves the call) when no cluster can be resident.
/// Sizing (H200: 228 KB of shared memory per SM, 227 KB per block, 1 KB reserved per block): `occ` 1 sizes
/// the shared part for one block per SM, `occ` 2 for two (512 threads at most, __launch_bounds__(block, 2):
/// 64 registers), offered where shared memory is what stops a second block; REGS is the fewest vectors a
/// thread keeps in registers for the rest to fit, at most 64 bytes (16 registers; ptxas: no spills). So a
/// cluster holds <= 16 x (227 KB + 64 B x 1024) = ~4.6 MB: the 4 MB fp32 rows need 16 blocks of 512-1024
/// threads (at 1024: 14 float4 a thread in 224 KB of shared memory, 2 in registers). Offered on sm_90+ for
/// rows of >= 32 x cluster elements (short rows too), the widest vector, blocks of 128 threads or no more than
/// the slice's vectors: 2-16 variants on the targets, so that the tuner's few trials reach the best (the norm
/// fuzz draws a cluster variant for half of the signatures that have one).
/// Not done: the 16 MB KernelBench layer-norm rows. A row over several clusters needs them to exchange
/// partials through global memory, so all of a row's clusters (>= 4 of 16, where ~8 fit the GPU) must be
/// resident at once; max_active_clusters counts an empty GPU, and a kernel on another stream or MPS limits
/// can hold SMs so that a spinning cluster waits on one that never starts. Only a cooperative launch
/// guarantees co-residency (mode 3 uses it, without clusters). Those rows stay on modes 2 and 3.
/// Mode 4 stays a knob and is rarely the fastest: every cluster of the GPU loads, computes and writes in step,
/// and with the whole row pinned in shared memory nothing loads the next row while one is reduced (layer norm
/// f32 [64,1048576]: ~250 us against ~213 us for mode 2; Nsight Compute: 7 clusters of 16 resident on 112 of
/// 132 SMs, DRAM ~43%, warps waiting on L1TEX). Mode 7 (Note [Norm held]) keeps the cluster and removes that.
/// Probed, not built: a cluster per row that holds nothing on chip and reads its slices twice, hoping for L2
/// (bench/probes/cluster_reread_probe.cu): its second read costs about what a read from HBM does.
///
/// Note [Norm ring]
/// Mode 5 addresses what holds modes 3 and 4 back: mode 3's reread misses L2 (Nsight Compute: DRAM moves 3 tensor
/// sizes, L2 hit rate ~38%: writes and the next group's reads evict the group before it is reread), and mode 4's
/// clusters load, reduce and write in step with nothing loading while a row is reduced (latency-bound, DRAM ~44%). A
/// cooperative grid of one block per SM (sm_count blocks; co-residency as in Note [Norm groups]: a grid that cannot be
/// resident fails to launch, streams being captured are declined, ATen serves the call) walks the rows in steps of
/// ~`step` MB (whole rows, RPS of them; one row when a row is larger). Every row of a step is dealt over all blocks:
/// block b holds vectors [b x ch, (b + 1) x ch) of it, ch = ceil(vectors / grid) (the last blocks may hold fewer or
/// none: they still publish an empty triple and arrive). A block keeps its parts of a step in one slot of a `ring`-slot
/// ring in dynamic shared memory, filled by cp.async (16-, 8- or 4-byte vectors; 2-byte vectors are not offered), one
/// commit group a step: the prologue issues steps 0..RING-2; step s issues step s + RING - 1 into the slot step s - 1
/// freed, waits (cp.async.wait_group RING - 1) for its own copies of step s, computes per-thread Welford over each
/// row's part from shared memory (vector order, as mode 2), block-merges it, thread 0 writes the triple of each row to
/// the workspace at row x grid + b and arrives on step s's counter (fence, atomicAdd), spins until all blocks arrived
/// (as mode 3), then every block merges the row's grid triples in the same order and tree (bit-identical statistics
/// everywhere; mode 3's merge_row) and normalises its part from shared memory into y; a block barrier ends the step
/// before its slot is refilled. A thread only reads back what it copied itself, so no block barrier orders the copies.
/// Past the last step the issued commit groups are empty, so the count stays uniform. HBM moves the floor's bytes (one
/// read, one write) plus rows x grid x 12 bytes of triples (0.04% on the targets); while a block waits at step s's
/// barrier and writes step s, its copies of steps s + 1..s + RING - 1 keep HBM reading.
/// Sizing: the planner sizes the ring for a reference grid (132 blocks on sm_90+, H100 SXM/H200; 108 on sm_80,
/// A100): ring x RPS x ch x vector bytes within one block's shared memory (227 KB on sm_90, 163 KB on sm_80,
/// less 512 bytes of static arrays), ch >= the block (every thread has a vector of every row). The bound kernel
/// sizes it for the device's real SM count; a device with fewer SMs whose ring no longer fits fails the
/// shared-memory opt-in: Unsupported, ATen serves the call. Workspace: rows x grid triples, then a counter per
/// step (cuMemsetD32Async on the call's stream). Offered where mode 2 is (rows >= 4096 elements, <= 4096 rows),
/// widest vector, blocks 256-1024, steps of 4 and 8 MB (one only where both give the same rows), 2 or 3 slots;
/// ring 3 is a stratum of its own (the tuner tries both ring sizes on every signature).
/// Not offered: the 16 MB KernelBench layer-norm rows. A row's part is 124 KB a block (16 MB / 132), two slots
/// need 248 KB. A finer ring (the next row's first ~100 KB loading while this row finishes, slots freed chunk by
/// chunk) would need per-chunk completion (mbarrier-tracked or TMA bulk copies) instead of commit groups; those
/// rows stay on modes 2 and 3.
/// Mode 5 stays a knob (verified by the norm fuzz) and is rarely the fastest (~2.5x the floor on layer norm f32
/// [64,1048576]; Nsight Compute: DRAM ~31%, one block of 16 warps an SM, a third of the stalls at block
/// barriers): its per-step chain on chip (block merges for every row, the grid wait, then the writes) sets the
/// pace, not the per-element arithmetic (per-thread two-pass statistics, ~8 instructions an element instead of
/// ~58, leave it within 5%).
///
/// Note [Norm parts]
/// Mode 6 avoids what holds modes 4 and 5 back (the Notes above: per-element Welford with a division, block
/// barriers, shared-memory round trips, and every block loading, reducing and writing in step with the rest)
/// and what holds mode 3 back (the L2 reread). A row is cut into P parts of BLOCK x PER vectors (PER 4 or 8; 32
/// registers of data at 8 x 16 bytes). A persistent cooperative grid of what the device keeps resident (2 blocks
/// of 512 or 4 of 256 an SM: __launch_bounds__ minimum blocks) takes parts by ticket (thread 0's atomicAdd, in
/// order, asked before it is needed): a block loads its part into registers with every load issued at once,
/// computes each thread's exact two-pass mean and squared deviations (no division per element), merges the
/// block's triples (Chan, one block reduction), publishes the part's triple and arrives on its row's counter;
/// the row's last part to arrive merges the row's P triples (merge_row, once a row), stores mean and rstd and
/// raises the row's flag; every part's block waits only for its row's flag, then normalises from registers.
/// With `ahead` a block holds two parts: it loads and publishes its next part before it waits on the current
/// one's row, so HBM keeps reading through the wait (a part is always published right after its loads, never
/// after a wait: publishing after the wait would chain every row to the one before). HBM moves the floor's
/// bytes.
/// Deadlock freedom: tickets go out in order and a part is published without waiting, so every part of the
/// oldest unfinished row is published or not yet issued, and then a block is free to take it as long as the
/// grid holds >= P blocks; the planner offers P <= the reference grid (ring_reference_blocks x minimum
/// blocks), the bound kernel declines the call (ATen) where this device keeps fewer blocks than P resident,
/// and the cooperative launch fails (ATen) where the grid cannot be resident. Workspace: rows x P triples, a
/// counter and a flag per row, the ticket counter (zeroed by cuMemsetD32Async), each row's mean and rstd;
/// streams being captured are declined (no cooperative graph nodes), as modes 3 and 5.
/// Speed: ~1.4x a copy of the same bytes on layer norm f32 [64,1048576] and group norm f32 [16,64,256,256] g8 (256
/// threads, 4-8 vectors, ahead). Nsight Compute: DRAM ~55%, 65% of cycles without an eligible warp: latency-bound; of
/// the ~16 cycles between a warp's instructions ~5.5 wait on loads and a third on the per-part barriers (ticket, block
/// reduction, arrival) and fences. The floor of this design (bench/probes/row_sync_probe.cu): the bare pattern (static
/// parts over a cooperative grid, a sum and one arrival a block a row, 1-3 rows loaded and published ahead of the wait,
/// nothing else) runs layer norm's shape [64,1048576] in 175-200 us against a 134 us copy, and mode 6 (~187 us) is at
/// that cost: going faster takes a design without a barrier over the whole grid per row (mode 8, Note [Norm held]), not
/// a leaner mode 6.
///
/// Note [Norm held]
/// Mode 7 keeps what made mode 4 right (a row over one thread-block cluster, read once, no wait on any other cluster)
/// and removes what made it slow: per-thread copies, a row's slice pinned in shared memory so that nothing loads while
/// it is reduced, and a cluster barrier a row. A block is BLOCK consumer threads plus one producer warp (two with
/// rereads, below). The producer's first thread walks the block's chunk sequence (rows cid, cid + clusters, ...; slice
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
  int sm = 0;         ///< compute capability x 10 planned for (ClusterSlices and the held rows need 90+)
  float eps = 1e-5f;  ///< as ATen uses it (group norm in fp16/bf16: rounded to the input's dtype)
  /// Group norm in fp16/bf16: ATen keeps mean and rstd in the input's dtype and normalises with those rounded
  /// values (y = a * x + b, a = rstd * w, b = bias - a * mean), so the kernel does the same.
  bool round_stats = false;
  int max_vec = 1;
};

/// Elements one thread may keep in registers.
constexpr int kMaxCachedElements = 64;

/// ClusterSlices: bytes of its slice one thread may keep in registers (16 registers).
constexpr int kMaxClusterRegisterBytes = 64;

/// The knobs every technique has.
struct NormLaunch {
  int vec = 1;      ///< elements per load/store
  int block = 256;  ///< threads per block (the held rows: consumer threads)
  /// Threads of a row's reductions (the generated TPR and kTpr).
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

/// SplitRow's parts in one cooperative launch over groups of rows sized for L2 (Note [Norm groups]).
struct RowGroups : NormLaunch {
  static constexpr int kMode = 3;
  static constexpr const char* kName = "RowGroups";
  int splits = 1;      ///< parts per row
  int chunk_mb = 0;    ///< rows are processed in groups of about this many MB of input
  bool ahead = false;  ///< a block reads group g + 1 before it normalises group g
  int64_t chunk_vectors(const NormShape& s) const;  ///< vectors per part (the last may be shorter)
  /// Rows per group (at least 1, at most all rows): as many whole rows as fit in chunk_mb MB of input.
  int64_t rows_per_group(const NormShape& s) const;
  int64_t groups(const NormShape& s) const;  ///< number of row groups
  void source(std::ostream& o, const NormShape& s) const;
};

/// A row per thread-block cluster of `cluster` blocks, kept on chip (Note [Norm clusters]).
struct ClusterSlices : NormLaunch {
  static constexpr int kMode = 4;
  static constexpr const char* kName = "ClusterSlices";
  int cluster = 2;  ///< blocks per row, one cluster
  int occ = 1;      ///< blocks per SM the slice's shared memory is sized for (1 or 2)
  int min_blocks() const { return occ > 1 ? occ : 0; }
  /// Vectors of a row each block of the cluster holds (the last may hold fewer).
  int64_t slice_vectors(const NormShape& s) const;
  /// Vectors each thread holds (registers first, then shared memory).
  int64_t thread_vectors(const NormShape& s) const;
  /// Vectors each thread keeps in registers so that the rest of its slice fits the shared memory of occ blocks per
  /// SM; -1 when that would take more than kMaxClusterRegisterBytes per thread or more threads than occ blocks
  /// leave 64 registers each.
  int registers(const NormShape& s) const;
  /// Dynamic shared memory bytes per block (the slice less its register part).
  unsigned smem_bytes(const NormShape& s) const;
  void source(std::ostream& o, const NormShape& s) const;
};

/// Steps of rows over the grid, kept on chip in a load-ahead ring (Note [Norm ring]).
struct RingSteps : NormLaunch {
  static constexpr int kMode = 5;
  static constexpr const char* kName = "RingSteps";
  int step_mb = 0;  ///< rows are processed in steps of about this many MB
  int ring = 0;     ///< steps held in a block's shared-memory ring (ring - 1 loading ahead)
  /// Whole rows per step, as many as fit in step_mb MB (at least 1, at most all).
  int64_t rows_per_step(const NormShape& s) const;
  int64_t steps(const NormShape& s) const;  ///< number of steps
  /// Vectors of each row a block holds in a grid of `blocks` (the last blocks may hold fewer or none).
  int64_t part_vectors(const NormShape& s, int64_t blocks) const;
  /// Dynamic shared memory bytes per block in a grid of `blocks`: `ring` slots of a step's part.
  int64_t smem_bytes(const NormShape& s, int64_t blocks) const;
  /// Whether it is offered: vectors of >= 4 bytes (cp.async), a part of >= `block` vectors a row and a ring that
  /// fits one block per SM's shared memory at the reference grid.
  bool fits(const NormShape& s) const;
  void source(std::ostream& o, const NormShape& s) const;
};

/// Parts of rows dealt by ticket over the grid, kept in registers (Note [Norm parts]).
struct TicketParts : NormLaunch {
  static constexpr int kMode = 6;
  static constexpr const char* kName = "TicketParts";
  int per = 0;         ///< vectors each thread holds in registers
  bool ahead = false;  ///< a block loads its next part before it waits on the current row
  /// Blocks per SM the kernel's __launch_bounds__ asks for (4 at 256 threads, 2 at 512 or with `ahead`'s second
  /// set of registers).
  int min_blocks() const;
  int64_t parts_per_row(const NormShape& s) const;  ///< block x per vectors each; the last may be shorter
  /// Whether it is offered: blocks of 256 or 512, 4 or 8 vectors a thread (with `ahead` at most 2048 vectors a
  /// block), at least 2 parts a row and no more than the reference grid (ring_reference_blocks x min_blocks)
  /// holds at once.
  bool fits(const NormShape& s) const;
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
  /// Whether it is offered: sm_90+, 16-byte vectors, 2 to the reference grid's blocks per row (132 on sm_90+),
  /// every slice wholly in registers (no rereads), a ring as HeldCluster's.
  bool fits(const NormShape& s) const;
  unsigned smem_bytes(const NormShape& s) const;  ///< dynamic shared memory per block (the ring)
  void source(std::ostream& o, const NormShape& s) const;
};

/// One variant's technique and knobs (default: RowPerWarp, vec 1, block 256, streamed).
using NormTechnique = std::variant<RowPerWarp, RowPerBlock, SplitRow, RowGroups, ClusterSlices, RingSteps,
                                   TicketParts, HeldCluster, HeldGrid>;

/// The variant of `t`: knobs {mode, vec, block, cache, splits, rev} (cache 0 outside the row techniques, splits 1
/// and rev 0 outside the split ones), then RowGroups' {chunk, ahead}, ClusterSlices' {cluster, occ}, RingSteps'
/// {step, ring}, TicketParts' {per, ahead}, HeldCluster's {cluster, ckb, deep} or HeldGrid's {parts, ckb, deep}:
/// the ids that caches, policy data and replay fixtures know.
Variant variant_of(const NormTechnique& t);

/// RingSteps and TicketParts: the grid the planner sizes them for on compute capability `sm` (the SM count of
/// H100 SXM/H200 on sm_90+, A100 on sm_80); 0 where they are not offered.
int ring_reference_blocks(int sm);

/// CUDA source of one variant, exactly as NVRTC compiles it: the generated head (dtypes, the shared reductions'
/// macros and typed constants), codegen_common's row reductions, norm_common.cuh, the technique's constants and
/// device code, then norm_entry.cuh: extern "C" cudal1_norm(x, w, b, y, mean, rstd, workspace, phase).
KernelSource generate_norm(const NormShape& s, const NormTechnique& t);

/// Binds a loaded module of technique `t` to `s`: launches once (RowPerWarp, RowPerBlock; ClusterSlices in
/// clusters of `cluster` blocks with smem_bytes of dynamic shared memory) or twice with a fp32 workspace of
/// rows * splits * 3 floats from torch's allocator (SplitRow); RowGroups launches once, cooperatively (Note [Norm
/// groups]), with that workspace followed by one zeroed arrival counter per row group; RingSteps likewise, with
/// rows * grid triples, a counter per step and smem_bytes of dynamic shared memory (Note [Norm ring]);
/// TicketParts likewise, with rows * parts triples, a counter per row and the ticket counter, on a grid of at
/// most what the device keeps resident, and Unsupported where that is fewer blocks than a row's parts; HeldCluster
/// in clusters of `cluster` blocks of `threads` threads with smem_bytes of dynamic shared memory, as many
/// clusters as the device holds (at most one a row), Unsupported where it holds none; HeldGrid cooperatively, as
/// many rows at once as the device's SMs hold groups of `parts` blocks, with rows * parts triples and a counter
/// per row.
std::unique_ptr<BoundKernel> make_norm_kernel(const NormShape& s, const NormTechnique& t,
                                              std::shared_ptr<LoadedModule> module);

}  // namespace cudal1::optimizer::norm
