/// @brief Status and Result<T>.
#include <gtest/gtest.h>

#include <stdexcept>

#include "cudal1/core/status.h"

namespace cudal1 {
namespace {

Result<int> half(int x) {
  if (x % 2) return Status(Code::kInvalidArgument, "odd");
  return x / 2;
}

Status chain(int x, int* out) {
  CUDAL1_ASSIGN_OR_RETURN(int h, half(x));
  CUDAL1_ASSIGN_OR_RETURN(int q, half(h));
  *out = q;
  return Status();
}

TEST(Status, CarriesCodeAndMessage) {
  const Status s(Code::kVerifyFailed, "element 3 differs");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.to_string(), "VerifyFailed: element 3 differs");
  EXPECT_TRUE(Status().ok());
}

TEST(Result, PropagatesThroughMacros) {
  int out = 0;
  EXPECT_TRUE(chain(8, &out).ok());
  EXPECT_EQ(out, 2);
  const Status s = chain(6, &out);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
}

TEST(Result, ValueOfFailureThrowsLogicError) {
  Result<int> r = half(3);
  EXPECT_FALSE(r.ok());
  EXPECT_THROW(r.value(), std::logic_error);
  EXPECT_THROW((Result<int>{Status()}), std::logic_error);
}

}  // namespace
}  // namespace cudal1
