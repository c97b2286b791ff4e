/// @brief Private: the normalisation family (native_layer_norm and native_group_norm, forward, with their
/// mean/rstd outputs; fp32/fp16/bf16 with fp32 statistics; contiguous input, weight and bias of the input's dtype).
///
/// Note [Norm rows]
/// Both ops normalise "rows" of a contiguous tensor: layer norm has rows = prod(leading dims) of length
/// prod(normalized_shape) with the affine parameters indexed by the column; group norm has rows = N * groups of
/// length (C / groups) * HxW, with the affine parameters indexed by channel = (row % groups) * (C / groups) +
/// column / HxW. One generator serves both; the shape says which indexing the code uses.
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
  int splits = 1;   ///< mode 2: chunks per row
  bool reverse = false;  ///< mode 2: second pass walks chunks last-read-first (L2 reuse)
};

/// Elements one thread may keep in registers.
constexpr int kMaxCachedElements = 64;

/// Vectors per chunk in mode 2 (the last chunk may be shorter).
int64_t chunk_vectors(const NormShape& s, const NormKnobs& k);

/// CUDA source of one variant: extern "C" cudal1_norm(x, w, b, y, mean, rstd, workspace, phase).
KernelSource generate_norm(const NormShape& s, const NormKnobs& k);

/// Binds a loaded module of variant `k` to `s`: launches once (modes 0, 1) or twice with a fp32 workspace of
/// rows * splits * 3 floats from torch's allocator (mode 2).
std::unique_ptr<BoundKernel> make_norm_kernel(const NormShape& s, const NormKnobs& k,
                                              std::shared_ptr<LoadedModule> module);

}  // namespace cudal1::optimizer::norm
