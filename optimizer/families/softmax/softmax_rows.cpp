/// @brief The softmax family's row plan: the reduced dim is the innermost one that is not size 1; its
/// technique space, features and binding.
#include "codegen_common.h"
#include "simple_kernel.h"
#include "softmax_codegen.h"

namespace cudal1::optimizer::softmax {
namespace {

constexpr int kBlocks[] = {128, 256, 512, 1024};
constexpr int kVecs[] = {1, 2, 4, 8};

/// Elements a thread keeps when its part of the row is cached (head variants: the whole-vector bound).
int cached_elements(const SoftmaxShape& s, int vec, int tpr) {
  const int64_t nv = s.cols / vec;
  return static_cast<int>((nv + tpr - 1) / tpr) * vec;
}

/// Cluster rows (Note [Softmax shared tiles]): blocks and cluster sizes.
constexpr int kClusterBlocks[] = {256, 512};
constexpr int kClusters[] = {1, 2, 4, 8, 16};  // 1: one block holds the row (no cluster)

class SoftmaxPlan final : public Plan {
 public:
  explicit SoftmaxPlan(SoftmaxShape s) : s_(std::move(s)) {}

  std::vector<Variant> space() const override {
    std::vector<Variant> out;
    for (const RowTechnique& t : techniques()) out.push_back(variant_of(t));
    return out;
  }

  std::vector<float> features(const Variant& v) const override {
    SoftmaxClass c;
    c.n = s_.cols;
    c.half = elem_size(s_.dtype) == 2;
    c.log = s_.log;
    return softmax_features(c, v);
  }

  /// warp x 2 + cache, + 20 for the widest vectors (so every mapping is tried with them: issue-bound short rows
  /// are decided by it, and 24 sampled trials missed the best one);
  /// cluster rows 17..19 by the blocks an SM holds (1, 2, 3+), disjoint from the column
  /// plan's 4..16.
  int stratum(const Variant& v) const override {
    if (const int cluster = v.get("cluster", 0))
      return 16 + std::min(3, resident_blocks(cluster_row_bytes(s_, v.get("vec"), cluster), v.get("block")));
    return v.get("warp") * 2 + v.get("cache") + (v.get("vec") >= s_.max_vec ? 20 : 0);
  }

  Result<KernelSource> source(const Variant& v) const override {
    CUDAL1_ASSIGN_OR_RETURN(RowTechnique t, technique_of(v));
    return generate_softmax_rows(s_, t);
  }

  Result<std::unique_ptr<BoundKernel>> bind(const Variant& v, std::shared_ptr<LoadedModule> m) const override {
    if (!m) return Status(Code::kInvalidArgument, "no module");
    CUDAL1_ASSIGN_OR_RETURN(RowTechnique t, technique_of(v));
    const OutputSpec out{s_.dtype, s_.sizes, s_.out_strides};
    const double log_weight = s_.log ? 4.0 : 0.0;
    if (const auto* c = std::get_if<ClusterRows>(&t))
      return std::unique_ptr<BoundKernel>(new SimpleKernel(
          std::move(m), out, s_.sizes, s_.in_strides, int64_t{c->vec} * elem_size(s_.dtype), s_.rows * c->cluster,
          c->block, log_weight, cluster_row_bytes(s_, c->vec, c->cluster), c->cluster));
    const bool warp = std::holds_alternative<RowPerWarp>(t);
    const RowLoop& k = warp ? static_cast<const RowLoop&>(std::get<RowPerWarp>(t)) : std::get<RowPerBlock>(t);
    const int64_t rows_per_block = warp ? k.block / 32 : 1;
    const int64_t grid = (s_.rows + rows_per_block - 1) / rows_per_block;
    return std::unique_ptr<BoundKernel>(new SimpleKernel(std::move(m), out, s_.sizes, s_.in_strides,
                                                         k.vec * elem_size(s_.dtype), grid, k.block, log_weight));
  }

 private:
  /// The space in its order: plain rows (head 0 then 1, vec, block, RowPerWarp before RowPerBlock, cached
  /// first) where each applies, then cluster rows (block, cluster).
  std::vector<RowTechnique> techniques() const {
    std::vector<RowTechnique> out;
    for (int head : {0, 1})
      for (int vec : kVecs) {
        if (!vec_ok(vec, head)) continue;
        for (int block : kBlocks)
          for (int warp : {1, 0})
            for (int cache : {1, 0}) {
              if (cache && cached_elements(s_, vec, warp ? 32 : block) > kMaxCachedElements) continue;
              const RowLoop k{vec, block, cache == 1, head == 1};
              if (warp)
                out.push_back(RowPerWarp{k});
              else
                out.push_back(RowPerBlock{k});
            }
      }
    for (int block : kClusterBlocks)
      for (int cluster : kClusters)
        if (cluster_ok(s_.max_vec, block, cluster))  // async always, where the vectors allow it
          out.push_back(ClusterRows{s_.max_vec, block, cluster, async_ok(s_.max_vec)});
    return out;
  }

  /// The technique of a variant of this plan's space, else InvalidArgument.
  Result<RowTechnique> technique_of(const Variant& v) const { return technique_in(techniques(), v); }

  /// Plain variants: vec divides the row and its stride; head variants: wider than that, up to head_vec.
  bool vec_ok(int vec, int head) const {
    const bool known = vec == 1 || vec == 2 || vec == 4 || vec == 8;
    if (head) return known && vec > s_.max_vec && vec <= s_.head_vec;
    return known && vec <= s_.max_vec && s_.cols % vec == 0;
  }

  /// Note [Softmax async tiles]: cp.async copies vectors of 4, 8 or 16 bytes.
  bool async_ok(int vec) const { return vec * elem_size(s_.dtype) >= 4; }

  /// Cluster rows: sm_90+, the plain layout's widest vector, at least two vectors a block, the slice within
  /// 227 KB and a grid within 2^31 - 1 blocks.
  bool cluster_ok(int vec, int block, int cluster) const {
    const bool block_ok = block == 256 || block == 512;
    const bool cluster_known = cluster == 1 || cluster == 2 || cluster == 4 || cluster == 8 || cluster == 16;
    return s_.sm >= 90 && vec == s_.max_vec && vec_ok(vec, 0) && block_ok && cluster_known &&
           s_.cols / vec >= 2 * cluster && cluster_row_bytes(s_, vec, cluster) <= kMaxBlockSmem &&
           s_.rows * cluster < (int64_t{1} << 31) - 1;
  }

  SoftmaxShape s_;
};

}  // namespace

std::unique_ptr<Plan> row_plan(SoftmaxShape s) { return std::unique_ptr<Plan>(new SoftmaxPlan(std::move(s))); }

}  // namespace cudal1::optimizer::softmax
