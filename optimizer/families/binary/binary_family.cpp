/// @brief The binary family: its ops, technique space, policy features and binding (Note [Binary elementwise]).
#include <algorithm>
#include <cmath>

#include "codegen_common.h"
#include "binary_family.h"

namespace cudal1::optimizer::binary {
namespace {

const ElementwiseKnobs kKnobs = {{1, 2, 4, 8}, {128, 256, 512}, {1, 2, 4}};

class BinaryPlan final : public Plan {
 public:
  explicit BinaryPlan(BinaryShape s) : s_(std::move(s)) {}

  std::vector<Variant> space() const override { return elementwise_space(kKnobs, s_.max_vec); }

  std::vector<float> features(const Variant& v) const override {
    const std::vector<float> knobs = elementwise_knob_features(kKnobs, v);
    bool broadcast = false, strided = false, mixed = false;
    for (const auto& o : s_.ins) {
      if (o.kind != OperandKind::kTensor) continue;
      broadcast = broadcast || std::count(o.it_strides.begin(), o.it_strides.end(), 0) > 0;
      strided = strided || (o.it_strides[0] != 0 && o.it_strides[0] != 1);
      mixed = mixed || (o.dtype != s_.out_dtype && o.dtype != c10::ScalarType::Bool);
    }
    const double lg = std::log2(static_cast<double>(std::max<int64_t>(s_.numel, 1)));
    const std::vector<float> ctx = {1.f,
                                    lg < 16 ? 1.f : 0.f,
                                    lg >= 16 && lg < 22 ? 1.f : 0.f,
                                    lg >= 22 ? 1.f : 0.f,
                                    elem_size(s_.out_dtype) == 2 ? 1.f : 0.f,
                                    broadcast ? 1.f : 0.f,
                                    strided ? 1.f : 0.f,
                                    mixed ? 1.f : 0.f};
    return crossed_features(ctx, knobs);
  }

  int stratum(const Variant& v) const override { return v.get("vec") > 1 ? 1 : 0; }

  Result<KernelSource> source(const Variant& v) const override {
    const int vec = v.get("vec", 0), block = v.get("block", 0), unroll = v.get("unroll", 0), grid = v.get("grid", -1);
    if (vec < 1 || vec > s_.max_vec || (vec & (vec - 1)) != 0 || block < 32 || block > 1024 || block % 32 != 0 ||
        unroll < 1 || unroll > 16 || grid < 0 || grid > 1)
      return Status(Code::kInvalidArgument, "variant " + v.id() + " is not in this plan's space");
    return generate_binary(s_, vec, block, unroll, grid == 1);
  }

  Result<std::unique_ptr<BoundKernel>> bind(const Variant& v, std::shared_ptr<LoadedModule> m) const override {
    if (!m) return Status(Code::kInvalidArgument, "no module");
    CUDAL1_RETURN_IF_ERROR(source(v));  // validates the knobs
    const int vec = v.get("vec"), block = v.get("block");
    const int64_t tile = int64_t{block} * v.get("unroll");
    int64_t grid = std::max<int64_t>(1, (s_.numel / vec + tile - 1) / tile);
    if (v.get("grid")) grid = std::min<int64_t>(grid, int64_t{m->sm_count()} * m->max_blocks_per_sm(block));
    return make_binary_kernel(std::move(m), s_, vec, grid, block);
  }

 private:
  BinaryShape s_;
};

class BinaryFamily final : public Family {
 public:
  const char* name() const override { return "binary_elementwise"; }
  int version() const override { return 2; }
  std::vector<std::string> ops() const override {
    return {"add.Tensor", "sub.Tensor", "mul.Tensor", "div.Tensor", "maximum", "minimum", "pow.Tensor_Tensor",
            "where.self", "add.Scalar", "sub.Scalar", "mul.Scalar", "div.Scalar"};
  }
  Result<std::unique_ptr<Plan>> plan(const Problem& p) const override {
    auto s = plan_binary(p);
    if (!s.ok()) return s.status();
    return std::unique_ptr<Plan>(new BinaryPlan(std::move(s).value()));
  }
};

}  // namespace

const Family& binary_family() {
  static const BinaryFamily f;
  return f;
}

}  // namespace cudal1::optimizer::binary
