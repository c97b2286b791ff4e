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
  const int n = static_cast<int>(sizes.size());
  // TensorIterator's fast setup (compute_fast_setup_type): a contiguous input gives a contiguous output, a
  // channels-last 4-d one a channels-last output, any other dense one its own strides. "Contiguous" ignores
  // size-1 dimensions, whose strides the output then takes from the format, not from the input.
  auto dense_in_order = [&](const std::vector<int>& order) {  // order: innermost first
    int64_t expected = 1;
    for (int d : order) {
      if (sizes[d] == 1) continue;
      if (in_strides[d] != expected) return false;
      expected *= sizes[d];
    }
    return true;
  };
  auto strides_in_order = [&](const std::vector<int>& order) {
    std::vector<int64_t> out(n);
    int64_t s = 1;
    for (int d : order) {
      out[d] = s;
      s *= std::max<int64_t>(sizes[d], 1);
    }
    return out;
  };
  std::vector<int> rowmajor(n);
  for (int i = 0; i < n; ++i) rowmajor[i] = n - 1 - i;
  int64_t numel = 1;
  for (int64_t s : sizes) numel *= s;
  if (numel == 0 || dense_in_order(rowmajor)) return contiguous_strides(sizes);
  if (n == 4 && dense_in_order({1, 3, 2, 0})) return strides_in_order({1, 3, 2, 0});
  if (non_overlapping_and_dense(sizes, in_strides)) return in_strides;
  // TensorIterator::reorder_dimensions with one operand: perm[0] is the fastest dim.
  std::vector<int> perm(n);
  for (int i = 0; i < n; ++i) perm[i] = n - 1 - i;
  auto should_swap = [&](int d0, int d1) {
    const int64_t s0 = in_strides[d0], s1 = in_strides[d1];
    if (s0 == 0 || s1 == 0) return 0;
    if (s0 < s1) return -1;
    if (s0 > s1) return 1;
    return sizes[d0] > sizes[d1] ? 1 : 0;
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
  std::vector<int64_t> out(n);
  int64_t s = 1;
  for (int i = 0; i < n; ++i) {
    out[perm[i]] = s;
    s *= std::max<int64_t>(sizes[perm[i]], 1);
  }
  // TensorIterator returns plain contiguous strides when perm is just the reversed order; same values.
  return out;
}

IterSpace coalesce(const std::vector<int64_t>& sizes, const std::vector<int64_t>& out_strides,
                   const std::vector<int64_t>& in_strides) {
  IterSpace it;
  it.numel = 1;
  for (int64_t s : sizes) it.numel *= s;
  std::vector<size_t> dims;
  for (size_t d = 0; d < sizes.size(); ++d)
    if (sizes[d] != 1) dims.push_back(d);
  std::stable_sort(dims.begin(), dims.end(), [&](size_t a, size_t b) { return out_strides[a] < out_strides[b]; });
  std::vector<int64_t> os;
  for (size_t d : dims) {
    if (!it.sizes.empty() && out_strides[d] == os.back() * it.sizes.back() &&
        in_strides[d] == it.in_strides.back() * it.sizes.back()) {
      it.sizes.back() *= sizes[d];
      continue;
    }
    it.sizes.push_back(sizes[d]);
    it.in_strides.push_back(in_strides[d]);
    os.push_back(out_strides[d]);
  }
  if (it.sizes.empty()) {  // a single element
    it.sizes.push_back(1);
    it.in_strides.push_back(1);
  }
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
