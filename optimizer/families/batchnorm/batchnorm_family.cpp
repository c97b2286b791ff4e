/// @brief The batch-norm family: what it accepts (Note [Batch norm inference]), its technique space, features
/// and binding.
#include "batchnorm_family.h"

#include <type_traits>

#include "args.h"
#include "codegen_common.h"
#include "cudal1/optimizer/layout.h"

namespace cudal1::optimizer::batchnorm {
namespace {

constexpr int kVecs[] = {1, 2, 4, 8};
constexpr int kBlocks[] = {64, 128, 256, 512};
constexpr int kRpts[] = {1, 4, 16};

/// A per-channel parameter at `a`: absent (None or undefined), or a contiguous 1-d [C] tensor.
Result<const dispatcher::TensorSpec*> channel_param(const dispatcher::ArgSpec& a, int64_t channels, const char* what) {
  if (!a.is_tensor) {
    if (a.value.isNone()) return static_cast<const dispatcher::TensorSpec*>(nullptr);
    return Status(Code::kUnsupported, std::string(what) + " is not a tensor");
  }
  if (!a.tensor.defined) return static_cast<const dispatcher::TensorSpec*>(nullptr);
  if (a.tensor.sizes != std::vector<int64_t>{channels} || !contiguous(a.tensor))
    return Status(Code::kUnsupported, std::string(what) + " is not a contiguous [C] vector");
  return &a.tensor;
}

/// Largest vector width the flat view allows (Note [Batch norm inference]).
int max_vec(const BnShape& s) {
  for (int v = 16 / elem_size(s.dtype); v > 1; v /= 2)
    if (s.storage_offset % v == 0 && (s.inner % v == 0 || (s.inner == 1 && s.channels % v == 0))) return v;
  return 1;
}

/// The output strides ATen gives cudnn_batch_norm (contiguous in x's suggested memory format), or Unsupported
/// when x is not contiguous in that format (ATen throws) or the format is ambiguous to us.
Result<std::vector<int64_t>> cudnn_out_strides(const dispatcher::TensorSpec& t) {
  const auto& sz = t.sizes;
  if (sz.size() == 4 && channels_last_strides_2d(sz, t.strides)) {
    const auto cl = channels_last_strides(sz);
    for (size_t d = 0; d < sz.size(); ++d)
      if (sz[d] != 1 && t.strides[d] != cl[d]) return Status(Code::kUnsupported, "input not channels-last contiguous");
    return cl;
  }
  // 5-d: ATen's is_channels_last_strides_3d is false for exactly contiguous strides unless C * D * H * W == 1;
  // other strides of size-1 dims could tip it, so only those are taken.
  if (sz.size() == 5 && (sz[1] * sz[2] * sz[3] * sz[4] == 1 || t.strides != contiguous_strides(sz)))
    return Status(Code::kUnsupported, "5-d input whose suggested format is not plainly contiguous");
  if (!contiguous(t)) return Status(Code::kUnsupported, "input not contiguous in its suggested format");
  return contiguous_strides(sz);
}

class BnPlan final : public Plan {
 public:
  explicit BnPlan(BnShape s) : s_(std::move(s)) {}

  std::vector<Variant> space() const override {
    std::vector<Variant> out;
    for (const BnTechnique& t : techniques()) out.push_back(variant_of(t));
    return out;
  }

  std::vector<float> features(const Variant& v) const override {
    std::vector<float> knobs;
    for (int m = 0; m < 3; ++m) knobs.push_back(v.get("mode") == m);
    for (int x : kVecs) knobs.push_back(v.get("vec") == x);
    for (int x : kBlocks) knobs.push_back(v.get("block") == x);
    for (int x : kRpts) knobs.push_back(v.get("rpt") == x);
    const std::vector<float> ctx = {1.f,
                                    s_.inner == 1 ? 1.f : 0.f,
                                    s_.inner > 1 && s_.inner < 1024 ? 1.f : 0.f,
                                    s_.inner >= 1024 ? 1.f : 0.f,
                                    s_.numel < (int64_t{1} << 20) ? 1.f : 0.f,
                                    elem_size(s_.dtype) == 2 ? 1.f : 0.f};
    return crossed_features(ctx, knobs);
  }

  int stratum(const Variant& v) const override { return v.get("mode"); }

  Result<KernelSource> source(const Variant& v) const override {
    CUDAL1_ASSIGN_OR_RETURN(BnTechnique t, technique_of(v));
    return generate_batchnorm(s_, t);
  }

  Result<std::unique_ptr<BoundKernel>> bind(const Variant& v, std::shared_ptr<LoadedModule> m) const override {
    if (!m) return Status(Code::kInvalidArgument, "no module");
    CUDAL1_ASSIGN_OR_RETURN(BnTechnique t, technique_of(v));
    return make_batchnorm_kernel(s_, t, std::move(m));
  }

 private:
  /// The space in its order (vec, then block, then technique, then rpt): each technique where it applies.
  std::vector<BnTechnique> techniques() const {
    std::vector<BnTechnique> out;
    for (int vec : kVecs) {
      if (vec > s_.max_vec) continue;
      for (int block : kBlocks) {
        if (block >= 128) out.push_back(FlatVectors{vec, block});
        if (s_.inner > 1 && s_.inner % vec == 0 && s_.inner >= 64 && (block == 64 || block * vec <= 2 * s_.inner))
          out.push_back(PlanePerBlock{vec, block});
        if (s_.inner == 1 && s_.channels % vec == 0)
          for (int rpt : kRpts) {
            const ChannelColumns c{vec, block, rpt};
            if ((rpt == 1 || rpt <= s_.rows()) && c.grid(s_) <= (int64_t{1} << 31) - 1) out.push_back(c);
          }
      }
    }
    return out;
  }

  /// The technique of a variant of this plan's space, else InvalidArgument.
  Result<BnTechnique> technique_of(const Variant& v) const {
    for (const BnTechnique& t : techniques())
      if (variant_of(t).id() == v.id()) return t;
    return Status(Code::kInvalidArgument, "variant " + v.id() + " is not in this plan's space");
  }

  BnShape s_;
};

class BnFamily final : public Family {
 public:
  const char* name() const override { return "batchnorm"; }
  int version() const override { return 2; }
  std::vector<std::string> ops() const override { return {"cudnn_batch_norm", "native_batch_norm"}; }

  Result<std::unique_ptr<Plan>> plan(const Problem& p) const override {
    CUDAL1_ASSIGN_OR_RETURN(BnShape s, parse_batch_norm(p));
    return std::unique_ptr<Plan>(new BnPlan(std::move(s)));
  }
};

}  // namespace

Variant variant_of(const BnTechnique& t) {
  return std::visit(
      [](const auto& k) {
        int rpt = 1;
        if constexpr (std::is_same_v<std::decay_t<decltype(k)>, ChannelColumns>) rpt = k.rpt;
        return Variant{{{"mode", k.kMode}, {"vec", k.vec}, {"block", k.block}, {"rpt", rpt}}};
      },
      t);
}

Result<BnShape> parse_batch_norm(const Problem& p) {
  if (!p.overload.empty()) return Status(Code::kUnsupported, "overload " + p.overload);
  if (p.op != "cudnn_batch_norm" && p.op != "native_batch_norm")
    return Status(Code::kUnsupported, "op " + p.op + " is not in this family");
  const bool cudnn = p.op == "cudnn_batch_norm";
  if (p.args.size() != 8) return Status(Code::kUnsupported, "unexpected arguments");
  if (!p.args[0].is_tensor || !p.args[0].tensor.defined) return Status(Code::kUnsupported, "input is not a tensor");
  const auto& x = p.args[0].tensor;
  BnShape s;
  s.cudnn = cudnn;
  s.dtype = x.dtype;
  if (!generated_dtype(s.dtype)) return Status(Code::kUnsupported, std::string("dtype ") + c10::toString(s.dtype));
  if (s.dtype == c10::ScalarType::BFloat16 && p.sm < 80) return Status(Code::kUnsupported, "bf16 needs sm_80+");
  if (!p.args[5].value.isBool() || p.args[5].value.toBool())
    return Status(Code::kUnsupported, "training (batch statistics)");
  if (!p.args[7].value.isDouble()) return Status(Code::kUnsupported, "eps is not a float");
  if (x.sizes.size() < 2 || x.sizes.size() > 5) return Status(Code::kUnsupported, "rank outside 2-5");
  s.sizes = x.sizes;
  s.strides = x.strides;
  s.storage_offset = x.storage_offset;
  s.channels = x.sizes[1];
  s.numel = 1;
  for (int64_t d : x.sizes) s.numel *= d;
  if (s.numel == 0) return Status(Code::kUnsupported, "empty tensor");
  if (!non_overlapping_and_dense(x.sizes, x.strides)) return Status(Code::kUnsupported, "input not dense");
  s.inner = s.channels == 1 ? s.numel : x.strides[1];

  CUDAL1_ASSIGN_OR_RETURN(const dispatcher::TensorSpec* w, channel_param(p.args[1], s.channels, "weight"));
  CUDAL1_ASSIGN_OR_RETURN(const dispatcher::TensorSpec* b, channel_param(p.args[2], s.channels, "bias"));
  CUDAL1_ASSIGN_OR_RETURN(const dispatcher::TensorSpec* rm, channel_param(p.args[3], s.channels, "running_mean"));
  CUDAL1_ASSIGN_OR_RETURN(const dispatcher::TensorSpec* rv, channel_param(p.args[4], s.channels, "running_var"));
  if (!rm || !rv) return Status(Code::kUnsupported, "no running statistics");
  s.param_dtype = rm->dtype;
  for (const auto* t : {w, b, rm, rv})
    if (t && t->dtype != s.param_dtype) return Status(Code::kUnsupported, "parameter dtypes differ");
  if (s.param_dtype != s.dtype && s.param_dtype != c10::ScalarType::Float)
    return Status(Code::kUnsupported, "parameter dtype is neither the input's nor fp32");
  s.has_weight = w != nullptr;
  s.has_bias = b != nullptr;
  s.eps = static_cast<float>(p.args[7].value.toDouble());  // ATen and cuDNN compute with eps in fp32

  if (cudnn) {
    if (!w || !b) return Status(Code::kUnsupported, "cudnn_batch_norm without weight or bias");
    if (s.dtype == c10::ScalarType::BFloat16) return Status(Code::kUnsupported, "bf16 cudnn_batch_norm");
    if (s.dtype == c10::ScalarType::Half ? s.param_dtype != c10::ScalarType::Float : s.param_dtype != s.dtype)
      return Status(Code::kUnsupported, "parameter dtype cuDNN rejects");
    CUDAL1_ASSIGN_OR_RETURN(s.out_strides, cudnn_out_strides(x));
  } else {
    s.out_strides = x.strides;  // empty_like of a dense tensor keeps its strides
  }
  s.max_vec = max_vec(s);
  return s;
}

const Family& batchnorm_family() {
  static const BnFamily f;
  return f;
}

}  // namespace cudal1::optimizer::batchnorm
