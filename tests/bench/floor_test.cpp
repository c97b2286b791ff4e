/// @brief The kernel benchmark's memory floor counts whole 32-byte sectors (bench/floor.h): what DRAM moves for
/// dense, stepped, sliced and transposed views.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "bench/floor.h"

namespace cudal1::bench {
namespace {

TEST(SectorBytes, DenseTensorsCountTheirBytes) {
  EXPECT_EQ(sector_bytes(at::empty({64, 48}, at::kFloat)), 64.0 * 48 * 4);
  EXPECT_EQ(sector_bytes(at::empty({64, 48}, at::kFloat).t()), 64.0 * 48 * 4);  // permuted, still dense
  EXPECT_EQ(sector_bytes(at::empty({0, 7}, at::kHalf)), 0.0);
}

TEST(SectorBytes, SteppedViewsCountTheSectorsTheyTouch) {
  // Every second bf16 column: half the bytes used, every sector touched.
  const at::Tensor x = at::empty({64, 256}, at::kBFloat16);
  EXPECT_EQ(sector_bytes(x.slice(1, 0, 256, 2)), 64.0 * 256 * 2);
  // Every 32nd fp32 column: one 4-byte element a sector (128-byte steps), one sector each.
  EXPECT_EQ(sector_bytes(at::empty({16, 1024}, at::kFloat).slice(1, 0, 1024, 32)), 16.0 * 32 * 32);
}

TEST(SectorBytes, SlicesCountWholeSectorsOfTheirRows) {
  // 40 fp32 columns (160 bytes) of rows 256 bytes apart: 5 sectors a row when rows start on a sector.
  const at::Tensor x = at::empty({8, 64}, at::kFloat);
  ASSERT_EQ(reinterpret_cast<uintptr_t>(x.data_ptr()) % 32, 0u);
  EXPECT_EQ(sector_bytes(x.slice(1, 0, 40)), 8.0 * 5 * 32);
  // Starting 4 bytes into a sector: 160 bytes straddle 6 sectors.
  EXPECT_EQ(sector_bytes(x.slice(1, 1, 41)), 8.0 * 6 * 32);
}

}  // namespace
}  // namespace cudal1::bench
