/// @brief Private: the held rows' geometry (HeldCluster and HeldGrid, Note [Norm held] in norm_family.h;
/// implemented in norm_held.cpp).
#pragma once

#include "norm_family.h"

namespace cudal1::optimizer::norm {

/// What HeldCluster and HeldGrid share: a row over `row_blocks` blocks (a cluster, or `grid`: consecutive blocks
/// of a cooperative grid), each holding its slice in registers, fed through a ring of `chunk_kb` KB chunks.
struct HeldLayout {
  int vec = 1, block = 256;  ///< elements per vector, consumer threads per block
  int row_blocks = 1;        ///< blocks per row
  int chunk_kb = 16;         ///< KB a bulk copy moves
  bool deep = false;         ///< as many ring slots as fit, else one more than a slice's chunks
  bool grid = false;         ///< HeldGrid

  /// Vectors of a row each block holds (the last may hold fewer).
  int64_t slice_vectors(const NormShape& s) const;
  /// Vectors each consumer thread takes from one chunk (a chunk is `block` of them x 16 bytes).
  int chunk_thread_vectors() const;
  /// Chunks of a block's slice (the last may be short or empty).
  int64_t chunks(const NormShape& s) const;
  /// Chunks of a slice kept in registers (the first ones; the rest are reread after the statistics).
  int64_t kept_chunks(const NormShape& s) const;
  /// Slots of the reread ring (64 KB), 0 where the whole slice is kept.
  int reread_slots(const NormShape& s) const;
  /// Slots of the main ring: one more than a slice's chunks, or with `deep` (always with rereads) as many as fit
  /// beside the reread ring.
  int slots(const NormShape& s) const;
  /// Threads a block: `block` consumers, a producer warp, and a second warp for the rereads or the exchange.
  int threads(const NormShape& s) const;
  /// What both techniques ask of the knobs: sm_90+, 16-byte vectors, 256 or 512 consumers, 16 or 32 KB chunks,
  /// at least a vector a consumer per chunk and a slice of at least one vector a consumer.
  bool knobs_fit(const NormShape& s) const;
  /// Dynamic shared memory bytes per block (the rings).
  unsigned smem_bytes(const NormShape& s) const;
  /// The constants of norm_held.cuh (in namespace rownorm) and the device code, after norm_common.cuh.
  void source(std::ostream& o, const NormShape& s) const;
};

HeldLayout layout_of(const HeldCluster& k);
HeldLayout layout_of(const HeldGrid& k);

}  // namespace cudal1::optimizer::norm
