/// @brief HeldCluster and HeldGrid of the normalisation family: a row over a thread-block cluster or a row's blocks
/// of a cooperative grid, each block's slice held in registers, fed by the bulk copy engine through a shared-memory
/// ring (Note [Norm held]): sizing and source.
#include <algorithm>
#include <ostream>

#include "codegen_common.h"
#include "norm_cuda.h"
#include "norm_family.h"
#include "norm_held.h"

namespace cudal1::optimizer::norm {
namespace {

// sm_90: at most 227 KB of shared memory per block; 1 KB covers the kernel's static arrays (red[96], the
// mbarriers and the inbox: < 1 KB at 32 + 4 slots and clusters of 16).
constexpr int64_t kHeldSmem = 226 * 1024;
constexpr int kMaxSlots = 32;  ///< mbarrier pairs in static shared memory
constexpr int64_t kVectorBytes = 16;
constexpr int64_t kHeldVectorsPerBlock = 8192;  ///< 128 KB of registers: 16 vectors a thread at 512, 32 at 256
constexpr int64_t kRereadRing = 64 * 1024;      ///< the reread ring's bytes
constexpr int64_t kReferenceBlocks = 132;       ///< HeldGrid: the most blocks a row takes (H100 SXM/H200's SMs)

/// Ring slots of `chunk_kb` KB that fit a block's shared memory (at most kMaxSlots).
int64_t most_slots(const HeldLayout& k) {
  return std::min<int64_t>(kMaxSlots, kHeldSmem / (int64_t{k.chunk_kb} * 1024));
}

/// A slice of `chunks` wholly in registers: its tight ring (a slice and a chunk) fits, and a deep one holds more.
bool whole_slice_ring_fits(int64_t chunks, const HeldLayout& k) {
  const int64_t tight = chunks + 1, most = most_slots(k);
  return tight <= most && (!k.deep || most > tight);
}

}  // namespace

HeldLayout layout_of(const HeldCluster& k) { return HeldLayout{k.vec, k.block, k.cluster, k.chunk_kb, k.deep, false}; }
HeldLayout layout_of(const HeldGrid& k) { return HeldLayout{k.vec, k.block, k.parts, k.chunk_kb, k.deep, true}; }

bool HeldLayout::knobs_fit(const NormShape& s) const {
  if (s.sm < 90 || int64_t{vec} * elem_size(s.dtype) != kVectorBytes) return false;
  if ((block != 256 && block != 512) || (chunk_kb != 16 && chunk_kb != 32)) return false;
  return chunk_thread_vectors() >= 1 && slice_vectors(s) >= block;
}

int64_t HeldLayout::slice_vectors(const NormShape& s) const {
  const int64_t nv = s.cols / vec;
  return (nv + row_blocks - 1) / row_blocks;
}

int HeldLayout::chunk_thread_vectors() const {
  return static_cast<int>(int64_t{chunk_kb} * 1024 / (int64_t{block} * kVectorBytes));
}

int64_t HeldLayout::chunks(const NormShape& s) const {
  const int64_t chv = int64_t{block} * chunk_thread_vectors();
  return (slice_vectors(s) + chv - 1) / chv;
}

int64_t HeldLayout::kept_chunks(const NormShape& s) const {
  const int cpt = std::max(1, chunk_thread_vectors());
  return std::min<int64_t>(chunks(s), kHeldVectorsPerBlock / block / cpt);
}

int HeldLayout::reread_slots(const NormShape& s) const {
  return chunks(s) > kept_chunks(s) ? static_cast<int>(kRereadRing / (int64_t{chunk_kb} * 1024)) : 0;
}

int HeldLayout::slots(const NormShape& s) const {
  const int64_t most = most_slots(*this);
  if (reread_slots(s) > 0) return static_cast<int>(most - reread_slots(s));
  const int64_t tight = chunks(s) + 1;
  return static_cast<int>(deep ? most : std::min(tight, most));
}

int HeldLayout::threads(const NormShape& s) const { return block + (reread_slots(s) > 0 || grid ? 64 : 32); }

unsigned HeldLayout::smem_bytes(const NormShape& s) const {
  return static_cast<unsigned>(int64_t{slots(s) + reread_slots(s)} * chunk_kb * 1024);
}

void HeldLayout::source(std::ostream& o, const NormShape& s) const {
  const int cpt = chunk_thread_vectors(), ch = static_cast<int>(chunks(s)), keep = static_cast<int>(kept_chunks(s));
  o << "namespace rownorm {\n";
  constant(o, "int", "kRowBlocks", row_blocks);
  constant(o, "bool", "kGrid", grid);
  constant(o, "bool", "kClusterExchange", !grid && row_blocks > 1);
  constant(o, "index_t", "kSliceVectors", slice_vectors(s));
  constant(o, "index_t", "kChunkVectors", int64_t{block} * cpt);
  constant(o, "int", "kChunkThreadVectors", cpt);
  constant(o, "int", "kChunks", ch);
  constant(o, "int", "kKeep", keep);
  constant(o, "int", "kDrop", ch - keep);
  constant(o, "int", "kHeld", keep * cpt);
  constant(o, "int", "kSlots", slots(s));
  constant(o, "int", "kRereadSlots", reread_slots(s));
  o << "}  // namespace rownorm\n"
    << cluster_primitives_source() << device_sources::kNormHeld;
}

int HeldCluster::threads(const NormShape& s) const { return layout_of(*this).threads(s); }
unsigned HeldCluster::smem_bytes(const NormShape& s) const { return layout_of(*this).smem_bytes(s); }
void HeldCluster::source(std::ostream& o, const NormShape& s) const { layout_of(*this).source(o, s); }

bool HeldCluster::fits(const NormShape& s) const {
  const HeldLayout l = layout_of(*this);
  if (!l.knobs_fit(s) || s.rows >= (int64_t{1} << 31)) return false;
  if (cluster < 1 || cluster > 16 || (cluster & (cluster - 1)) != 0) return false;
  const int64_t chunks = l.chunks(s), kept = l.kept_chunks(s);
  if (kept < chunks)  // rereads: 512 consumers (two producer warps leave 113 registers a thread), at most as
                      // many chunks reread as kept, one (deep) ring
    return block == 512 && deep && chunks - kept <= kept && most_slots(l) - l.reread_slots(s) >= 2;
  return whole_slice_ring_fits(chunks, l);
}

int HeldGrid::threads(const NormShape& s) const { return layout_of(*this).threads(s); }
unsigned HeldGrid::smem_bytes(const NormShape& s) const { return layout_of(*this).smem_bytes(s); }
void HeldGrid::source(std::ostream& o, const NormShape& s) const { layout_of(*this).source(o, s); }

int64_t HeldGrid::parts_for(const NormShape& s, int vec) {
  const int64_t nv = s.cols / vec;
  return (nv + kHeldVectorsPerBlock - 1) / kHeldVectorsPerBlock;
}

bool HeldGrid::fits(const NormShape& s) const {
  if (parts < 2 || parts > kReferenceBlocks || s.rows * parts >= (int64_t{1} << 31)) return false;
  const HeldLayout l = layout_of(*this);
  if (!l.knobs_fit(s)) return false;
  const int64_t chunks = l.chunks(s);
  return l.kept_chunks(s) == chunks && whole_slice_ring_fits(chunks, l);  // no rereads
}

}  // namespace cudal1::optimizer::norm
