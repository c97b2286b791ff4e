/// @brief The softmax family's held slabs (Note [Softmax held slabs]): where they are offered, how a launch sizes its
/// parts and slots for a device, and what their source asks of the device.
#include <gtest/gtest.h>

#include <regex>
#include <string>
#include <vector>

#include "cudal1/core/nvrtc.h"
#include "cudal1/optimizer/compiler.h"
#include "cudal1/optimizer/family.h"
#include "optimizer/problems.h"
#include "softmax/softmax_family.h"

namespace cudal1::optimizer {
namespace {

using testing::contiguous;
using testing::softmax_problem;
using softmax::ColumnShape;
using softmax::HeldGrid;
using softmax::HeldKnobs;
using softmax::held_grid;
using softmax::kHeldMaxSlots;

std::vector<Variant> held_of(const Problem& p) {
  auto plan = family_for(p.op, "")->plan(p);
  EXPECT_TRUE(plan.ok()) << plan.status().to_string();
  std::vector<Variant> out;
  if (!plan.ok()) return out;
  for (const auto& v : plan.value()->space())
    if (v.get("tile") == 3) out.push_back(v);
  return out;
}

Problem column(c10::ScalarType dt, std::vector<int64_t> sizes, int sm = 90, const char* op = "_log_softmax") {
  const auto strides = contiguous(sizes);
  return softmax_problem(op, dt, std::move(sizes), strides, 1, false, sm);
}

TEST(SoftmaxHeldPlan, OfferedForLarge16BitDenseSlabsOnSm90) {
  const auto bench = held_of(column(at::kBFloat16, {32, 32000, 64}));
  ASSERT_EQ(bench.size(), 5u);
  EXPECT_EQ(bench[0].id(), "tile3.stats8.out8.merge4.pf0.hold0");
  EXPECT_EQ(bench[4].id(), "tile3.stats5.out8.merge4.pf0.hold2");
  EXPECT_EQ(held_of(column(at::kHalf, {4, 4096, 256}, 90, "_softmax")).size(), 5u);  // 512-byte rows
  EXPECT_EQ(held_of(column(at::kBFloat16, {2, 16384, 32})).size(), 5u);               // 64-byte rows
}

TEST(SoftmaxHeldPlan, ItemsHeldInRegistersOnlyWhereTheyFit) {
  // 40000 rows: items of 313 rows, 10 vectors an output thread: one item fits 16 warps' 128 registers, not two,
  // and not 17 warps' 96 (at most 8 vectors there).
  std::vector<std::string> ids;
  for (const auto& v : held_of(column(at::kHalf, {3, 40000, 64}, 90, "_softmax"))) ids.push_back(v.id());
  EXPECT_EQ(ids, (std::vector<std::string>{"tile3.stats8.out8.merge4.pf0.hold0", "tile3.stats8.out8.merge2.pf1.hold0",
                                           "tile3.stats5.out8.merge4.pf0.hold1"}));
  // Items of 64 KB: 25 vectors a statistics thread at S 5 (at most 16), 16 an output thread at 17 warps (8).
  EXPECT_EQ(held_of(column(at::kBFloat16, {8, 32000, 128})).size(), 2u);
}

/// Every held variant of a few shapes compiles for sm_90 without spilling: the variants' register bounds
/// (held_ok) are what keeps a held item in registers rather than in local memory.
TEST(SoftmaxHeldPlan, HeldVariantsCompileWithoutSpills) {
  if (auto api = nvrtc(); !api.ok()) GTEST_SKIP() << "NVRTC not installed here: " << api.status().message();
  const std::vector<std::vector<int64_t>> shapes = {
      {32, 32000, 64}, {3, 40000, 64}, {4, 4096, 256}, {2, 16384, 32}, {8, 32000, 128}};
  int compiled = 0;
  for (const auto& sizes : shapes) {
    const Problem p = column(at::kHalf, sizes);
    auto plan = family_for(p.op, "")->plan(p);
    ASSERT_TRUE(plan.ok());
    for (const auto& v : held_of(p)) {
      auto src = plan.value()->source(v);
      ASSERT_TRUE(src.ok()) << src.status().to_string();
      auto k = compile(src.value(), 90, {"--ptxas-options=-v"});
      ASSERT_TRUE(k.ok()) << v.id() << ": " << k.status().to_string();
      const std::string& log = k->log;
      SCOPED_TRACE(v.id() + " of [" + std::to_string(sizes[0]) + "," + std::to_string(sizes[1]) + "," +
                   std::to_string(sizes[2]) + "]: " + log);
      EXPECT_NE(log.find("Used "), std::string::npos);  // ptxas reported
      EXPECT_NE(log.find(" 0 bytes spill stores"), std::string::npos);
      EXPECT_FALSE(std::regex_search(log, std::regex("[1-9][0-9]* bytes spill (stores|loads)")));
      ++compiled;
    }
  }
  EXPECT_EQ(compiled, 5 + 3 + 5 + 5 + 2);
}

TEST(SoftmaxHeldPlan, DeclinedWhereTheDesignDoesNotHold) {
  EXPECT_TRUE(held_of(column(at::kBFloat16, {32, 32000, 64}, 80)).empty());  // no bulk copies before sm_90
  Problem unknown = column(at::kBFloat16, {32, 32000, 64});
  unknown.sm_count = 0;  // the grid is sized for the device in the source: none without it
  EXPECT_TRUE(held_of(unknown).empty());
  EXPECT_TRUE(held_of(column(at::kFloat, {32, 32000, 64})).empty());         // 16-bit only
  EXPECT_TRUE(held_of(column(at::kBFloat16, {32, 1000, 64})).empty());       // 128 KB slabs
  EXPECT_TRUE(held_of(column(at::kBFloat16, {32, 32000, 96})).empty());      // rows of 192 bytes
  EXPECT_TRUE(held_of(column(at::kBFloat16, {1024, 4096, 64})).empty());     // 65536 columns: the workspace
  // Rows padded to 68 elements: the slab is not dense.
  EXPECT_TRUE(held_of(softmax_problem("_softmax", at::kHalf, {4, 8192, 64}, {8192 * 68, 68, 1}, 1)).empty());
}

TEST(SoftmaxHeldPlan, LaunchSizesPartsAndSlotsForTheDevice) {
  ColumnShape c;
  c.dtype = at::kBFloat16;
  c.outer = 32;
  c.n = 32000;
  c.inner = 64;
  const HeldGrid h200 = held_grid(c, HeldKnobs{8, 8, 4, 0, 0}, 132);  // the probe's best: 128 parts, 7 slots
  EXPECT_TRUE(h200.ok);
  EXPECT_EQ(h200.grid, 132);
  EXPECT_EQ(h200.rows, 250);
  EXPECT_EQ(h200.parts, 128);
  EXPECT_EQ(h200.slots, 7);
  EXPECT_EQ(h200.smem, 7 * 32000 + 2 * 8 * 64 * 8);
  const HeldGrid pcie = held_grid(c, HeldKnobs{8, 8, 4, 0, 0}, 114);  // 110 data blocks: rows 291, the last part 281
  EXPECT_TRUE(pcie.ok);
  EXPECT_EQ(pcie.rows, 291);
  EXPECT_EQ(pcie.parts, 110);
  EXPECT_EQ(pcie.slots, 6);
  EXPECT_FALSE(held_grid(c, HeldKnobs{8, 8, 4, 0, 0}, 4).ok);  // no data block
  EXPECT_FALSE(held_grid(c, HeldKnobs{8, 8, 4, 0, 0}, 0).ok);  // no device known
  c.n = 4000000;                                           // a part of 3.8 MB
  EXPECT_FALSE(held_grid(c, HeldKnobs{8, 8, 4, 0, 0}, 132).ok);
  c.n = 130;  // fewer rows than data blocks: a row a part, no empty part
  const HeldGrid tiny = held_grid(c, HeldKnobs{8, 8, 2, 1, 0}, 132);
  EXPECT_EQ(tiny.rows, 1);
  EXPECT_EQ(tiny.parts, 130);
  EXPECT_EQ(tiny.slots, kHeldMaxSlots);
}

TEST(SoftmaxHeldPlan, SourceUsesBulkCopiesPackedMaximaAndOnlyItsOwnVariants) {
  auto plan = family_for("_log_softmax", "")->plan(column(at::kBFloat16, {32, 32000, 64}));
  ASSERT_TRUE(plan.ok());
  const Variant v{{{"tile", 3}, {"stats", 8}, {"out", 8}, {"merge", 2}, {"pf", 1}, {"hold", 0}}};
  auto src = plan.value()->source(v);
  ASSERT_TRUE(src.ok()) << src.status().to_string();
  for (const char* needle : {"cp.async.bulk.shared::cluster.global", "cp.async.bulk.prefetch.L2",
                             "enum : bool { kBfloat16 = true };", "red.release.gpu", "st.release.gpu",
                             "enum : int { kMerge = 2 };", "enum : int { kBlock = 608 };", "enum : int { kHold = 0 };",
                             "LPR = 8"})
    EXPECT_NE(src->code.find(needle), std::string::npos) << needle;
  EXPECT_EQ(plan.value()->stratum(v), 30);
  Variant odd = v;
  odd.knobs[1].second = 7;  // seven statistics warps: not one of the five
  EXPECT_FALSE(plan.value()->source(odd).ok());
  Variant held2 = v;
  held2.knobs[5].second = 2;  // S 8 O 8 holding two items: not one of the five (19 warps leave 96 registers)
  EXPECT_FALSE(plan.value()->source(held2).ok());
  const Variant best{{{"tile", 3}, {"stats", 5}, {"out", 8}, {"merge", 4}, {"pf", 0}, {"hold", 2}}};
  auto src2 = plan.value()->source(best);
  ASSERT_TRUE(src2.ok()) << src2.status().to_string();
  for (const char* needle : {"enum : int { kHold = 2 };", "enum : int { kBlock = 512 };",
                             "mbar_init(&written[i], kHold > 0 ? kOut + kStats : kOut)"})
    EXPECT_NE(src2->code.find(needle), std::string::npos) << needle;
}

TEST(SoftmaxHeldPlan, SourceHoldsTheGridOfThePlansDevice) {
  const Variant v{{{"tile", 3}, {"stats", 8}, {"out", 8}, {"merge", 4}, {"pf", 0}, {"hold", 0}}};
  const auto source_for = [&](int sm_count) {
    Problem p = column(at::kBFloat16, {32, 32000, 64});
    p.sm_count = sm_count;
    auto plan = family_for(p.op, "")->plan(p);
    EXPECT_TRUE(plan.ok());
    auto src = plan.ok() ? plan.value()->source(v) : Result<KernelSource>(Status(Code::kInternal, "no plan"));
    EXPECT_TRUE(src.ok()) << src.status().to_string();
    return src.ok() ? src->code : std::string();
  };
  EXPECT_NE(source_for(132).find("P = 128, R = 250, NB = 7;"), std::string::npos);  // held_grid's above
  EXPECT_NE(source_for(114).find("P = 110, R = 291, NB = 6;"), std::string::npos);
  EXPECT_NE(source_for(132), source_for(114));
}

}  // namespace
}  // namespace cudal1::optimizer
