/// @brief The softmax family's column plan (Note [Softmax columns], Note [Softmax column tiles]): technique space,
/// features and binding.
#include <algorithm>

#include "codegen_common.h"
#include "cudal1/optimizer/layout.h"
#include "simple_kernel.h"
#include "softmax_family.h"

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
    for (int vec : kVecs) {
      if (!vec_ok(vec)) continue;
      for (int block : kBlocks)
        for (int split : kSplits) {
          if (split > 1 && split > c_.n) continue;  // idle threads only
          for (int cache : {1, 0}) {
            if (cache && cached_elements(c_, vec, split) > kMaxCachedElements) continue;
            out.push_back(Variant{{{"vec", vec}, {"block", block}, {"split", split}, {"cache", cache}}});
          }
        }
    }
    for (int vec : kVecs) {
      if (!vec_ok(vec)) continue;
      for (int block : kTileBlocks)
        for (int chunks : kChunks)
          for (int cache : {1, 0})
            if (tile_ok(vec, block, chunks, cache)) {
              Variant v{{{"vec", vec}, {"block", block}, {"tile", 1}, {"chunks", chunks}, {"cache", cache}}};
              out.push_back(v);
              if (fast_ok(cache)) {  // Note [Softmax fast tiles]
                v.knobs.emplace_back("fast", 1);
                out.push_back(std::move(v));
              }
            }
    }
    for (int vec : kVecs)
      for (int block : kSmemBlocks)
        for (int cluster : kClusters) {
          const int keep = block == 512;
          if (!smem_ok(vec, block, cluster, keep)) continue;
          for (int two : {0, 1}) {  // online pairs, or two passes on chip (Note [Softmax fast exp])
            Variant v{{{"vec", vec}, {"block", block}, {"tile", 2}, {"cluster", cluster}}};
            if (keep) v.knobs.emplace_back("keep", 1);
            if (two) v.knobs.emplace_back("two", 1);
            if (async_ok(vec)) v.knobs.emplace_back("async", 1);  // always, where the layout allows it
            out.push_back(v);
            if (two && pair_ok(vec, block, cluster, keep)) {  // Note [Softmax pair tiles]
              v.knobs.emplace_back("pair", 1);
              out.push_back(std::move(v));
            }
          }
        }
    for (const HeldKnobs& k : kHeldVariants)
      if (held_ok(k))
        out.push_back(Variant{{{"tile", 3}, {"stats", k.stats}, {"out", k.out}, {"merge", k.merge},
                               {"pf", k.prefetch}, {"hold", k.hold}}});
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
  /// 14..16 (online pairs), 24..26 (two passes) and 27..29 (pair tiles) by the blocks an SM holds (1, 2, 3+: what
  /// sets how well reads overlap the merges): disjoint from rows' 0..3 and 17..23.
  int stratum(const Variant& v) const override {
    if (v.get("tile", 0) == 3) return 30;  // held slabs
    if (v.get("tile", 0) == 2) {
      const int vec = v.get("vec"), block = v.get("block"), cluster = v.get("cluster");
      const bool pair = v.get("pair", 0) == 1;
      const int keep = v.get("keep", 0) ? keep_rows(c_, vec, pair) : 0;
      const int resident = resident_blocks(smem_tile_bytes(c_, vec, block, cluster, keep, pair), block);
      return (pair ? 26 : v.get("two", 0) ? 23 : 13) + std::min(3, resident);
    }
    if (v.get("tile", 0)) return v.get("fast", 0) ? 13 : v.get("chunks", 1) > 1 ? 12 : 10 + v.get("cache");
    const int split = v.get("split", 1);
    return 4 + 2 * (split == 1 ? 0 : split == 4 ? 1 : 2) + v.get("cache");
  }

  Result<KernelSource> source(const Variant& v) const override {
    if (v.get("tile", 0) == 3) {
      CUDAL1_ASSIGN_OR_RETURN(const HeldKnobs k, held_knobs(v));
      return generate_softmax_held(c_, k);
    }
    if (v.get("tile", 0) == 2) {
      const int vec = v.get("vec", 0), block = v.get("block", 0), cluster = v.get("cluster", 0);
      const int keep = v.get("keep", 0), two = v.get("two", 0), async = v.get("async", 0), pair = v.get("pair", 0);
      if (v.knobs.size() != 4u + (keep ? 1 : 0) + (two ? 1 : 0) + (async ? 1 : 0) + (pair ? 1 : 0) || two < 0 ||
          two > 1 || async != (async_ok(vec) ? 1 : 0) || !smem_ok(vec, block, cluster, keep) || pair < 0 ||
          pair > 1 || (pair && (!two || !pair_ok(vec, block, cluster, keep))))
        return Status(Code::kInvalidArgument, "variant " + v.id() + " is not in this plan's space");
      return generate_softmax_smem_tiles(c_, vec, block, cluster, keep ? keep_rows(c_, vec, pair == 1) : 0,
                                         two == 1, async == 1, pair == 1);
    }
    if (v.get("tile", 0)) {
      const int vec = v.get("vec", 0), block = v.get("block", 0), chunks = v.get("chunks", 0),
                cache = v.get("cache", -1);
      const int fast = v.get("fast", 0);
      if (v.get("tile") != 1 || v.knobs.size() != 5u + (fast ? 1 : 0) || !tile_ok(vec, block, chunks, cache) ||
          fast < 0 || fast > 1 || (fast && !fast_ok(cache)))
        return Status(Code::kInvalidArgument, "variant " + v.id() + " is not in this plan's space");
      return generate_softmax_tiles(c_, vec, block, chunks, cache == 1, fast == 1);
    }
    const int vec = v.get("vec", 0), block = v.get("block", 0), split = v.get("split", 0), cache = v.get("cache", -1);
    const bool block_ok = block == 128 || block == 256 || block == 512 || block == 1024;
    const bool split_ok = split == 1 || ((split == 4 || split == 32) && split <= c_.n);
    if (!vec_ok(vec) || !block_ok || !split_ok || cache < 0 || cache > 1 || v.knobs.size() != 4 ||
        (cache && cached_elements(c_, vec, split) > kMaxCachedElements))
      return Status(Code::kInvalidArgument, "variant " + v.id() + " is not in this plan's space");
    return generate_softmax_columns(c_, vec, block, split, cache == 1);
  }

  Result<std::unique_ptr<BoundKernel>> bind(const Variant& v, std::shared_ptr<LoadedModule> m) const override {
    if (!m) return Status(Code::kInvalidArgument, "no module");
    CUDAL1_RETURN_IF_ERROR(source(v));
    if (v.get("tile", 0) == 3) return make_held_kernel(c_, held_knobs(v).value(), std::move(m));
    if (v.get("tile", 0) == 2) {
      const int vec = v.get("vec"), block = v.get("block"), cluster = v.get("cluster");
      const bool pair = v.get("pair", 0) == 1;
      const int keep = v.get("keep", 0) ? keep_rows(c_, vec, pair) : 0;
      const int64_t blocks = c_.outer * ((c_.inner / vec + 31) / 32) * cluster;
      const int64_t align = v.get("async", 0) ? 16 : int64_t{vec} * elem_size(c_.dtype);  // cp.async chunks
      return std::unique_ptr<BoundKernel>(new SimpleKernel(
          std::move(m), OutputSpec{c_.dtype, c_.sizes, c_.out_strides}, c_.sizes, c_.in_strides, align, blocks,
          block, c_.log ? 4.0 : 0.0, smem_tile_bytes(c_, vec, block, cluster, keep, pair), cluster));
    }
    if (v.get("tile", 0)) return make_tile_kernel(c_, v.get("vec"), v.get("block"), v.get("chunks"), std::move(m));
    const int vec = v.get("vec"), block = v.get("block"), split = v.get("split");
    const int64_t columns = c_.outer * (c_.inner / vec), per_block = block / split;
    const int64_t grid = (columns + per_block - 1) / per_block;
    return std::unique_ptr<BoundKernel>(new SimpleKernel(std::move(m), OutputSpec{c_.dtype, c_.sizes, c_.out_strides},
                                                         c_.sizes, c_.in_strides, vec * elem_size(c_.dtype), grid,
                                                         block, c_.log ? 4.0 : 0.0));
  }

 private:
  bool vec_ok(int vec) const {
    return (vec == 1 || vec == 2 || vec == 4 || vec == 8) && vec <= c_.max_vec && c_.inner % vec == 0;
  }

  bool tile_ok(int vec, int block, int chunks, int cache) const {
    const bool block_ok = block == 256 || block == 1024;
    const bool chunks_ok = chunks == 1 || ((chunks == 8 || chunks == 64) && c_.n >= chunks * (block / 32) &&
                                           2 * chunks * c_.outer * c_.inner <= kMaxWorkspaceFloats);
    const int64_t tiles = (c_.inner / std::max(vec, 1) + 31) / 32;
    return vec_ok(vec) && block_ok && chunks_ok && int64_t{block} * vec <= kMaxTileBlockVec &&
           c_.outer * tiles * chunks < (int64_t{1} << 31) - 1 && (cache == 0 || cache == 1) &&
           (cache == 0 || tile_cache_fits(c_, vec, block, chunks));
  }

  /// Note [Softmax fast tiles]: 16-bit dtypes, rows read (not cached).
  bool fast_ok(int cache) const { return elem_size(c_.dtype) == 2 && cache == 0; }

  /// Note [Softmax async tiles]: whole tiles (every lane live) whose rows start on 16 bytes.
  bool async_ok(int vec) const { return c_.aligned16 && (c_.inner / vec) % 32 == 0; }

  /// Shared tiles: sm_90+, a warp row of 64 to 256 bytes (whole or half lines), the block's bytes within
  /// 227 KB, clusters only where each block gets at least two rows, and a grid within 2^31 - 1 blocks. `keep`
  /// (rows in registers) at block 512 only, where the block's rows are at least twice those it keeps.
  bool smem_ok(int vec, int block, int cluster, int keep) const {
    const bool block_ok = keep ? block == 512 : block == 256 || block == 1024;
    if (c_.sm < 90 || !vec_ok(vec) || (keep != 0 && keep != 1) || !block_ok || int64_t{block} * vec > kMaxSmemBlockVec)
      return false;
    const int64_t row_bytes = 32 * int64_t{vec} * elem_size(c_.dtype);
    if (row_bytes < 64 || row_bytes > 256) return false;
    if (cluster != 1 && cluster != 2 && cluster != 4 && cluster != 8 && cluster != 16) return false;
    if (cluster > 1 && c_.n < 2 * cluster) return false;
    const int kept = keep ? keep_rows(c_, vec, false) : 0;
    if (keep && (c_.n + cluster - 1) / cluster < 2 * int64_t{kept} * (block / 32)) return false;
    const int64_t tiles = (c_.inner / vec + 31) / 32;
    return smem_tile_bytes(c_, vec, block, cluster, kept, false) <= kMaxBlockSmem &&
           c_.outer * tiles * cluster < (int64_t{1} << 31) - 1;
  }

  /// Note [Softmax pair tiles]: a shared tile that smem_ok offers, of a 16-bit dtype at vec 1 or 2, copied by
  /// cp.async (whole tiles, so NSV and IV are even), whose block still has twice the rows its pairs keep.
  bool pair_ok(int vec, int block, int cluster, int keep) const {
    if (elem_size(c_.dtype) != 2 || (vec != 1 && vec != 2) || !async_ok(vec)) return false;
    const int kept = keep ? keep_rows(c_, vec, true) : 0;
    if (keep && (c_.n + cluster - 1) / cluster < 4 * int64_t{kept} * (block / 32)) return false;
    return smem_tile_bytes(c_, vec, block, cluster, kept, true) <= kMaxBlockSmem;
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

  Result<HeldKnobs> held_knobs(const Variant& v) const {
    const HeldKnobs k{v.get("stats"), v.get("out"), v.get("merge"), v.get("pf", -1), v.get("hold", -1)};
    for (const HeldKnobs& h : kHeldVariants)
      if (v.knobs.size() == 6 && h.stats == k.stats && h.out == k.out && h.merge == k.merge &&
          h.prefetch == k.prefetch && h.hold == k.hold && held_ok(k))
        return k;
    return Status(Code::kInvalidArgument, "variant " + v.id() + " is not in this plan's space");
  }

  ColumnShape c_;
};

}  // namespace

std::unique_ptr<Plan> column_plan(ColumnShape c) { return std::unique_ptr<Plan>(new ColumnPlan(std::move(c))); }

}  // namespace cudal1::optimizer::softmax
