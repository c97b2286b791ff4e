/// @brief What the normalisation family accepts and declines, how it maps both ops onto rows, and its space.
#include <gtest/gtest.h>

#include <set>

#include "cudal1/optimizer/family.h"
#include "norm/norm_family.h"
#include "optimizer/problems.h"

namespace cudal1::optimizer {
namespace {

using testing::group_norm_problem;
using testing::layer_norm_problem;

const Family& family() { return *family_for("native_layer_norm", ""); }

Code code(const Problem& p) { return family().plan(p).status().code(); }

std::vector<Variant> space(const Problem& p) { return testing::planned_space(family(), p); }

/// The generated head's line for an int constant of the device code (Note [Device constants]).
std::string constant(const std::string& name, int value) {
  return "enum : int { " + name + " = " + std::to_string(value) + " };\n";
}

TEST(NormPlan, ServesLayerAndGroupNorm) {
  ASSERT_EQ(family_for("native_group_norm", ""), &family());
  EXPECT_STREQ(family().name(), "norm");
  EXPECT_TRUE(family().plan(layer_norm_problem(at::kFloat, {8192, 4096}, 1)).ok());
  EXPECT_TRUE(family().plan(layer_norm_problem(at::kBFloat16, {16, 64, 256, 256}, 3, false, false)).ok());
  EXPECT_TRUE(family().plan(layer_norm_problem(at::kHalf, {1}, 1)).ok());
  EXPECT_TRUE(family().plan(group_norm_problem(at::kFloat, {16, 64, 56, 56}, 8)).ok());
  EXPECT_TRUE(family().plan(group_norm_problem(at::kBFloat16, {3, 6}, 3, false)).ok());
}

TEST(NormPlan, DeclinesWhatItCannotDoExactly) {
  EXPECT_EQ(code(layer_norm_problem(at::kDouble, {8, 16}, 1)), Code::kUnsupported);
  EXPECT_EQ(code(layer_norm_problem(at::kFloat, {0, 16}, 1)), Code::kUnsupported);
  EXPECT_EQ(code(layer_norm_problem(at::kBFloat16, {8, 16}, 1, true, true, 75)), Code::kUnsupported);
  auto transposed = layer_norm_problem(at::kFloat, {16, 8}, 1);
  transposed.args[0].tensor.strides = {1, 16};
  EXPECT_EQ(code(transposed), Code::kUnsupported);
  auto mixed = layer_norm_problem(at::kBFloat16, {8, 16}, 1);
  mixed.args[2].tensor.dtype = at::kFloat;  // fp32 weight on a bf16 input
  EXPECT_EQ(code(mixed), Code::kUnsupported);
  auto wrong_shape = layer_norm_problem(at::kFloat, {8, 16}, 1);
  wrong_shape.args[1].value = c10::IValue(std::vector<int64_t>{15});
  EXPECT_EQ(code(wrong_shape), Code::kUnsupported);
  auto bad_groups = group_norm_problem(at::kFloat, {2, 6, 4, 4}, 4);  // 6 channels in 4 groups
  EXPECT_EQ(code(bad_groups), Code::kUnsupported);
  auto wrong_hw = group_norm_problem(at::kFloat, {2, 6, 4, 4}, 3);
  wrong_hw.args[5].value = c10::IValue(int64_t{15});
  EXPECT_EQ(code(wrong_hw), Code::kUnsupported);
}

TEST(NormPlan, VectorWidthFollowsRowsOffsetsAndChannels) {
  auto max_vec = [](const Problem& p) {
    int m = 0;
    for (const auto& v : space(p)) m = std::max(m, v.get("vec"));
    return m;
  };
  EXPECT_EQ(max_vec(layer_norm_problem(at::kFloat, {8, 4096}, 1)), 4);
  EXPECT_EQ(max_vec(layer_norm_problem(at::kBFloat16, {8, 4096}, 1)), 8);
  EXPECT_EQ(max_vec(layer_norm_problem(at::kFloat, {8, 4098}, 1)), 2);
  auto offset_weight = layer_norm_problem(at::kHalf, {8, 4096}, 1);
  offset_weight.args[2].tensor.storage_offset = 2;
  EXPECT_EQ(max_vec(offset_weight), 2);
  // Group norm: a vector must not straddle two channels, so HxW bounds the width.
  EXPECT_EQ(max_vec(group_norm_problem(at::kFloat, {4, 32, 7, 7}, 8)), 1);
  EXPECT_EQ(max_vec(group_norm_problem(at::kFloat, {4, 32, 6, 6}, 8)), 4);
}

TEST(NormPlan, SpaceOffersSplitRowsOnlyForLongRowsAndCachingOnlyWhereRowsFit) {
  // KernelBench LayerNorm: 16 rows of 4M elements. Only split rows (mode 2, and mode 8's rows over grid blocks)
  // and streamed block rows make sense.
  std::set<int> modes;
  for (const auto& v : space(layer_norm_problem(at::kFloat, {16, 64, 256, 256}, 3))) {
    modes.insert(v.get("mode"));
    EXPECT_EQ(v.get("cache"), 0) << v.id();
    if (v.get("mode") == 2) {
      EXPECT_GE(v.get("splits"), 4) << v.id();
    }
  }
  EXPECT_EQ(modes, (std::set<int>{1, 2, 8}));  // 8: the row held in the registers of 128 grid blocks
  // LLM rows: 4096 features fit in registers of a block; many rows, so no splitting.
  int cached = 0;
  for (const auto& v : space(layer_norm_problem(at::kBFloat16, {8192, 4096}, 1))) {
    cached += v.get("cache");
    EXPECT_NE(v.get("mode"), 2) << v.id();
    if (v.get("mode") == 0) {
      EXPECT_EQ(v.get("cache"), 0) << v.id();  // 128 elements per lane: too many
    }
  }
  EXPECT_GT(cached, 0);
}

TEST(NormPlan, SplitRowsServeLongRowsWhereTheHeldRowsCannot) {
  // Note [Norm rows]: long rows get modes 7 and 8 on sm_90+ with 16-byte vectors, and mode 2 everywhere: on sm_80,
  // and for rows whose vectors are narrower (fp32 rows of 100002: 8 bytes).
  auto modes = [](const Problem& p) {
    std::set<int> m;
    for (const auto& v : space(p)) m.insert(v.get("mode"));
    return m;
  };
  EXPECT_EQ(modes(layer_norm_problem(at::kFloat, {64, 1 << 20}, 1, false, false)), (std::set<int>{1, 2, 7, 8}));
  EXPECT_EQ(modes(layer_norm_problem(at::kFloat, {64, 1 << 20}, 1, false, false, 80)), (std::set<int>{1, 2}));
  EXPECT_EQ(modes(layer_norm_problem(at::kFloat, {8, 100002}, 1)), (std::set<int>{1, 2}));
  EXPECT_EQ(modes(layer_norm_problem(at::kBFloat16, {8192, 4096}, 1)), (std::set<int>{0, 1}));  // many short rows
  // Modes 3-6 name no technique (Note [Norm rows]): a cached id of one is not in the space.
  auto plan = family().plan(layer_norm_problem(at::kFloat, {64, 1 << 20}, 1, false, false));
  ASSERT_TRUE(plan.ok());
  EXPECT_FALSE(plan.value()->source(Variant{{{"mode", 3}, {"vec", 4}, {"block", 256}, {"cache", 0}, {"splits", 256},
                                             {"rev", 0}, {"chunk", 8}, {"ahead", 1}}}).ok());
  EXPECT_FALSE(plan.value()->source(Variant{{{"mode", 6}, {"vec", 4}, {"block", 256}, {"cache", 0}, {"splits", 1},
                                             {"rev", 0}, {"per", 8}, {"ahead", 0}}}).ok());
}

TEST(NormPlan, HeldRowsAreOfferedWhereASliceFitsTheRegistersOfACluster) {
  // Note [Norm held]. Group norm g8 of [16,64,256,256] fp32: 2 MB rows (131072 float4). Clusters of 16 keep the
  // whole slice (8192 vectors: 16 a thread at 512 consumers, 32 at 256) in 16 KB chunks (8 a slice) or 32 KB ones
  // (4), each with a tight ring (a slice and one chunk) and a deep one (as many as fit 226 KB): 4 variants a
  // block size. Clusters of 8 keep half of their 256 KB slices and reread the rest: 512 consumers and the deep
  // ring only, 2 variants. 10 in all, in 2 strata.
  auto plan = family().plan(group_norm_problem(at::kFloat, {16, 64, 256, 256}, 8));
  ASSERT_TRUE(plan.ok());
  std::set<int> strata;
  int held = 0, reread = 0;
  for (const auto& v : plan.value()->space()) {
    if (v.get("mode") != 7) continue;
    ++held;
    EXPECT_EQ(v.get("vec"), 4) << v.id();
    strata.insert(plan.value()->stratum(v));
    auto src = plan.value()->source(v);
    ASSERT_TRUE(src.ok());
    const int per_chunk = v.get("ckb") / 8;  // vectors a consumer takes from a chunk at 512 consumers
    if (v.get("cluster") == 8) {
      ++reread;
      EXPECT_EQ(v.get("block"), 512) << v.id();
      EXPECT_EQ(v.get("deep"), 1) << v.id();
      const int chunks = 16 / per_chunk * 2, kept = chunks / 2, slots_b = 64 / v.get("ckb");
      EXPECT_NE(src->code.find(constant("kChunks", chunks)), std::string::npos) << v.id();
      EXPECT_NE(src->code.find(constant("kKeep", kept)), std::string::npos) << v.id();
      EXPECT_NE(src->code.find(constant("kRereadSlots", slots_b)), std::string::npos) << v.id();
      EXPECT_NE(src->code.find(constant("kSlots", 226 / v.get("ckb") - slots_b)), std::string::npos) << v.id();
      EXPECT_NE(src->code.find(constant("kThreads", 576)), std::string::npos) << v.id();
      EXPECT_NE(src->code.find(constant("kMinBlocks", 1)), std::string::npos) << v.id();
      continue;
    }
    EXPECT_EQ(v.get("cluster"), 16) << v.id();
    const int chunks = v.get("ckb") == 16 ? 8 : 4;
    const int slots = v.get("deep") ? 226 / v.get("ckb") : chunks + 1;
    EXPECT_NE(src->code.find(constant("kChunks", chunks)), std::string::npos) << v.id();
    EXPECT_NE(src->code.find(constant("kKeep", chunks)), std::string::npos) << v.id();
    EXPECT_NE(src->code.find(constant("kSlots", slots)), std::string::npos) << v.id();
    EXPECT_NE(src->code.find(constant("kRereadSlots", 0)), std::string::npos) << v.id();
    EXPECT_NE(src->code.find(constant("kRowBlocks", 16)), std::string::npos) << v.id();
    EXPECT_NE(src->code.find(constant("kThreads", v.get("block") + 32)), std::string::npos) << v.id();
  }
  EXPECT_EQ(held, 10);
  EXPECT_EQ(reread, 2);
  EXPECT_EQ(strata, (std::set<int>{14, 15}));
  // 128 KB fp16 rows: the two smallest cluster sizes that fit, 1 and 2. 4 MB fp32 rows: clusters of 16 that
  // reread half of each slice.
  std::set<int> clusters;
  for (const auto& v : space(layer_norm_problem(at::kHalf, {32, 65536}, 1)))
    if (v.get("mode") == 7) clusters.insert(v.get("cluster"));
  EXPECT_EQ(clusters, (std::set<int>{1, 2}));
  int long_rows = 0;
  for (const auto& v : space(layer_norm_problem(at::kFloat, {64, 1 << 20}, 1, false, false))) {
    if (v.get("mode") != 7) continue;
    ++long_rows;
    EXPECT_EQ(v.get("cluster"), 16) << v.id();
    EXPECT_EQ(v.get("block"), 512) << v.id();
  }
  EXPECT_EQ(long_rows, 2);
  // Not offered: 16 MB rows (a slice of 16 would reread 7 of every 8 chunks), 8-byte vectors, sm_80, and many
  // short rows.
  for (const auto& p : {layer_norm_problem(at::kFloat, {16, 64, 256, 256}, 3),
                        layer_norm_problem(at::kFloat, {8, 100002}, 1),
                        group_norm_problem(at::kFloat, {16, 64, 256, 256}, 8, true, 80),
                        layer_norm_problem(at::kBFloat16, {8192, 4096}, 1)})
    for (const auto& v : space(p)) EXPECT_NE(v.get("mode"), 7) << v.id();
}

TEST(NormPlan, GridHeldRowsUseTheFewestGridBlocksWhoseRegistersHoldTheRow) {
  // Note [Norm held], mode 8: a row over the fewest blocks of a cooperative grid that hold it in registers (128 KB
  // each), at most the reference grid (132 on sm_90+), every chunk kept, the same ring knobs as mode 7.
  struct Case {
    optimizer::Problem p;
    int parts;
  };
  const std::vector<Case> cases = {
      {layer_norm_problem(at::kFloat, {16, 64, 256, 256}, 3), 128},       // KernelBench: 16 MB rows
      {layer_norm_problem(at::kFloat, {64, 1 << 20}, 1, false, false), 32},  // 4 MB rows
      {group_norm_problem(at::kFloat, {16, 64, 256, 256}, 8), 16},          // 2 MB rows
      {layer_norm_problem(at::kFloat, {5, 100004}, 1), 4},                  // 25001 vectors: the last slice short
  };
  for (const auto& c : cases) {
    auto plan = family().plan(c.p);
    ASSERT_TRUE(plan.ok());
    int grid = 0;
    for (const auto& v : plan.value()->space()) {
      if (v.get("mode") != 8) continue;
      ++grid;
      EXPECT_EQ(v.get("parts"), c.parts) << v.id();
      EXPECT_EQ(v.get("vec"), 4) << v.id();
      EXPECT_GE(plan.value()->stratum(v), 16) << v.id();
      auto src = plan.value()->source(v);
      ASSERT_TRUE(src.ok());
      EXPECT_NE(src->code.find(constant("kRowBlocks", c.parts)), std::string::npos) << v.id();
      EXPECT_NE(src->code.find("enum : bool { kGrid = true };"), std::string::npos) << v.id();
      EXPECT_NE(src->code.find("enum : bool { kClusterExchange = false };"), std::string::npos) << v.id();
      EXPECT_NE(src->code.find(constant("kDrop", 0)), std::string::npos) << v.id();  // no rereads
      EXPECT_NE(src->code.find(constant("kRereadSlots", 0)), std::string::npos) << v.id();
      EXPECT_NE(src->code.find(constant("kThreads", v.get("block") + 64)), std::string::npos) << v.id();
    }
    EXPECT_GE(grid, 2);
    EXPECT_LE(grid, 8);
  }
  // Not offered: rows one block holds (mode 7's clusters of 1 do), rows longer than 132 blocks hold, sm_80,
  // 8-byte vectors.
  for (const auto& p : {layer_norm_problem(at::kFloat, {64, 32768}, 1),
                        layer_norm_problem(at::kFloat, {2, 5, 1 << 22}, 2),
                        group_norm_problem(at::kFloat, {16, 64, 256, 256}, 8, true, 80),
                        layer_norm_problem(at::kFloat, {8, 100002}, 1)})
    for (const auto& v : space(p)) EXPECT_NE(v.get("mode"), 8) << v.id();
}

TEST(NormPlan, SourceIsSpecialisedAndRejectsForeignVariants) {
  auto plan = family().plan(layer_norm_problem(at::kFloat, {64, 1000}, 1, true, false, 90, 1e-6));
  ASSERT_TRUE(plan.ok());
  const auto sp = plan.value()->space();
  ASSERT_FALSE(sp.empty());
  auto src = plan.value()->source(sp.front());
  ASSERT_TRUE(src.ok());
  EXPECT_NE(src->code.find("enum : index_t { kCols = 1000 };"), std::string::npos);
  EXPECT_NE(src->code.find("enum : bool { kHasBias = false };"), std::string::npos);
  EXPECT_EQ(src->kernel_name, "cudal1_norm");
  EXPECT_FALSE(plan.value()->source(Variant{{{"mode", 2}, {"vec", 8}}}).ok());
  EXPECT_EQ(plan.value()->features(sp.front()).size(), plan.value()->features(sp.back()).size());
}

// Each technique's variant keeps the knobs {mode, vec, block, cache, splits, rev, ...} that caches, policy data
// and replay fixtures know.
TEST(NormPlan, TechniquesKeepTheirVariants) {
  using namespace norm;
  EXPECT_EQ(variant_of(RowPerWarp{{2, 128}, true}).id(), "mode0.vec2.block128.cache1.splits1.rev0");
  EXPECT_EQ(variant_of(RowPerBlock{{4, 256}, false}).id(), "mode1.vec4.block256.cache0.splits1.rev0");
  EXPECT_EQ(variant_of(SplitRow{{4, 512}, 64, true}).id(), "mode2.vec4.block512.cache0.splits64.rev1");
  EXPECT_EQ(variant_of(HeldCluster{{4, 512}, 8, 32, true}).id(),
            "mode7.vec4.block512.cache0.splits1.rev0.cluster8.ckb32.deep1");
  EXPECT_EQ(variant_of(HeldGrid{{4, 256}, 128, 16, false}).id(),
            "mode8.vec4.block256.cache0.splits1.rev0.parts128.ckb16.deep0");
  const Variant v = variant_of(RowPerBlock{{1, 256}, true});
  EXPECT_EQ(v.to_json(), (Variant{{{"mode", 1}, {"vec", 1}, {"block", 256}, {"cache", 1}, {"splits", 1}, {"rev", 0}}}
                              .to_json()));
}

}  // namespace
}  // namespace cudal1::optimizer
