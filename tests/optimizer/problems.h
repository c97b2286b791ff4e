/// @brief Test helpers: Problems built by hand (what a profiled signature gives the optimizer).
#pragma once

#include <string>
#include <vector>

#include "cudal1/optimizer/family.h"

namespace cudal1::testing {

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

inline optimizer::Problem problem(const std::string& op, int sm, std::vector<dispatcher::ArgSpec> args) {
  optimizer::Problem p;
  p.op = op;
  p.sm = sm;
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

}  // namespace cudal1::testing
