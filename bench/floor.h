/// @brief The memory floor's byte count of the kernel benchmark (bench/kernels_bench.cpp), a header so that a
/// host test checks it (tests/bench/floor_test.cpp).
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

namespace cudal1::bench {

/// Bytes DRAM must move to touch every element of `t` once: whole 32-byte sectors, so that a view stepping over
/// elements (every second column) counts the sectors it touches rather than the bytes it uses; dense tensors
/// count their bytes. Walks the view's offsets (sizes and strides only; a few hundred ms at 10^8 elements).
inline double sector_bytes(const at::Tensor& t) {
  const int64_t es = t.element_size(), nd = t.dim();
  if (t.numel() == 0) return 0;
  if (t.is_non_overlapping_and_dense()) return static_cast<double>(t.numel() * es);
  int64_t lo = 0, hi = 0;  // element offsets spanned around data_ptr
  for (int64_t d = 0; d < nd; ++d) (t.stride(d) < 0 ? lo : hi) += (t.size(d) - 1) * t.stride(d);
  const auto base = static_cast<int64_t>(reinterpret_cast<uintptr_t>(t.data_ptr()));
  const int64_t first = (base + lo * es) / 32, last = (base + hi * es + es - 1) / 32;
  std::vector<bool> seen(static_cast<size_t>(last - first + 1));
  std::vector<int64_t> idx(static_cast<size_t>(nd), 0);
  int64_t off = 0, sectors = 0;
  for (int64_t n = 0; n < t.numel(); ++n) {
    for (int64_t b = (base + off * es) / 32; b <= (base + off * es + es - 1) / 32; ++b)
      if (!seen[static_cast<size_t>(b - first)]) seen[static_cast<size_t>(b - first)] = true, ++sectors;
    for (int64_t d = nd - 1; d >= 0; --d) {  // odometer over the dims, innermost fastest
      off += t.stride(d);
      if (++idx[static_cast<size_t>(d)] < t.size(d)) break;
      off -= t.size(d) * t.stride(d);
      idx[static_cast<size_t>(d)] = 0;
    }
  }
  return 32.0 * static_cast<double>(sectors);
}

}  // namespace cudal1::bench
