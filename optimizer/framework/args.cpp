/// @brief Argument readers (args.h).
#include "args.h"

namespace cudal1::optimizer {

std::optional<int64_t> int_value(const c10::IValue& v) {
  if (v.isInt()) return v.toInt();
  if (v.isSymInt()) {
    const auto si = v.toSymInt();
    if (!si.is_symbolic()) return si.expect_int();
  }
  return std::nullopt;
}

std::optional<std::vector<int64_t>> int_list(const c10::IValue& v) {
  if (v.isIntList()) return v.toIntVector();
  if (!v.isList()) return std::nullopt;
  std::vector<int64_t> out;
  for (const auto& e : v.toListRef()) {
    auto i = int_value(e);
    if (!i) return std::nullopt;
    out.push_back(*i);
  }
  return out;
}

std::optional<std::pair<int64_t, int64_t>> int_pair(const c10::IValue& v,
                                                    std::optional<std::pair<int64_t, int64_t>> empty) {
  const auto l = int_list(v);
  if (!l) return std::nullopt;
  if (l->empty()) return empty;
  if (l->size() == 1) return std::make_pair((*l)[0], (*l)[0]);
  if (l->size() == 2) return std::make_pair((*l)[0], (*l)[1]);
  return std::nullopt;
}

bool contiguous(const dispatcher::TensorSpec& t) {
  int64_t expect = 1;
  for (int64_t d = static_cast<int64_t>(t.sizes.size()) - 1; d >= 0; --d) {
    if (t.sizes[d] != 1 && t.strides[d] != expect) return false;
    expect *= t.sizes[d];
  }
  return true;
}

}  // namespace cudal1::optimizer
