/// @brief The GPU fuzz test's random signatures per family and the variants each family's fuzz favours
/// (fuzz_draws.h).
#include "gpu/fuzz_draws.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <functional>
#include <iterator>
#include <limits>
#include <numeric>
#include <optional>

#include "optimizer/problems.h"

namespace cudal1::fuzz {



int64_t pick(Rng& rng, std::initializer_list<int64_t> xs) {
  return *(xs.begin() + static_cast<std::ptrdiff_t>(rng() % xs.size()));
}

/// A dimension size: 0, 1, small odd/prime, powers of two, awkward larger ones.
int64_t draw_size(Rng& rng) {
  switch (rng() % 10) {
    case 0: return pick(rng, {0, 1, 1, 1});
    case 1: case 2: return pick(rng, {2, 3, 5, 7, 11, 13, 17, 31});
    case 3: case 4: return pick(rng, {8, 16, 32, 64, 128, 256});
    case 5: case 6: return pick(rng, {97, 127, 129, 250, 257, 499, 1000, 1023});
    default: return pick(rng, {1024, 2048, 3000, 4096, 5003, 8192, 32768});
  }
}

/// Random sizes of rank `rank` whose product stays under kMaxNumel.
std::vector<int64_t> draw_sizes(Rng& rng, int rank) {
  std::vector<int64_t> s(rank);
  for (auto& x : s) x = draw_size(rng);
  auto numel = [&] { return std::accumulate(s.begin(), s.end(), int64_t{1}, std::multiplies<>()); };
  while (numel() > kMaxNumel) *std::max_element(s.begin(), s.end()) /= 2;
  return s;
}

/// A random layout of `sizes`: contiguous, permuted, sliced (a window of a larger tensor, with an offset) or
/// stepped (every 2nd element of a dimension). `kinds` bounds which are drawn (1: contiguous only).
void draw_layout(Rng& rng, const std::vector<int64_t>& sizes, int kinds, std::vector<int64_t>* strides,
                 int64_t* offset) {
  const int rank = static_cast<int>(sizes.size());
  const int kind = static_cast<int>(rng() % kinds);
  std::vector<int64_t> alloc = sizes;
  std::vector<int> order(rank);
  std::iota(order.begin(), order.end(), 0);
  int step_dim = -1;
  if (kind == 1) std::shuffle(order.begin(), order.end(), rng);
  if (kind == 2)
    for (int d = 0; d < rank; ++d)
      if (rng() % 2) alloc[d] += static_cast<int64_t>(rng() % 5) + 1;
  if (kind == 3 && rank > 0) {
    step_dim = static_cast<int>(rng() % rank);
    alloc[step_dim] *= 2;
  }
  std::vector<int64_t> base(rank, 1);
  int64_t s = 1;
  for (int i = rank - 1; i >= 0; --i) {
    base[order[i]] = s;
    s *= std::max<int64_t>(alloc[order[i]], 1);
  }
  *strides = base;
  *offset = 0;
  for (int d = 0; d < rank; ++d) {
    if (d == step_dim) (*strides)[d] *= 2;
    if (alloc[d] > sizes[d] && d != step_dim)
      *offset += static_cast<int64_t>(rng() % (alloc[d] - sizes[d] + 1)) * base[d];
  }
}

c10::ScalarType draw_dtype(Rng& rng) {
  const c10::ScalarType all[] = {at::kFloat, at::kHalf, at::kBFloat16, at::kFloat, at::kHalf, at::kBFloat16,
                                 at::kDouble};
  return all[rng() % 7];
}

dispatcher::ArgSpec tensor(Rng& rng, c10::ScalarType dt, const std::vector<int64_t>& sizes, int kinds) {
  std::vector<int64_t> strides;
  int64_t offset = 0;
  draw_layout(rng, sizes, kinds, &strides, &offset);
  return testing::tensor_arg(dt, sizes, strides, offset);
}

Problem unary(Rng& rng, int sm) {
  static const char* ops[] = {"relu", "gelu", "gelu", "sigmoid", "tanh", "silu", "exp", "neg", "abs"};
  const std::string op = ops[rng() % 9];
  const auto sizes = draw_sizes(rng, 1 + static_cast<int>(rng() % 5));
  std::vector<dispatcher::ArgSpec> args = {tensor(rng, draw_dtype(rng), sizes, 4)};
  if (op == "gelu") args.push_back(testing::value_arg(std::string(rng() % 2 ? "tanh" : "none")));
  return testing::problem(op, sm, std::move(args));
}

Problem softmax(Rng& rng, int sm) {
  const int rank = 1 + static_cast<int>(rng() % 5);
  auto sizes = draw_sizes(rng, rank);
  // Half the draws an outer dim (columns, Note [Softmax columns]), positive or negative; otherwise mostly the
  // last dim (rows), else any dim, valid or not.
  int64_t dim;
  if (rank >= 2 && rng() % 2) {
    dim = static_cast<int64_t>(rng() % (rank - 1));
    if (rng() % 2) dim -= rank;
    // One column draw in three has whole tiles of 32 vectors (Note [Softmax async tiles]).
    if (rng() % 3 == 0) sizes.back() = 32 * (1 + static_cast<int64_t>(rng() % 3));
  } else {
    dim = rng() % 3 ? -1 : static_cast<int64_t>(rng() % (2 * rank)) - rank;
  }
  return testing::softmax_problem(rng() % 2 ? "_softmax" : "_log_softmax", draw_dtype(rng), sizes, {}, dim,
                                  rng() % 8 == 0, sm);
}

/// Few long rows: the split and held rows (modes 2, 7 and 8). Some pass kMaxNumel (up to 4.9M elements: rows of up
/// to 8 MB, held over clusters with rereads or over grid blocks); odd lengths give short last chunks and slices (3
/// x 300008: the held rows' last slice, Note [Norm held]).
Problem long_norm(Rng& rng, int sm, c10::ScalarType dt, double eps) {
  if (rng() % 2) {
    const std::pair<int64_t, int64_t> shapes[] = {{1, 2097152}, {3, 1048576}, {7, 699050},  {5, 524288},
                                                  {9, 393216},  {2, 262144},  {16, 131072}, {5, 99991},
                                                  {64, 32768},  {3, 300008}};
    const auto [rows, cols] = shapes[rng() % std::size(shapes)];
    return testing::layer_norm_problem(dt, {rows, cols}, 1, rng() % 2 != 0, rng() % 2 != 0, sm, eps);
  }
  const int64_t n = pick(rng, {1, 3}), groups = pick(rng, {1, 2, 3}), cpg = pick(rng, {1, 2});
  int64_t hw = pick(rng, {65536, 99991, 131072, 262144});
  while (n * groups * cpg * hw > 2 * kMaxNumel) hw /= 2;
  return testing::group_norm_problem(dt, {n, groups * cpg, hw}, groups, rng() % 2 != 0, sm, eps);
}

Problem norm(Rng& rng, int sm) {
  const c10::ScalarType dt = draw_dtype(rng);
  const double eps = static_cast<double>(pick(rng, {1, 10, 100000})) * 1e-6;
  if (rng() % 3 == 0) return long_norm(rng, sm, dt, eps);
  if (rng() % 2) {
    const int rank = 1 + static_cast<int>(rng() % 5);
    const auto sizes = draw_sizes(rng, rank);
    const size_t k = 1 + rng() % rank;
    Problem p = testing::layer_norm_problem(dt, sizes, k, rng() % 4 != 0, rng() % 3 != 0, sm, eps);
    p.args[0] = tensor(rng, dt, sizes, rng() % 5 ? 1 : 4);  // mostly contiguous (what ATen hands the op)
    return p;
  }
  const int64_t groups = pick(rng, {1, 2, 3, 4, 8, 32});
  const int64_t c = groups * pick(rng, {1, 2, 3, 4, 16});
  std::vector<int64_t> sizes = {pick(rng, {1, 2, 3, 7, 16}), c};
  const int spatial = static_cast<int>(rng() % 3);
  for (int d = 0; d < spatial; ++d) sizes.push_back(pick(rng, {1, 3, 7, 8, 14, 28, 56}));
  return testing::group_norm_problem(dt, sizes, groups, rng() % 3 != 0, sm, eps);
}

/// Norm variants the fuzz favours: the held rows (modes 7 and 8, sm_90+ with 16-byte vectors: Note [Norm held]),
/// which the many split-row variants of long rows would otherwise leave rare.
bool norm_chip_variant(const optimizer::Variant& v) { return v.get("mode") >= 7; }

/// Batch norm in eval form (Note [Batch norm inference]): both ops, ranks 2-5 (sizes from draw_sizes, so 0, 1,
/// odd and prime ones too, the channel count often a typical one), contiguous, channels-last (4-d), permuted,
/// sliced or stepped inputs, every dtype with parameters of the input's dtype or fp32 (sometimes fp16 against
/// fp32, which ATen rejects), affine, weight only or none, eps values, and now and then training=true or
/// missing running statistics (declined).
Problem batch_norm(Rng& rng, int sm) {
  const bool cudnn = rng() % 2;
  const int rank = 2 + static_cast<int>(rng() % 4);
  std::vector<int64_t> sizes = draw_sizes(rng, rank);
  if (rng() % 2) {
    sizes[1] = pick(rng, {1, 3, 8, 16, 24, 64, 96, 256});
    while (std::accumulate(sizes.begin(), sizes.end(), int64_t{1}, std::multiplies<>()) > kMaxNumel) {
      size_t big = sizes.size() > 2 ? 2 : 0;  // halve the largest dim other than the channels
      for (size_t d = 0; d < sizes.size(); ++d)
        if (d != 1 && sizes[d] > sizes[big]) big = d;
      sizes[big] /= 2;
    }
  }
  // cudnn_batch_norm mostly as ATen calls it (fp32, or fp16 with fp32 parameters, weight and bias given).
  c10::ScalarType dt = draw_dtype(rng);
  if (cudnn && rng() % 4 != 0) dt = rng() % 2 ? at::kFloat : at::kHalf;
  c10::ScalarType pdt = rng() % 2 ? dt : at::kFloat;
  if (cudnn && rng() % 4 != 0) pdt = dt == at::kHalf ? at::kFloat : dt;
  if (rng() % 16 == 0) pdt = at::kHalf;
  const double eps = cudnn ? static_cast<double>(pick(rng, {10, 1000, 100000})) * 1e-6
                           : static_cast<double>(pick(rng, {1, 10, 1000, 100000})) * 1e-6;
  const int affine = cudnn && rng() % 8 != 0 ? 2 : static_cast<int>(rng() % 6);  // 0: none, 1: weight only, else both
  Problem p = testing::batch_norm_problem(cudnn ? "cudnn_batch_norm" : "native_batch_norm", dt, pdt, sizes, {},
                                          affine != 0, sm, eps, rng() % 12 == 0);
  if (affine == 1) p.args[2] = testing::none_arg();
  if (rng() % 16 == 0) p.args[3] = p.args[4] = testing::none_arg();
  const int layout = static_cast<int>(rng() % 4);
  if (layout == 1 && rank == 4) p.args[0].tensor.strides = testing::channels_last(sizes);
  if (layout >= 2) p.args[0] = tensor(rng, dt, sizes, 4);
  return p;
}

/// Pooling, the sliding-window class (Note [Pooling slide]): contiguous NCHW (3-d or 4-d), stride 1, dilation
/// 1, overlapping windows, W a multiple of 4 (often of 8; under 32 chunks so several rows share a warp, or
/// over), max with or without indices or avg with its options.
Problem pool_sliding(Rng& rng, int sm) {
  const c10::ScalarType dt = draw_dtype(rng);
  std::vector<int64_t> sizes = {pick(rng, {1, 2, 3, 7, 16}), pick(rng, {1, 2, 3, 5, 8, 13, 28, 31, 64, 97}),
                                pick(rng, {4, 8, 12, 16, 24, 28, 32, 40, 56, 64, 96, 128, 256})};
  if (rng() % 3) sizes.insert(sizes.begin(), pick(rng, {1, 2, 3}));
  auto pair = [&](std::initializer_list<int64_t> xs) {
    const int64_t a = pick(rng, xs);
    return rng() % 4 == 0 ? std::vector<int64_t>{a} : std::vector<int64_t>{a, pick(rng, xs)};
  };
  const auto k = pair({1, 2, 3, 3, 4, 5});
  const std::vector<int64_t> one = rng() % 2 ? std::vector<int64_t>{1} : std::vector<int64_t>{1, 1};
  const int64_t kmin = *std::min_element(k.begin(), k.end());
  std::vector<int64_t> pad;
  for (int64_t v : pair({0, 1, 1, 2})) pad.push_back(std::min(v, kmin / 2));
  const bool ceil = rng() % 2;
  switch (rng() % 3) {
    case 0: return testing::max_pool_problem(dt, sizes, {}, k, one, pad, one, ceil, false, sm);
    case 1: return testing::max_pool_problem(dt, sizes, {}, k, one, pad, one, ceil, true, sm);
    default: {
      const c10::IValue divisor = rng() % 4 == 0 ? c10::IValue(pick(rng, {1, 3, 9, -2})) : c10::IValue();
      return testing::avg_pool_problem(dt, sizes, {}, k, one, pad, ceil, rng() % 2, divisor, sm);
    }
  }
}

/// Pooling, the channels-last runs class (Note [Pooling exact division]): dense channels-last avg_pool2d with
/// column stride 1, channels a multiple of 8 (16-byte vectors), images from one pixel to wider than a run.
Problem pool_channels_last_runs(Rng& rng, int sm) {
  const c10::ScalarType dt = draw_dtype(rng);
  const std::vector<int64_t> sizes = {pick(rng, {1, 2, 3}), pick(rng, {8, 16, 24, 64}),
                                      pick(rng, {1, 2, 3, 5, 7, 13, 28}), pick(rng, {1, 2, 3, 4, 5, 7, 8, 13, 28, 31})};
  const std::vector<int64_t> k = {pick(rng, {1, 2, 3, 3, 5}), pick(rng, {2, 3, 3, 4, 5})};
  const std::vector<int64_t> stride = {pick(rng, {1, 1, 2}), 1};
  const std::vector<int64_t> pad = {std::min<int64_t>(pick(rng, {0, 1, 1, 2}), k[0] / 2),
                                    std::min<int64_t>(pick(rng, {0, 1, 1, 2}), k[1] / 2)};
  const c10::IValue divisor = rng() % 4 == 0 ? c10::IValue(pick(rng, {1, 3, 9, -2})) : c10::IValue();
  return testing::avg_pool_problem(dt, sizes, testing::channels_last(sizes), k, stride, pad, rng() % 2, rng() % 2,
                                   divisor, sm);
}

/// Pooling, the staged adaptive class (Note [Pooling adaptive staging]): adaptive_avg_pool2d with uniform
/// windows (H and W multiples of the output's) over a dense NCHW input, 3-d or 4-d; rows of any element count
/// (whole 16-byte vectors or not, so blocks of several rows and a tensor end inside a vector both occur).
Problem pool_adaptive_uniform(Rng& rng, int sm) {
  const c10::ScalarType dt = draw_dtype(rng);
  const int64_t oh = pick(rng, {1, 2, 3, 7}), ow = pick(rng, {1, 2, 4, 5, 7});
  std::vector<int64_t> sizes = {pick(rng, {1, 2, 3, 8, 64}), oh * pick(rng, {1, 2, 3, 4}),
                                ow * pick(rng, {1, 2, 3, 5})};
  if (rng() % 3) sizes.insert(sizes.begin(), pick(rng, {1, 2, 5}));
  return testing::adaptive_avg_pool_problem(dt, sizes, {}, {oh, ow}, sm);
}

/// Pooling, the packed-pair class (Note [Pooling packed pairs]): 16-bit max_pool2d with or without indices, column
/// stride 2, rows of 1 to 3 warps (W a multiple of 4), any row stride, padding and dilation, ceil mode; a quarter
/// of the inputs sliced to a wider row pitch with an offset (an offset of one element leaves the 8-byte loads
/// unaligned: the kernel declines that call).
Problem pool_pairs(Rng& rng, int sm) {
  const c10::ScalarType dt = rng() % 2 ? at::kHalf : at::kBFloat16;
  std::vector<int64_t> sizes = {pick(rng, {1, 2, 3, 5, 8, 13}), pick(rng, {1, 2, 3, 5, 7, 8, 13, 28, 56, 112}),
                                pick(rng, {4, 8, 12, 20, 28, 56, 112, 128, 132, 260})};
  if (rng() % 3) sizes.insert(sizes.begin(), pick(rng, {1, 2, 3}));
  const std::vector<int64_t> k = {pick(rng, {1, 2, 3, 3, 4, 5}), pick(rng, {2, 3, 3, 4})};
  const std::vector<int64_t> stride = {pick(rng, {1, 2, 2, 3}), 2};
  const std::vector<int64_t> pad = {std::min<int64_t>(pick(rng, {0, 1, 1, 2}), k[0] / 2),
                                    std::min<int64_t>(pick(rng, {0, 1, 1, 2}), k[1] / 2)};
  const std::vector<int64_t> dil = {pick(rng, {1, 1, 2, 3}), 1};
  std::vector<int64_t> strides;
  if (rng() % 4 == 0) {  // rows of a wider tensor
    const int64_t pitch = sizes.back() + pick(rng, {4, 8, 12});
    strides.assign(sizes.size(), 1);
    int64_t step = pitch;
    for (size_t d = sizes.size() - 1; d-- > 0;) {
      strides[d] = step;
      step *= sizes[d];
    }
  }
  Problem p = testing::max_pool_problem(dt, sizes, strides, k, stride, pad, dil, rng() % 2, rng() % 2, sm);
  if (!strides.empty()) p.args[0].tensor.storage_offset = pick(rng, {4, 8, 8, 1});
  return p;
}

/// Pooling: every op, ranks 3-4 (2 and 5 sometimes, to be declined), NCHW, channels-last or random layouts,
/// windows with padding, stride, dilation and ceil mode (sometimes invalid ones ATen rejects), every dtype;
/// a sixth of the draws from the packed-pair class, half the rest from the sliding-window class, an eighth
/// from the channels-last runs class (which holds the channels-last walks, Note [Pooling channels-last walk]),
/// a sixteenth from the staged adaptive class.
Problem pool(Rng& rng, int sm) {
  if (rng() % 6 == 0) return pool_pairs(rng, sm);
  if (rng() % 2) return pool_sliding(rng, sm);
  if (rng() % 4 == 0) return pool_channels_last_runs(rng, sm);
  if (rng() % 6 == 0) return pool_adaptive_uniform(rng, sm);
  const c10::ScalarType dt = draw_dtype(rng);
  const int rank = rng() % 10 == 0 ? static_cast<int>(pick(rng, {2, 5})) : static_cast<int>(pick(rng, {3, 4, 4}));
  std::vector<int64_t> sizes;
  for (int d = 0; d < rank; ++d) {
    const bool spatial = d >= rank - 2;
    sizes.push_back(spatial ? pick(rng, {1, 2, 3, 5, 7, 8, 13, 28, 31, 56, 64, 97, 128})
                            : pick(rng, {1, 2, 3, 7, 16, 17, 64}));
  }
  auto numel = [&] { return std::accumulate(sizes.begin(), sizes.end(), int64_t{1}, std::multiplies<>()); };
  while (numel() > kMaxNumel) *std::max_element(sizes.begin(), sizes.end()) /= 2;
  dispatcher::ArgSpec x = tensor(rng, dt, sizes, 4);
  if (rank == 4 && rng() % 3 == 0) x.tensor.strides = testing::channels_last(sizes), x.tensor.storage_offset = 0;
  auto pair = [&](std::initializer_list<int64_t> xs) {
    const int64_t a = pick(rng, xs);
    return rng() % 4 == 0 ? std::vector<int64_t>{a} : std::vector<int64_t>{a, pick(rng, xs)};
  };
  const int kind = static_cast<int>(rng() % 6);
  Problem p;
  if (kind == 5) {
    p = testing::adaptive_avg_pool_problem(dt, sizes, {},
                                           {pick(rng, {1, 2, 3, 5, 7, 14, 64}), pick(rng, {1, 2, 4, 7, 9, 30})}, sm);
  } else {
    const auto k = pair({1, 2, 2, 3, 3, 4, 5, 7});
    const auto stride = rng() % 4 == 0 ? std::vector<int64_t>{} : pair({1, 2, 2, 3});
    const int64_t kmin = *std::min_element(k.begin(), k.end());
    const auto pad = rng() % 12 == 0 ? std::vector<int64_t>{kmin} : pair({0, 0, 1, 2});  // sometimes > k/2: declined
    std::vector<int64_t> pad_ok;
    for (int64_t v : pad) pad_ok.push_back(std::min(v, kmin / 2));
    const bool ceil = rng() % 2;
    if (kind <= 2) {
      p = testing::max_pool_problem(dt, sizes, {}, k, stride, rng() % 12 == 0 ? pad : pad_ok, pair({1, 1, 2, 3}), ceil,
                                    kind != 0, sm);
    } else {
      const c10::IValue divisor = rng() % 4 == 0 ? c10::IValue(pick(rng, {1, 3, 9, -2})) : c10::IValue();
      p = testing::avg_pool_problem(dt, sizes, {}, k, stride, pad_ok, ceil, rng() % 2, divisor, sm);
    }
  }
  p.args[0] = x;
  return p;
}

/// Scans: cumsum and cumprod over every dim of random layouts, sometimes with a dtype argument.
Problem scan(Rng& rng, int sm) {
  const int rank = 1 + static_cast<int>(rng() % 5);
  const auto sizes = draw_sizes(rng, rank);
  const c10::ScalarType dt = draw_dtype(rng);
  const int64_t dim = static_cast<int64_t>(rng() % (2 * rank)) - rank;  // every dim, negative or not
  std::optional<c10::ScalarType> dtype_arg;
  if (rng() % 8 == 0) dtype_arg = rng() % 2 ? dt : at::kDouble;  // the input's own (served) or a conversion
  // Strides left empty: layout_missing_strides draws contiguous, permuted, sliced or stepped ones.
  return testing::scan_problem(rng() % 3 ? "cumsum" : "cumprod", dt, sizes, {}, dim, sm, 0, dtype_arg);
}

/// Distinct dims of a rank-`rank` tensor, 1..rank of them in random order, some negative.
std::vector<int64_t> draw_dims(Rng& rng, int rank) {
  std::vector<int> order(rank);
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), rng);
  std::vector<int64_t> ds;
  for (int i = 0; i < 1 + static_cast<int>(rng() % rank); ++i) ds.push_back(order[i] - (rng() % 2 ? rank : 0));
  return ds;
}

/// linalg_vector_norm: every ord class (0, 1, 2 as int or double, inf, -inf, other p, one declined p), dims as
/// None, [] or a list, keepdim both ways, dtype= None, the input's, fp32 (widening fp16/bf16) or a declined one.
Problem vector_norm(Rng& rng, int sm, int rank, const std::vector<int64_t>& sizes, c10::ScalarType dt) {
  const double inf = std::numeric_limits<double>::infinity();
  c10::IValue ord;
  switch (rng() % 12) {
    case 0: ord = 0.0; break;
    case 1: ord = int64_t{1}; break;
    case 2: case 3: ord = 2.0; break;
    case 4: ord = int64_t{2}; break;
    case 5: ord = inf; break;
    case 6: ord = -inf; break;
    case 7: ord = int64_t{3}; break;
    case 8: ord = 0.5; break;
    case 9: ord = -1.0; break;
    case 10: ord = 2.5; break;
    default: ord = 0.1;  // outside 0.25 <= |p| <= 16: declined
  }
  c10::IValue dim;
  switch (rng() % 6) {
    case 0: break;  // None: every dim
    case 1: dim = std::vector<int64_t>{}; break;  // []: every dim too
    default: dim = draw_dims(rng, rank);
  }
  c10::IValue dtype;
  switch (rng() % 8) {
    case 0: dtype = static_cast<int64_t>(dt); break;
    case 1: case 2: dtype = static_cast<int64_t>(at::kFloat); break;  // widens fp16/bf16
    case 3: dtype = static_cast<int64_t>(rng() % 2 ? at::kDouble : at::kHalf); break;  // declined or narrowing
    default: break;
  }
  Problem p = testing::vector_norm_problem(dt, sizes, {}, ord, dim, rng() % 2 == 0, dtype, sm);
  p.args[0] = tensor(rng, dt, sizes, 4);  // contiguous, permuted, sliced or stepped
  return p;
}

/// Reductions: every op over random dims (one, several, none) of random layouts, keepdim both ways; a quarter of
/// the draws are linalg_vector_norm.
Problem reduction(Rng& rng, int sm) {
  static const char* specs[] = {"sum.dim_IntList", "mean.dim", "amax",   "amin",           "max.dim",
                                "min.dim",         "argmax",   "argmin", "var.correction", "std.correction"};
  const size_t pick_op = rng() % 40;
  const int rank = 1 + static_cast<int>(rng() % 5);
  const auto sizes = draw_sizes(rng, rank);
  const c10::ScalarType dt = draw_dtype(rng);
  if (pick_op >= 30) return vector_norm(rng, sm, rank, sizes, dt);
  const std::string spec = specs[pick_op % 10];
  const std::string op = spec.substr(0, spec.find('.'));
  auto any_dim = [&] { return static_cast<int64_t>(rng() % (2 * rank)) - rank; };  // negative or not
  c10::IValue dim;
  if (op == "max" || op == "min" || ((op == "argmax" || op == "argmin") && rng() % 4 != 0)) {
    dim = any_dim();
  } else if (op == "argmax" || op == "argmin" || (op != "amax" && op != "amin" && rng() % 6 == 0)) {
    dim = c10::IValue();  // None: every dim (flattened for argmax/argmin)
  } else {  // one or more distinct dims, in random order, some negative
    dim = draw_dims(rng, rank);
  }
  c10::IValue extra;
  if (op == "sum" || op == "mean") {
    if (rng() % 4 == 0) extra = static_cast<int64_t>(rng() % 2 ? dt : at::kFloat);  // dtype= (converting: declined)
  } else if (op == "var" || op == "std") {
    switch (rng() % 5) {
      case 0: break;  // None: 1
      case 1: extra = int64_t{0}; break;
      case 2: extra = int64_t{2}; break;
      case 3: extra = 0.5; break;
      default: extra = int64_t{1};
    }
  }
  Problem p = testing::reduce_problem(spec, dt, sizes, {}, dim, rng() % 2 == 0, extra, sm);
  p.args[0] = tensor(rng, dt, sizes, 4);  // contiguous, permuted, sliced or stepped
  return p;
}

/// A binary-family signature: any op, operands broadcast from the result's shape (size-1 dims, missing leading
/// dims), any layout, any dtype (fp64 is declined), 0-dim operands and Scalars; where.self gets a bool mask.
Problem binary(Rng& rng, int sm) {
  static const char* specs[] = {"add.Tensor", "sub.Tensor", "mul.Tensor", "div.Tensor", "maximum", "minimum",
                                "pow.Tensor_Tensor", "where.self", "add.Scalar", "sub.Scalar", "mul.Scalar",
                                "div.Scalar"};
  const std::string spec = specs[rng() % 12];
  const auto dot = spec.find('.');
  const std::string op = spec.substr(0, dot), overload = dot == std::string::npos ? "" : spec.substr(dot + 1);
  const auto shape = draw_sizes(rng, 1 + static_cast<int>(rng() % 5));
  auto operand = [&](c10::ScalarType dt) {
    if (rng() % 8 == 0) return testing::zero_dim_arg(rng() % 4 ? dt : at::kDouble);
    std::vector<int64_t> sizes(shape.begin() + static_cast<std::ptrdiff_t>(rng() % 3 == 0 ? rng() % shape.size() : 0),
                               shape.end());
    for (auto& x : sizes)
      if (rng() % 3 == 0) x = 1;
    return tensor(rng, dt, sizes, 4);
  };
  auto scalar = [&]() -> c10::IValue {
    switch (rng() % 4) {
      case 0: return int64_t{3};
      case 1: return 0.5;
      case 2: return -2.25;
      default: return 0.1;  // not exact in fp16/bf16: declined there
    }
  };
  std::vector<dispatcher::ArgSpec> args;
  if (op == "where") args.push_back(operand(at::kBool));
  args.push_back(operand(draw_dtype(rng)));
  if (args.back().tensor.sizes.empty() && rng() % 2) args.back() = tensor(rng, args.back().tensor.dtype, shape, 4);
  args.push_back(overload == "Scalar" ? testing::value_arg(scalar()) : operand(draw_dtype(rng)));
  if (op == "add" || op == "sub") args.push_back(testing::value_arg(rng() % 3 ? c10::IValue(int64_t{1}) : scalar()));
  return testing::binary_problem(op, overload, std::move(args), sm);
}

/// mm (Note [Padded GEMM]): fp16 and bf16 mostly (fp32 and fp64 now and then: declined), M from draw_size (0, 1,
/// odd, prime), K a multiple of 8 up to 1024 (one in eight not: declined), N odd or prime up to ~5000 (one in eight
/// a multiple of 8: declined); a and b contiguous, transposed (b as nn.Linear's weight), sliced or stepped; one in
/// three an addmm with a [N] bias (one in eight of those with beta 0.5: declined).
Problem gemm(Rng& rng, int sm) {
  const c10::ScalarType dt = rng() % 8 == 0 ? draw_dtype(rng) : (rng() % 2 ? at::kHalf : at::kBFloat16);
  const int64_t m = std::min<int64_t>(draw_size(rng), 600);
  int64_t k = 8 * pick(rng, {1, 2, 3, 8, 16, 96, 128});
  if (rng() % 8 == 0) k += pick(rng, {1, 3, 5});
  int64_t n = pick(rng, {1, 3, 5, 7, 31, 97, 127, 129, 257, 499, 1000, 1023, 2049, 5003});
  if (rng() % 8 == 0) n = 8 * pick(rng, {1, 16, 125});
  Problem p = testing::problem("mm", sm, {tensor(rng, dt, {m, k}, 4), tensor(rng, dt, {k, n}, 4)});
  if (rng() % 3 == 0) {  // addmm(bias [N], a, b), now and then with beta or alpha other than 1 (declined)
    p.op = "addmm";
    p.args.insert(p.args.begin(), testing::tensor_arg(dt, {n}, {1}));
    p.args.push_back(testing::value_arg(rng() % 8 ? c10::IValue(int64_t{1}) : c10::IValue(0.5)));
    p.args.push_back(testing::value_arg(c10::IValue(int64_t{1})));
  }
  return p;
}

/// Softmax variants the fuzz favours: the shared tiles and cluster rows (Note [Softmax shared tiles]), whose
/// index arithmetic and cluster exchange the small fuzz shapes would otherwise reach too rarely.
bool softmax_cluster_variant(const optimizer::Variant& v) { return v.get("cluster", 0) > 0; }

/// Pool variants the fuzz favours: the sliding windows (Note [Pooling slide]), the channels-last runs (Note
/// [Pooling exact division]) and walks (Note [Pooling channels-last walk]), the staged adaptive pooling (Note
/// [Pooling adaptive staging]) and the packed pairs (Note [Pooling packed pairs]), small parts of large spaces.
bool pool_slide_variant(const optimizer::Variant& v) {
  return v.get("slide", 0) > 0 || v.get("cpx", 1) > 1 || v.get("walk", 0) > 0 || v.get("flat", 0) > 0 ||
         v.get("pair", 0) > 0;
}

/// Reduce variants the fuzz favours: the pipelined column tiles, their one-launch merge (Note [Column tiles in
/// flight]) and their split over a cluster (sm_90+, Note [Column tiles in clusters]; the "cluster=1" count of
/// the knob line says how often), which the large column spaces would otherwise leave rare; rows not a multiple
/// of the batch, empty chunks and partial tiles come with the drawn sizes.
bool reduce_pipelined_tile(const optimizer::Variant& v) { return v.get("unr", 0) > 0; }

/// Scan variants the fuzz favours: the lane tiles that combine in fp16/bf16 itself (Note [Scans], native
/// combines; compared bit for bit, as every exact scan variant), offered only for 16-bit cumsum rows.
bool scan_native_variant(const optimizer::Variant& v) { return v.get("nat", 0) == 1; }

bool gemm_residue_variant(const optimizer::Variant& v) { return v.get("rows", 0) > 0; }

}  // namespace cudal1::fuzz
