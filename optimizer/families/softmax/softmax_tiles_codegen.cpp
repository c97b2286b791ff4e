/// @brief Source generation for the softmax family's column tiles (ColumnTiles, Note [Softmax column tiles]): the
/// head of typed constants and column variables before softmax_column_tiles.cuh.
#include <sstream>

#include "codegen_common.h"
#include "softmax_codegen.h"
#include "softmax_cuda.h"

namespace cudal1::optimizer::softmax {

KernelSource generate_softmax_tiles(const ColumnShape& c, const ColumnTiles& t) {
  const int64_t iv = c.inner / t.vec, tiles = (iv + 31) / 32, nc = (c.n + t.chunks - 1) / t.chunks;
  const int warps = t.block / 32;
  std::ostringstream o;
  column_head(o, c, ColumnTiles::kName, variant_of(t), t.vec, t.block, t.fast, false);
  constant(o, "int", "kChunks", t.chunks);
  constant(o, "bool", "kCache", t.cache);
  constant(o, "bool", "kFast", t.fast);  // Note [Softmax fast tiles]
  constant(o, "int", "kUnroll", t.fast ? 8 : 4);
  o << "}  // namespace softmax\n";
  o << "static constexpr int N = " << c.n << ", NC = " << nc << ";  // rows, rows per chunk\n"
    << "static constexpr index_t IV = " << iv << ", TILES = " << tiles << ";  // vectors along inner, tiles\n"
    << "static constexpr index_t BLOCKS = " << c.outer * tiles * t.chunks << ";\n"
    << "static constexpr index_t OSV = " << c.outer_stride / t.vec << ", NSV = " << c.n_stride / t.vec
    << ";  // input strides in vectors\n";
  if (t.cache) o << "static constexpr int PER = " << (nc + warps - 1) / warps << ";  // vectors each thread keeps\n";
  if (t.chunks > 1) o << "static constexpr index_t COLS = " << c.outer * c.inner << ";  // workspace stride\n";
  o << "namespace softmax {\n";
  bound_column_constants(o);
  bound_constant(o, "int", "kChunkRows", "NC");
  bound_constant(o, "index_t", "kTiles", "TILES");
  bound_constant(o, "index_t", "kGridBlocks", "BLOCKS");
  bound_or_constant(o, "int", "kPer", "PER", t.cache, 1);
  bound_or_constant(o, "index_t", "kWorkspaceStride", "COLS", t.chunks > 1, c.outer * c.inner);
  o << "}  // namespace softmax\n"
    << device_sources::kSoftmaxCommon << device_sources::kSoftmaxColumnCommon << device_sources::kSoftmaxColumnTiles;
  return KernelSource{o.str(), "cudal1_softmax"};
}

}  // namespace cudal1::optimizer::softmax
