/// @brief Private: the softmax family (_softmax and _log_softmax over any dimension; fp32/fp16/bf16 with fp32
/// accumulation). Rows (the last dim, or a dim followed only by size-1 dims) contiguous inside with any uniform
/// row stride; outer dims as [outer, n, inner] columns (Note [Softmax columns]).
///
/// Note [Softmax columns]
/// Softmax over a dim followed by dims of product inner > 1 reduces, for each (outer, inner) position, a column
/// of n elements with stride `n_stride` (ATen: cunn_SpatialSoftMaxForward on the .contiguous() input, so the
/// output is contiguous). The arithmetic is that kernel's, per column in fp32: max (NaN skipped: fmaxf, like
/// ATen's `a < b ? b : a` from `lowest`; the two differ only in columns of -Inf/NaN, NaN either way), then
/// sum of expf(x - max), then softmax = expf(x - max) / sum and log_softmax = (x - max) - logf(sum)
/// (SoftMaxForwardEpilogue / LogSoftMaxForwardEpilogue; the row kernels keep x - (max + log(sum)) of ATen's
/// persistent softmax). Layouts served exactly: the dims after `dim` dense (stride 1 inside), `dim` with any
/// stride, the dims before it one uniform stride (size-1 dims ignored), no overlap; anything else declines.
/// Technique space: `split` threads share a column (1: a thread per column, coalesced across threads along
/// inner; 4 or 32: a partial reduction each, combined by warp shuffles and shared memory), `vec` adjacent
/// inner columns per thread (16-byte loads where inner, the strides and the offset allow), `cache` (the
/// thread's part of the column kept in registers: one read instead of three) and the block size; and the tiles
/// of Note [Softmax column tiles].
///
/// Note [Softmax column tiles]
/// Why (bytes, H200): with `split` threads per column a warp covers block/split adjacent columns, 64 bytes of a
/// row at best, and three reads when the column does not fit registers: log_softmax bf16 [32,32000,64] runs at
/// 6.4x its floor (2048 columns: 128 blocks, each thread a serial column of 1000), f16 [8,16,2048,2048] dim 2
/// at 2.3x (three reads of 512 MB; L2 holds 50 MB), f32 [64,1000,56,56] dim 1 at 1.4x (half lines per warp).
/// A tile variant (`tile` = 1) gives each warp 32 x vec adjacent inner elements of one n-row (128 bytes for fp32
/// vec 1 or 16-bit vec 2: whole lines), the block / 32 warps of a block take rows w, w + W, ... of n, and each
/// lane keeps an online (max, sum) pair per column, merged over the warps in shared memory in warp order (every
/// warp folds the same values in the same order, so all agree bitwise). One pass then writes: from registers
/// when the block's rows fit (`cache`, at most 64 elements a thread, 32 at block 1024: input read once), else
/// re-read right after the block read them (L2 holds the working set when it is small: f16 [8,16,2048,2048]
/// at vec 1 keeps 264 resident blocks x 128 KB = 34 MB). Where outer x tiles gives too few blocks (2048
/// columns = 32 tiles of 64), `chunks` blocks split each column's n over two launches: phase 0 writes each
/// chunk's merged pairs to an fp32 workspace [2][chunks][outer * inner], phase 1 merges them in chunk order,
/// re-reads its rows and writes, walking the blocks backwards so that its first blocks hit what phase 0 left
/// in L2. Bytes: spatial f32 one read + one write at whole lines; [32,32000,64] two reads less the ~50 MB L2
/// tail of 131 MB.
/// Special values as the two-pass kernels: m is the fmaxf maximum (never NaN); an element -Inf adds 0 (exactly
/// exp(-Inf - max) when the column max is finite; a column whose max stays -Inf, every element -Inf or NaN, gets
/// sum NaN like exp(-Inf - -Inf) in the two-pass sum); NaN and +Inf make the sum NaN (exp(NaN), exp(Inf - Inf));
/// rescaling skips the factor when the max did not change, so exp(-Inf - -Inf) never enters. The sum differs
/// from the two-pass one by the rescale roundings only (a few fp32 ulps), far inside the verification tolerance.
///
/// Note [Softmax shared tiles]
/// Why (bytes, H200): the tiles above read a column twice whenever it does not fit registers (log_softmax bf16
/// [32,32000,64] dim 1 runs at ~3.9x its floor with two launches whose re-read misses L2; f16 [8,16,2048,2048]
/// dim 2 at ~2.2x), and a block per long row reads it three times (f32 [4096,65536]: 1.66x). Shared memory
/// (227 KB a block, 228 KB an SM) holds the data between the statistics and the output instead: one read.
/// Column tiles (`tile` = 2, sm_90+): a block holds its tile (32 x vec adjacent inner columns, vec such that a
/// warp row is 64 to 256 bytes) for its range of n in dynamic shared memory in the storage dtype, folds its
/// statistics in two passes on chip (the maximum, then the sum: Note [Softmax fast exp]), then writes from shared
/// memory. Where one block cannot hold the whole column range, `cluster` = C in 2..16 blocks of a thread-block
/// cluster take ceil(n / C) rows each, publish each merged statistic in shared memory, meet at a cluster barrier,
/// and every block merges the C values in rank order through distributed shared memory (identical everywhere),
/// then writes its rows; it leaves only after a second barrier (Note [Clusters] in module.cpp). Offered for any
/// n >= 2 C (C = 1 for any n) where the block's bytes fit; the tuner picks C, which sets how many blocks an SM
/// holds (one block per SM leaves its memory pipe idle during the merge and the barrier: prefer >= 2). With
/// `keep` (block 512 only, where a block has at least twice those rows) each thread keeps its first rows in
/// kKeptRegisters = 20 registers (20 rows of vectors up to 4 bytes, 10 of 8 bytes; 320 rows of a block at 4
/// bytes) and only the rest goes to shared memory. The kernel's __launch_bounds__ asks for the blocks per SM
/// that its shared memory allows, and the read keeps as many vectors in flight as the registers left allow.
/// Cluster rows (`cluster` = C in 2..16 on a row plan, sm_90+): C blocks split each row's vectors into slices
/// kept in shared memory; the row max and then the sum of exp(x - max) are reduced in the block and then over
/// the cluster in rank order; the epilogue and the special values are the row kernel's (a two-pass kernel).
/// Strata: shared tiles 24..26, pair tiles 27..29 and cluster rows 17..19 by the blocks an SM holds (1, 2, 3+), so
/// that the tuner's first picks cover each occupancy class rather than one random cluster size.
/// Dropped (issue 41): the online shared tiles (online pairs folded as the tile kernel folds them, variants without
/// `two1`), which no benchmark row chose (docs/PERF.md, "Whole kernel table, H200, 2026-12-03 (session 31, run
/// 4)": rows 18 and 20 chose two-pass tiles, 19 the held slabs, 21 split columns); every such tile had a two-pass
/// twin of the same knobs, as fast for fp32 and faster for 16-bit (Note [Softmax fast exp]). Shared tiles keep
/// `two1` in their ids, and the features their layout.
/// f16 [16384,1024] rows are launch-bound, not addressed here.
/// Speed: the cluster rows serve softmax f32 [4096,65536] at ~1.2x the floor (vec 4, block 256, C = 8) where three
/// reads cost ~1.66x. Without the async copies and two-pass folding below (Note [Softmax async tiles],
/// Note [Softmax fast exp]), the shared column tiles lose to the whole-line tile on f16 [8,16,2048,2048] dim 2 and to
/// split32 on f32 [64,1000,56,56] dim 1: a block that reduces its tile from shared memory and waits at the cluster
/// barrier leaves HBM idle, and the blocks of a wave do so in step.
/// Not done: ticketed column parts (parts of a column tile dealt by ticket over a cooperative grid, kept in
/// registers, the group's last part merging the parts' pairs once and raising a flag the others wait on):
/// every variant is ~1.2-14x slower than the kept tiles, and fewer, larger parts are faster, so the per-part
/// ticket, merge and wait cost dominates, not HBM.
///
/// Note [Softmax cluster merge]
/// Why: with every thread reading the ranks' values itself, the merges cost more than the tile's rows (Nsight
/// Compute source-level stall sampling, log_softmax bf16 [32,32000,64] dim 1, the pair tile, cluster 16, DRAM 37%,
/// 45% achieved occupancy): only 23% of the warp stall samples fall in the loops over the tile's rows. The rest
/// sit in the merges: 11% on the memory barriers that each warp's `barrier.cluster.arrive.release` brings (ERRBAR,
/// stall_membar), 9% in the cluster barrier's wait, and ~15% on the combines of two_pass_merge waiting for their
/// remote loads (stall_long_sb): each thread reads the 16 ranks' values one round trip at a time
/// (`ld.shared::cluster` is volatile asm with a memory clobber, so no load is issued before the previous combine),
/// 512 threads a block reading the same 16 x NE words.
/// What (two_pass_merge, kCluster > 1): warp 0 publishes, arrives with release and alone reads the ranks' values,
/// every rank's load issued before the first combine; it hands the merged values to its block through shared
/// memory (`bc`, see two_pass_merge for why reusing the other merge's `pub` is safe) behind one more block
/// barrier. The other warps arrive relaxed (they published nothing), and so does every warp at the final
/// arrival (the remote values are used before it). The combines and their order are unchanged: the same bits.
/// The cluster rows also issue every rank's loads before their first combine.
/// So a merge takes one round trip of distributed shared memory instead of 16 serial ones (~0.2 us each at ~350
/// cycles under load), with 16x fewer remote loads and 1 fence a block instead of 16: that row ~1.3x faster (~1.6x
/// the copy). The cluster rows' batched loads leave softmax f32 [4096,65536] where it was.
///
/// Note [Softmax fast exp]
/// Why (instructions, H200): f16 [8,16,2048,2048] dim 2 holds 1.07 G elements; with expf and div_rn a kernel
/// spends ~30 instructions an element (expf is ~8 with one MUFU, online_add ~13 with its branch, the epilogue's
/// expf and div_rn ~15), 1.0 G warp instructions at ~1.05 T a second for the GPU: ~1000 us against a 515 us
/// memory floor, whatever it reads. Two-pass shared tiles (`two`: every shared tile since the online ones were
/// dropped) fold only the maximum while the tile is read (fmaxf, NaN skipped, as the two-pass kernels),
/// merge it over warps and the cluster, then sum exp(x - m) from the tile on chip (thread rows in order, warps in
/// warp order, cluster ranks in rank order: the same value in every block), merge the sums (both merges are one
/// device function, two_pass_merge, on a combine: fmaxf, or +), and write. With a 16-bit output, exp(x - m) is
/// ex2.approx((x - m) * log2 e): one FADD, one FMUL, one MUFU (relative error <= 2^-22 from ex2.approx plus
/// 2^-24 |x - m| log2 e from the rounding of the product: below 2^-19 for x - m >= -10, where every term that
/// moves a 16-bit result lies), and the epilogue multiplies by the sum's reciprocal (1.5 ulp of fp32) instead of
/// div_rn. fp16's half ulp is 2^-11 and bf16's 2^-8, so a result differs from ATen's by at most one ulp of the
/// output, rarely (within the 2e-3 / 1.6e-2 verification rtol).
/// fp16 flushes fp32 subnormal exps (.ftz): they are below fp16's smallest subnormal and round to 0 either way;
/// bf16, which can hold them, keeps them (no .ftz). Special values are the two-pass kernels': ex2(-Inf) = 0,
/// NaN and +Inf - +Inf give NaN. fp32 outputs keep expf and div_rn. ~13-16 instructions an element; the other
/// column rows are not issue-bound (log_softmax bf16 [32,32000,64] has 65 M elements). What then holds the f16
/// attention row is the copy through registers starving HBM (DRAM 56%), which Note [Softmax async tiles] removes.
/// fp32 two-pass tiles (exact exp) ran as fast as the online ones (since dropped: Note [Softmax shared tiles]).
///
/// Note [Softmax async tiles]
/// Why (Nsight Compute, H200): copied through registers, the two-pass tile vec2.block256.cluster4 on f16
/// [8,16,2048,2048] dim 2 runs at DRAM 56%, 3 blocks an SM, half its stalls waiting on global loads: each
/// warp loads kUnroll rows into registers, waits for all of them, stores them to shared memory and folds them,
/// so its bytes in flight fall to zero between batches; a `keep` block at 2 per SM holds ~12 KB in flight
/// (log_softmax bf16 [32,32000,64]: 12 rows of 64 bytes a warp, the registers left by kept rows). Where a tile
/// is whole (inner / vec a multiple of 32: every lane live) and its rows start on 16 bytes (storage offset,
/// n and outer strides; the pointers are checked at every call), the block's shared rows are copied with
/// cp.async.cg (cp_async<16>, Note [Async copies]) in 16-byte chunks (thread t takes chunks t, t + BLOCK, ...;
/// a chunk's bytes land where the register path would have stored them), all in flight at once without
/// registers; the kept rows still load into registers first. After cp.async.wait_all (cp_async_wait_all) and a
/// block barrier every thread folds its own rows from shared memory in the same order as the register copy (kept rows,
/// then rows n0 + NK + w + i W), so the arithmetic and its order are unchanged. Offered on every such shared
/// tile instead of the register copy (no knob: the id shows `async1`). Speed (with the two passes): attention over
/// queries ~1.18x the copy (vec1.block512.tile2.cluster1.keep1.two1), spatial f32 ~1.2x, log_softmax bf16
/// [32,32000,64] dim 1 ~2.1x (Notes [Softmax pair tiles] and [Softmax cluster merge] go further there).
/// Cluster rows copy their slice the same way where the vector is 4 bytes or more (cp.async has no 2-byte
/// copy; each thread reads back only what it copied, so no barrier), sum and write with Note [Softmax fast exp]
/// for 16-bit outputs, and may be one block without a cluster (`cluster` = 1: a row of up to 227 KB, e.g. the
/// 64 KB bf16 rows of [8192,32000], three blocks an SM, no cluster barrier: one read of each row instead of the
/// row kernels' three, two of them from L2).
///
/// Note [Softmax fast tiles]
/// Why (H200): the shared tiles hold log_softmax bf16 [32,32000,64] dim 1's column tiles on chip only in clusters
/// of 16 blocks (2 MB a tile), 4.6 waves that load, reduce across the cluster and write in step, latency-bound
/// (DRAM 37%; Nsight Compute: 16 cycles between a warp's instructions, 0.45 issued a cycle a scheduler;
/// Note [Softmax pair tiles] cuts the instructions by a third and the time by little).
/// Reading twice instead costs one more read of the input: a column pass of (max, sum) pairs per chunk of rows
/// (phase 0: 131 MB read) and a pass that merges the chunks' pairs, re-reads and writes (phase 1: 262 MB), both
/// streaming at whole lines with no block waiting on another; ~393 MB, ~95-100 us (1.5-1.6x the floor), less
/// what phase 1's backward walk finds in L2. The chunked tiles of Note [Softmax column tiles] are that plan, but
/// their online_add spends ~20 instructions an element (expf in both branches). With `fast` (16-bit dtypes,
/// rows not cached) phase 0 folds kUnroll = 8 rows at a time: their maximum first (fmaxf, NaN skipped), one
/// rescale of the sum by expf(m - m_new) where it grew, then exp(x - m) of each row by Note [Softmax fast exp]
/// (-Inf adds 0 as in online_add; rows past the chunk load as -Inf); the epilogue takes the fast forms too.
/// Special values as online_add: +Inf and NaN poison the sum (exp(Inf - Inf), exp(NaN)), m never NaN. The sum
/// differs from online_add's by the rescale and ex2.approx roundings (Note [Softmax fast exp]); with at most one
/// rescale per 8 rows its error stays below online_add's (one expf per growing row). ~8 instructions an element.
/// Speed: on that row the best fast tile is ~8% faster than the best plain chunked tile but slower than the shared
/// pair tiles, and chunks 64 run slower than chunks 8, so neither the instructions nor the second read are what
/// hold the chunked tiles back. Kept: on the H200 they beat the other tiles that do not need sm_90's shared tiles,
/// which are what an sm_80 part chooses among (not timed there).
///
/// Note [Softmax pair tiles]
/// Why (Nsight Compute, H200): without pairs, log_softmax bf16 [32,32000,64] dim 1 (two-pass shared tile, vec 1,
/// cluster 16, keep; ~2.2x its floor) runs at DRAM 37% and 0.55 instructions a cycle a scheduler, ~35 warp instructions
/// per 32 elements: at vec 1 every lane loads, converts and folds one 2-byte element per instruction in each of three
/// passes over the tile (64 bytes a warp row; vec 2 does not fit a cluster's shared memory for 32000 rows). With `pair`
/// a lane takes 2 x vec adjacent elements (4 or 8 bytes) of every second row: lanes 0-15 cover a row of the tile, lanes
/// 16-31 the next one, so the tile, its layout in shared memory and the cp.async copy stay the same. The maximum is
/// folded on the packed 16-bit values (max.bf16x2 / max.f16x2, exact, NaN skipped as fmaxf: one instruction per two
/// elements, no conversion), the sum and the epilogue unpack a word into two floats (Note [Softmax fast exp]) and the
/// output is packed by one cvt.rn.{bf16,f16}x2.f32. Lanes l and l + 16 hold the same columns: their maxima and sums are
/// combined by one shuffle (a + b == b + a: both lanes get the same bits) before the warp and cluster merges, whose
/// slots are then the tile's columns. `keep` keeps kKeptRegisters words a thread, twice the rows of 2-byte vectors.
/// Offered on two-pass async tiles of 16-bit dtypes at vec 1 and 2.
/// Speed: within 2% of the vec-1 keep tile on log_softmax bf16 [32,32000,64] dim 1 and softmax f16
/// [8,16,2048,2048] dim 2, and the pick for both. The instructions fall to ~25 per 32 elements (the cp.async address
/// arithmetic ~2.6 an element, the sum ~7, the write ~7 in PTX), but the row is latency- and phase-bound, not
/// issue-bound (Nsight Compute: 0.45 issued a cycle a scheduler, 16.2 cycles between a warp's instructions: 4.9 on
/// loads, 1.9 at barriers, 1.5 at fences, 2.0 fixed-latency; DRAM 37%). Note [Softmax cluster merge] speeds it up.
///
/// Note [Softmax grid slabs] (not offered)
/// Why considered: log_softmax bf16 [32,32000,64] dim 1 is 32 dense slabs [32000, 64] of 4 MB; the pair tile
/// (~1.64x the copy) holds a slab only over clusters of 16 blocks that load, merge and write in step. The norm
/// family's mode 8 (Note [Norm held]) holds 4 MB rows over GP blocks of a cooperative grid, a row ahead, with an
/// exchange warp (layer norm [64,1048576] at ~1.1x the copy). What: the same for slabs: GP = ceil(n x IV / 8192)
/// blocks a slab (32 here, 4 slabs at once on 128 SMs), each thread always the same 8 columns, per-column (max, sum)
/// pairs from the ring (two passes on chip: packed maximum, then EXP_SUB sums), merged over lanes, warps and, by the
/// exchange warp, over the GP blocks in rank order. Why not offered: its best form runs ~1.6x slower than the pair
/// tile, and a slower kernel than the kept one is never swapped in, so such variants only cost tuning trials.
/// Registers bind it: every slice in registers spills (808 bytes a thread); beside 16 vectors a thread kept in
/// registers (the rest in the ring) the kept write's unrolled epilogue and addresses take ~55-90 registers, so
/// only 256 consumers and 16 KB chunks fit. Nsight Compute on the best form: DRAM 31%, 0.34 issued a cycle a
/// scheduler, 10 warps an SM, ~27 instructions an element: latency-bound on its instructions with too few warps to
/// hide them, not HBM-bound. Its hand-over of the statistics needs every exchange lane to arrive on the mbarrier
/// (lane 0 arriving for the warp's stores once failed verification in a tuning run, 103 elements of one block,
/// unexplained). The opposite trade, two reads a slab with nothing held on chip and 16-32 warps an SM
/// (bench/probes/column_wave_probe.cu), is no faster than the pair tile either (~114 us against ~102 us).
///
/// Note [Softmax held slabs]
/// Why: the pair tiles run log_softmax bf16 [32,32000,64] dim 1 (32 dense slabs of 4 MB) at ~1.64x a copy of its
/// bytes: they read it twice (a cluster of 16 holds half rows of a slab, a slab does not fit one cluster's shared
/// memory). The probes in bench/probes/column_split_probe.cu show what holds a slab on chip at HBM pace: parts of
/// whole rows over every SM, each chain on warps of its own, and the cross-grid merge on blocks that do nothing
/// else (~1.15x a copy there).
/// What (`tile` = 3; sm_90+, 16-bit dtypes, contiguous [outer, n, inner] with inner 32, 64, 128 or 256, so a row
/// is 64-512 whole bytes; slabs of 512 KB or more): one cooperative launch of a block per SM. GM blocks merge; the
/// GD = SMs - GM data blocks each take part p = bd of every slab (R = ceil(n / GD) rows, P = ceil(n / R) parts),
/// items k = bd + t GD in turn. The plan's device SM count (Problem::sm_count, also in the cache key's fingerprint)
/// sizes R, P and the slots NB in the source: as compile-time constants the kernel runs 1-2 us faster than with
/// them as arguments, and a device of another SM count declines the call. A data block has NB
/// slots (as many as 227 KB hold, at most kHeldMaxSlots) and:
/// - a producer warp: bulk copies (cp.async.bulk, an mbarrier a slot) of item t + NB once item t is written, and
///   with `pf` > 0 an L2 prefetch (cp.async.bulk.prefetch.L2) of the item pf ahead of each bulk copy;
/// - S statistics warps: per warp and column the maximum on packed pairs (exact, NaN skipped), then the sum of
///   exp_sub(x, max) (Note [Softmax fast exp]) over the warp's rows, into a double-buffered array (mbarriers
///   statted / taken, no block barrier);
/// - two publisher warps (items alternate): the S pairs of each column folded (two passes: the maximum of all,
///   then the sums rescaled by ex2), stored to the workspace, counted on the slab's counter (red.release.gpu);
/// - O output warps: one lane of the first polls the slab's flag (ld.acquire) and a named barrier holds the others,
///   each warp reads the slab's finals as one 16-byte load a lane and shuffles them to the lanes of each column,
///   writes ATen's epilogue of every element of the item to global memory. With `hold` 0 they read the item from
///   its slot and free it after; with `hold` H > 0 they copy an item into registers as soon as it lands and free
///   the slot then (it frees once the statistics warps have read it too), holding H items (H = 2: item u + 1 is
///   copied before item u is written), so a slot is no longer held while its slab waits for its flag.
/// A merging block takes slabs b, b + GM, ...: waits for the counter to reach P, folds the P pairs of each column
/// in part order (8 loads in flight a thread, MC = threads / inner chunks, then the chunks in order), stores the
/// final (max, log(sum)) or (max, 1 / sum) and raises the flag (st.release.gpu). Every output warp of the grid
/// reads a slab's finals and polls its flag at about the same moment, so those L2 lines are hot spots: eight 8-byte
/// loads a lane and a poller a warp run ~2x slower (Nsight Compute: the output warps wait on the finals' loads),
/// so a warp reads them as one 16-byte load a lane. Pairs are folded as the two-pass tiles treat elements: a
/// pair whose maximum is -Inf contributes its sum x 0 (0, or a NaN that is kept), a final maximum of -Inf makes the
/// sum NaN, +Inf poisons the sum through Inf - Inf; so special values come out as the pair tiles' and ATen's.
/// No deadlock: loading item t waits for item t - NB's output, which waits only for parts of earlier items of every
/// block (each slab's parts are items of one or two consecutive t), and NB >= 2; the launch is cooperative, so every
/// block is resident (else Unsupported, as a captured stream is: ATen serves the call). Workspace per call: OUTER x
/// P x inner pairs, OUTER x inner finals, 2 x OUTER counters and flags zeroed by a memset on the stream.
/// Knobs: stats S, out O, merge GM, pf, hold; five variants (S 8 O 8 GM 4, S 8 O 8 GM 2 pf 1, S 6 O 8 GM 4 hold 1,
/// S 5 O 8 GM 4 hold 1 and hold 2), one stratum. Registers bound `hold`: a block of at most 16 warps (4 a
/// scheduler) gives a thread 128 registers, one of 17-19 warps 96; a held item takes an output thread item / (O x
/// 32 x 16) vectors, at most 16 in all (8 above 16 warps), which compiles without spills (SoftmaxHeldPlan test).
/// Why holding: without it the kernel is bound by the slots (one slot fewer, 6 instead of 7, costs 14%), each taken
/// from its load to its item's write, i.e. across the whole chain; registers add an item or two of depth (~5% on
/// that row at S 5 O 8 hold 2).
/// Not kept (bench/probes/held_edits.py, on the benchmark row): the sums'
/// exp as one FFMA with a per-column correction, the log epilogue as one FADD, a lead on the first load, parts of
/// 84-500 rows (250 is a sharp optimum: ~0.37 us of fixed cost an item), a warp that fetches each slab's finals
/// into shared memory ahead of the output warps (5-6 us slower, however often it polls), 4-7 statistics and 6-8
/// output warps (S 6 O 8 or O 7 best). None beat the kernel by more than the run-to-run spread (~1 us). Nsight
/// Compute: the output warps' wait for the finals is the wait for the slab's flag (as long with the
/// fetcher), so what binds is the chain across the grid (slowest block's load, statistics, merge) against the slots.
#pragma once

#include <variant>

#include "cudal1/optimizer/family.h"

namespace cudal1::optimizer::softmax {

/// The family object (a process-wide singleton).
const Family& softmax_family();

/// One planned signature served by rows (the reduced dim is the last one that is not size 1).
struct SoftmaxShape {
  bool log = false;
  c10::ScalarType dtype = c10::ScalarType::Float;
  std::vector<int64_t> sizes, in_strides, out_strides;
  int64_t rows = 0, cols = 0, row_stride = 0;
  int max_vec = 1;
  int head_vec = 1;  ///< widest vector of the head/body/tail reading (Note [Softmax row heads]); 1: not offered
  int sm = 0;        ///< target compute capability: cluster rows from 90 (Note [Softmax shared tiles])
};

/// One planned signature served by columns (Note [Softmax columns]).
struct ColumnShape {
  bool log = false;
  c10::ScalarType dtype = c10::ScalarType::Float;
  std::vector<int64_t> sizes, in_strides, out_strides;
  int64_t outer = 1, n = 1, inner = 1;  ///< the input viewed as [outer, n, inner]
  int64_t outer_stride = 0, n_stride = 0;  ///< input strides (elements) of outer and n; inner is dense
  int max_vec = 1;                     ///< widest vector along inner the layout allows
  bool aligned16 = false;  ///< offset and strides of n and outer are whole 16 bytes (Note [Softmax async tiles])
  int sm = 0;                          ///< target compute capability: shared tiles from 90
  int sm_count = 0;                    ///< SMs of the target device: held slabs are sized for it (0: none)
};

/// The number of vectors one thread keeps in registers when the row is cached; above kMaxCachedElements per
/// thread, caching is not offered.
constexpr int kMaxCachedElements = 64;

/// Problem classes and knobs of either kind of plan, as one feature vector of a fixed length (the policy
/// learns one weight vector per family).
struct SoftmaxClass {
  int64_t n = 1;        ///< elements reduced
  bool half = false;    ///< 16-bit dtype
  bool log = false;
  bool columns = false;  ///< a ColumnShape
  int64_t inner = 1, column_count = 0;  ///< columns only
};
std::vector<float> softmax_features(const SoftmaxClass& c, const Variant& v);

/// Plans `s` (rows) / `c` (columns); never fails.
std::unique_ptr<Plan> row_plan(SoftmaxShape s);
std::unique_ptr<Plan> column_plan(ColumnShape c);

/// The row techniques: each class holds only the knobs it uses and kName, its name in the source's first line;
/// generate_softmax_rows writes its source, whose device code is softmax_common.cuh and then its own .cuh
/// (softmax_plain_rows.cuh for RowPerWarp and RowPerBlock, softmax_cluster_rows.cuh). Their variants keep the
/// knobs and ids that caches, policy data and replay fixtures know (variant_of).
///
/// Note [Softmax row heads]
/// Rows whose width or stride is not a multiple of the vector width (a vocabulary of 50257) get vec 1 only: one
/// 4-byte load per element and lane, 49 loads a thread for log_softmax f32 [1024,50257] at block 1024, which
/// runs at ~1.49x the floor while the same kernel at vec 4 (32768 wide) runs at ~1.12x. With `head`, row r starts
/// at element r x RS; its first h = (VEC - r x RS % VEC) % VEC elements are scalars (lanes < h), then
/// (D - h) / VEC aligned vectors, then fewer than VEC scalars (lanes < tail). The output row r x D shares the
/// head length because the planner asks (RS - D) % VEC == 0 and a storage offset that is a multiple of VEC
/// (the call checks both pointers against VEC x element size); rows must hold at least two vectors. The
/// arithmetic is the plain kernel's (max, then sum, then ATen's epilogue); only the summation order moves.

/// The knobs of a plain row technique: a row's maximum, its sum of exp(x - max), then ATen's epilogue, by
/// threads_per_row() threads in `vec`-element vectors (softmax_plain_rows.cuh). Variant knobs {vec, block, warp,
/// cache}, then head 1 where `head`.
struct RowLoop {
  int vec = 1;         ///< elements per vector load/store
  int block = 128;     ///< threads per block
  bool cache = false;  ///< the thread's vectors stay in registers between the passes (one read), else re-read
  bool head = false;   ///< scalar head, aligned vectors, scalar tail (Note [Softmax row heads])
};

/// A warp per row, block / 32 rows a block (variant knob warp 1).
struct RowPerWarp : RowLoop {
  static constexpr const char* kName = "RowPerWarp";
  static constexpr int kWarp = 1;
  int threads_per_row() const { return 32; }
};

/// A block per row (variant knob warp 0).
struct RowPerBlock : RowLoop {
  static constexpr const char* kName = "RowPerBlock";
  static constexpr int kWarp = 0;
  int threads_per_row() const { return block; }
};

/// Cluster rows (Note [Softmax shared tiles], sm_90+): `cluster` blocks (1: one block, no cluster) split a row
/// into slices kept in shared memory, cluster_row_bytes each; `async`: the slice copied by cp.async (Note [Softmax
/// async tiles]; vectors of 4 bytes or more); 16-bit outputs take Note [Softmax fast exp]
/// (softmax_cluster_rows.cuh). Bound as a SimpleKernel with its shared memory and cluster size (simple_kernel.h).
/// Variant knobs {vec, block, cluster}, then async 1 where `async`.
struct ClusterRows {
  static constexpr const char* kName = "ClusterRows";
  int vec = 1, block = 256, cluster = 1;
  bool async = false;
};

/// One row variant's technique and knobs (default: RowPerWarp, vec 1, block 128).
using RowTechnique = std::variant<RowPerWarp, RowPerBlock, ClusterRows>;

/// The variant of `t`.
Variant variant_of(const RowTechnique& t);

/// CUDA source of `t` on `s`, exactly as NVRTC compiles it: a generated head (dtypes, typed constants and the row
/// variables of Note [Softmax row constants]), codegen_common's row reduction, softmax_common.cuh, then the
/// technique's .cuh, whose kernel is extern "C" cudal1_softmax(in, out).
KernelSource generate_softmax_rows(const SoftmaxShape& s, const RowTechnique& t);

/// Vectors each thread of a shared tile or cluster row has in flight while reading: what the registers left at
/// `resident` blocks per SM hold beside ~32 for the rest and `kept` registers of kept rows (4 to 32 registers of
/// vectors).
int copy_unroll(c10::ScalarType dtype, int vec, int block, int resident, int kept);

/// The column techniques (Note [Softmax columns]): each class holds only the knobs it uses and kName, its name in
/// the source's first line; generate_softmax_columns writes its source, whose device code is softmax_common.cuh,
/// softmax_column_common.cuh and then the technique's own .cuh (Note [Softmax column walks]). Their variants keep
/// the knobs and ids that caches, policy data and replay fixtures know (variant_of).

/// `split` threads share a column (1, 4 or 32), `vec` adjacent columns a thread, its part of the column kept in
/// registers (`cache`) or re-read (softmax_split_columns.cuh). Variant knobs {vec, block, split, cache}.
struct SplitColumns {
  static constexpr const char* kName = "SplitColumns";
  int vec = 1, block = 128, split = 1;
  bool cache = false;
};

/// Note [Softmax column tiles]: a warp per n-row of 32 x vec inner elements, `chunks` blocks a column (two
/// launches when > 1), rows kept in registers (`cache`, one chunk only) or re-read; `fast`: Note [Softmax fast
/// tiles] (16-bit, not cached) (softmax_column_tiles.cuh). Bound by make_tile_kernel. Variant knobs {vec, block,
/// tile 1, chunks, cache}, then fast 1 where `fast`.
struct ColumnTiles {
  static constexpr const char* kName = "ColumnTiles";
  int vec = 1, block = 256, chunks = 1;
  bool cache = false, fast = false;
};

/// The knobs of a shared column tile (Note [Softmax shared tiles], sm_90+): a tile of 32 x `vec` columns over
/// `cluster` blocks (1: no cluster) of `block` threads, smem_tile_bytes of dynamic shared memory each; `keep`
/// (block 512): each thread keeps its first kept_rows in registers. Bound as a SimpleKernel with its shared
/// memory and cluster size (simple_kernel.h).
struct SharedTileKnobs {
  int vec = 1, block = 256, cluster = 1;
  bool keep = false;
};

/// Two passes on chip (the maximum, then the sum; Note [Softmax fast exp] for 16-bit outputs); `async`: the shared
/// rows copied by cp.async (Note [Softmax async tiles]; whole tiles on 16 bytes) (softmax_shared_tiles.cuh).
/// Variant knobs {vec, block, tile 2, cluster}, then keep 1 where set, two 1, then async 1 where set.
struct SharedTiles : SharedTileKnobs {
  static constexpr const char* kName = "SharedTiles";
  bool async = false;
};

/// Note [Softmax pair tiles]: a two-pass tile copied by cp.async whose lanes take 2 x vec elements of every second
/// row (16-bit, vec 1 or 2) (softmax_pair_tiles.cuh). Variant knobs {vec, block, tile 2, cluster}, then keep 1
/// where set, then two 1, async 1, pair 1.
struct PairTiles : SharedTileKnobs {
  static constexpr const char* kName = "PairTiles";
};

/// Knobs of a held-slab variant (Note [Softmax held slabs]): statistics warps, output warps, merging blocks, items
/// prefetched into L2 ahead of their bulk copies, and items the output warps hold in registers (0: the slot stays
/// taken until its item is written; 1 or 2: it frees once copied, before the slab's flag is up).
struct HeldKnobs {
  int stats = 8, out = 8, merge = 4, prefetch = 0, hold = 0;
};

/// Note [Softmax held slabs] (softmax_held_slabs.cuh). Bound by make_held_kernel. Variant knobs {tile 3, stats,
/// out, merge, pf, hold}.
struct HeldSlabs : HeldKnobs {
  static constexpr const char* kName = "HeldSlabs";
};

/// One column variant's technique and knobs (default: SplitColumns, vec 1, block 128, split 1).
using ColumnTechnique = std::variant<SplitColumns, ColumnTiles, SharedTiles, PairTiles, HeldSlabs>;

/// The variant of `t`.
Variant variant_of(const ColumnTechnique& t);

/// CUDA source of `t` on `c`, exactly as NVRTC compiles it: device_head, the technique's constants and the column
/// variables its cubins hold (Note [Softmax column constants]), softmax_common.cuh, softmax_column_common.cuh,
/// then the technique's .cuh (PairTiles and HeldSlabs: softmax_packed_pairs.cuh first; SharedTiles and PairTiles:
/// softmax_shared_common.cuh first), whose kernel is extern "C" cudal1_softmax: (in, out); ColumnTiles (in, out,
/// float* ws, int phase); HeldSlabs (in, out, ws). HeldSlabs requires held_grid(c, t, c.sm_count).ok.
KernelSource generate_softmax_columns(const ColumnShape& c, const ColumnTechnique& t);

/// Dynamic shared memory of one block: of a shared column tile of `c` (Note [Softmax shared tiles]) at `vec`,
/// `block` threads and `cluster` blocks a column, `keep` kept vectors a thread (of `pair`s: Note [Softmax pair
/// tiles]); of a cluster row slice of `s` at `vec` and `cluster`.
int64_t smem_tile_bytes(const ColumnShape& c, int vec, int block, int cluster, int keep, bool pair);
int64_t cluster_row_bytes(const SoftmaxShape& s, int vec, int cluster);
/// Blocks one SM holds at `block` threads and `smem` bytes of dynamic shared memory each (228 KB an SM, 1 KB
/// reserved a block, 2048 threads): the strata of the shared tiles and cluster rows (1, 2, 3 or more).
int resident_blocks(int64_t smem, int block);
/// The most dynamic shared memory one block may ask for on sm_90 (227 KB).
constexpr int64_t kMaxBlockSmem = 227 * 1024;
/// Registers a thread of a `keep` shared tile spends on kept rows, and the vectors that makes at `vec` (of
/// 2 x `vec` elements with `pair`).
constexpr int kKeptRegisters = 20;
int keep_rows(const ColumnShape& c, int vec, bool pair);
/// Kept vectors a thread of `t` on `c` (0 without keep), and its dynamic shared memory.
int kept_rows(const ColumnShape& c, const SharedTileKnobs& t, bool pair);
int64_t shared_tile_bytes(const ColumnShape& c, const SharedTileKnobs& t, bool pair);

/// The most slots a data block of a held-slab kernel keeps (its mbarriers are static shared memory).
constexpr int kHeldMaxSlots = 8;
/// Threads a block of a held-slab kernel: the statistics and output warps, two publishers and the producer.
int held_threads(const HeldKnobs& k);
/// Dynamic shared memory of the statistics warps' double-buffered pairs.
int64_t held_red_bytes(const ColumnShape& c, const HeldKnobs& k);
/// A held-slab launch on a device of `sm_count` SMs: grid (a block an SM), parts a slab, rows a part, slots a data
/// block and dynamic shared memory; ok false when the device leaves no data block or fewer than two slots.
struct HeldGrid {
  bool ok = false;
  int64_t grid = 1, parts = 1, rows = 1, slots = 0, smem = 0;
};
HeldGrid held_grid(const ColumnShape& c, const HeldKnobs& k, int sm_count);

}  // namespace cudal1::optimizer::softmax
