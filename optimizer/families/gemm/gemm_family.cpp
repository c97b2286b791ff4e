/// @brief The gemm family: what it accepts (Note [Padded GEMM]), its technique space (the padded GEMM, and residue
/// rows where the layout allows: Note [Residue rows]), features and binding.
#include "gemm_family.h"

#include "codegen_common.h"

namespace cudal1::optimizer::gemm {
namespace {

constexpr int kPads[] = {8, 64};
constexpr int kOrients[] = {0, 1};
constexpr int kVecs[] = {2, 4, 8};
constexpr int kBlocks[] = {256, 512};
constexpr int kResidueWarps[] = {4, 8};

class GemmPlan final : public Plan {
 public:
  explicit GemmPlan(GemmShape s) : s_(std::move(s)) {}

  std::vector<Variant> space() const override {
    std::vector<Variant> out;
    for (const GemmTechnique& t : techniques()) out.push_back(variant_of(t));
    return out;
  }

  std::vector<float> features(const Variant& v) const override {
    std::vector<float> knobs;
    for (int x : kPads) knobs.push_back(v.get("pad") == x);
    for (int x : kOrients) knobs.push_back(v.get("orient") == x);
    for (int x : kVecs) knobs.push_back(v.get("vec") == x);
    for (int x : kBlocks) knobs.push_back(v.get("block") == x);
    for (int x : kResidueWarps) knobs.push_back(v.get("rows") > 0 && v.get("warps") == x);
    const bool weight_rows = s_.b_strides[0] == 1;  // b is a [N, K] weight seen transposed (nn.Linear)
    const std::vector<float> ctx = {1.f, weight_rows ? 1.f : 0.f, s_.m * s_.n >= (int64_t{1} << 24) ? 1.f : 0.f,
                                    s_.k >= 2048 ? 1.f : 0.f};
    return crossed_features(ctx, knobs);
  }

  int stratum(const Variant& v) const override { return v.get("rows") > 0 ? 2 : v.get("orient"); }

  Result<KernelSource> source(const Variant& v) const override {
    CUDAL1_ASSIGN_OR_RETURN(GemmTechnique t, technique_of(v));
    return std::visit([&](const auto& k) { return k.source(s_); }, t);
  }

  Result<std::unique_ptr<BoundKernel>> bind(const Variant& v, std::shared_ptr<LoadedModule> m) const override {
    if (!m) return Status(Code::kInvalidArgument, "no module");
    CUDAL1_ASSIGN_OR_RETURN(GemmTechnique t, technique_of(v));
    return make_gemm_kernel(s_, t, std::move(m));
  }

 private:
  /// The space in its order: every padded GEMM (pad, then orient, vec, block), then residue rows (warps) where
  /// the layout allows them.
  std::vector<GemmTechnique> techniques() const {
    std::vector<GemmTechnique> out;
    for (int pad : kPads)
      for (int orient : kOrients)
        for (int vec : kVecs)
          for (int block : kBlocks) out.push_back(PaddedGemm{pad, orient, vec, block});
    if (residue_layout(s_))
      for (int warps : kResidueWarps) out.push_back(ResidueRows{warps});
    return out;
  }

  /// The technique of a variant of this plan's space, else InvalidArgument.
  Result<GemmTechnique> technique_of(const Variant& v) const {
    for (const GemmTechnique& t : techniques())
      if (variant_of(t).id() == v.id()) return t;
    return Status(Code::kInvalidArgument, "variant " + v.id() + " is not in this plan's space");
  }

  GemmShape s_;
};

class GemmFamily final : public Family {
 public:
  const char* name() const override { return "gemm"; }
  int version() const override { return 3; }
  std::vector<std::string> ops() const override { return {"mm", "addmm"}; }

  Result<std::unique_ptr<Plan>> plan(const Problem& p) const override {
    CUDAL1_ASSIGN_OR_RETURN(GemmShape s, parse_mm(p));
    return std::unique_ptr<Plan>(new GemmPlan(std::move(s)));
  }
};

}  // namespace

Variant variant_of(const GemmTechnique& t) {
  if (const auto* r = std::get_if<ResidueRows>(&t)) return Variant{{{"rows", kResidueRows}, {"warps", r->warps}}};
  const auto& p = std::get<PaddedGemm>(t);
  return Variant{{{"pad", p.pad}, {"orient", p.orient}, {"vec", p.vec}, {"block", p.block}}};
}

namespace {

/// True when `v` is the number 1 (addmm's beta and alpha as the hook records them: int or double).
bool is_one(const c10::IValue& v) {
  return (v.isInt() && v.toInt() == 1) || (v.isDouble() && v.toDouble() == 1.0);
}

}  // namespace

Result<GemmShape> parse_mm(const Problem& p) {
  const bool addmm = p.op == "addmm";
  if ((p.op != "mm" && !addmm) || !p.overload.empty())
    return Status(Code::kUnsupported, "op " + p.op + " is not in this family");
  if (p.args.size() != (addmm ? 5u : 2u)) return Status(Code::kUnsupported, "unexpected arguments");
  const size_t first = addmm ? 1 : 0;  // addmm(self=bias, mat1, mat2, beta, alpha)
  for (size_t i = 0; i < (addmm ? 3u : 2u); ++i)
    if (!p.args[i].is_tensor || !p.args[i].tensor.defined)
      return Status(Code::kUnsupported, "an operand is not a tensor");
  if (addmm && (!is_one(p.args[3].value) || !is_one(p.args[4].value)))
    return Status(Code::kUnsupported, "addmm with beta or alpha other than 1");
  const auto& a = p.args[first].tensor;
  const auto& b = p.args[first + 1].tensor;
  if (a.sizes.size() != 2 || b.sizes.size() != 2) return Status(Code::kUnsupported, "operands are not matrices");
  if (a.dtype != b.dtype) return Status(Code::kUnsupported, "operand dtypes differ");
  if (a.dtype != c10::ScalarType::Half && a.dtype != c10::ScalarType::BFloat16)
    return Status(Code::kUnsupported, std::string("dtype ") + c10::toString(a.dtype) + " (fp16 and bf16 only)");
  if (p.sm < 80) return Status(Code::kUnsupported, "sm_80+ only");
  GemmShape s;
  s.dtype = a.dtype;
  s.m = a.sizes[0];
  s.k = a.sizes[1];
  s.n = b.sizes[1];
  if (b.sizes[0] != s.k) return Status(Code::kUnsupported, "inner sizes differ (ATen raises)");
  if (s.m == 0 || s.k == 0 || s.n == 0) return Status(Code::kUnsupported, "empty operand");
  if (s.n % 8 == 0) return Status(Code::kUnsupported, "N is a multiple of 8: cuBLAS stores aligned rows already");
  if (s.k % 8 != 0) return Status(Code::kUnsupported, "K is not a multiple of 8: padding N does not mend the loads");
  if (s.m * (s.n + 64) > (int64_t{1} << 40)) return Status(Code::kUnsupported, "too large");
  if (addmm) {
    const auto& bias = p.args[0].tensor;
    if (bias.dtype != s.dtype || bias.sizes != std::vector<int64_t>{s.n} || bias.strides != std::vector<int64_t>{1})
      return Status(Code::kUnsupported, "addmm whose bias is not a contiguous [N] vector of the operands' dtype");
    s.bias = true;
  }
  s.a_strides = a.strides;
  s.b_strides = b.strides;
  s.a_offset = a.storage_offset;
  s.b_offset = b.storage_offset;
  return s;
}

const Family& gemm_family() {
  static const GemmFamily f;
  return f;
}

}  // namespace cudal1::optimizer::gemm
