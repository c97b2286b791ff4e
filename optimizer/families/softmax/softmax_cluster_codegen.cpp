/// @brief Source generation for the softmax family's shared column tiles (SharedTiles, PairTiles: Note [Softmax
/// shared tiles]): column tiles held in dynamic shared memory, split over the blocks of a thread-block cluster when
/// one block cannot hold them; and the shared memory and registers of those and of the cluster rows (ClusterRows,
/// whose source softmax_codegen.cpp writes). Cluster parts are inline PTX (NVRTC has no cooperative_groups here).
#include <algorithm>
#include <sstream>

#include "codegen_common.h"
#include "softmax_codegen.h"
#include "softmax_cuda.h"

namespace cudal1::optimizer::softmax {
namespace {

int regs_per_vec(c10::ScalarType dtype, int vec) { return std::max(1, vec * elem_size(dtype) / 4); }

/// The source of a shared tile (`pair`: a pair tile) named `name`, variant `v`.
KernelSource shared_tiles(const ColumnShape& c, const SharedTileKnobs& t, const char* name, const Variant& v,
                          bool async, bool pair) {
  const int64_t iv = c.inner / t.vec, tiles = (iv + 31) / 32, nb = (c.n + t.cluster - 1) / t.cluster;
  const int keep = kept_rows(c, t, pair), nk = keep * (t.block / 32) * (pair ? 2 : 1);
  const int resident = resident_blocks(shared_tile_bytes(c, t, pair), t.block);
  std::ostringstream o;
  column_head(o, c, name, v, t.vec, t.block, true, true);  // two passes: Note [Softmax fast exp]
  constant(o, "int", "kCluster", t.cluster);
  constant(o, "int", "kResident", resident);
  constant(o, "int", "kUnroll", copy_unroll(c.dtype, t.vec, t.block, resident,
                                            keep * regs_per_vec(c.dtype, pair ? 2 * t.vec : t.vec)));
  constant(o, "int", "kKeep", keep);
  constant(o, "bool", "kAsync", async);
  constant(o, "bool", "kPair", pair);
  if (pair) constant(o, "bool", "kBfloat16", c.dtype == c10::ScalarType::BFloat16);
  o << "}  // namespace softmax\n";
  o << "static constexpr int N = " << c.n << ", NB = " << nb << ";  // rows, rows per block of a cluster\n"
    << "static constexpr int NK = " << nk << ";  // the block's first rows, kept in registers\n"
    << "static constexpr int NS = " << std::max<int64_t>(0, nb - nk) << ";  // the rest, in shared memory\n"
    << "static constexpr index_t IV = " << iv << ", TILES = " << tiles << ";  // vectors along inner, tiles\n"
    << "static constexpr index_t OSV = " << c.outer_stride / t.vec << ", NSV = " << c.n_stride / t.vec
    << ";  // input strides in vectors\n";
  o << "namespace softmax {\n";
  bound_column_constants(o);
  bound_constant(o, "int", "kBlockRows", "NB");
  bound_constant(o, "int", "kKeptRows", "NK");
  bound_constant(o, "int", "kSharedRows", "NS");
  bound_constant(o, "index_t", "kTiles", "TILES");
  o << "}  // namespace softmax\n" << device_sources::kSoftmaxCommon << device_sources::kSoftmaxColumnCommon;
  if (pair) o << device_sources::kSoftmaxPackedPairs;
  o << device_sources::kSoftmaxSharedCommon
    << (pair ? device_sources::kSoftmaxPairTiles : device_sources::kSoftmaxSharedTiles);
  return KernelSource{o.str(), "cudal1_softmax"};
}

}  // namespace

int copy_unroll(c10::ScalarType dtype, int vec, int block, int resident, int kept) {
  const int regs = std::min(255, 65536 / (resident * block)) / 8 * 8;
  const int buffer = std::clamp(regs - 32 - kept, 4, 32);
  return std::clamp(buffer / regs_per_vec(dtype, vec), 2, 32);
}

int resident_blocks(int64_t smem, int block) {
  return static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(2048 / block, 233472 / (smem + 1024))));
}

int keep_rows(const ColumnShape& c, int vec, bool pair) {
  return kKeptRegisters / regs_per_vec(c.dtype, pair ? 2 * vec : vec);
}

int64_t smem_tile_bytes(const ColumnShape& c, int vec, int block, int cluster, int keep, bool pair) {
  const int64_t kept = int64_t{keep} * (block / 32) * (pair ? 2 : 1);  // rows the block keeps in registers
  const int64_t rows = std::max<int64_t>(0, (c.n + cluster - 1) / cluster - kept);
  const int64_t data = rows * 32 * vec * elem_size(c.dtype);                 // a multiple of 16 bytes
  const int64_t stats = (2 * int64_t{block / 32} * vec * 32 + 2 * vec * 32) * 4;  // warp merge + published pairs
  return data + stats;
}

int64_t cluster_row_bytes(const SoftmaxShape& s, int vec, int cluster) {
  const int64_t nv = s.cols / vec, part = (nv + cluster - 1) / cluster;
  // The slice (rounded up to 16 bytes: the floats after it stay aligned), the block reduction, the published pair.
  return (part * vec * elem_size(s.dtype) + 15) / 16 * 16 + (32 + 2) * 4;
}

int kept_rows(const ColumnShape& c, const SharedTileKnobs& t, bool pair) {
  return t.keep ? keep_rows(c, t.vec, pair) : 0;
}

int64_t shared_tile_bytes(const ColumnShape& c, const SharedTileKnobs& t, bool pair) {
  return smem_tile_bytes(c, t.vec, t.block, t.cluster, kept_rows(c, t, pair), pair);
}

KernelSource generate_softmax_shared_tiles(const ColumnShape& c, const SharedTiles& t) {
  return shared_tiles(c, t, SharedTiles::kName, variant_of(t), t.async, false);
}

KernelSource generate_softmax_shared_tiles(const ColumnShape& c, const PairTiles& t) {
  return shared_tiles(c, t, PairTiles::kName, variant_of(t), true, true);
}

}  // namespace cudal1::optimizer::softmax
