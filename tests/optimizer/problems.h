/// @brief Test helpers: Problems built by hand (what a profiled signature gives the optimizer).
#pragma once

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "cudal1/optimizer/family.h"

namespace cudal1::testing {

/// The technique space `f` plans for `p`; empty (and a test failure) when planning fails.
inline std::vector<optimizer::Variant> planned_space(const optimizer::Family& f, const optimizer::Problem& p) {
  auto plan = f.plan(p);
  EXPECT_TRUE(plan.ok()) << plan.status().to_string();
  return plan.ok() ? plan.value()->space() : std::vector<optimizer::Variant>{};
}

inline dispatcher::ArgSpec tensor_arg(c10::ScalarType dt, std::vector<int64_t> sizes, std::vector<int64_t> strides,
                                      int64_t offset = 0) {
  dispatcher::ArgSpec a;
  a.is_tensor = true;
  a.tensor.defined = true;
  a.tensor.dtype = dt;
  a.tensor.sizes = std::move(sizes);
  a.tensor.strides = std::move(strides);
  a.tensor.storage_offset = offset;
  return a;
}

inline dispatcher::ArgSpec value_arg(c10::IValue v) {
  dispatcher::ArgSpec a;
  a.value = std::move(v);
  return a;
}

/// The SM count the CPU tests plan for: an H100 SXM's or an H200's (the GPU tests plan for their device's).
constexpr int kTestSmCount = 132;

/// A problem of `op` for compute capability `sm` on a kTestSmCount-SM device.
inline optimizer::Problem problem(const std::string& op, int sm, std::vector<dispatcher::ArgSpec> args) {
  optimizer::Problem p;
  p.op = op;
  p.sm = sm;
  p.sm_count = kTestSmCount;
  p.args = std::move(args);
  return p;
}

/// A unary op's problem: one tensor, plus gelu's `approximate` string.
inline optimizer::Problem unary_problem(const std::string& op, c10::ScalarType dt, std::vector<int64_t> sizes,
                                        std::vector<int64_t> strides, int sm = 90, int64_t offset = 0,
                                        const std::string& approximate = "tanh") {
  std::vector<dispatcher::ArgSpec> args = {tensor_arg(dt, std::move(sizes), std::move(strides), offset)};
  if (op == "gelu") args.push_back(value_arg(approximate));
  return problem(op, sm, std::move(args));
}

/// A _softmax / _log_softmax problem: tensor, dim, half_to_float.
inline optimizer::Problem softmax_problem(const std::string& op, c10::ScalarType dt, std::vector<int64_t> sizes,
                                          std::vector<int64_t> strides, int64_t dim = -1, bool half_to_float = false,
                                          int sm = 90, int64_t offset = 0) {
  return problem(op, sm, {tensor_arg(dt, std::move(sizes), std::move(strides), offset), value_arg(dim),
                          value_arg(half_to_float)});
}

/// A binary-family problem ("add", "Tensor", {self, other, alpha}).
inline optimizer::Problem binary_problem(const std::string& op, const std::string& overload,
                                         std::vector<dispatcher::ArgSpec> args, int sm = 90) {
  optimizer::Problem p = problem(op, sm, std::move(args));
  p.overload = overload;
  return p;
}

/// A 0-dim tensor argument.
/// An mm problem: a [M, K] (row-major unless `a_strides` given) times b [K, N], by default a [N, K] weight seen
/// transposed as nn.Linear passes it (strides {1, K}).
inline optimizer::Problem mm_problem(c10::ScalarType dt, int64_t m, int64_t k, int64_t n, int sm = 90,
                                     std::vector<int64_t> b_strides = {}, std::vector<int64_t> a_strides = {}) {
  if (a_strides.empty()) a_strides = {k, 1};
  if (b_strides.empty()) b_strides = {1, k};
  return problem("mm", sm, {tensor_arg(dt, {m, k}, std::move(a_strides)), tensor_arg(dt, {k, n}, std::move(b_strides))});
}

/// An addmm problem: bias [N] + a [M, K] x b [K, N] (b as nn.Linear's transposed weight), beta and alpha given.
inline optimizer::Problem addmm_problem(c10::ScalarType dt, int64_t m, int64_t k, int64_t n, int sm = 90,
                                        c10::IValue beta = c10::IValue(int64_t{1}),
                                        c10::IValue alpha = c10::IValue(int64_t{1})) {
  optimizer::Problem p = mm_problem(dt, m, k, n, sm);
  p.op = "addmm";
  p.args.insert(p.args.begin(), tensor_arg(dt, {n}, {1}));
  p.args.push_back(value_arg(std::move(beta)));
  p.args.push_back(value_arg(std::move(alpha)));
  return p;
}

inline dispatcher::ArgSpec zero_dim_arg(c10::ScalarType dt) { return tensor_arg(dt, {}, {}); }

/// Contiguous strides of `sizes`.
inline std::vector<int64_t> contiguous(const std::vector<int64_t>& sizes) {
  std::vector<int64_t> st(sizes.size(), 1);
  for (int64_t d = static_cast<int64_t>(sizes.size()) - 2; d >= 0; --d) st[d] = st[d + 1] * sizes[d + 1];
  return st;
}

/// An absent optional tensor argument (None).
inline dispatcher::ArgSpec none_arg() { return value_arg(c10::IValue()); }

/// A native_layer_norm problem over the last `norm_dims` dimensions of a contiguous input.
inline optimizer::Problem layer_norm_problem(c10::ScalarType dt, std::vector<int64_t> sizes, size_t norm_dims,
                                             bool weight = true, bool bias = true, int sm = 90, double eps = 1e-5) {
  const std::vector<int64_t> shape(sizes.end() - static_cast<std::ptrdiff_t>(norm_dims), sizes.end());
  auto param = [&](bool present) { return present ? tensor_arg(dt, shape, contiguous(shape)) : none_arg(); };
  return problem("native_layer_norm", sm,
                 {tensor_arg(dt, sizes, contiguous(sizes)), value_arg(c10::IValue(shape)), param(weight),
                  param(bias), value_arg(eps)});
}

/// A native_group_norm problem on a contiguous [N, C, *spatial] input.
inline optimizer::Problem group_norm_problem(c10::ScalarType dt, std::vector<int64_t> sizes, int64_t groups,
                                             bool affine = true, int sm = 90, double eps = 1e-5) {
  int64_t hw = 1;
  for (size_t d = 2; d < sizes.size(); ++d) hw *= sizes[d];
  const int64_t n = sizes[0], c = sizes[1];
  auto param = [&] { return affine ? tensor_arg(dt, {c}, {1}) : none_arg(); };
  return problem("native_group_norm", sm,
                 {tensor_arg(dt, sizes, contiguous(sizes)), param(), param(), value_arg(n), value_arg(c),
                  value_arg(hw), value_arg(groups), value_arg(eps)});
}

/// A cudnn_batch_norm / native_batch_norm problem in eval form: input of `sizes` (contiguous unless `strides`),
/// parameters of `param_dt` ([C] contiguous; weight and bias only when `affine`), running stats always,
/// training false, momentum 0.1.
inline optimizer::Problem batch_norm_problem(const std::string& op, c10::ScalarType dt, c10::ScalarType param_dt,
                                             std::vector<int64_t> sizes, std::vector<int64_t> strides = {},
                                             bool affine = true, int sm = 90, double eps = 1e-5,
                                             bool training = false) {
  if (strides.empty()) strides = contiguous(sizes);
  const int64_t c = sizes.size() > 1 ? sizes[1] : 1;
  auto param = [&](bool present) { return present ? tensor_arg(param_dt, {c}, {1}) : none_arg(); };
  return problem(op, sm,
                 {tensor_arg(dt, std::move(sizes), std::move(strides)), param(affine), param(affine), param(true),
                  param(true), value_arg(training), value_arg(0.1), value_arg(eps)});
}

/// A max_pool2d / max_pool2d_with_indices problem: tensor, kernel_size, stride, padding, dilation, ceil_mode.
inline optimizer::Problem max_pool_problem(c10::ScalarType dt, std::vector<int64_t> sizes, std::vector<int64_t> strides,
                                           std::vector<int64_t> kernel, std::vector<int64_t> stride,
                                           std::vector<int64_t> pad, std::vector<int64_t> dil, bool ceil,
                                           bool indices = true, int sm = 90) {
  if (strides.empty()) strides = contiguous(sizes);
  return problem(indices ? "max_pool2d_with_indices" : "max_pool2d", sm,
                 {tensor_arg(dt, std::move(sizes), std::move(strides)), value_arg(c10::IValue(kernel)),
                  value_arg(c10::IValue(stride)), value_arg(c10::IValue(pad)), value_arg(c10::IValue(dil)),
                  value_arg(ceil)});
}

/// An avg_pool2d problem: tensor, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override.
inline optimizer::Problem avg_pool_problem(c10::ScalarType dt, std::vector<int64_t> sizes, std::vector<int64_t> strides,
                                           std::vector<int64_t> kernel, std::vector<int64_t> stride,
                                           std::vector<int64_t> pad, bool ceil, bool count_include_pad,
                                           c10::IValue divisor = c10::IValue(), int sm = 90) {
  if (strides.empty()) strides = contiguous(sizes);
  return problem("avg_pool2d", sm,
                 {tensor_arg(dt, std::move(sizes), std::move(strides)), value_arg(c10::IValue(kernel)),
                  value_arg(c10::IValue(stride)), value_arg(c10::IValue(pad)), value_arg(ceil),
                  value_arg(count_include_pad), value_arg(std::move(divisor))});
}

/// An _adaptive_avg_pool2d problem: tensor, output_size.
inline optimizer::Problem adaptive_avg_pool_problem(c10::ScalarType dt, std::vector<int64_t> sizes,
                                                    std::vector<int64_t> strides, std::vector<int64_t> out,
                                                    int sm = 90) {
  if (strides.empty()) strides = contiguous(sizes);
  return problem("_adaptive_avg_pool2d", sm,
                 {tensor_arg(dt, std::move(sizes), std::move(strides)), value_arg(c10::IValue(out))});
}

/// Channels-last strides of a 4-d `sizes`.
inline std::vector<int64_t> channels_last(const std::vector<int64_t>& s) {
  return {s[1] * s[2] * s[3], 1, s[1] * s[3], s[1]};
}

/// A cumsum / cumprod problem: tensor, dim, dtype (None unless `dtype_arg` is given).
inline optimizer::Problem scan_problem(const std::string& op, c10::ScalarType dt, std::vector<int64_t> sizes,
                                       std::vector<int64_t> strides, int64_t dim, int sm = 90, int64_t offset = 0,
                                       std::optional<c10::ScalarType> dtype_arg = std::nullopt) {
  return problem(op, sm, {tensor_arg(dt, std::move(sizes), std::move(strides), offset), value_arg(dim),
                          dtype_arg ? value_arg(static_cast<int64_t>(*dtype_arg)) : none_arg()});
}
/// A reduction problem. `spec` is the op with its overload ("sum.dim_IntList", "mean.dim", "amax", "amin",
/// "max.dim", "min.dim", "argmax", "argmin", "var.correction", "std.correction"); `dim` as the op takes it (an int
/// list, an int, or None); `extra` is sum/mean's dtype or var/std's correction (None: the default).
inline optimizer::Problem reduce_problem(const std::string& spec, c10::ScalarType dt, std::vector<int64_t> sizes,
                                         std::vector<int64_t> strides, c10::IValue dim, bool keepdim = false,
                                         c10::IValue extra = c10::IValue(), int sm = 90, int64_t offset = 0) {
  const auto dot = spec.find('.');
  std::vector<dispatcher::ArgSpec> args = {tensor_arg(dt, std::move(sizes), std::move(strides), offset),
                                           value_arg(std::move(dim))};
  const std::string op = spec.substr(0, dot);
  if (op == "var" || op == "std") {
    args.push_back(value_arg(std::move(extra)));
    args.push_back(value_arg(keepdim));
  } else {
    args.push_back(value_arg(keepdim));
    if (op == "sum" || op == "mean") args.push_back(value_arg(std::move(extra)));
  }
  optimizer::Problem p = problem(op, sm, std::move(args));
  p.overload = dot == std::string::npos ? "" : spec.substr(dot + 1);
  return p;
}

/// A linalg_vector_norm signature: (self, Scalar ord, int[1]? dim, bool keepdim, *, ScalarType? dtype).
inline optimizer::Problem vector_norm_problem(c10::ScalarType dt, std::vector<int64_t> sizes,
                                              std::vector<int64_t> strides, c10::IValue ord, c10::IValue dim,
                                              bool keepdim = false, c10::IValue dtype = c10::IValue(), int sm = 90,
                                              int64_t offset = 0) {
  return problem("linalg_vector_norm", sm,
                 {tensor_arg(dt, std::move(sizes), std::move(strides), offset), value_arg(std::move(ord)),
                  value_arg(std::move(dim)), value_arg(keepdim), value_arg(std::move(dtype))});
}

/// An int-list argument value (dims).
inline c10::IValue dims(std::vector<int64_t> d) { return c10::IValue(std::move(d)); }

}  // namespace cudal1::testing
