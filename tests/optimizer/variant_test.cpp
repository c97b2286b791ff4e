/// @brief Variant ids and JSON round trip.
#include <gtest/gtest.h>

#include "cudal1/optimizer/family.h"

namespace cudal1::optimizer {
namespace {

TEST(Variant, IdAndJson) {
  Variant v{{{"vec", 4}, {"block", 256}, {"unroll", 2}, {"grid", 1}}};
  EXPECT_EQ(v.id(), "vec4.block256.unroll2.grid1");
  auto back = Variant::from_json(v.to_json());
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->id(), v.id());
  EXPECT_EQ(back->get("unroll"), 2);
  EXPECT_EQ(back->get("missing", 7), 7);
  EXPECT_EQ(Variant::from_json("{}").status().code(), Code::kCorrupt);
  EXPECT_EQ(Variant::from_json("[[1,2]]").status().code(), Code::kCorrupt);
}

TEST(Variant, FilterMatchesSubstringsOrAnAnchoredEnd) {
  const Variant plain{{{"vec", 1}, {"two", 1}, {"async", 1}}};
  const Variant more{{{"vec", 1}, {"two", 1}, {"async", 1}, {"pair", 1}}};
  EXPECT_TRUE(plain.matches("two1.async1"));
  EXPECT_TRUE(more.matches("two1.async1"));  // a substring: both
  EXPECT_TRUE(plain.matches("two1.async1$"));
  EXPECT_FALSE(more.matches("two1.async1$"));  // anchored: only the id that ends there
  EXPECT_TRUE(more.matches("pair1$"));
  EXPECT_FALSE(plain.matches("async0"));
  EXPECT_TRUE(plain.matches(""));
  EXPECT_TRUE(plain.matches("$"));
  EXPECT_FALSE(plain.matches("vec1.two1.async1.pair1$"));  // longer than the id
}

}  // namespace
}  // namespace cudal1::optimizer
