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
  // KernelBench LayerNorm: 16 rows of 4M elements. Only split rows (modes 2, 3 and the parts of mode 6) and
  // streamed block rows make sense.
  std::set<int> modes;
  for (const auto& v : space(layer_norm_problem(at::kFloat, {16, 64, 256, 256}, 3))) {
    modes.insert(v.get("mode"));
    EXPECT_EQ(v.get("cache"), 0) << v.id();
    if (v.get("mode") == 2 || v.get("mode") == 3) {
      EXPECT_GE(v.get("splits"), 4) << v.id();
    }
  }
  EXPECT_EQ(modes, (std::set<int>{1, 2, 3, 6, 8}));  // 8: the row held in the registers of 128 grid blocks
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

TEST(NormPlan, RowGroupsAreSizedForL2AndOfferedWhereRowsAreSplit) {
  // Note [Norm groups]. KernelBench LayerNorm: 16 MB rows, so a group is one row whatever its size, and the
  // 8 and 16 MB knob values would be the same variant: only one is offered.
  std::set<int> chunks;
  int grouped = 0;
  for (const auto& v : space(layer_norm_problem(at::kFloat, {16, 64, 256, 256}, 3))) {
    if (v.get("mode") != 3) continue;
    ++grouped;
    chunks.insert(v.get("chunk"));
    EXPECT_EQ(v.get("vec"), 4) << v.id();
    EXPECT_EQ(v.get("cache"), 0) << v.id();
    EXPECT_GE(v.get("block"), 256) << v.id();
    EXPECT_EQ(v.get("splits"), 256) << v.id();
  }
  EXPECT_EQ(grouped, 3 * 2);  // blocks x ahead: 256 parts per row (16 or 64 leave SMs idle in a 1-row group)
  EXPECT_EQ(chunks, (std::set<int>{8}));
  // Group norm f32 [16,64,256,256] g8: 2 MB rows, groups of 4 and 8 rows; both `ahead` strata are there.
  std::set<int> strata;
  auto plan = family().plan(group_norm_problem(at::kFloat, {16, 64, 256, 256}, 8));
  ASSERT_TRUE(plan.ok());
  chunks.clear();
  for (const auto& v : plan.value()->space()) {
    if (v.get("mode") != 3) continue;
    chunks.insert(v.get("chunk"));
    strata.insert(plan.value()->stratum(v));
  }
  EXPECT_EQ(chunks, (std::set<int>{8, 16}));
  EXPECT_EQ(strata, (std::set<int>{6, 7}));
  // Many short rows: no splitting, so no groups.
  for (const auto& v : space(layer_norm_problem(at::kBFloat16, {8192, 4096}, 1))) EXPECT_NE(v.get("mode"), 3);
}

TEST(NormPlan, RowGroupSourceNamesItsGroups) {
  // 64 rows of 1M fp32 (4 MB): 8 MB groups hold 2 rows, so 32 groups.
  auto plan = family().plan(layer_norm_problem(at::kFloat, {64, 1 << 20}, 1, false, false));
  ASSERT_TRUE(plan.ok());
  bool seen = false;
  for (const auto& v : plan.value()->space()) {
    if (v.get("mode") != 3 || v.get("chunk") != 8 || v.get("ahead") != 1) continue;
    auto src = plan.value()->source(v);
    ASSERT_TRUE(src.ok());
    EXPECT_NE(src->code.find("enum : index_t { kRowsPerGroup = 2 };"), std::string::npos);
    EXPECT_NE(src->code.find("enum : index_t { kGroupCount = 32 };"), std::string::npos);
    EXPECT_NE(src->code.find("enum : int { kLead = 1 };"), std::string::npos);
    seen = true;
  }
  EXPECT_TRUE(seen);
}

TEST(NormPlan, ClusterRowsOnSm90OnlyAndForRowsOfAtLeast32ElementsABlock) {
  // Note [Norm clusters]. sm_80 has no clusters.
  for (int sm : {80, 86}) {
    for (const auto& v : space(group_norm_problem(at::kFloat, {16, 64, 256, 256}, 8, true, sm))) {
      EXPECT_NE(v.get("mode"), 4) << v.id();
    }
  }
  // Short rows too (the small group-norm rows: 8 x 784 fp16): every cluster size, the widest vector only,
  // blocks no larger than a slice's vectors (but 128 always).
  std::set<int> clusters, vecs;
  for (const auto& v : space(group_norm_problem(at::kHalf, {64, 256, 28, 28}, 32))) {
    if (v.get("mode") != 4) continue;
    clusters.insert(v.get("cluster"));
    vecs.insert(v.get("vec"));
    EXPECT_EQ(v.get("splits"), 1) << v.id();
    EXPECT_TRUE(v.get("block") == 128 || v.get("block") <= 784 / v.get("cluster")) << v.id();
  }
  EXPECT_EQ(clusters, (std::set<int>{2, 4, 8, 16}));
  EXPECT_EQ(vecs, (std::set<int>{8}));
  // 100 elements: a cluster of 2 at most (>= 32 elements a block).
  clusters.clear();
  for (const auto& v : space(layer_norm_problem(at::kFloat, {8, 100}, 1)))
    if (v.get("mode") == 4) clusters.insert(v.get("cluster"));
  EXPECT_EQ(clusters, (std::set<int>{2}));
  for (const auto& v : space(layer_norm_problem(at::kFloat, {8, 63}, 1))) EXPECT_NE(v.get("mode"), 4) << v.id();
  // KernelBench LayerNorm: 16 MB rows exceed a cluster's shared memory and registers (Note [Norm clusters]).
  for (const auto& v : space(layer_norm_problem(at::kFloat, {16, 64, 256, 256}, 3))) EXPECT_NE(v.get("mode"), 4);
}

TEST(NormPlan, ClusterSlicesFitSharedMemoryWithRegistersForTheRest) {
  // 4 MB fp32 rows: only 16 blocks of 512 or 1024 threads hold 256 KB each; at 1024 threads 14 float4 a thread
  // sit in shared memory (224 KB) and 2 in registers.
  auto plan = family().plan(layer_norm_problem(at::kFloat, {64, 1 << 20}, 1));
  ASSERT_TRUE(plan.ok());
  std::set<int> blocks;
  bool seen = false;
  for (const auto& v : plan.value()->space()) {
    if (v.get("mode") != 4) continue;
    EXPECT_EQ(v.get("cluster"), 16) << v.id();
    EXPECT_EQ(v.get("occ"), 1) << v.id();
    EXPECT_EQ(v.get("vec"), 4) << v.id();
    blocks.insert(v.get("block"));
    if (v.get("block") != 1024) continue;
    auto src = plan.value()->source(v);
    ASSERT_TRUE(src.ok());
    EXPECT_NE(src->code.find("enum : int { kThreadVectors = 16 };"), std::string::npos);
    EXPECT_NE(src->code.find("enum : int { kRegisterVectors = 2 };"), std::string::npos);
    EXPECT_NE(src->code.find("enum : int { kCluster = 16 };"), std::string::npos);
    EXPECT_NE(src->code.find("enum : index_t { kSliceVectors = 16384 };"), std::string::npos);
    EXPECT_NE(src->code.find("enum : int { kMinBlocks = 0 };"), std::string::npos);  // __launch_bounds__(block)
    seen = true;
  }
  EXPECT_TRUE(seen);
  EXPECT_EQ(blocks, (std::set<int>{512, 1024}));
  // 2 MB group-norm rows: 128 KB slices in 16 blocks; at 512 threads they also come sized for two blocks per
  // SM (14 float4 a thread in 112 KB of shared memory, 2 in registers), a stratum of their own.
  auto gplan = family().plan(group_norm_problem(at::kFloat, {16, 64, 256, 256}, 8));
  ASSERT_TRUE(gplan.ok());
  seen = false;
  for (const auto& v : gplan.value()->space()) {
    if (v.get("mode") != 4 || v.get("occ") != 2) continue;
    EXPECT_LE(v.get("block"), 512) << v.id();
    EXPECT_EQ(gplan.value()->stratum(v), 9) << v.id();
    if (v.get("vec") != 4 || v.get("block") != 512 || v.get("cluster") != 16) continue;
    auto src = gplan.value()->source(v);
    ASSERT_TRUE(src.ok());
    EXPECT_NE(src->code.find("enum : int { kRegisterVectors = 2 };"), std::string::npos);
    EXPECT_NE(src->code.find("enum : int { kMinBlocks = 2 };"), std::string::npos);
    seen = true;
  }
  EXPECT_TRUE(seen);
}

TEST(NormPlan, RingStepsAreOfferedWhereTheRingFitsOneBlockPerSm) {
  // Note [Norm ring]. 4 MB fp32 rows at the reference grid of 132 blocks: 1987 float4 a row per block; 4 MB
  // steps hold 1 row, 8 MB steps 2; 3 slots of 2 rows are 186 KB. Every block, step and ring: 12 variants in
  // two strata (ring 2, ring 3), so the tuner's stratum pass reaches both.
  auto plan = family().plan(layer_norm_problem(at::kFloat, {64, 1 << 20}, 1, false, false));
  ASSERT_TRUE(plan.ok());
  std::set<int> strata, steps;
  int rings = 0;
  bool seen = false;
  for (const auto& v : plan.value()->space()) {
    if (v.get("mode") != 5) continue;
    ++rings;
    EXPECT_EQ(v.get("vec"), 4) << v.id();
    EXPECT_GE(v.get("block"), 256) << v.id();
    strata.insert(plan.value()->stratum(v));
    steps.insert(v.get("step"));
    if (v.get("step") != 8 || v.get("ring") != 3) continue;
    auto src = plan.value()->source(v);
    ASSERT_TRUE(src.ok());
    EXPECT_NE(src->code.find("enum : index_t { kRowsPerStep = 2 };"), std::string::npos);
    EXPECT_NE(src->code.find("enum : index_t { kSteps = 32 };"), std::string::npos);
    EXPECT_NE(src->code.find("enum : int { kRing = 3 };"), std::string::npos);
    EXPECT_NE(src->code.find("#define VEC_BYTES 16\n"), std::string::npos);
    seen = true;
  }
  EXPECT_TRUE(seen);
  EXPECT_EQ(rings, 3 * 2 * 2);
  EXPECT_EQ(strata, (std::set<int>{10, 11}));
  EXPECT_EQ(steps, (std::set<int>{4, 8}));
  // sm_80 (A100: 108 blocks, 163 KB a block): 2428 float4 a row per block, so 3 slots of 2 rows do not fit.
  rings = 0;
  for (const auto& v : space(layer_norm_problem(at::kFloat, {64, 1 << 20}, 1, false, false, 80))) {
    if (v.get("mode") != 5) continue;
    ++rings;
    EXPECT_FALSE(v.get("step") == 8 && v.get("ring") == 3) << v.id();
  }
  EXPECT_EQ(rings, 3 * 3);
  // Group norm f32 [16,64,256,256] g8: 2 MB rows, 993 float4 a row per block: no 1024-thread blocks; 2 and 4
  // rows per step.
  rings = 0;
  for (const auto& v : space(group_norm_problem(at::kFloat, {16, 64, 256, 256}, 8))) {
    if (v.get("mode") != 5) continue;
    ++rings;
    EXPECT_LE(v.get("block"), 512) << v.id();
  }
  EXPECT_EQ(rings, 2 * 2 * 2);
  // KernelBench LayerNorm: a 16 MB row is 124 KB a block: two slots exceed shared memory (Note [Norm ring]).
  for (const auto& v : space(layer_norm_problem(at::kFloat, {16, 64, 256, 256}, 3))) EXPECT_NE(v.get("mode"), 5);
  // 2-byte vectors (odd fp16 rows) have no cp.async; other compute capabilities have no reference grid.
  for (const auto& v : space(layer_norm_problem(at::kHalf, {8, 999999}, 1))) EXPECT_NE(v.get("mode"), 5);
  for (const auto& v : space(layer_norm_problem(at::kFloat, {64, 1 << 20}, 1, false, false, 86)))
    EXPECT_NE(v.get("mode"), 5);
  // Many short rows: no split modes at all.
  for (const auto& v : space(layer_norm_problem(at::kBFloat16, {8192, 4096}, 1))) EXPECT_NE(v.get("mode"), 5);
}

TEST(NormPlan, TicketedPartsAreOfferedWhereTheReferenceGridHoldsARow) {
  // Note [Norm parts]. 4 MB fp32 rows (262144 float4): parts of block x per vectors, 64-256 a row, each within
  // the reference grid (132 SMs x 2 blocks of 512 or 4 of 256; 2 of either with `ahead`): all four without
  // `ahead`, three with it (8 vectors at 512 threads twice would not fit 64 registers), in two strata.
  auto plan = family().plan(layer_norm_problem(at::kFloat, {64, 1 << 20}, 1, false, false));
  ASSERT_TRUE(plan.ok());
  std::set<int> strata;
  int parts = 0;
  bool seen = false;
  for (const auto& v : plan.value()->space()) {
    if (v.get("mode") != 6) continue;
    ++parts;
    EXPECT_EQ(v.get("vec"), 4) << v.id();
    strata.insert(plan.value()->stratum(v));
    if (v.get("block") != 256 || v.get("per") != 4) continue;
    auto src = plan.value()->source(v);
    ASSERT_TRUE(src.ok());
    EXPECT_NE(src->code.find("enum : index_t { kParts = 256 };"), std::string::npos);
    EXPECT_NE(src->code.find("enum : int { kThreadVectors = 4 };"), std::string::npos);
    EXPECT_NE(src->code.find(v.get("ahead") ? "enum : int { kMinBlocks = 2 };" : "enum : int { kMinBlocks = 4 };"),
              std::string::npos);
    seen = true;
  }
  EXPECT_TRUE(seen);
  EXPECT_EQ(parts, 4 + 3);
  EXPECT_EQ(strata, (std::set<int>{12, 13}));
  // KernelBench LayerNorm, 16 MB rows: only per 8 without `ahead` (256 parts of 512 threads <= 264, 512 of 256
  // <= 528).
  parts = 0;
  for (const auto& v : space(layer_norm_problem(at::kFloat, {16, 64, 256, 256}, 3))) {
    if (v.get("mode") != 6) continue;
    ++parts;
    EXPECT_EQ(v.get("per"), 8) << v.id();
    EXPECT_EQ(v.get("ahead"), 0) << v.id();
  }
  EXPECT_EQ(parts, 2);
  // sm_80 (108 SMs): the 16 MB rows have more parts than the reference grid holds; the 4 MB rows fit (with
  // `ahead` not at 256 parts a row: 216 blocks).
  for (const auto& v : space(layer_norm_problem(at::kFloat, {16, 64, 256, 256}, 3, true, true, 80)))
    EXPECT_NE(v.get("mode"), 6);
  parts = 0;
  for (const auto& v : space(layer_norm_problem(at::kFloat, {64, 1 << 20}, 1, false, false, 80)))
    parts += v.get("mode") == 6;
  EXPECT_EQ(parts, 4 + 2);
  // Odd fp16 rows take 2-byte vectors and a short last part; no reference grid on sm_86; short rows: none.
  bool odd = false;
  for (const auto& v : space(layer_norm_problem(at::kHalf, {8, 999999}, 1))) odd = odd || v.get("mode") == 6;
  EXPECT_TRUE(odd);
  for (const auto& v : space(layer_norm_problem(at::kFloat, {64, 1 << 20}, 1, false, false, 86)))
    EXPECT_NE(v.get("mode"), 6);
  for (const auto& v : space(layer_norm_problem(at::kBFloat16, {8192, 4096}, 1))) EXPECT_NE(v.get("mode"), 6);
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
  EXPECT_EQ(variant_of(RowGroups{{4, 256}, 256, 8, true}).id(),
            "mode3.vec4.block256.cache0.splits256.rev0.chunk8.ahead1");
  EXPECT_EQ(variant_of(ClusterSlices{{8, 128}, 16, 2}).id(), "mode4.vec8.block128.cache0.splits1.rev0.cluster16.occ2");
  EXPECT_EQ(variant_of(RingSteps{{4, 1024}, 8, 3}).id(), "mode5.vec4.block1024.cache0.splits1.rev0.step8.ring3");
  EXPECT_EQ(variant_of(TicketParts{{4, 256}, 8, false}).id(), "mode6.vec4.block256.cache0.splits1.rev0.per8.ahead0");
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
