/// @brief The unary family: planning (what it accepts), its technique space, features, and binding.
#include "unary_family.h"

#include <ATen/core/Tensor.h>

#include <cmath>

#include "codegen_common.h"
#include "simple_kernel.h"

namespace cudal1::optimizer::unary {
namespace {

const ElementwiseKnobs kKnobs = {{1, 2, 4, 8}, {128, 256, 512, 1024}, {1, 2, 4, 8}};
constexpr int kMaxDims = 8;

class UnaryPlan final : public Plan {
 public:
  explicit UnaryPlan(UnaryShape s) : s_(std::move(s)) {}

  std::vector<Variant> space() const override { return elementwise_space(kKnobs, s_.max_vec); }

  std::vector<float> features(const Variant& v) const override {
    // One-hot knobs, then the knobs crossed with the problem's class (size, dtype width, layout), so that one
    // policy can learn what works where.
    const std::vector<float> knobs = elementwise_knob_features(kKnobs, v);
    const double lg = std::log2(static_cast<double>(std::max<int64_t>(s_.space.numel, 1)));
    const std::vector<float> ctx = {1.f,
                         lg < 16 ? 1.f : 0.f,
                         lg >= 16 && lg < 22 ? 1.f : 0.f,
                         lg >= 22 ? 1.f : 0.f,
                         elem_size(s_.dtype) == 2 ? 1.f : 0.f,
                         s_.space.linear() ? 0.f : 1.f};
    return crossed_features(ctx, knobs);
  }

  Result<KernelSource> source(const Variant& v) const override {
    const int vec = v.get("vec", 0), block = v.get("block", 0), unroll = v.get("unroll", 0), grid = v.get("grid", -1);
    if (vec < 1 || vec > s_.max_vec || block < 32 || block > 1024 || unroll < 1 || unroll > 16 || grid < 0)
      return Status(Code::kInvalidArgument, "variant " + v.id() + " is not in this plan's space");
    return generate_unary(s_, vec, block, unroll, grid == 1);
  }

  Result<std::unique_ptr<BoundKernel>> bind(const Variant& v, std::shared_ptr<LoadedModule> m) const override {
    if (!m) return Status(Code::kInvalidArgument, "no module");
    CUDAL1_RETURN_IF_ERROR(source(v));  // validates the knobs
    const int vec = v.get("vec"), block = v.get("block");
    const int64_t tile = int64_t{block} * v.get("unroll");
    int64_t grid = std::max<int64_t>(1, (s_.space.numel / vec + tile - 1) / tile);
    if (v.get("grid")) grid = std::min<int64_t>(grid, int64_t{m->sm_count()} * m->max_blocks_per_sm(block));
    // Picked vectors load 2 x vec elements (Note [Unary picked vectors]): both pointers aligned to that.
    const int align = vec * elem_size(s_.dtype) * (vec > 1 ? s_.pick : 1);
    return std::unique_ptr<BoundKernel>(new SimpleKernel(std::move(m), OutputSpec{s_.dtype, s_.sizes, s_.out_strides},
                                                         s_.sizes, s_.in_strides, align, grid, block));
  }

 private:
  UnaryShape s_;
};

class UnaryFamily final : public Family {
 public:
  const char* name() const override { return "unary_elementwise"; }
  // 2: picked vectors (Note [Unary picked vectors]); 3: the erf gelu, 4: also the tanh gelu, sigmoid and silu
  // of 16-bit outputs in short forms (Note [Unary math for 16-bit outputs])
  int version() const override { return 5; }
  std::vector<std::string> ops() const override {
    return {"relu", "gelu", "sigmoid", "tanh", "silu", "exp", "neg", "abs"};
  }

  Result<std::unique_ptr<Plan>> plan(const Problem& p) const override {
    if (!p.overload.empty()) return Status(Code::kUnsupported, "overload " + p.overload);
    UnaryShape s;
    s.math = p.op;
    if (p.op == "gelu") {
      if (p.args.size() != 2 || !p.args[1].value.isString())
        return Status(Code::kUnsupported, "gelu without its approximate argument");
      const std::string a = p.args[1].value.toStringRef();
      if (a != "none" && a != "tanh") return Status(Code::kUnsupported, "gelu approximate='" + a + "'");
      s.math = "gelu_" + a;
    } else if (p.args.size() != 1) {
      return Status(Code::kUnsupported, "unexpected arguments");
    }
    if (unary_math(s.math, c10::ScalarType::Float).empty())
      return Status(Code::kUnsupported, "op " + p.op + " is not in this family");
    if (p.args.empty() || !p.args[0].is_tensor || !p.args[0].tensor.defined)
      return Status(Code::kUnsupported, "no tensor input");
    const auto& t = p.args[0].tensor;
    s.dtype = t.dtype;
    if (!generated_dtype(s.dtype))
      return Status(Code::kUnsupported, std::string("dtype ") + c10::toString(s.dtype));
    if (s.dtype == c10::ScalarType::BFloat16 && p.sm < 80) return Status(Code::kUnsupported, "bf16 needs sm_80+");
    if (p.sm < 60) return Status(Code::kUnsupported, "needs sm_60+");
    if (t.sizes.size() > static_cast<size_t>(kMaxDims)) return Status(Code::kUnsupported, "more than 8 dims");
    int64_t numel = 1;
    for (int64_t x : t.sizes) numel *= x;
    if (numel == 0) return Status(Code::kUnsupported, "empty tensor");
    for (size_t d = 0; d < t.sizes.size(); ++d)
      if (t.strides[d] < 0) return Status(Code::kUnsupported, "negative stride");
    s.sizes = t.sizes;
    s.in_strides = t.strides;
    s.out_strides = elementwise_output_strides(t.sizes, t.strides);
    s.space = coalesce(s.sizes, s.out_strides, s.in_strides);
    // Allocations are at least 256-byte aligned, so a view's alignment is that of its storage offset. (A call
    // whose data is aligned differently from the first one's falls back to ATen at launch.)
    const int64_t offset_bytes = t.storage_offset * elem_size(s.dtype);
    int max_by_width = 16 / elem_size(s.dtype);
    while (max_by_width > 1 && offset_bytes % (max_by_width * elem_size(s.dtype)) != 0) max_by_width /= 2;
    if (s.space.linear()) {
      s.max_vec = max_by_width;
    } else if (s.space.in_strides[0] == 2) {
      // Note [Unary picked vectors]
      // Every second element along the innermost dim (x[..., ::2], the halves of rotary embeddings): a vector of
      // v outputs is picked from one aligned load of 2v elements (<= 16 bytes) instead of v 2-byte or 4-byte
      // loads. The load reaches one element past the last one used, inside the same aligned 2v-element chunk
      // as used elements, so inside the same page as the tensor's own bytes: it cannot fault, and the value
      // is ignored. Offsets of vector starts are multiples of 2v (innermost size a multiple of v, outer
      // strides and the storage offset multiples of 2v), so every load is aligned. It saves instructions, not
      // bytes: DRAM moves whole 32-byte sectors, so the input's used elements cost twice their bytes either way
      // (neg bf16 every 2nd column [8192,4096]: 64 MB used, 128 MB read, 201 MB with the output, 48 us at
      // 4.2 TB/s, which scalar loads already reach within ~8%). Kept for heavier math on such views, verified by
      // the unary fuzz; the tuner picks by time.
      for (int v = max_by_width / 2; v > 1; v /= 2) {
        bool ok = s.space.sizes[0] % v == 0 && t.storage_offset % (2 * v) == 0;
        for (size_t d = 1; d < s.space.in_strides.size(); ++d) ok = ok && s.space.in_strides[d] % (2 * v) == 0;
        if (ok) {
          s.max_vec = v;
          s.pick = 2;
          break;
        }
      }
    } else {
      s.max_vec = 1;
      if (s.space.in_strides[0] == 1)
        for (int v = max_by_width; v > 1; v /= 2) {
          bool ok = s.space.sizes[0] % v == 0;
          for (size_t d = 1; d < s.space.in_strides.size(); ++d) ok = ok && s.space.in_strides[d] % v == 0;
          if (ok) {
            s.max_vec = v;
            break;
          }
        }
    }
    return std::unique_ptr<Plan>(new UnaryPlan(std::move(s)));
  }
};

}  // namespace

const Family& unary_family() {
  static const UnaryFamily f;
  return f;
}

}  // namespace cudal1::optimizer::unary
