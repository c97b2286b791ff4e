/// @brief Private: the held-row modes' geometry and device code (modes 7 and 8, Note [Norm held] in
/// norm_family.h; implemented in norm_held.cpp).
#pragma once

#include "norm_family.h"

namespace cudal1::optimizer::norm {

/// Mode 7 (Note [Norm held]): vectors of a row each block of the cluster holds (the last may hold fewer).
int64_t held_slice_vectors(const NormShape& s, const NormKnobs& k);

/// Mode 7: vectors each consumer thread takes from one chunk (a chunk is k.block of them x 16 bytes).
int held_vectors_per_chunk_thread(const NormKnobs& k);

/// Mode 7: chunks of a block's slice (the last may be short or empty).
int64_t held_chunks(const NormShape& s, const NormKnobs& k);

/// Mode 7: chunks of a slice kept in registers (the first ones; the rest are reread after the statistics).
int64_t held_kept_chunks(const NormShape& s, const NormKnobs& k);

/// Mode 7: slots of the reread ring (64 KB), 0 where the whole slice is kept.
int held_reread_slots(const NormShape& s, const NormKnobs& k);

/// Mode 7: slots of the main ring: one more than a slice's chunks, or with k.deep (always with rereads) as many
/// as fit beside the reread ring.
int held_slots(const NormShape& s, const NormKnobs& k);

/// Mode 7: threads a block: k.block consumers, a producer warp, and a second one for the rereads.
int held_threads(const NormShape& s, const NormKnobs& k);

/// Mode 7: whether `k` is offered: sm_90+, 16-byte vectors, blocks of 256 or 512 consumer threads, chunks of 16
/// or 32 KB, a power-of-two cluster of 1-16, a slice of at least a block of vectors, and either a slice that fits
/// 128 KB of registers with a ring of more slots than its chunks, or (512 consumers, deep ring) one that rereads
/// at most as many chunks as it keeps.
bool held_fits(const NormShape& s, const NormKnobs& k);

/// Mode 7: dynamic shared memory bytes per block (the rings).
unsigned held_smem_bytes(const NormShape& s, const NormKnobs& k);

/// Mode 8 (Note [Norm held], mode 8): the fewest blocks whose registers hold a row of k.vec-element vectors
/// (128 KB each), i.e. the row's parts.
int64_t grid_held_parts(const NormShape& s, const NormKnobs& k);

/// Mode 8: whether `k` (k.cluster = the row's parts) is offered: sm_90+, 16-byte vectors, 2 to the reference
/// grid's blocks per row (132 on sm_90+), every slice wholly in registers (no rereads), a ring as mode 7's.
bool grid_held_fits(const NormShape& s, const NormKnobs& k);

/// Mode 7: device code (after cluster_primitives_source) that the kernel's MODE 7 branch calls.
const char* held_source();

}  // namespace cudal1::optimizer::norm
