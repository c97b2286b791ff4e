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
  const Variant plain{{{"mode", 6}, {"per", 4}, {"ahead", 1}}};
  const Variant more{{{"mode", 6}, {"per", 4}, {"ahead", 1}, {"lag", 8}}};
  EXPECT_TRUE(plain.matches("per4.ahead1"));
  EXPECT_TRUE(more.matches("per4.ahead1"));  // a substring: both
  EXPECT_TRUE(plain.matches("per4.ahead1$"));
  EXPECT_FALSE(more.matches("per4.ahead1$"));  // anchored: only the id that ends there
  EXPECT_TRUE(more.matches("lag8$"));
  EXPECT_FALSE(plain.matches("ahead0"));
  EXPECT_TRUE(plain.matches(""));
  EXPECT_TRUE(plain.matches("$"));
  EXPECT_FALSE(plain.matches("mode6.per4.ahead1.lag8$"));  // longer than the id
}

}  // namespace
}  // namespace cudal1::optimizer
