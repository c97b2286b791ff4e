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
/// Two of our techniques reproduce those associations step for step, rounding like ATen: `row_exact` (a warp
/// per row, tiles of 32 = 2 x 16, Sklansky by shuffles) and `column` (serial per column). They are exact (only
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
#pragma once

#include "cudal1/optimizer/family.h"

namespace cudal1::optimizer::scan {

/// The family object (a process-wide singleton).
const Family& scan_family();

/// The technique of a variant (its stratum).
enum ScanMode : int {
  kRowWarp = 0,    ///< a warp per row, VEC elements per lane serially, warp scan, carry across chunks
  kRowBlock = 1,   ///< a block per row, block-wide scan of BLOCK * VEC elements per step, carry across steps
  kRowSplit = 2,   ///< SPLITS blocks per row: chunk totals (phase 0), then each chunk scanned from its carry
  kRowExact = 3,   ///< ATen's tile-of-32 Sklansky scan, rounded per step like ATen (Note [Scans])
  kColumn = 4,     ///< a thread per VEC columns, serial along the dimension, rounded per step like ATen
  kColumnSplit = 5,///< the dimension split in SPLITS chunks: chunk totals (phase 0), then serial from carries
};

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
  bool row_exact = false;   ///< kRowExact reproduces ATen's association (Note [Scans])
  bool column_exact = false;///< kColumn reproduces ATen's association
  bool reassociate = false; ///< fp32 cumsum: reassociated techniques allowed (with a length-scaled tolerance)
};

/// Technique choice.
struct ScanKnobs {
  int mode = kColumn;
  int vec = 1;
  int block = 256;
  int splits = 1;  ///< kRowSplit / kColumnSplit
};

/// Threads per tile row ATen 2.x uses for an innermost scan of `rows` rows of `size` (torch 1.13: always 16).
int aten_tile_threads(int64_t rows, int64_t size);

/// Fills row_exact / column_exact / reassociate of `s` from its op, dtype, rank and dimension (Note [Scans]).
void scan_exactness(ScanShape& s, int64_t ndim);

/// Elements each split-mode chunk covers (a multiple of the vector width).
int64_t scan_chunk(const ScanShape& s, const ScanKnobs& k);

/// Extra absolute tolerance of variant `k`, in fp32 eps x max|finite ATen output| (OutputTolerance), 0 for
/// exact variants.
double scan_output_scaled_tolerance(const ScanShape& s, const ScanKnobs& k);

/// True when `k` reproduces ATen's association for `s`.
bool scan_is_exact(const ScanShape& s, const ScanKnobs& k);

/// CUDA source of one variant: extern "C" cudal1_scan(in, out, workspace, phase).
KernelSource generate_scan(const ScanShape& s, const ScanKnobs& k);

/// Binds a loaded module of variant `k` to `s`: one launch, or two with an fp32 workspace (split modes).
std::unique_ptr<BoundKernel> make_scan_kernel(const ScanShape& s, const ScanKnobs& k,
                                              std::shared_ptr<LoadedModule> module);

}  // namespace cudal1::optimizer::scan
