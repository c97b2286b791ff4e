/// @brief The softmax family's column plan (Note [Softmax columns], Note [Softmax column tiles]): technique space,
/// features and binding.
#include <algorithm>

#include "codegen_common.h"
#include "cudal1/optimizer/layout.h"
#include "simple_kernel.h"
#include "softmax_codegen.h"

namespace cudal1::optimizer::softmax {
namespace {

constexpr int kBlocks[] = {128, 256, 512, 1024};
constexpr int kVecs[] = {1, 2, 4, 8};
constexpr int kSplits[] = {1, 4, 32};

/// Elements one thread keeps in registers when its part of the column is cached.
int64_t cached_elements(const ColumnShape& c, int vec, int split) { return (c.n + split - 1) / split * vec; }

/// Tiled variants (Note [Softmax column tiles]): a warp per n-row of 32 x vec inner elements, block / 32 warps
/// share n, `chunks` blocks share a column (two launches when > 1).
constexpr int kTileBlocks[] = {256, 1024};
constexpr int kChunks[] = {1, 8, 64};
/// Shared memory of the warp merge: 2 x block x vec floats, within the 48 KB of static shared memory.
constexpr int64_t kMaxTileBlockVec = 4096;
/// Workspace floats of a chunked variant: 2 x chunks x columns at most this many (64 MB).
constexpr int64_t kMaxWorkspaceFloats = int64_t{1} << 24;

/// Shared tiles (Note [Softmax shared tiles]): blocks and clusters (block 512: the variants that keep rows in
/// registers); block x vec at most 2048 (the warp merge's 16 KB of shared memory).
constexpr int kSmemBlocks[] = {256, 512, 1024};
constexpr int kClusters[] = {1, 2, 4, 8, 16};
constexpr int64_t kMaxSmemBlockVec = 2048;

/// Held slabs (Note [Softmax held slabs]): the five variants (stats, out, merge, prefetch, hold); a slab of at least
/// kMinHeldSlab bytes; at most kMaxHeldColumns columns (the workspace: outer x parts x inner pairs, parts <= SMs);
/// parts and slots sized for the plan's device (Problem::sm_count); a statistics thread keeps at most
/// kMaxHeldVectors 16-byte vectors of an item in registers, an output thread as many of its `hold` items (at most 16
/// warps a block, 4 a scheduler: 128 registers a thread), half as many above 16 warps (96 registers).
constexpr HeldKnobs kHeldVariants[] = {{8, 8, 4, 0, 0}, {8, 8, 2, 1, 0}, {6, 8, 4, 0, 1}, {5, 8, 4, 0, 1},
                                       {5, 8, 4, 0, 2}};
constexpr int64_t kMinHeldSlab = 512 * 1024, kMaxHeldColumns = 32768, kMaxHeldVectors = 16;

int64_t tile_rows(const ColumnShape& c, int chunks) { return (c.n + chunks - 1) / chunks; }

/// Elements one thread of a cached tile keeps: at most 64, 32 at block 1024 (64 registers per thread there).
bool tile_cache_fits(const ColumnShape& c, int vec, int block, int chunks) {
  const int w = block / 32;
  return chunks == 1 &&
         (tile_rows(c, chunks) + w - 1) / w * vec <= std::min<int64_t>(kMaxCachedElements, 32768 / block);
}

class ColumnPlan final : public Plan {
 public:
  explicit ColumnPlan(ColumnShape c) : c_(std::move(c)) {}

  std::vector<Variant> space() const override {
    std::vector<Variant> out;
    for (const ColumnTechnique& t : techniques()) out.push_back(variant_of(t));
    return out;
  }

  std::vector<float> features(const Variant& v) const override {
    SoftmaxClass k;
    k.n = c_.n;
    k.half = elem_size(c_.dtype) == 2;
    k.log = c_.log;
    k.columns = true;
    k.inner = c_.inner;
    k.column_count = c_.outer * c_.inner;
    return softmax_features(k, v);
  }

  /// 4 + 2 x split class + cache, tiles 10 + cache (one launch), 12 (chunked) and 13 (fast), shared tiles
  /// 24..26 and pair tiles 27..29 by the blocks an SM holds (1, 2, 3+: what sets how well reads overlap the
  /// merges), held slabs 30: disjoint from rows' 0..3 and 17..23 (14..16 were the online shared tiles, dropped).
  int stratum(const Variant& v) const override {
    if (v.get("tile", 0) == 3) return 30;  // held slabs
    if (v.get("tile", 0) == 2) {
      const bool pair = v.get("pair", 0) == 1;
      const SharedTileKnobs t{v.get("vec"), v.get("block"), v.get("cluster"), v.get("keep", 0) == 1};
      const int resident = resident_blocks(shared_tile_bytes(c_, t, pair), t.block);
      return (pair ? 26 : 23) + std::min(3, resident);
    }
    if (v.get("tile", 0)) return v.get("fast", 0) ? 13 : v.get("chunks", 1) > 1 ? 12 : 10 + v.get("cache");
    const int split = v.get("split", 1);
    return 4 + 2 * (split == 1 ? 0 : split == 4 ? 1 : 2) + v.get("cache");
  }

  Result<KernelSource> source(const Variant& v) const override {
    CUDAL1_ASSIGN_OR_RETURN(ColumnTechnique t, technique_of(v));
    return generate_softmax_columns(c_, t);
  }

  Result<std::unique_ptr<BoundKernel>> bind(const Variant& v, std::shared_ptr<LoadedModule> m) const override {
    if (!m) return Status(Code::kInvalidArgument, "no module");
    CUDAL1_ASSIGN_OR_RETURN(ColumnTechnique t, technique_of(v));
    const OutputSpec out{c_.dtype, c_.sizes, c_.out_strides};
    const double log_weight = c_.log ? 4.0 : 0.0;
    if (const auto* h = std::get_if<HeldSlabs>(&t)) return make_held_kernel(c_, *h, std::move(m));
    if (const auto* k = std::get_if<ColumnTiles>(&t)) return make_tile_kernel(c_, *k, std::move(m));
    if (const auto* s = std::get_if<SplitColumns>(&t)) {
      const int64_t columns = c_.outer * (c_.inner / s->vec), per_block = s->block / s->split;
      const int64_t grid = (columns + per_block - 1) / per_block;
      return std::unique_ptr<BoundKernel>(new SimpleKernel(std::move(m), out, c_.sizes, c_.in_strides,
                                                           s->vec * elem_size(c_.dtype), grid, s->block,
                                                           log_weight));
    }
    const bool pair = std::holds_alternative<PairTiles>(t);
    const SharedTileKnobs& k = pair ? static_cast<const SharedTileKnobs&>(std::get<PairTiles>(t))
                                    : std::get<SharedTiles>(t);
    const bool async = pair || std::get<SharedTiles>(t).async;
    const int64_t blocks = c_.outer * ((c_.inner / k.vec + 31) / 32) * k.cluster;
    const int64_t align = async ? 16 : int64_t{k.vec} * elem_size(c_.dtype);  // cp.async chunks
    return std::unique_ptr<BoundKernel>(new SimpleKernel(std::move(m), out, c_.sizes, c_.in_strides, align, blocks,
                                                         k.block, log_weight, shared_tile_bytes(c_, k, pair),
                                                         k.cluster));
  }

 private:
  /// The space in its order: split columns (vec, block, split, cached first), column tiles (vec, block, chunks,
  /// cached first, each then fast where it applies), shared tiles (vec, block, cluster; each then its pair tile
  /// where it applies), held slabs (kHeldVariants' order).
  std::vector<ColumnTechnique> techniques() const {
    std::vector<ColumnTechnique> out;
    for (int vec : kVecs) {
      if (!vec_ok(vec)) continue;
      for (int block : kBlocks)
        for (int split : kSplits) {
          if (split > 1 && split > c_.n) continue;  // idle threads only
          for (int cache : {1, 0}) {
            if (cache && cached_elements(c_, vec, split) > kMaxCachedElements) continue;
            out.push_back(SplitColumns{vec, block, split, cache == 1});
          }
        }
    }
    for (int vec : kVecs) {
      if (!vec_ok(vec)) continue;
      for (int block : kTileBlocks)
        for (int chunks : kChunks)
          for (int cache : {1, 0})
            if (tile_ok(vec, block, chunks, cache)) {
              out.push_back(ColumnTiles{vec, block, chunks, cache == 1, false});
              if (fast_ok(cache)) out.push_back(ColumnTiles{vec, block, chunks, cache == 1, true});
            }
    }
    for (int vec : kVecs)
      for (int block : kSmemBlocks)
        for (int cluster : kClusters) {
          const SharedTileKnobs k{vec, block, cluster, block == 512};
          if (!smem_ok(k)) continue;
          out.push_back(SharedTiles{k, async_ok(vec)});  // async always, where the layout allows it
          if (pair_ok(k)) out.push_back(PairTiles{k});  // Note [Softmax pair tiles]
        }
    for (const HeldKnobs& k : kHeldVariants)
      if (held_ok(k)) out.push_back(HeldSlabs{k});
    return out;
  }

  /// The technique of a variant of this plan's space, else InvalidArgument.
  Result<ColumnTechnique> technique_of(const Variant& v) const { return technique_in(techniques(), v); }

  bool vec_ok(int vec) const {
    return (vec == 1 || vec == 2 || vec == 4 || vec == 8) && vec <= c_.max_vec && c_.inner % vec == 0;
  }

  bool tile_ok(int vec, int block, int chunks, int cache) const {
    const bool chunks_ok = chunks == 1 || (c_.n >= chunks * (block / 32) &&
                                           2 * chunks * c_.outer * c_.inner <= kMaxWorkspaceFloats);
    const int64_t tiles = (c_.inner / vec + 31) / 32;
    return chunks_ok && int64_t{block} * vec <= kMaxTileBlockVec &&
           c_.outer * tiles * chunks < (int64_t{1} << 31) - 1 && (cache == 0 || tile_cache_fits(c_, vec, block, chunks));
  }

  /// Note [Softmax fast tiles]: 16-bit dtypes, rows read (not cached).
  bool fast_ok(int cache) const { return elem_size(c_.dtype) == 2 && cache == 0; }

  /// Note [Softmax async tiles]: whole tiles (every lane live) whose rows start on 16 bytes.
  bool async_ok(int vec) const { return c_.aligned16 && (c_.inner / vec) % 32 == 0; }

  /// Shared tiles: sm_90+, a warp row of 64 to 256 bytes (whole or half lines), the block's bytes within
  /// 227 KB, clusters only where each block gets at least two rows, and a grid within 2^31 - 1 blocks. `keep`
  /// (rows in registers, at block 512) only where the block's rows are at least twice those it keeps.
  bool smem_ok(const SharedTileKnobs& k) const {
    if (c_.sm < 90 || !vec_ok(k.vec) || int64_t{k.block} * k.vec > kMaxSmemBlockVec) return false;
    const int64_t row_bytes = 32 * int64_t{k.vec} * elem_size(c_.dtype);
    if (row_bytes < 64 || row_bytes > 256) return false;
    if (k.cluster > 1 && c_.n < 2 * k.cluster) return false;
    const int kept = kept_rows(c_, k, false);
    if (k.keep && (c_.n + k.cluster - 1) / k.cluster < 2 * int64_t{kept} * (k.block / 32)) return false;
    const int64_t tiles = (c_.inner / k.vec + 31) / 32;
    return shared_tile_bytes(c_, k, false) <= kMaxBlockSmem && c_.outer * tiles * k.cluster < (int64_t{1} << 31) - 1;
  }

  /// Note [Softmax pair tiles]: a shared tile that smem_ok offers, of a 16-bit dtype at vec 1 or 2, copied by
  /// cp.async (whole tiles, so NSV and IV are even), whose block still has twice the rows its pairs keep.
  bool pair_ok(const SharedTileKnobs& k) const {
    if (elem_size(c_.dtype) != 2 || (k.vec != 1 && k.vec != 2) || !async_ok(k.vec)) return false;
    const int kept = kept_rows(c_, k, true);
    if (k.keep && (c_.n + k.cluster - 1) / k.cluster < 4 * int64_t{kept} * (k.block / 32)) return false;
    return shared_tile_bytes(c_, k, true) <= kMaxBlockSmem;
  }

  /// Note [Softmax held slabs]: sm_90+, a 16-bit dtype, input and output dense [outer, n, inner] on 16 bytes, inner
  /// 32-256 (whole 16-byte lane vectors, a power of two), slabs of kMinHeldSlab bytes or more, and a known device
  /// whose SMs leave `k` slots (held_grid).
  bool held_ok(const HeldKnobs& k) const {
    const bool inner_ok = c_.inner == 32 || c_.inner == 64 || c_.inner == 128 || c_.inner == 256;
    if (c_.sm < 90 || elem_size(c_.dtype) != 2 || !inner_ok || !c_.aligned16 || c_.n_stride != c_.inner ||
        c_.outer_stride != c_.n * c_.inner || c_.out_strides != contiguous_strides(c_.sizes) ||
        c_.n * c_.inner * 2 < kMinHeldSlab || c_.outer * c_.inner > kMaxHeldColumns ||
        c_.outer * c_.n * c_.inner >= (int64_t{1} << 31))
      return false;
    const HeldGrid g = held_grid(c_, k, c_.sm_count);
    const int64_t rows_a_pass = int64_t{k.stats} * 32 / (c_.inner / 8), out_rows = int64_t{k.out} * 32 / (c_.inner / 8);
    const int64_t out_vectors = k.hold * ((g.rows + out_rows - 1) / out_rows);
    const bool wide_block = held_threads(k) > 16 * 32;
    return g.ok && (g.rows + rows_a_pass - 1) / rows_a_pass <= kMaxHeldVectors &&
           out_vectors <= (wide_block ? kMaxHeldVectors / 2 : kMaxHeldVectors);
  }

  ColumnShape c_;
};

}  // namespace

std::unique_ptr<Plan> column_plan(ColumnShape c) { return std::unique_ptr<Plan>(new ColumnPlan(std::move(c))); }

}  // namespace cudal1::optimizer::softmax
