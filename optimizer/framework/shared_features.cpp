/// @brief The shared feature schema (Note [Shared features] in shared_features.h).
#include "cudal1/optimizer/shared_features.h"

#include <algorithm>
#include <array>

namespace cudal1::optimizer {
namespace {

constexpr std::array<const char*, 11> kKnobNames = {"widest-vec", "narrowest-vec", "largest-block", "smallest-block",
                                                    "most-work",  "least-work",    "split",         "cluster",
                                                    "ring",       "gridloop",      "staged"};
constexpr std::array<const char*, 5> kContextNames = {"", " x 2-byte", " x <2^22 elements", " x inner<=1024",
                                                      " x compute-bound"};

int elem_bytes_of(c10::ScalarType t) {
  switch (t) {
    case c10::ScalarType::Double:
    case c10::ScalarType::Long:
      return 8;
    case c10::ScalarType::Half:
    case c10::ScalarType::BFloat16:
    case c10::ScalarType::Short:
      return 2;
    case c10::ScalarType::Bool:
    case c10::ScalarType::Byte:
    case c10::ScalarType::Char:
      return 1;
    default:
      return 4;
  }
}

/// A variant's vector width, threads per block and work per thread (Note [Shared features]).
std::array<int64_t, 3> sizes_of(const Variant& v) {
  int64_t work = 1;
  for (const char* k : {"unroll", "unr", "ty", "per", "opw", "oph", "chunk"}) work *= std::max(1, v.get(k, 1));
  return {std::max(1, v.get("vec", 1)), v.get("block", 0), work};
}

}  // namespace

ProblemClass problem_class(const Problem& p) {
  ProblemClass c;
  c.compute_bound = p.op == "mm" || p.op == "addmm" || p.op == "bmm";
  for (const auto& a : p.args) {
    if (!a.is_tensor || !a.tensor.defined) continue;
    c.elem_bytes = elem_bytes_of(a.tensor.dtype);
    c.elements = 1;
    for (int64_t s : a.tensor.sizes) c.elements *= s;
    c.inner = a.tensor.sizes.empty() ? 1 : a.tensor.sizes.back();
    break;
  }
  return c;
}

SpaceRange space_range(const std::vector<Variant>& space) {
  SpaceRange r;
  for (size_t i = 0; i < space.size(); ++i) {
    const auto s = sizes_of(space[i]);
    for (size_t j = 0; j < 3; ++j) {
      r.lo[j] = i == 0 ? s[j] : std::min(r.lo[j], s[j]);
      r.hi[j] = i == 0 ? s[j] : std::max(r.hi[j], s[j]);
    }
  }
  return r;
}

size_t shared_feature_dim() { return kKnobNames.size() * kContextNames.size(); }

std::vector<float> shared_features(const Variant& v, const ProblemClass& c, const SpaceRange& r) {
  const auto s = sizes_of(v);
  std::vector<float> knobs;
  for (size_t j = 0; j < 3; ++j) {  // an extreme counts only where the space varies
    knobs.push_back(r.hi[j] > r.lo[j] && s[j] == r.hi[j] ? 1.f : 0.f);
    knobs.push_back(r.hi[j] > r.lo[j] && s[j] == r.lo[j] ? 1.f : 0.f);
  }
  knobs.push_back(v.get("splits", 1) > 1 ? 1.f : 0.f);
  knobs.push_back(v.get("cluster", 0) > 0 ? 1.f : 0.f);
  knobs.push_back(v.get("ring", 0) > 0 ? 1.f : 0.f);
  knobs.push_back(v.get("grid", 0) == 1 ? 1.f : 0.f);
  knobs.push_back(v.get("cache", 0) == 1 || v.get("smem", 0) == 1 || v.get("async", 0) == 1 ? 1.f : 0.f);
  const std::vector<float> ctx = {1.f, c.elem_bytes == 2 ? 1.f : 0.f, c.elements < (int64_t{1} << 22) ? 1.f : 0.f,
                                  c.inner <= 1024 ? 1.f : 0.f, c.compute_bound ? 1.f : 0.f};
  std::vector<float> out;
  out.reserve(knobs.size() * ctx.size());
  for (float x : ctx)
    for (float k : knobs) out.push_back(x * k);
  return out;
}

std::string shared_feature_name(size_t i) {
  const size_t n = kKnobNames.size();
  if (i >= shared_feature_dim()) return "?";
  return std::string(kKnobNames[i % n]) + kContextNames[i / n];
}

}  // namespace cudal1::optimizer
