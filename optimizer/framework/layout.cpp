/// @brief Output-layout prediction and dimension coalescing (see layout.h).
#include "cudal1/optimizer/layout.h"

#include <algorithm>
#include <numeric>

namespace cudal1::optimizer {

bool non_overlapping_and_dense(const std::vector<int64_t>& sizes, const std::vector<int64_t>& strides) {
  const size_t n = sizes.size();
  std::vector<size_t> perm(n);
  std::iota(perm.begin(), perm.end(), 0);
  std::sort(perm.begin(), perm.end(), [&](size_t a, size_t b) {
    if (sizes[a] < 2) return false;
    if (sizes[b] < 2) return true;
    return strides[a] < strides[b];
  });
  int64_t expected = 1;
  for (size_t i : perm) {
    if (sizes[i] == 1) continue;
    if (sizes[i] == 0) return true;
    if (strides[i] != expected) return false;
    expected *= sizes[i];
  }
  return true;
}

std::vector<int64_t> contiguous_strides(const std::vector<int64_t>& sizes) {
  std::vector<int64_t> st(sizes.size(), 1);
  for (int64_t d = static_cast<int64_t>(sizes.size()) - 2; d >= 0; --d)
    st[d] = st[d + 1] * std::max<int64_t>(sizes[d + 1], 1);
  return st;
}

std::vector<int64_t> elementwise_output_strides(const std::vector<int64_t>& sizes,
                                                const std::vector<int64_t>& in_strides) {
  return broadcast_output_strides(sizes, {OperandLayout{sizes, in_strides}});
}

bool broadcast_shape(const std::vector<OperandLayout>& operands, std::vector<int64_t>* shape) {
  shape->clear();
  for (const auto& op : operands) {
    const size_t n = std::max(shape->size(), op.sizes.size());
    std::vector<int64_t> out(n);
    for (size_t i = 0; i < n; ++i) {  // aligned at the innermost dim
      const int64_t a = i < shape->size() ? (*shape)[shape->size() - 1 - i] : 1;
      const int64_t b = i < op.sizes.size() ? op.sizes[op.sizes.size() - 1 - i] : 1;
      if (a != b && a != 1 && b != 1) return false;
      out[n - 1 - i] = a == 1 ? b : a;
    }
    *shape = std::move(out);
  }
  return true;
}

namespace {

/// "Contiguous in this order" (innermost first), size-1 dims ignored: TensorImpl's is_contiguous rules.
bool dense_in_order(const std::vector<int64_t>& sizes, const std::vector<int64_t>& strides,
                    const std::vector<int>& order) {
  int64_t expected = 1;
  for (int d : order) {
    if (sizes[d] == 1) continue;
    if (strides[d] != expected) return false;
    expected *= sizes[d];
  }
  return true;
}

/// TensorIterator's fast setup (compute_fast_setup_type), or nothing when it does not apply.
bool fast_setup_strides(const std::vector<int64_t>& shape, const std::vector<OperandLayout>& ops,
                        std::vector<int64_t>* out) {
  const int n = static_cast<int>(shape.size());
  for (const auto& op : ops)
    if (op.sizes != shape) return false;  // !all_ops_same_shape_ (a 0-dim operand included)
  std::vector<int> rowmajor(n);
  for (int i = 0; i < n; ++i) rowmajor[i] = n - 1 - i;
  bool contiguous = true, channels_last = n == 4, dense = true;
  for (const auto& op : ops) {
    contiguous = contiguous && dense_in_order(shape, op.strides, rowmajor);
    channels_last = channels_last && dense_in_order(shape, op.strides, {1, 3, 2, 0});
    dense = dense && non_overlapping_and_dense(shape, op.strides);
  }
  if (contiguous) {
    *out = contiguous_strides(shape);
  } else if (channels_last) {
    *out = channels_last_strides(shape);
  } else if (dense) {
    for (const auto& op : ops)
      if (op.strides != ops.back().strides) return false;
    *out = ops.back().strides;
  } else {
    return false;
  }
  return true;
}

}  // namespace

std::vector<int64_t> broadcast_output_strides(const std::vector<int64_t>& shape,
                                              const std::vector<OperandLayout>& operands) {
  const int n = static_cast<int>(shape.size());
  int64_t numel = 1;
  for (int64_t s : shape) numel *= s;
  if (numel == 0) return contiguous_strides(shape);
  std::vector<int64_t> fast;
  if (fast_setup_strides(shape, operands, &fast)) return fast;
  // compute_strides: right-aligned; a missing dim, or a size-1 dim broadcast to a larger size, has stride 0.
  std::vector<std::vector<int64_t>> st;
  for (const auto& op : operands) {
    std::vector<int64_t> s(n, 0);
    const int offset = n - static_cast<int>(op.sizes.size());
    for (size_t i = 0; i < op.sizes.size(); ++i)
      s[offset + i] = (op.sizes[i] == 1 && shape[offset + i] != 1) ? 0 : op.strides[i];
    st.push_back(std::move(s));
  }
  // reorder_dimensions: perm[0] is the fastest dim; insertion sort with ambiguous comparisons.
  std::vector<int> perm(n);
  for (int i = 0; i < n; ++i) perm[i] = n - 1 - i;
  auto should_swap = [&](int d0, int d1) {
    for (const auto& s : st) {
      const int64_t s0 = s[d0], s1 = s[d1];
      if (s0 == 0 || s1 == 0) continue;
      if (s0 < s1) return -1;
      if (s0 > s1) return 1;
      if (shape[d0] > shape[d1]) return 1;  // equal strides: the smaller size goes first
    }
    return 0;
  };
  for (int i = 1; i < n; ++i) {
    int d1 = i;
    for (int d0 = i - 1; d0 >= 0; --d0) {
      const int c = should_swap(perm[d0], perm[d1]);
      if (c > 0) {
        std::swap(perm[d0], perm[d1]);
        d1 = d0;
      } else if (c < 0) {
        break;
      }
    }
  }
  // allocate_or_resize_outputs: contiguous in perm order (plain contiguous when perm is reversed: same values).
  std::vector<int64_t> out(n);
  int64_t s = 1;
  for (int i = 0; i < n; ++i) {
    out[perm[i]] = s;
    s *= shape[perm[i]];
  }
  return out;
}

MultiIterSpace coalesce_inputs(const std::vector<int64_t>& sizes, const std::vector<int64_t>& out_strides,
                               const std::vector<std::vector<int64_t>>& in_strides) {
  MultiIterSpace it;
  it.numel = 1;
  for (int64_t s : sizes) it.numel *= s;
  it.in_strides.resize(in_strides.size());
  std::vector<size_t> dims;
  for (size_t d = 0; d < sizes.size(); ++d)
    if (sizes[d] != 1) dims.push_back(d);
  std::stable_sort(dims.begin(), dims.end(), [&](size_t a, size_t b) { return out_strides[a] < out_strides[b]; });
  std::vector<int64_t> os;
  for (size_t d : dims) {
    bool merge = !it.sizes.empty() && out_strides[d] == os.back() * it.sizes.back();
    for (size_t k = 0; merge && k < in_strides.size(); ++k)
      merge = in_strides[k][d] == it.in_strides[k].back() * it.sizes.back();
    if (merge) {
      it.sizes.back() *= sizes[d];
      continue;
    }
    it.sizes.push_back(sizes[d]);
    for (size_t k = 0; k < in_strides.size(); ++k) it.in_strides[k].push_back(in_strides[k][d]);
    os.push_back(out_strides[d]);
  }
  if (it.sizes.empty()) {  // a single element
    it.sizes.push_back(1);
    for (auto& s : it.in_strides) s.push_back(1);
  }
  return it;
}

IterSpace coalesce(const std::vector<int64_t>& sizes, const std::vector<int64_t>& out_strides,
                   const std::vector<int64_t>& in_strides) {
  MultiIterSpace m = coalesce_inputs(sizes, out_strides, {in_strides});
  IterSpace it;
  it.sizes = std::move(m.sizes);
  it.in_strides = std::move(m.in_strides[0]);
  it.numel = m.numel;
  return it;
}

bool channels_last_strides_2d(const std::vector<int64_t>& sizes, const std::vector<int64_t>& strides) {
  if (sizes.size() != 4 || strides.size() != 4) return false;
  if (strides[1] == 0) return false;  // trivial C dimension: NCHW
  int64_t min = 0;
  for (int d : {1, 3, 2, 0}) {
    if (sizes[d] == 0 || strides[d] < min) return false;
    if (d == 0 && min == strides[1]) return false;  // N111 / sliced N11W: NCHW by default
    min = strides[d];
    if (sizes[d] > 1) min *= sizes[d];
  }
  return true;
}

std::vector<int64_t> channels_last_strides(const std::vector<int64_t>& sizes) {
  std::vector<int64_t> st(4);
  st[1] = 1;
  st[3] = sizes[1];
  st[2] = st[3] * sizes[3];
  st[0] = st[2] * sizes[2];
  return st;
}

}  // namespace cudal1::optimizer
