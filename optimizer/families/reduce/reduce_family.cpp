/// @brief The reduction family: its technique space (Note [Reductions]), features, strata and binding.
#include "reduce_family.h"

#include <type_traits>

#include "codegen_common.h"

namespace cudal1::optimizer::reduce {
namespace {

constexpr int kVecs[] = {1, 2, 4, 8};
constexpr int kBlocks[] = {128, 256, 512, 1024};
constexpr int kRowSplits[] = {4, 16, 64, 256};
constexpr int kColSplits[] = {1, 8, 32};
constexpr int kTys[] = {1, 8};
constexpr int kColumnsPerThread[] = {1, 2};  // the plain and pipelined tiles' columns (knob ty)
constexpr int kTileBlocks[] = {256, 512, 1024};
constexpr int kTileSplits[] = {1, 8};
constexpr int kPipeUnrolls[] = {4, 8};     // PipelinedTile's batch (knob unr, Note [Column tiles in flight])
constexpr int kPipeSplits[] = {1, 4, 16};  // one launch when > 1
constexpr int64_t kMaxPartials = int64_t{1} << 22;  // workspace entries (16 bytes each)
constexpr int kClusterBlocks[] = {192, 256, 512};  // cluster tiles (Note [Column tiles in clusters])
constexpr int kClusterSizes[] = {16, 8, 4, 2};     // blocks (row chunks) per tile, largest first
constexpr int kClusterUnrolls[] = {2, 4, 8};       // batch (16-byte vectors of fp32 take 2 or 4 rows a batch)
// Threads of one wave of cluster tiles on a 132-SM H100/H200 at kClusterTileThreadsPerSm each.
constexpr int64_t kClusterWaveThreads = int64_t{132} * kClusterTileThreadsPerSm;

// Note [Norm chains]
// A norm of ord 1, 2 or p sums non-negative terms. One fp32 accumulator fed a long serial chain of them drifts low:
// once the running sum is large, every term below half its ulp rounds away, and |x|^2 of normal inputs has most of its
// mass near 0, so the roundings do not cancel as the random-walk bound of the verification tolerance assumes
// (Note [Verification]; reduce_kernel.cpp): ColumnThreads with a thread per output summing 1.26 M squares serially
// comes out 3.7e-4 low against a tolerance of 2.7e-4, and 10% low on 67 M elements. Verification rejects such a
// variant, so nothing wrong is swapped in, but it cannot win and only costs a trial: techniques whose accumulators
// take more than kMaxNormChain terms (chain()) are not planned for these norms (ATen's trees keep every chain short).
// Signed sums (sum, mean) stay unbiased and var/std use Welford, so the bound is theirs only.
constexpr int64_t kMaxNormChain = 8192;

class ReducePlan final : public Plan {
 public:
  ReducePlan(ReduceShape s, int sm) : s_(std::move(s)), sm_(sm) {}

  std::vector<Variant> space() const override {
    std::vector<Variant> out;
    for (const ReduceTechnique& t : techniques()) out.push_back(variant_of(t));
    return out;
  }

  std::vector<float> features(const Variant& v) const override {
    std::vector<float> knobs;
    for (int m = 0; m < 5; ++m) knobs.push_back(v.get("mode") == m);
    for (int x : kVecs) knobs.push_back(v.get("vec") == x);
    for (int x : kBlocks) knobs.push_back(v.get("block") == x);
    const int sp = v.get("splits");
    knobs.push_back(sp == 1);
    knobs.push_back(sp > 1 && sp <= 8);
    knobs.push_back(sp > 8 && sp <= 64);
    knobs.push_back(sp > 64);
    for (int x : kTys) knobs.push_back(v.get("ty") == x);
    knobs.push_back(v.get("mode") == 4 && v.get("ty") == 2);
    const int unr = v.get("unr", 0);
    knobs.push_back(unr > 0);
    knobs.push_back(unr == 8);
    knobs.push_back(unr > 0 && sp > 1);  // one launch
    knobs.push_back(unr > 0 && v.get("block") == 1024);
    const bool cluster = v.get("cluster", 0) > 0;
    knobs.push_back(cluster);
    knobs.push_back(cluster && v.get("vec") * elem_size(s_.dtype) == 16);
    knobs.push_back(cluster && v.get("block") == 512);
    knobs.push_back(cluster && v.get("block") == 192);
    knobs.push_back(cluster && fills_wave(v));
    knobs.push_back(v.get("ring", 0) > 0);
    const int64_t k = s_.length, o = s_.outputs;
    const bool kind_heavy = s_.has_indices() || s_.op == Reduction::kVar || s_.op == Reduction::kStd ||
                            (s_.op == Reduction::kNorm && s_.ord == NormOrd::kP);  // powf per element
    const std::vector<float> ctx = {1.f,
                                    k <= 1024 ? 1.f : 0.f,
                                    k > 1024 && k <= 16384 ? 1.f : 0.f,
                                    k > 16384 ? 1.f : 0.f,
                                    o < 264 ? 1.f : 0.f,
                                    o >= 65536 ? 1.f : 0.f,
                                    elem_size(s_.dtype) == 2 ? 1.f : 0.f,
                                    s_.row_vec > 1 ? 1.f : 0.f,
                                    s_.col_vec > 1 ? 1.f : 0.f,
                                    kind_heavy ? 1.f : 0.f};
    return crossed_features(ctx, knobs);
  }

  /// A cluster tile whose grid the next larger cluster size would take past one wave (Note [Column tiles in
  /// clusters]).
  bool fills_wave(const Variant& v) const {
    const ClusterTile k{{{v.get("vec"), v.get("block")}, 1, v.get("splits")}, v.get("unr")};
    return k.tiles(s_) * k.splits * k.block * 2 > kClusterWaveThreads;
  }

  int stratum(const Variant& v) const override {
    const int mode = v.get("mode");
    if (mode < 3) return mode;
    if (v.get("cluster", 0) > 0) {  // cluster tiles (Note [Column tiles in clusters])
      if (v.get("ring", 0) > 0) return 13;                      // through a ring (Note [Column tiles in rings])
      if (v.get("vec") * elem_size(s_.dtype) < 16) return 12;  // narrower loads
      if (!fills_wave(v)) return 11;                            // 16-byte loads, half a wave or less
      return v.get("block") == 192 ? 10 : 9;                    // 3/4 of the wave, or all of it
    }
    if (mode == 4 && v.get("unr", 0) > 0) return 7 + (v.get("splits") > 1 ? 1 : 0);  // pipelined tiles
    return (mode == 3 ? 3 : 5) + (v.get("splits") > 1 ? 1 : 0);
  }

  Result<KernelSource> source(const Variant& v) const override {
    CUDAL1_ASSIGN_OR_RETURN(ReduceTechnique t, technique_of(v));
    return generate_reduce(s_, t);
  }

  Result<std::unique_ptr<BoundKernel>> bind(const Variant& v, std::shared_ptr<LoadedModule> m) const override {
    if (!m) return Status(Code::kInvalidArgument, "no module");
    CUDAL1_ASSIGN_OR_RETURN(ReduceTechnique t, technique_of(v));
    return make_reduce_kernel(s_, t, std::move(m));
  }

 private:
  /// The space in its order: for each vec, then block, RowPerWarp, RowPerBlock and SplitRow (each splits); then
  /// ColumnThreads; then, where the kept outputs are contiguous, for each vec the plain column tiles and the
  /// pipelined ones; then ClusterTile on sm_90+. Norms of ord 1, 2 and p skip techniques whose accumulators take more
  /// than kMaxNormChain terms (Note [Norm chains]).
  std::vector<ReduceTechnique> techniques() const {
    std::vector<ReduceTechnique> out;
    const bool norm_sum = s_.op == Reduction::kNorm &&
                          (s_.ord == NormOrd::kOne || s_.ord == NormOrd::kTwo || s_.ord == NormOrd::kP);
    auto add = [&](const auto& k) {
      if (norm_sum && k.chain(s_) > kMaxNormChain) return;  // Note [Norm chains]
      out.push_back(k);
    };
    const bool row_like = s_.row_vec > 1 || (!s_.red_strides.empty() && s_.red_strides.back() == 1);
    const bool col_like = !s_.kept_strides.empty() && s_.kept_strides.back() == 1 && !row_like;
    const int64_t k_len = s_.length, o = s_.outputs;
    for (int vec : kVecs) {
      if (vec > s_.row_vec || (col_like && vec > 1)) continue;
      for (int block : kBlocks) {
        // Rows served by a layout whose reduced run is not innermost only get a fallback of each technique.
        if (col_like && block != 256) continue;
        if (k_len <= 16384 && block <= 256) add(RowPerWarp{{vec, block}});
        if (k_len >= 128 || o <= 1024) add(RowPerBlock{{vec, block}});
        if (k_len >= 8192 && o <= 2048 && block >= 256 && block <= 512 && !col_like)
          for (int splits : kRowSplits) {
            const SplitRow k{{vec, block}, splits};
            if (k.chunk_vectors(s_) >= block && o * splits <= kMaxPartials) add(k);
          }
      }
    }
    for (int vec : kVecs) {
      if (vec > s_.col_vec) continue;
      for (int block : {128, 256}) {
        if (row_like && (block != 256 || vec > 1)) continue;  // columns of a row layout: a fallback
        for (int ty : kTys)
          for (int splits : kColSplits) {
            const ColumnThreads k{{vec, block}, ty, splits};
            if (ty > k_len || (splits > 1 && (row_like || k.chunk_rows(s_) < 4 * ty || o * splits > kMaxPartials)))
              continue;
            add(k);
          }
      }
    }
    // Column tiles (Note [Reductions]): kept outputs contiguous (more than one, so K < 2^30); warps split r, ty is
    // columns per thread (CPT); the shared-memory combine holds BLOCK * CPT * VEC partials (<= 32 KB).
    if (!s_.kept_strides.empty() && s_.kept_strides.back() == 1 && !row_like && o > 1)
      for (int vec : kVecs) {
        if (vec > s_.col_vec) continue;
        for (int block : kTileBlocks)
          for (int cpt : kColumnsPerThread)
            for (int splits : kTileSplits) {
              const ColumnTile k{{{vec, block}, cpt, splits}};
              if (vec * cpt > 4 || block * cpt * vec > 2048 || block / 32 > k_len) continue;
              if (splits > 1 && (k.chunk_rows(s_) < 4 * (block / 32) || o * splits > kMaxPartials)) continue;
              add(k);
            }
        // Pipelined tiles (Note [Column tiles in flight]): 8-16 elements per thread per batch of rows (fewer
        // leave too few bytes in flight), 2 x UNR x CPT x VEC of them in registers.
        for (int block : kTileBlocks)
          for (int cpt : kColumnsPerThread)
            for (int unr : kPipeUnrolls)
              for (int splits : kPipeSplits) {
                const PipelinedTile k{{{vec, block}, cpt, splits}, unr};
                if (vec * cpt > 4 || vec * cpt * unr < 8 || vec * cpt * unr > 16 || block * cpt * vec > 2048 ||
                    block / 32 > k_len)
                  continue;
                if (splits > 1 && (k.chunk_rows(s_) < 4 * (block / 32) || o * splits > kMaxPartials)) continue;
                add(k);
              }
      }
    if (sm_ >= 90 && !s_.kept_strides.empty() && s_.kept_strides.back() == 1 && !row_like && o > 1)
      for (const ClusterTile& k : cluster_tiles()) add(k);
    return out;
  }

  /// Cluster tiles (Note [Column tiles in clusters]): one column vector per thread of up to 16 bytes, 8-16
  /// elements per batch of rows (fewer leave too few bytes in flight; 2 x UNR x VEC of them in registers), and
  /// the two largest cluster sizes whose grid fits one wave of an H100/H200 (the larger fills it; the smaller
  /// leaves room for clusters that a GPC cannot place). Each warp gets at least one whole batch of its chunk.
  std::vector<ClusterTile> cluster_tiles() const {
    std::vector<ClusterTile> out;
    for (int vec : kVecs) {
      if (vec > s_.col_vec || vec * elem_size(s_.dtype) > 16) continue;
      if (vec > 4 && (s_.op == Reduction::kVar || s_.op == Reduction::kStd)) continue;  // 8 Welford runs spill
      for (int block : kClusterBlocks) {
        // The shared-memory combine: BLOCK * VEC partials (<= 32 KB), a thread per tile column.
        if (block * vec > 2048 || 32 * vec > block) continue;
        int sizes = 0;
        for (int cl : kClusterSizes) {
          ClusterTile k{{{vec, block}, 1, cl}};
          if (sizes == 2 || k.tiles(s_) * cl * block > kClusterWaveThreads) continue;
          const size_t before = out.size();
          for (int unr : kClusterUnrolls) {
            k.batch = unr;
            if (vec * unr < 8 || vec * unr > 16 || k.chunk_rows(s_) < int64_t{unr} * (block / 32)) continue;
            out.push_back(k);
            // The same tile streaming through a cp.async ring (Note [Column tiles in rings]): 4-16 byte copies,
            // 32-byte stages.
            if (vec * elem_size(s_.dtype) >= 4 && unr * vec * elem_size(s_.dtype) == 32) {
              out.push_back(k);
              out.back().ring = true;
            }
          }
          sizes += out.size() > before;
        }
      }
    }
    return out;
  }

  /// The technique of a variant of this plan's space, else InvalidArgument.
  Result<ReduceTechnique> technique_of(const Variant& v) const {
    for (const ReduceTechnique& t : techniques())
      if (variant_of(t).id() == v.id()) return t;
    return Status(Code::kInvalidArgument, "variant " + v.id() + " is not in this plan's space");
  }

  ReduceShape s_;
  int sm_ = 0;
};

class ReduceFamily final : public Family {
 public:
  const char* name() const override { return "reduce"; }
  // 2: ordered push for (value, index); 3: norms, out_t, tiles; 4: pipelined tiles, one-launch merge; 5: cluster
  // tiles, the tile body as a device function; 6: cluster tiles through a cp.async ring; 7: each technique a class
  // and its device code in reduce_*.cuh files (same cubins); 8: the column tiles' vector copies in
  // framework/vector_copy.cuh on sizeof(vec_t), not VEC_BYTES (same cubins)
  int version() const override { return 8; }
  std::vector<std::string> ops() const override {
    return {"sum.dim_IntList", "mean.dim", "amax",           "amin",           "max.dim",           "min.dim",
            "argmax",          "argmin",   "var.correction", "std.correction", "linalg_vector_norm"};
  }

  Result<std::unique_ptr<Plan>> plan(const Problem& p) const override {
    CUDAL1_ASSIGN_OR_RETURN(ReduceShape s, parse_reduction(p));
    return std::unique_ptr<Plan>(new ReducePlan(std::move(s), p.sm));
  }
};

}  // namespace

Variant variant_of(const ReduceTechnique& t) {
  return std::visit(
      [](const auto& k) {
        using K = std::decay_t<decltype(k)>;
        int splits = 1, ty = 1;
        if constexpr (std::is_same_v<K, SplitRow>) splits = k.splits;
        if constexpr (std::is_same_v<K, ColumnThreads>) splits = k.splits, ty = k.threads;
        if constexpr (std::is_base_of_v<TileLaunch, K>) splits = k.splits, ty = k.columns;
        Variant v{{{"mode", K::kMode}, {"vec", k.vec}, {"block", k.block}, {"splits", splits}, {"ty", ty}}};
        if constexpr (std::is_same_v<K, PipelinedTile> || std::is_same_v<K, ClusterTile>)
          v.knobs.emplace_back("unr", k.batch);
        if constexpr (std::is_same_v<K, ClusterTile>) {
          v.knobs.emplace_back("cluster", 1);
          if (k.ring) v.knobs.emplace_back("ring", 1);
        }
        return v;
      },
      t);
}

const Family& reduce_family() {
  static const ReduceFamily f;
  return f;
}

}  // namespace cudal1::optimizer::reduce
