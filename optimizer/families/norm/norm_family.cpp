/// @brief The normalisation family: what it accepts (Note [Norm rows]), its technique space, features and binding.
#include "norm_family.h"

#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#include <optional>
#include <type_traits>

#include "args.h"
#include "codegen_common.h"

namespace cudal1::optimizer::norm {
namespace {

constexpr int kBlocks[] = {128, 256, 512, 1024};
constexpr int kVecs[] = {1, 2, 4, 8};
constexpr int kSplits[] = {4, 16, 64, 256, 1024};
constexpr int kHeldClusters[] = {1, 2, 4, 8, 16};  ///< mode 7: blocks per row (Note [Norm held])
constexpr int kHeldChunkKb[] = {16, 32};           ///< mode 7: bulk copy sizes

/// The optional affine parameter at `a`: absent (None or undefined), or a contiguous tensor of `numel` elements
/// of `dtype`. Unsupported otherwise (mixed dtypes, strided parameters).
Result<const dispatcher::TensorSpec*> affine_param(const dispatcher::ArgSpec& a, c10::ScalarType dtype, int64_t numel,
                                                   const char* what) {
  if (!a.is_tensor) {
    if (a.value.isNone()) return static_cast<const dispatcher::TensorSpec*>(nullptr);
    return Status(Code::kUnsupported, std::string(what) + " is not a tensor");
  }
  if (!a.tensor.defined) return static_cast<const dispatcher::TensorSpec*>(nullptr);
  if (a.tensor.dtype != dtype) return Status(Code::kUnsupported, std::string(what) + " dtype differs from the input's");
  int64_t n = 1;
  for (int64_t x : a.tensor.sizes) n *= x;
  if (n != numel || !contiguous(a.tensor)) return Status(Code::kUnsupported, std::string(what) + " layout");
  return &a.tensor;
}

/// Largest vector width (elements) that every row, the parameters' offsets and the group layout allow.
int max_vec(const NormShape& s, const std::vector<const dispatcher::TensorSpec*>& tensors) {
  const int es = elem_size(s.dtype);
  int v = 16 / es;
  auto ok = [&](int vec) {
    if (s.cols % vec != 0 || (s.group && s.hw % vec != 0)) return false;
    for (const auto* t : tensors)
      if (t && t->storage_offset % vec != 0) return false;
    return true;
  };
  while (v > 1 && !ok(v)) v /= 2;
  return v;
}

int cached_elements(const NormShape& s, int vec, int tpr) {
  const int64_t nv = s.cols / vec;
  return static_cast<int>(std::min<int64_t>((nv + tpr - 1) / tpr, 1 << 20)) * vec;
}

class NormPlan final : public Plan {
 public:
  explicit NormPlan(NormShape s) : s_(std::move(s)) {}

  std::vector<Variant> space() const override {
    std::vector<Variant> out;
    for (const NormTechnique& t : techniques()) out.push_back(variant_of(t));
    return out;
  }

  std::vector<float> features(const Variant& v) const override {
    // The layout stored policies were learned on (Family::features_version): the places of modes 3-6 and of knobs
    // no technique has stay, always 0.
    std::vector<float> knobs;
    for (int x : kVecs) knobs.push_back(v.get("vec") == x);
    for (int x : kBlocks) knobs.push_back(v.get("block") == x);
    for (int m = 0; m < 9; ++m) knobs.push_back(v.get("mode") == m);
    knobs.push_back(v.get("cache") == 1);
    knobs.push_back(v.get("cache") == 0);
    knobs.push_back(v.get("splits") == 1);
    for (int x : kSplits) knobs.push_back(v.get("splits") == x);
    knobs.push_back(v.get("rev") == 1);
    knobs.push_back(v.get("rev") == 0);
    knobs.insert(knobs.end(), 3, 0.f);  // chunk 8, chunk 16, ahead
    for (int x : kHeldClusters) knobs.push_back(v.get("cluster") == x);
    knobs.insert(knobs.end(), 5, 0.f);  // occ 2, step 4, step 8, ring 3, per 8
    knobs.push_back(v.get("ckb") == 32);
    knobs.push_back(v.get("deep") == 1);
    const std::vector<float> ctx = {1.f,
                         s_.cols <= 1024 ? 1.f : 0.f,
                         s_.cols > 1024 && s_.cols <= 16384 ? 1.f : 0.f,
                         s_.cols > 16384 ? 1.f : 0.f,
                         s_.rows < 264 ? 1.f : 0.f,
                         elem_size(s_.dtype) == 2 ? 1.f : 0.f,
                         s_.group ? 1.f : 0.f};
    return crossed_features(ctx, knobs);
  }

  int stratum(const Variant& v) const override {
    return v.get("mode") * 2 + v.get("cache") + v.get("deep");
  }

  Result<KernelSource> source(const Variant& v) const override {
    CUDAL1_ASSIGN_OR_RETURN(NormTechnique t, technique_of(v));
    return generate_norm(s_, t);
  }

  Result<std::unique_ptr<BoundKernel>> bind(const Variant& v, std::shared_ptr<LoadedModule> m) const override {
    if (!m) return Status(Code::kInvalidArgument, "no module");
    CUDAL1_ASSIGN_OR_RETURN(NormTechnique t, technique_of(v));
    return make_norm_kernel(s_, t, std::move(m));
  }

 private:
  /// The space in its order: for each vec, then block, RowPerWarp (short rows), RowPerBlock (cached first where
  /// the row fits the registers, then streamed) and SplitRow (each splits, forward then reversed); then
  /// HeldCluster and HeldGrid where they apply.
  std::vector<NormTechnique> techniques() const {
    std::vector<NormTechnique> out;
    for (int vec : kVecs) {
      if (vec > s_.max_vec) continue;
      for (int block : kBlocks) {
        if (s_.cols <= 16384)  // warp per row: short rows
          for (bool cache : {true, false})
            if (!cache || cached_elements(s_, vec, 32) <= kMaxCachedElements)
              out.push_back(RowPerWarp{{vec, block}, cache});
        for (bool cache : {true, false})
          if (!cache || cached_elements(s_, vec, block) <= kMaxCachedElements)
            out.push_back(RowPerBlock{{vec, block}, cache});
        if (split_rows())
          for (int splits : kSplits) {
            const SplitRow k{{vec, block}, splits, false};
            if (k.chunk_vectors(s_) < block || s_.rows * splits > (int64_t{1} << 22)) continue;
            for (bool rev : {false, true}) out.push_back(SplitRow{{vec, block}, splits, rev});
          }
      }
    }
    add_held_techniques(&out);
    return out;
  }

  /// The technique of a variant of this plan's space, else InvalidArgument.
  Result<NormTechnique> technique_of(const Variant& v) const {
    for (const NormTechnique& t : techniques())
      if (variant_of(t).id() == v.id()) return t;
    return Status(Code::kInvalidArgument, "variant " + v.id() + " is not in this plan's space");
  }

  /// Rows long and few enough to split over blocks: where SplitRow and the held rows are offered.
  bool split_rows() const { return s_.cols >= 4096 && s_.rows <= 4096; }

  /// HeldCluster (Note [Norm held]), where SplitRow is offered, on sm_90+ with 16-byte vectors: blocks of 256 and
  /// 512 consumers, the two smallest cluster sizes whose slices fit, 16 and 32 KB chunks, tight and deep rings;
  /// HeldGrid with the same knobs over the fewest grid blocks whose registers hold the row.
  void add_held_techniques(std::vector<NormTechnique>* out) const {
    if (!split_rows()) return;
    for (int block : {256, 512}) {
      int sizes = 0;
      for (int cluster : kHeldClusters) {
        bool any = false;
        for (int kb : kHeldChunkKb)
          for (bool deep : {false, true}) {
            const HeldCluster k{{s_.max_vec, block}, cluster, kb, deep};
            if (k.fits(s_)) out->push_back(k), any = true;
          }
        if (any && ++sizes == 2) break;
      }
    }
    const int parts = static_cast<int>(std::min<int64_t>(HeldGrid::parts_for(s_, s_.max_vec), 1 << 20));
    for (int block : {256, 512})
      for (int kb : kHeldChunkKb)
        for (bool deep : {false, true}) {
          const HeldGrid k{{s_.max_vec, block}, parts, kb, deep};
          if (k.fits(s_)) out->push_back(k);
        }
  }

  NormShape s_;
};

/// Checks what both ops share; fills dtype, sizes, strides.
Status common_input(const Problem& p, NormShape* s) {
  if (!p.args[0].is_tensor || !p.args[0].tensor.defined) return Status(Code::kUnsupported, "input is not a tensor");
  const auto& t = p.args[0].tensor;
  s->dtype = t.dtype;
  s->sm = p.sm;
  if (!generated_dtype(s->dtype)) return Status(Code::kUnsupported, std::string("dtype ") + c10::toString(s->dtype));
  if (s->dtype == c10::ScalarType::BFloat16 && p.sm < 80) return Status(Code::kUnsupported, "bf16 needs sm_80+");
  if (!contiguous(t)) return Status(Code::kUnsupported, "input not contiguous");
  int64_t numel = 1;
  for (int64_t x : t.sizes) numel *= x;
  if (numel == 0) return Status(Code::kUnsupported, "empty tensor");
  s->sizes = t.sizes;
  s->strides = t.strides;
  return Status();
}

Status finish(const Problem& p, NormShape* s, const dispatcher::TensorSpec* w, const dispatcher::TensorSpec* b,
              const c10::IValue& eps) {
  if (!eps.isDouble()) return Status(Code::kUnsupported, "eps is not a float");
  s->eps = static_cast<float>(eps.toDouble());  // ATen computes with eps in the accumulation type...
  if (s->round_stats)  // ...except group norm, which passes eps as the input's dtype
    s->eps = s->dtype == c10::ScalarType::Half ? static_cast<float>(c10::Half(s->eps))
                                               : static_cast<float>(c10::BFloat16(s->eps));
  s->has_weight = w != nullptr;
  s->has_bias = b != nullptr;
  if (s->cols > (int64_t{1} << 28)) return Status(Code::kUnsupported, "rows too long");
  if (s->rows >= (int64_t{1} << 31)) return Status(Code::kUnsupported, "too many rows");
  s->max_vec = max_vec(*s, {&p.args[0].tensor, w, b});
  return Status();
}

Result<NormShape> plan_layer_norm(const Problem& p) {
  if (p.args.size() != 5) return Status(Code::kUnsupported, "unexpected arguments");
  NormShape s;
  CUDAL1_RETURN_IF_ERROR(common_input(p, &s));
  const auto shape = int_list(p.args[1].value);
  const int64_t nd = static_cast<int64_t>(s.sizes.size());
  if (!shape || shape->empty() || static_cast<int64_t>(shape->size()) > nd)
    return Status(Code::kUnsupported, "normalized_shape");
  const int64_t axis = nd - static_cast<int64_t>(shape->size());
  s.rows = 1;
  s.cols = 1;
  for (int64_t d = 0; d < nd; ++d) {
    if (d < axis) {
      s.rows *= s.sizes[d];
      s.stat_sizes.push_back(s.sizes[d]);
    } else {
      if ((*shape)[d - axis] != s.sizes[d]) return Status(Code::kUnsupported, "normalized_shape does not match");
      s.cols *= s.sizes[d];
      s.stat_sizes.push_back(1);
    }
  }
  s.stat_dtype = c10::ScalarType::Float;  // ATen: the accumulation type
  CUDAL1_ASSIGN_OR_RETURN(const dispatcher::TensorSpec* w, affine_param(p.args[2], s.dtype, s.cols, "weight"));
  CUDAL1_ASSIGN_OR_RETURN(const dispatcher::TensorSpec* b, affine_param(p.args[3], s.dtype, s.cols, "bias"));
  CUDAL1_RETURN_IF_ERROR(finish(p, &s, w, b, p.args[4].value));
  return s;
}

Result<NormShape> plan_group_norm(const Problem& p) {
  if (p.args.size() != 8) return Status(Code::kUnsupported, "unexpected arguments");
  NormShape s;
  s.group = true;
  CUDAL1_RETURN_IF_ERROR(common_input(p, &s));
  const auto n = int_value(p.args[3].value), c = int_value(p.args[4].value), hw = int_value(p.args[5].value),
             g = int_value(p.args[6].value);
  if (!n || !c || !hw || !g || *g <= 0 || *c <= 0 || *c % *g != 0) return Status(Code::kUnsupported, "group arguments");
  int64_t inner = 1;
  for (size_t d = 2; d < s.sizes.size(); ++d) inner *= s.sizes[d];
  if (s.sizes.size() < 2 || s.sizes[0] != *n || s.sizes[1] != *c || inner != *hw)
    return Status(Code::kUnsupported, "N, C, HxW do not match the input");
  s.groups = *g;
  s.channels_per_group = *c / *g;
  s.hw = *hw;
  s.rows = *n * *g;
  s.cols = s.channels_per_group * s.hw;
  s.stat_sizes = {*n, *g};
  s.stat_dtype = s.dtype;  // ATen: the input's dtype unless the parameters' differ (declined below)
  s.round_stats = s.dtype != c10::ScalarType::Float;
  CUDAL1_ASSIGN_OR_RETURN(const dispatcher::TensorSpec* w, affine_param(p.args[1], s.dtype, *c, "weight"));
  CUDAL1_ASSIGN_OR_RETURN(const dispatcher::TensorSpec* b, affine_param(p.args[2], s.dtype, *c, "bias"));
  CUDAL1_RETURN_IF_ERROR(finish(p, &s, w, b, p.args[7].value));
  return s;
}

class NormFamily final : public Family {
 public:
  const char* name() const override { return "norm"; }
  // 6: cp.async from codegen_common (Note [Async copies]; same cubins); 7: mode 7 (Note [Norm held]), 8: mode 8,
  // so that cached choices are tuned again over the larger space; 9: mode 8 writes a row and takes the next one
  // chunk by chunk (new timings)
  // 10: each technique a class and its device code in norm_*.cuh files (same cubins); 11: RowGroups, ClusterSlices,
  // RingSteps and TicketParts (modes 3-6) dropped (the kept variants' cubins unchanged); 12: codegen_common's row
  // reductions in framework/row_reduce.cuh on typed constants, not TPR, BLOCK and ROW_BARRIER (same cubins)
  int version() const override { return 12; }
  std::vector<std::string> ops() const override { return {"native_layer_norm", "native_group_norm"}; }

  Result<std::unique_ptr<Plan>> plan(const Problem& p) const override {
    if (!p.overload.empty()) return Status(Code::kUnsupported, "overload " + p.overload);
    Result<NormShape> s = Status(Code::kUnsupported, "op " + p.op + " is not in this family");
    if (p.op == "native_layer_norm") s = plan_layer_norm(p);
    if (p.op == "native_group_norm") s = plan_group_norm(p);
    if (!s.ok()) return s.status();
    return std::unique_ptr<Plan>(new NormPlan(std::move(s).value()));
  }
};

}  // namespace

Variant variant_of(const NormTechnique& t) {
  return std::visit(
      [](const auto& k) {
        using K = std::decay_t<decltype(k)>;
        int cache = 0, splits = 1, rev = 0;
        if constexpr (std::is_same_v<K, RowPerWarp> || std::is_same_v<K, RowPerBlock>) cache = k.cache ? 1 : 0;
        if constexpr (std::is_same_v<K, SplitRow>) splits = k.splits, rev = k.reverse ? 1 : 0;
        Variant v{{{"mode", K::kMode}, {"vec", k.vec}, {"block", k.block}, {"cache", cache}, {"splits", splits},
                   {"rev", rev}}};
        if constexpr (std::is_same_v<K, HeldCluster>)
          v.knobs.insert(v.knobs.end(), {{"cluster", k.cluster}, {"ckb", k.chunk_kb}, {"deep", k.deep ? 1 : 0}});
        if constexpr (std::is_same_v<K, HeldGrid>)
          v.knobs.insert(v.knobs.end(), {{"parts", k.parts}, {"ckb", k.chunk_kb}, {"deep", k.deep ? 1 : 0}});
        return v;
      },
      t);
}

const Family& norm_family() {
  static const NormFamily f;
  return f;
}

}  // namespace cudal1::optimizer::norm
