/// @brief The pooling family: what it accepts (Note [Pooling]), its technique space, features and binding.
#include "pool_family.h"

#include <optional>

#include "args.h"
#include "codegen_common.h"
#include "cudal1/optimizer/layout.h"

namespace cudal1::optimizer::pool {
namespace {

constexpr int kOpws[] = {1, 2, 4, 8};
constexpr int kOphs[] = {1, 2, 4};
constexpr int kBlocks[] = {128, 256, 512};
constexpr int kSmems[] = {0, 1};  ///< the features' layout only: the knob is always 0 (PoolKnobs::smem)
constexpr int kPxs[] = {0, 4, 8};
constexpr int kSlides[] = {0, 4, 8};
constexpr int kSegs[] = {0, 8, 32};
constexpr int kCpxs[] = {1, 2, 4};
constexpr int kWalks[] = {0, 2, 3, 4};
constexpr int kFlats[] = {0, 1, 2, 4};
constexpr int kSeps[] = {0, 1};
constexpr int kPairs[] = {0, 4, 8};
constexpr int64_t kInt32 = int64_t{1} << 31;

/// ATen's pooling_output_shape (floor division; in ceil mode the last window must start inside the image or
/// the left padding).
int64_t pooled_size(int64_t in, int64_t k, int64_t pad, int64_t stride, int64_t dil, bool ceil) {
  const int64_t num = in + 2 * pad - dil * (k - 1) - 1 + (ceil ? stride - 1 : 0);
  int64_t out = (num >= 0 ? num / stride : -((-num + stride - 1) / stride)) + 1;
  if (ceil && (out - 1) * stride >= in + pad) --out;
  return out;
}

class PoolPlan final : public Plan {
 public:
  explicit PoolPlan(PoolShape s) : s_(std::move(s)) {}

  std::vector<Variant> space() const override {
    std::vector<Variant> out;
    for (const PoolKnobs& k : knob_space()) {
      Variant v{{{"opw", k.opw}, {"oph", k.oph}, {"block", k.block}, {"smem", k.smem}, {"px", k.px},
                 {"slide", k.slide}, {"seg", k.seg}, {"cpx", k.cpx}, {"walk", k.walk}, {"flat", k.flat}}};
      if (k.sep) v.knobs.push_back({"sep", k.sep});  // ids of the bit-identical variants stay as they were
      if (k.pair) v.knobs.push_back({"pair", k.pair});  // and those of the variants before the packed pairs
      out.push_back(std::move(v));
    }
    return out;
  }

  std::vector<float> features(const Variant& v) const override {
    std::vector<float> knobs;
    for (int x : kOpws) knobs.push_back(v.get("opw") == x);
    for (int x : kOphs) knobs.push_back(v.get("oph") == x);
    for (int x : kBlocks) knobs.push_back(v.get("block") == x);
    for (int x : kSmems) knobs.push_back(v.get("smem") == x);
    for (int x : kPxs) knobs.push_back(v.get("px") == x);
    for (int x : kSlides) knobs.push_back(v.get("slide") == x);
    for (int x : kSegs) knobs.push_back(v.get("seg") == x);
    for (int x : kCpxs) knobs.push_back(v.get("cpx", 1) == x);
    for (int x : kWalks) knobs.push_back(v.get("walk", 0) == x);
    for (int x : kFlats) knobs.push_back(v.get("flat", 0) == x);
    for (int x : kSeps) knobs.push_back(v.get("sep", 0) == x);
    for (int x : kPairs) knobs.push_back(v.get("pair", 0) == x);
    const std::vector<float> ctx = {1.f,
                                    s_.kind == PoolKind::kMax ? 1.f : 0.f,
                                    s_.kind == PoolKind::kAvg ? 1.f : 0.f,
                                    s_.kind == PoolKind::kAdaptiveAvg ? 1.f : 0.f,
                                    s_.channels_last ? 1.f : 0.f,
                                    s_.indices ? 1.f : 0.f,
                                    overlap() ? 1.f : 0.f,
                                    elem_size(s_.dtype) == 2 ? 1.f : 0.f};
    return crossed_features(ctx, knobs);
  }

  int stratum(const Variant& v) const override {
    // Sliding windows: one stratum per segment length, so that a few trials still reach the technique and its
    // segment lengths (short walks: more parallelism and halo re-reads; whole planes: fewer threads).
    if (v.get("slide")) return 8 + (v.get("seg") == 8 ? 0 : v.get("seg") == 32 ? 1 : 2);
    // Channels-last walks (one stratum per length) and staged adaptive pooling: their own, for the same reason.
    if (v.get("walk", 0)) return 10 + v.get("walk");  // 12, 13, 14
    if (v.get("flat", 0)) return 15;
    if (v.get("pair", 0)) return 16;  // packed pairs: their own, for the same reason
    if (v.get("cpx", 1) > 1) return 11;  // channels-last pixel runs: a stratum of their own, for the same reason
    return (v.get("opw") > 1 ? 1 : 0) + (v.get("oph") > 1 ? 2 : 0) + (v.get("px") ? 4 : 0);
  }

  Result<KernelSource> source(const Variant& v) const override {
    CUDAL1_ASSIGN_OR_RETURN(const PoolKnobs k, knobs_of(v));
    return generate_pool(s_, k);
  }

  Result<std::unique_ptr<BoundKernel>> bind(const Variant& v, std::shared_ptr<LoadedModule> m) const override {
    if (!m) return Status(Code::kInvalidArgument, "no module");
    CUDAL1_ASSIGN_OR_RETURN(const PoolKnobs k, knobs_of(v));
    return make_pool_kernel(s_, k, std::move(m));
  }

 private:
  std::vector<PoolKnobs> knob_space() const {
    std::vector<PoolKnobs> out;
    const int es = elem_size(s_.dtype);
    for (int opw : kOpws)
      for (int oph : kOphs)
        for (int block : kBlocks)
          for (int px : kPxs) {
            const PoolKnobs k{opw, oph, block, 0, px};
            if (s_.channels_last) {
              if (oph > 1 || s_.c % opw != 0 || opw * es > 16) continue;
              // Pixel tiles pay only where windows overlap; a tile twice the row's width only idles threads.
              const int sg = ChannelsLastTiles{block, opw, px}.geometry(s_).sg;
              if (px && (!overlap() || px >= 2 * s_.ow || px > block / sg)) continue;
            } else {
              if (px) continue;
              if (opw > 1 && opw >= 2 * s_.ow) continue;  // a tile wider than the row only idles threads
              if (oph > 1 && (oph >= 2 * s_.oh || s_.kind == PoolKind::kAdaptiveAvg)) continue;
              if ((opw > 1 || oph > 1) && s_.kind != PoolKind::kAdaptiveAvg &&
                  patch_rows(s_, oph) * patch_cols(s_, opw) > kMaxPatch)
                continue;
            }
            out.push_back(k);
          }
    // Note [Pooling slide]: VEC 4 (fp32 16-byte, 16-bit 8-byte loads) or 8 (16-bit only); segments of 8 or 32
    // rows where the plane is taller, else the whole plane.
    for (int vec : kSlides) {
      if (vec == 0 || vec * es > 16 || !slide_fits(s_, vec)) continue;
      for (int seg : kSegs) {
        if (seg && seg >= s_.oh) continue;
        for (int block : kBlocks) out.push_back(PoolKnobs{1, 1, block, 0, 0, vec, seg});
      }
    }
    // Note [Pooling exact division]: channels-last avg with stride-1 columns and overlapping windows, 16-byte
    // channel vectors: runs of CPX output pixels per thread share their input columns.
    if (s_.channels_last && s_.kind == PoolKind::kAvg && s_.dw == 1 && s_.kw > 1 && s_.ow >= 2)
      for (int cpx : kCpxs) {
        const int opw = 16 / es;
        if (cpx == 1 || s_.max_vec < opw) continue;
        for (int block : kBlocks) out.push_back(PoolKnobs{opw, 1, block, 0, 0, 0, 0, cpx});
      }
    // Note [Pooling channels-last walk]: channels-last avg, stride 1, rows overlapping; 16- or 8-byte channel
    // vectors of at least 8 outputs a row (OPW x CPX), within the register budget; walks of 2, 3 or 4 steps of
    // KH rows (a longer walk only where the shorter one does not already cover the image's rows).
    if (s_.channels_last && s_.kind == PoolKind::kAvg && s_.dh == 1 && s_.dw == 1 && s_.kh > 1)
      for (int bytes : {16, 8}) {
        const int opw = bytes / es;
        if (opw < 1 || opw > s_.max_vec || opw * es < 4) continue;
        for (int cpx : kCpxs)
          for (int walk : kWalks) {
            PoolKnobs k{opw, 1, 128, 0, 0, 0, 0, cpx, walk};
            const ChannelsLastWalk t{128, opw, cpx, walk};
            if (!walk || opw * cpx < 8 || (cpx > 1 && cpx >= 2 * s_.ow) || t.registers(s_) > kMaxWalkRegisters)
              continue;
            if (walk > 2 && ChannelsLastWalk{128, opw, cpx, walk - 1}.rows(s_) >= s_.oh) continue;
            for (int block : {128, 256})
              for (int sep : kSeps) {  // Note [Pooling separable sums]
                k.block = block, k.sep = sep;
                out.push_back(k);
              }
          }
      }
    // Note [Pooling packed pairs]: 16-bit NCHW max at column stride 2; segments of 4 or 8 output rows (a longer
    // one only where the shorter does not already cover the plane), the lane's words within kMaxPairWords.
    if (pair_fits(s_))
      for (int pair : kPairs) {
        PoolKnobs k{1, 1, 128, 0, 0, 0, 0, 1, 0, 0, 0, pair};
        if (!pair || (pair > 4 && s_.oh <= 4) || PackedPairs{128, pair}.geometry(s_).words > kMaxPairWords) continue;
        for (int block : {128, 256}) {
          k.block = block;
          out.push_back(k);
        }
      }
    // Note [Pooling adaptive staging]: uniform windows over a dense NCHW input, the block's rows within the
    // static shared-memory limit.
    if (flat_fits(s_))
      for (int flat : kFlats)
        for (int block : kBlocks) {
          const PoolKnobs k{1, 1, block, 0, 0, 0, 0, 1, 0, flat};
          if (flat && AdaptiveStaging{block, flat}.geometry(s_).bytes <= kMaxSmemBytes) out.push_back(k);
        }
    return out;
  }

  bool overlap() const {
    return static_cast<int64_t>(s_.kh - 1) * s_.dil_h + 1 > s_.dh ||
           static_cast<int64_t>(s_.kw - 1) * s_.dil_w + 1 > s_.dw;
  }

  Result<PoolKnobs> knobs_of(const Variant& v) const {
    const PoolKnobs k{v.get("opw"), v.get("oph"), v.get("block"), v.get("smem"), v.get("px"), v.get("slide"),
                      v.get("seg"), v.get("cpx", 1), v.get("walk", 0), v.get("flat", 0), v.get("sep", 0),
                      v.get("pair", 0)};
    for (const PoolKnobs& x : knob_space())
      if (x.opw == k.opw && x.oph == k.oph && x.block == k.block && x.smem == k.smem && x.px == k.px &&
          x.slide == k.slide && x.seg == k.seg && x.cpx == k.cpx && x.walk == k.walk && x.flat == k.flat &&
          x.sep == k.sep && x.pair == k.pair)
        return k;
    return Status(Code::kInvalidArgument, "variant " + v.id() + " is not in this plan's space");
  }

  PoolShape s_;
};

/// Reads the input tensor (3-d or 4-d, non-empty, a generated dtype) into `s`.
Status read_input(const Problem& p, PoolShape* s) {
  if (p.args.empty() || !p.args[0].is_tensor || !p.args[0].tensor.defined)
    return Status(Code::kUnsupported, "unexpected arguments");
  const auto& t = p.args[0].tensor;
  s->dtype = t.dtype;
  if (!generated_dtype(s->dtype)) return Status(Code::kUnsupported, std::string("dtype ") + c10::toString(s->dtype));
  if (s->dtype == c10::ScalarType::BFloat16 && p.sm < 80) return Status(Code::kUnsupported, "bf16 needs sm_80+");
  const size_t nd = t.sizes.size();
  if (nd != 3 && nd != 4) return Status(Code::kUnsupported, "input is not 3-d or 4-d");
  for (int64_t x : t.sizes)
    if (x == 0) return Status(Code::kUnsupported, "empty tensor");
  const size_t o = nd - 3;
  s->n = nd == 4 ? t.sizes[0] : 1;
  s->sn = nd == 4 ? t.strides[0] : 0;
  s->c = t.sizes[o], s->h = t.sizes[o + 1], s->w = t.sizes[o + 2];
  s->sc = t.strides[o], s->sh = t.strides[o + 1], s->sw = t.strides[o + 2];
  s->in_sizes = t.sizes;
  s->in_strides = t.strides;
  int64_t extent = t.storage_offset + 1;
  for (size_t d = 0; d < nd; ++d) {
    if (t.strides[d] < 0) return Status(Code::kUnsupported, "negative stride");
    extent += (t.sizes[d] - 1) * t.strides[d];
  }
  if (extent >= kInt32 || s->h * s->w >= kInt32) return Status(Code::kUnsupported, "needs 64-bit indices");
  s->channels_last = channels_last_strides_2d(t.sizes, t.strides);
  const int es = elem_size(s->dtype);
  s->max_vec = 1;
  if (s->channels_last && s->sc == 1) {
    s->max_vec = 16 / es;
    while (s->max_vec > 1 && (s->c % s->max_vec || s->sh % s->max_vec || s->sw % s->max_vec ||
                              s->sn % s->max_vec || t.storage_offset % s->max_vec))
      s->max_vec /= 2;
  }
  return Status();
}

/// Sizes and strides of the output(s), as ATen allocates them; checks what ATen checks of the output.
Status set_output(PoolShape* s) {
  if (s->oh < 1 || s->ow < 1) return Status(Code::kUnsupported, "output would be empty (ATen raises or returns none)");
  if (s->n * s->c * s->oh * s->ow >= kInt32 || s->oh * s->h >= kInt32 || s->ow * s->w >= kInt32)
    return Status(Code::kUnsupported, "needs 64-bit indices");
  const bool batched = s->in_sizes.size() == 4;
  s->out_sizes = batched ? std::vector<int64_t>{s->n, s->c, s->oh, s->ow} : std::vector<int64_t>{s->c, s->oh, s->ow};
  s->out_strides = s->channels_last ? channels_last_strides(s->out_sizes) : contiguous_strides(s->out_sizes);
  return Status();
}

/// max_pool2d, max_pool2d_with_indices, avg_pool2d: the window arguments, checked as ATen checks them.
Status read_window(const Problem& p, PoolShape* s) {
  const bool avg = s->kind == PoolKind::kAvg;
  if (p.args.size() != (avg ? 7u : 6u)) return Status(Code::kUnsupported, "unexpected arguments");
  const auto k = int_pair(p.args[1].value, std::nullopt);
  if (!k) return Status(Code::kUnsupported, "kernel_size");
  const auto st = int_pair(p.args[2].value, k);
  const auto pad = int_pair(p.args[3].value, std::nullopt);
  const auto dil =
      avg ? std::make_optional(std::make_pair(int64_t{1}, int64_t{1})) : int_pair(p.args[4].value, std::nullopt);
  const auto& ceil_v = p.args[avg ? 4 : 5].value;
  if (!st || !pad || !dil || !ceil_v.isBool())
    return Status(Code::kUnsupported, "stride, padding, dilation or ceil_mode");
  if (k->first <= 0 || k->second <= 0 || st->first <= 0 || st->second <= 0 || dil->first <= 0 || dil->second <= 0 ||
      pad->first < 0 || pad->second < 0 || k->first / 2 < pad->first || k->second / 2 < pad->second)
    return Status(Code::kUnsupported, "window arguments ATen rejects");
  if (k->first * k->second > 4096 || st->first >= kInt32 || st->second >= kInt32 || dil->first * k->first >= kInt32 ||
      dil->second * k->second >= kInt32)
    return Status(Code::kUnsupported, "window too large");
  if (avg) {
    if (!p.args[5].value.isBool()) return Status(Code::kUnsupported, "count_include_pad");
    s->count_include_pad = p.args[5].value.toBool();
    const auto& d = p.args[6].value;
    if (!d.isNone()) {
      const auto dv = int_value(d);
      if (!dv || *dv == 0 || *dv >= kInt32 || *dv <= -kInt32) return Status(Code::kUnsupported, "divisor_override");
      s->divisor = *dv;
    }
  }
  s->kh = static_cast<int>(k->first), s->kw = static_cast<int>(k->second);
  s->dh = static_cast<int>(st->first), s->dw = static_cast<int>(st->second);
  s->ph = static_cast<int>(pad->first), s->pw = static_cast<int>(pad->second);
  s->dil_h = static_cast<int>(dil->first), s->dil_w = static_cast<int>(dil->second);
  const bool ceil = ceil_v.toBool();
  s->oh = pooled_size(s->h, s->kh, s->ph, s->dh, s->dil_h, ceil);
  s->ow = pooled_size(s->w, s->kw, s->pw, s->dw, s->dil_w, ceil);
  return set_output(s);
}

class PoolFamily final : public Family {
 public:
  const char* name() const override { return "pool"; }
  int version() const override { return 12; }
  std::vector<std::string> ops() const override {
    return {"max_pool2d", "max_pool2d_with_indices", "avg_pool2d", "_adaptive_avg_pool2d"};
  }

  Result<std::unique_ptr<Plan>> plan(const Problem& p) const override {
    if (!p.overload.empty())
      return Status(Code::kUnsupported, "op " + p.op + "." + p.overload + " is not in this family");
    PoolShape s;
    if (p.op == "max_pool2d" || p.op == "max_pool2d_with_indices") {
      s.kind = PoolKind::kMax;
      s.indices = p.op == "max_pool2d_with_indices";
    } else if (p.op == "avg_pool2d") {
      s.kind = PoolKind::kAvg;
    } else if (p.op == "_adaptive_avg_pool2d") {
      s.kind = PoolKind::kAdaptiveAvg;
    } else {
      return Status(Code::kUnsupported, "op " + p.op + " is not in this family");
    }
    CUDAL1_RETURN_IF_ERROR(read_input(p, &s));
    if (s.kind == PoolKind::kAdaptiveAvg) {
      if (p.args.size() != 2) return Status(Code::kUnsupported, "unexpected arguments");
      const auto os = int_list(p.args[1].value);
      if (!os || os->size() != 2) return Status(Code::kUnsupported, "output_size");
      if (s.channels_last) return Status(Code::kUnsupported, "adaptive pooling of a channels-last input");
      s.oh = (*os)[0], s.ow = (*os)[1];
      CUDAL1_RETURN_IF_ERROR(set_output(&s));
    } else {
      CUDAL1_RETURN_IF_ERROR(read_window(p, &s));
    }
    return std::unique_ptr<Plan>(new PoolPlan(std::move(s)));
  }
};

}  // namespace

const Family& pool_family() {
  static const PoolFamily f;
  return f;
}

}  // namespace cudal1::optimizer::pool
