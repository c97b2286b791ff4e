/// @brief Test helper: a unary Problem (one tensor argument, plus gelu's `approximate` string) built by hand.
#pragma once

#include <string>
#include <vector>

#include "cudal1/optimizer/family.h"

namespace cudal1::testing {

inline optimizer::Problem unary_problem(const std::string& op, c10::ScalarType dt, std::vector<int64_t> sizes,
                                        std::vector<int64_t> strides, int sm = 90, int64_t offset = 0,
                                        const std::string& approximate = "tanh") {
  optimizer::Problem p;
  p.op = op;
  p.sm = sm;
  dispatcher::ArgSpec a;
  a.is_tensor = true;
  a.tensor.defined = true;
  a.tensor.dtype = dt;
  a.tensor.sizes = std::move(sizes);
  a.tensor.strides = std::move(strides);
  a.tensor.storage_offset = offset;
  p.args.push_back(a);
  if (op == "gelu") {
    dispatcher::ArgSpec s;
    s.value = approximate;
    p.args.push_back(s);
  }
  return p;
}

}  // namespace cudal1::testing
