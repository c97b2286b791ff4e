/// @brief The softmax family's column plan (Note [Softmax columns]): technique space, features and binding.
#include "codegen_common.h"
#include "simple_kernel.h"
#include "softmax_family.h"

namespace cudal1::optimizer::softmax {
namespace {

constexpr int kBlocks[] = {128, 256, 512, 1024};
constexpr int kVecs[] = {1, 2, 4, 8};
constexpr int kSplits[] = {1, 4, 32};

/// Elements one thread keeps in registers when its part of the column is cached.
int64_t cached_elements(const ColumnShape& c, int vec, int split) { return (c.n + split - 1) / split * vec; }

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

  /// 4 + 2 x split class + cache: disjoint from the row plan's 0..3.
  int stratum(const Variant& v) const override {
    const int split = v.get("split", 1);
    return 4 + 2 * (split == 1 ? 0 : split == 4 ? 1 : 2) + v.get("cache");
  }

  Result<KernelSource> source(const Variant& v) const override {
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

  ColumnShape c_;
};

}  // namespace

std::unique_ptr<Plan> column_plan(ColumnShape c) { return std::unique_ptr<Plan>(new ColumnPlan(std::move(c))); }

}  // namespace cudal1::optimizer::softmax
