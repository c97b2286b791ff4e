/// @brief Private: the normalisation family (native_layer_norm and native_group_norm, forward, with their
/// mean/rstd outputs; fp32/fp16/bf16 with fp32 statistics; contiguous input, weight and bias of the input's dtype).
///
/// Note [Norm rows]
/// Both ops normalise "rows" of a contiguous tensor: layer norm has rows = prod(leading dims) of length
/// prod(normalized_shape) with the affine parameters indexed by the column; group norm has rows = N * groups of
/// length (C / groups) * HxW, with the affine parameters indexed by channel = (row % groups) * (C / groups) +
/// column / HxW. One generator serves both; the shape says which indexing the code uses.
///
/// Modes. 0: a warp per row; 1: a block per row (both may keep the row in registers, `cache`, so the input is
/// read once); 2: long rows split over `splits` blocks in two launches (partial Welford triples, then merge and
/// normalise), so the input is read twice; 3: the same split in one cooperative launch over groups of rows sized
/// for L2, so the second read hits L2 (Note [Norm groups]).
///
/// Bytes, at the H200's ~4.15 TB/s (floor = input read once + output written once; mean/rstd, the affine
/// parameters and the workspace are < 0.1%). Mode 2 moves 3 tensor-sizes where the floor moves 2: 1.5x the floor
/// before any launch cost, measured 1.64-1.68x (layer norm f32 [16,64,256,256]: 217 us against 129 us). Only the
/// last ~50 MB of the first pass can still be in L2 when the second starts (`rev` reuses those, ~1%).
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
/// Prediction (per-group wait ~1.5 us: drain, atomics, ramp-up; memset + launch ~3 us):
/// - layer norm f32 [16,64,256,256]: rows of 16 MB, 16 groups, no ahead: 129 + 16 x 1.5 + 3 = ~156 us, 1.21x
///   (mode 2: 1.68x);
/// - layer norm f32 [64,1048576] (4 MB rows) and group norm f32 [16,64,256,256] g8 (2 MB rows): 8 MB groups with
///   ahead: ~129 x 1.05 + 3 = ~140 us, 1.09x; 16 MB groups without: ~156 us (mode 2: 1.64-1.67x).
/// Rejected: one stats launch and one normalise launch per L2-sized group (the same bytes) costs 2 kernel
/// boundaries (~2-4 us each: launch gap, tail, ramp-up) per group: 32 boundaries for 268 MB in 16 MB groups,
/// 64-128 us against the 64 us of HBM reads it saves. Thread-block clusters cannot hold a row either: 16 SMs'
/// shared memory is 3.6 MB, and the rows that need splitting are 2-16 MB.
/// Measured (H200, 2026-11-30, docs/PERF.md session 4): the prediction was wrong. On layer norm f32
/// [64,1048576] the best mode-3 variant (8 sampled: splits64, chunk16, ahead1, block 512) ran 210 us (1.66x the
/// floor) and the others 238-669 us, against 215 us for mode 2; the KernelBench rows stay on mode 2 (1.68-1.71x).
/// Not profiled yet: the per-group waits and the share of the reread that really hits L2 are the unknowns.
#pragma once

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
  float eps = 1e-5f;  ///< as ATen uses it (group norm in fp16/bf16: rounded to the input's dtype)
  /// Group norm in fp16/bf16: ATen keeps mean and rstd in the input's dtype and normalises with those rounded
  /// values (y = a * x + b, a = rstd * w, b = bias - a * mean), so the kernel does the same.
  bool round_stats = false;
  int max_vec = 1;
};

/// Technique choice: how rows are mapped to threads and whether a row is kept in registers.
struct NormKnobs {
  int mode = 1;     ///< 0: warp per row; 1: block per row; 2: split rows over `splits` blocks, second pass
  int vec = 1;      ///< elements per load/store
  int block = 256;  ///< threads per block
  bool cache = false;  ///< row kept in registers between the statistics and the output (modes 0, 1)
  int splits = 1;   ///< modes 2, 3: chunks per row
  bool reverse = false;  ///< mode 2: second pass walks chunks last-read-first (L2 reuse)
  int chunk_mb = 0;      ///< mode 3: rows are processed in groups of about this many MB of input
  bool ahead = false;    ///< mode 3: a block reads group g + 1 before it normalises group g
};

/// Elements one thread may keep in registers.
constexpr int kMaxCachedElements = 64;

/// Vectors per chunk in modes 2 and 3 (the last chunk may be shorter).
int64_t chunk_vectors(const NormShape& s, const NormKnobs& k);

/// Mode 3: rows per group (at least 1, at most all rows): as many whole rows as fit in k.chunk_mb MB of input.
int64_t rows_per_group(const NormShape& s, const NormKnobs& k);

/// Mode 3: number of row groups.
int64_t row_groups(const NormShape& s, const NormKnobs& k);

/// CUDA source of one variant: extern "C" cudal1_norm(x, w, b, y, mean, rstd, workspace, phase).
KernelSource generate_norm(const NormShape& s, const NormKnobs& k);

/// Binds a loaded module of variant `k` to `s`: launches once (modes 0, 1) or twice with a fp32 workspace of
/// rows * splits * 3 floats from torch's allocator (mode 2); mode 3 launches once, cooperatively (Note [Norm
/// groups]), with that workspace followed by one zeroed arrival counter per row group.
std::unique_ptr<BoundKernel> make_norm_kernel(const NormShape& s, const NormKnobs& k,
                                              std::shared_ptr<LoadedModule> module);

}  // namespace cudal1::optimizer::norm
