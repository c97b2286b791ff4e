/// @brief The softmax family: what it accepts, its technique space, features and binding.
#include "softmax_family.h"

#include <cmath>

#include "codegen_common.h"
#include "cudal1/optimizer/layout.h"
#include "simple_kernel.h"

namespace cudal1::optimizer::softmax {
namespace {

constexpr int kBlocks[] = {128, 256, 512, 1024};
constexpr int kVecs[] = {1, 2, 4, 8};

int cached_elements(const SoftmaxShape& s, int vec, int tpr) {
  const int64_t nv = s.cols / vec;
  return static_cast<int>((nv + tpr - 1) / tpr) * vec;
}

class SoftmaxPlan final : public Plan {
 public:
  explicit SoftmaxPlan(SoftmaxShape s) : s_(std::move(s)) {}

  std::vector<Variant> space() const override {
    std::vector<Variant> out;
    for (int vec : kVecs) {
      if (vec > s_.max_vec) continue;
      for (int block : kBlocks)
        for (int warp : {1, 0})
          for (int cache : {1, 0}) {
            if (cache && cached_elements(s_, vec, warp ? 32 : block) > kMaxCachedElements) continue;
            out.push_back(Variant{{{"vec", vec}, {"block", block}, {"warp", warp}, {"cache", cache}}});
          }
    }
    return out;
  }

  std::vector<float> features(const Variant& v) const override {
    std::vector<float> knobs;
    for (int x : kVecs) knobs.push_back(v.get("vec") == x);
    for (int x : kBlocks) knobs.push_back(v.get("block") == x);
    knobs.push_back(v.get("warp") == 1);
    knobs.push_back(v.get("warp") == 0);
    knobs.push_back(v.get("cache") == 1);
    knobs.push_back(v.get("cache") == 0);
    const std::vector<float> ctx = {1.f,
                         s_.cols <= 1024 ? 1.f : 0.f,
                         s_.cols > 1024 && s_.cols <= 8192 ? 1.f : 0.f,
                         s_.cols > 8192 ? 1.f : 0.f,
                         elem_size(s_.dtype) == 2 ? 1.f : 0.f,
                         s_.log ? 1.f : 0.f};
    return crossed_features(ctx, knobs);
  }

  int stratum(const Variant& v) const override { return v.get("warp") * 2 + v.get("cache"); }

  Result<KernelSource> source(const Variant& v) const override {
    const int vec = v.get("vec", 0), block = v.get("block", 0), warp = v.get("warp", -1), cache = v.get("cache", -1);
    const bool block_ok = block == 128 || block == 256 || block == 512 || block == 1024;
    if (vec < 1 || vec > s_.max_vec || s_.cols % vec != 0 || !block_ok || warp < 0 || warp > 1 || cache < 0 ||
        cache > 1 || (cache && cached_elements(s_, vec, warp ? 32 : block) > kMaxCachedElements))
      return Status(Code::kInvalidArgument, "variant " + v.id() + " is not in this plan's space");
    return generate_softmax(s_, vec, block, warp == 1, cache == 1);
  }

  Result<std::unique_ptr<BoundKernel>> bind(const Variant& v, std::shared_ptr<LoadedModule> m) const override {
    if (!m) return Status(Code::kInvalidArgument, "no module");
    CUDAL1_RETURN_IF_ERROR(source(v));
    const int vec = v.get("vec"), block = v.get("block");
    const int64_t rows_per_block = v.get("warp") ? block / 32 : 1;
    const int64_t grid = (s_.rows + rows_per_block - 1) / rows_per_block;
    return std::unique_ptr<BoundKernel>(new SimpleKernel(std::move(m), OutputSpec{s_.dtype, s_.sizes, s_.out_strides},
                                                         s_.sizes, s_.in_strides, vec * elem_size(s_.dtype), grid,
                                                         block, s_.log ? 4.0 : 0.0));
  }

 private:
  SoftmaxShape s_;
};

class SoftmaxFamily final : public Family {
 public:
  const char* name() const override { return "softmax"; }
  int version() const override { return 2; }  // 2: row reductions from codegen_common
  std::vector<std::string> ops() const override { return {"_softmax", "_log_softmax"}; }

  Result<std::unique_ptr<Plan>> plan(const Problem& p) const override {
    if ((p.op != "_softmax" && p.op != "_log_softmax") || !p.overload.empty())
      return Status(Code::kUnsupported, "op " + p.op + " is not in this family");
    if (p.args.size() != 3 || !p.args[0].is_tensor || !p.args[0].tensor.defined || !p.args[1].value.isInt() ||
        !p.args[2].value.isBool())
      return Status(Code::kUnsupported, "unexpected arguments");
    if (p.args[2].value.toBool()) return Status(Code::kUnsupported, "half_to_float=True");
    const auto& t = p.args[0].tensor;
    SoftmaxShape s;
    s.log = p.op == "_log_softmax";
    s.dtype = t.dtype;
    if (!generated_dtype(s.dtype)) return Status(Code::kUnsupported, std::string("dtype ") + c10::toString(s.dtype));
    if (s.dtype == c10::ScalarType::BFloat16 && p.sm < 80) return Status(Code::kUnsupported, "bf16 needs sm_80+");
    const int64_t nd = static_cast<int64_t>(t.sizes.size());
    if (nd == 0) return Status(Code::kUnsupported, "0-d tensor");
    int64_t dim = p.args[1].value.toInt();
    if (dim < 0) dim += nd;
    if (dim != nd - 1) return Status(Code::kUnsupported, "softmax over an outer dimension");
    s.cols = t.sizes.back();
    if (s.cols != 1 && t.strides.back() != 1) return Status(Code::kUnsupported, "softmax dimension not contiguous");
    int64_t numel = 1;
    for (int64_t x : t.sizes) numel *= x;
    if (numel == 0) return Status(Code::kUnsupported, "empty tensor");
    if (s.cols > (int64_t{1} << 30)) return Status(Code::kUnsupported, "rows too long");
    // Outer dimensions must form rows with one uniform stride (size-1 dimensions ignored).
    s.rows = numel / s.cols;
    s.row_stride = s.cols;
    int64_t expect = -1;
    for (int64_t d = nd - 2; d >= 0; --d) {
      if (t.sizes[d] == 1) continue;
      if (expect < 0) {
        s.row_stride = t.strides[d];
      } else if (t.strides[d] != expect) {
        return Status(Code::kUnsupported, "rows do not have one uniform stride");
      }
      expect = t.strides[d] * t.sizes[d];
    }
    if (s.rows > 1 && s.row_stride < s.cols) return Status(Code::kUnsupported, "overlapping rows");
    if (s.rows >= (int64_t{1} << 31)) return Status(Code::kUnsupported, "too many rows");
    s.sizes = t.sizes;
    s.in_strides = t.strides;
    s.out_strides = contiguous_strides(t.sizes);  // ATen writes softmax into a contiguous tensor
    const int es = elem_size(s.dtype);
    s.max_vec = 16 / es;
    while (s.max_vec > 1 && (s.cols % s.max_vec != 0 || (s.rows > 1 && s.row_stride % s.max_vec != 0) ||
                             (t.storage_offset * es) % (s.max_vec * es) != 0))
      s.max_vec /= 2;
    return std::unique_ptr<Plan>(new SoftmaxPlan(std::move(s)));
  }
};

}  // namespace

const Family& softmax_family() {
  static const SoftmaxFamily f;
  return f;
}

}  // namespace cudal1::optimizer::softmax
