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

}  // namespace
}  // namespace cudal1::optimizer
