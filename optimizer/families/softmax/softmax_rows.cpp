/// @brief The softmax family's row plan: the reduced dim is the innermost one that is not size 1; its
/// technique space, features and binding.
#include "codegen_common.h"
#include "simple_kernel.h"
#include "softmax_family.h"

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
    for (int head : {0, 1})
      for (int vec : kVecs) {
        if (!vec_ok(vec, head)) continue;
        for (int block : kBlocks)
          for (int warp : {1, 0})
            for (int cache : {1, 0}) {
              if (cache && cached_elements(s_, vec, warp ? 32 : block) > kMaxCachedElements) continue;
              Variant v{{{"vec", vec}, {"block", block}, {"warp", warp}, {"cache", cache}}};
              if (head) v.knobs.emplace_back("head", 1);
              out.push_back(std::move(v));
            }
      }
    for (int block : kClusterBlocks)
      for (int cluster : kClusters)
        if (cluster_ok(s_.max_vec, block, cluster)) {
          Variant v{{{"vec", s_.max_vec}, {"block", block}, {"cluster", cluster}}};
          if (async_ok(s_.max_vec)) v.knobs.emplace_back("async", 1);  // always, where the vectors allow it
          out.push_back(std::move(v));
        }
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
    if (v.get("cluster", 0)) {
      const int vec = v.get("vec", 0), block = v.get("block", 0), cluster = v.get("cluster", 0);
      const int async = v.get("async", 0);
      if (v.knobs.size() != (async ? 4u : 3u) || async != (async_ok(vec) ? 1 : 0) || !cluster_ok(vec, block, cluster))
        return Status(Code::kInvalidArgument, "variant " + v.id() + " is not in this plan's space");
      return generate_softmax_cluster_rows(s_, vec, block, cluster, async == 1);
    }
    const int vec = v.get("vec", 0), block = v.get("block", 0), warp = v.get("warp", -1), cache = v.get("cache", -1);
    const int head = v.get("head", 0);
    const bool block_ok = block == 128 || block == 256 || block == 512 || block == 1024;
    if (head < 0 || head > 1 || v.knobs.size() != (head ? 5u : 4u) || !vec_ok(vec, head) || !block_ok || warp < 0 ||
        warp > 1 || cache < 0 || cache > 1 ||
        (cache && cached_elements(s_, vec, warp ? 32 : block) > kMaxCachedElements))
      return Status(Code::kInvalidArgument, "variant " + v.id() + " is not in this plan's space");
    return generate_softmax(s_, vec, block, warp == 1, cache == 1, head == 1);
  }

  Result<std::unique_ptr<BoundKernel>> bind(const Variant& v, std::shared_ptr<LoadedModule> m) const override {
    if (!m) return Status(Code::kInvalidArgument, "no module");
    CUDAL1_RETURN_IF_ERROR(source(v));
    const int vec = v.get("vec"), block = v.get("block");
    if (const int cluster = v.get("cluster", 0))
      return std::unique_ptr<BoundKernel>(new SimpleKernel(
          std::move(m), OutputSpec{s_.dtype, s_.sizes, s_.out_strides}, s_.sizes, s_.in_strides,
          int64_t{vec} * elem_size(s_.dtype), s_.rows * cluster, block, s_.log ? 4.0 : 0.0,
          cluster_row_bytes(s_, vec, cluster), cluster));
    const int64_t rows_per_block = v.get("warp") ? block / 32 : 1;
    const int64_t grid = (s_.rows + rows_per_block - 1) / rows_per_block;
    return std::unique_ptr<BoundKernel>(new SimpleKernel(std::move(m), OutputSpec{s_.dtype, s_.sizes, s_.out_strides},
                                                         s_.sizes, s_.in_strides, vec * elem_size(s_.dtype), grid,
                                                         block, s_.log ? 4.0 : 0.0));
  }

 private:
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
