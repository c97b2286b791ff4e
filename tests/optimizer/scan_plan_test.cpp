/// @brief What the scan family accepts and declines (Note [Scans]), which techniques it offers where, and that
/// its source is specialised and rejects foreign variants.
#include <gtest/gtest.h>

#include <set>
#include <tuple>

#include "cudal1/optimizer/family.h"
#include "optimizer/problems.h"
#include "scan/scan_family.h"

namespace cudal1::optimizer {
namespace {

using testing::contiguous;
using testing::scan_problem;

const Family& family() { return *family_for("cumsum", ""); }

Problem sp(const std::string& op, c10::ScalarType dt, std::vector<int64_t> sizes, int64_t dim) {
  auto st = contiguous(sizes);
  return scan_problem(op, dt, std::move(sizes), std::move(st), dim);
}

/// The modes (strata) a plan offers, or {-1} when it declines.
std::set<int> modes(const Problem& p) {
  auto plan = family().plan(p);
  if (!plan.ok()) return {-1};
  std::set<int> m;
  for (const auto& v : plan.value()->space()) {
    m.insert(v.get("mode"));
    EXPECT_EQ(plan.value()->stratum(v), v.get("nat", 0) == 1 ? 8 : v.get("mode"));  // native: its own stratum
  }
  return m;
}

int max_vec(const Problem& p) {
  auto plan = family().plan(p);
  EXPECT_TRUE(plan.ok()) << plan.status().to_string();
  int m = 0;
  if (plan.ok())
    for (const auto& v : plan.value()->space()) m = std::max(m, v.get("vec"));
  return m;
}

TEST(ScanPlan, ServesCumsumAndCumprod) {
  ASSERT_EQ(family_for("cumprod", ""), &family());
  EXPECT_EQ(family_for("cumsum", "dimname"), nullptr);
  EXPECT_STREQ(family().name(), "scan");
  EXPECT_TRUE(family().plan(sp("cumsum", at::kFloat, {64, 4096}, 1)).ok());
  EXPECT_TRUE(family().plan(sp("cumsum", at::kFloat, {64, 4096}, -1)).ok());
  EXPECT_TRUE(family().plan(sp("cumsum", at::kFloat, {4096}, 0)).ok());  // one row: reassociated techniques
  EXPECT_TRUE(family().plan(sp("cumsum", at::kHalf, {8, 300, 5}, 1)).ok());
  EXPECT_TRUE(family().plan(sp("cumprod", at::kBFloat16, {8, 300, 5}, -3)).ok());
  EXPECT_TRUE(family().plan(sp("cumprod", at::kFloat, {4096, 4096}, 1)).ok());
  // dtype argument equal to the input's.
  EXPECT_TRUE(family().plan(scan_problem("cumsum", at::kHalf, {8, 16}, {16, 1}, 0, 90, 0, at::kHalf)).ok());
  // Permuted and sliced inputs.
  EXPECT_TRUE(family().plan(scan_problem("cumsum", at::kFloat, {16, 8}, {1, 16}, 1)).ok());
  EXPECT_TRUE(family().plan(scan_problem("cumsum", at::kFloat, {16, 8}, {32, 2}, 0, 90, 3)).ok());
}

TEST(ScanPlan, DeclinesWhatItCannotDoExactly) {
  auto code = [&](const Problem& p) { return family().plan(p).status().code(); };
  EXPECT_EQ(code(sp("cumsum", at::kDouble, {8, 16}, 1)), Code::kUnsupported);
  EXPECT_EQ(code(sp("cumsum", at::kInt, {8, 16}, 1)), Code::kUnsupported);
  EXPECT_EQ(code(sp("cumsum", at::kLong, {8, 16}, 1)), Code::kUnsupported);
  EXPECT_EQ(code(sp("cumprod", at::kBool, {8, 16}, 1)), Code::kUnsupported);
  EXPECT_EQ(code(scan_problem("cumsum", at::kFloat, {}, {}, 0)), Code::kUnsupported);       // 0-d
  EXPECT_EQ(code(sp("cumsum", at::kFloat, {0, 16}, 1)), Code::kUnsupported);                 // empty
  EXPECT_EQ(code(sp("cumsum", at::kFloat, {8, 16}, 2)), Code::kUnsupported);                 // dim out of range
  EXPECT_EQ(code(sp("cumsum", at::kFloat, {8, 16}, -3)), Code::kUnsupported);
  EXPECT_EQ(code(scan_problem("cumsum", at::kHalf, {8, 16}, {16, 1}, 1, 90, 0, at::kFloat)), Code::kUnsupported);
  EXPECT_EQ(code(scan_problem("cumsum", at::kBFloat16, {8, 16}, {16, 1}, 1, 75)), Code::kUnsupported);
  EXPECT_EQ(code(sp("relu", at::kFloat, {8, 16}, 1)), Code::kUnsupported);
  // fp16/bf16 and cumprod: ATen's association cannot be reproduced for one long row (cub) ...
  EXPECT_EQ(code(sp("cumsum", at::kHalf, {4096}, 0)), Code::kUnsupported);
  EXPECT_EQ(code(sp("cumprod", at::kFloat, {1, 4096}, 1)), Code::kUnsupported);
  // ... nor for rows ATen scans in tiles wider than 32 (few long rows: Tx = 128 here).
  EXPECT_EQ(code(sp("cumsum", at::kBFloat16, {64, 4096}, 1)), Code::kUnsupported);
  EXPECT_EQ(code(sp("cumprod", at::kFloat, {64, 4096}, 1)), Code::kUnsupported);
  // Many short rows: Tx = 512 (unsigned wrap in ATen's heuristic), rows of 40 > 32.
  EXPECT_EQ(code(sp("cumsum", at::kHalf, {1 << 20, 40}, 1)), Code::kUnsupported);
}

TEST(ScanPlan, ExactTechniquesWhereTheAssociationIsAtens) {
  const std::set<int> declined = {-1};
  // Rows ATen tiles with Tx = 16: only the tile emulations (a warp per tile, mode 3; a lane per tile, mode 6).
  EXPECT_EQ(modes(sp("cumsum", at::kBFloat16, {8192, 4096}, 1)), std::set<int>({3, 6}));
  EXPECT_EQ(modes(sp("cumprod", at::kFloat, {4096, 4096}, -1)), std::set<int>({3, 6}));
  // Rows of at most 32 match any tile width.
  EXPECT_EQ(modes(sp("cumsum", at::kHalf, {1 << 20, 32}, 1)), std::set<int>({3, 6}));
  // An outer dimension: serial columns only, also for rows with trailing size-1 dimensions.
  EXPECT_EQ(modes(sp("cumsum", at::kHalf, {8, 300, 5}, 1)), std::set<int>({4}));
  EXPECT_EQ(modes(sp("cumprod", at::kHalf, {8, 300, 1}, 1)), std::set<int>({4}));
  // Two elements: every association agrees.
  EXPECT_EQ(modes(sp("cumprod", at::kHalf, {2}, 0)), std::set<int>({3, 4, 6}));
  EXPECT_EQ(modes(sp("cumprod", at::kHalf, {3}, 0)), declined);
}

TEST(ScanPlan, Fp32CumsumOffersEveryTechniqueOfItsClass) {
  EXPECT_EQ(modes(sp("cumsum", at::kFloat, {32768, 32768}, 1)), std::set<int>({0, 1, 3}));
  EXPECT_EQ(modes(sp("cumsum", at::kFloat, {4, 1 << 20}, 1)), std::set<int>({0, 1, 2, 3}));
  EXPECT_EQ(modes(sp("cumsum", at::kFloat, {64, 48}, -1)), std::set<int>({0, 1, 3, 4}));
  EXPECT_EQ(modes(sp("cumsum", at::kFloat, {4096, 4096}, 0)), std::set<int>({4, 5, 7}));
  EXPECT_EQ(modes(sp("cumsum", at::kFloat, {3, 4096, 7}, 1)), std::set<int>({4, 5, 7}));
  // Single-pass columns: at most 64 chunks of (BLOCK / 32) x rows, and fp32 cumsum only.
  EXPECT_EQ(modes(sp("cumsum", at::kFloat, {1 << 16, 8}, 0)), std::set<int>({4, 5}));
  EXPECT_EQ(modes(sp("cumsum", at::kFloat, {8, 8}, 0)), std::set<int>({4}));
  EXPECT_EQ(modes(sp("cumsum", at::kFloat, {16, 8}, 0)), std::set<int>({4, 7}));
  EXPECT_EQ(modes(sp("cumsum", at::kHalf, {4096, 4096}, 0)), std::set<int>({4}));
}

/// The knobs of every variant of mode `mode` a plan offers, as (vec, block, splits).
std::set<std::tuple<int, int, int>> knobs(const Problem& p, int mode) {
  std::set<std::tuple<int, int, int>> k;
  auto plan = family().plan(p);
  EXPECT_TRUE(plan.ok()) << plan.status().to_string();
  if (plan.ok())
    for (const auto& v : plan.value()->space())
      if (v.get("mode") == mode) k.insert({v.get("vec"), v.get("block"), v.get("splits")});
  return k;
}

TEST(ScanPlan, SinglePassKnobs) {
  // A lane per tile: the widest loads the row allows or (vec 1) coalesced accesses staged through shared
  // memory, 4/8/16 lanes per row.
  const auto lanes = knobs(sp("cumsum", at::kBFloat16, {8192, 4096}, 1), 6);
  EXPECT_EQ(lanes.size(), 12u);
  for (const auto& [vec, block, splits] : lanes) {
    EXPECT_TRUE(vec == 8 || vec == 1);
    EXPECT_TRUE(splits == 4 || splits == 8 || splits == 16);
  }
  for (const auto& [vec, block, splits] : knobs(sp("cumprod", at::kFloat, {4096, 4092}, 1), 6))
    EXPECT_TRUE(vec == 4 || vec == 1);
  EXPECT_EQ(knobs(sp("cumprod", at::kHalf, {4096, 4095}, 1), 6).size(), 6u);  // odd rows: staged only
  // Transposed rows: scalar strided loads.
  for (const auto& [vec, block, splits] : knobs(scan_problem("cumprod", at::kHalf, {4096, 64}, {1, 4096}, 1), 6))
    EXPECT_EQ(vec, 1);
  // Columns in one pass: at most 64 values per thread, at most 64 chunks (4096 rows: chunks of >= 64 rows).
  const auto look = knobs(sp("cumsum", at::kFloat, {4096, 8192}, 0), 7);
  EXPECT_FALSE(look.empty());
  EXPECT_TRUE(look.count({4, 256, 16}));
  for (const auto& [vec, block, splits] : look) {
    EXPECT_LE(vec * splits, 64);
    EXPECT_LE((4096 + block / 32 * splits - 1) / (block / 32 * splits), 64);
  }
}

TEST(ScanPlan, NativeCombinesOnlyForHalfPrecisionCumsum) {
  // Note [Scans], native combines: every 16-bit cumsum lane variant also comes with nat, in a stratum of its own;
  // products and fp32 never do.
  auto count_native = [](const Problem& p) {
    auto plan = family().plan(p);
    EXPECT_TRUE(plan.ok()) << plan.status().to_string();
    int n = 0;
    if (!plan.ok()) return n;
    for (const auto& v : plan.value()->space()) {
      if (v.get("nat", 0) == 1) {
        EXPECT_EQ(v.get("mode"), 6);
        EXPECT_EQ(plan.value()->stratum(v), 8);
        auto src = plan.value()->source(v);
        EXPECT_TRUE(src.ok());
        if (src.ok()) {
          EXPECT_NE(src->code.find(p.args[0].tensor.dtype == at::kBFloat16 ? "fma.rn.bf16" : "fma.rn.f16"),
                    std::string::npos);
        }
        ++n;
      } else if (v.get("mode") == 6) {
        auto src = plan.value()->source(v);
        EXPECT_TRUE(src.ok());
        if (src.ok()) {
          EXPECT_EQ(src->code.find("fma.rn."), std::string::npos) << v.id();
        }
      }
    }
    return n;
  };
  EXPECT_EQ(count_native(sp("cumsum", at::kBFloat16, {8192, 4096}, 1)), 24);  // 6 two tiles ahead, 6 staged stores
  EXPECT_EQ(count_native(sp("cumsum", at::kHalf, {4096, 4095}, 1)), 6);  // odd rows: staged only
  EXPECT_EQ(count_native(sp("cumprod", at::kBFloat16, {8192, 4096}, 1)), 0);
  EXPECT_EQ(count_native(sp("cumsum", at::kFloat, {8192, 4096}, 1)), 0);
}

TEST(ScanPlan, LoadsAheadOnlyWithVectorLoads) {
  // Note [Scans], "Loads ahead": every lane variant with vector loads also comes two tiles ahead, no other.
  for (const auto& p : {sp("cumsum", at::kBFloat16, {8192, 4096}, 1), sp("cumsum", at::kHalf, {4096, 4095}, 1),
                        sp("cumprod", at::kFloat, {1024, 780}, 1)}) {
    auto plan = family().plan(p);
    ASSERT_TRUE(plan.ok()) << plan.status().to_string();
    int lanes_vec = 0, ahead = 0;
    for (const auto& v : plan.value()->space()) {
      const bool vec_lanes = v.get("mode") == 6 && v.get("vec") > 1;
      lanes_vec += vec_lanes;
      if (v.get("ahead", 1) == 1) continue;
      ++ahead;
      EXPECT_TRUE(vec_lanes) << v.id();
      EXPECT_EQ(v.get("ahead"), 2) << v.id();
      auto src = plan.value()->source(v);
      ASSERT_TRUE(src.ok()) << src.status().to_string();
      EXPECT_NE(src->code.find("enum : int { kAhead = 2 };\n"), std::string::npos) << v.id();
    }
    EXPECT_EQ(3 * ahead, lanes_vec);  // ahead 1 with and without staged stores, ahead 2
  }
}

TEST(ScanPlan, StagedStoresOnlyWithVectorLoadsOneStepAhead) {
  // Note [Scans], "Whole-sector stores": every lane variant with vector loads, one tile ahead, also comes with
  // its stores through shared memory; no other variant does.
  int all_staged = 0;
  for (const auto& p : {sp("cumsum", at::kBFloat16, {8192, 4096}, 1), sp("cumsum", at::kHalf, {4096, 4095}, 1),
                        sp("cumprod", at::kFloat, {1024, 780}, 1), sp("cumsum", at::kFloat, {64, 4096}, 1)}) {
    auto plan = family().plan(p);
    ASSERT_TRUE(plan.ok()) << plan.status().to_string();
    int plain = 0, staged = 0;
    for (const auto& v : plan.value()->space()) {
      const bool candidate = v.get("mode") == 6 && v.get("vec") > 1 && v.get("ahead", 1) == 1;
      auto src = plan.value()->source(v);
      ASSERT_TRUE(src.ok()) << src.status().to_string();
      const bool defined = src->code.find("enum : bool { kStagedStores = true };\n") != std::string::npos;
      EXPECT_EQ(defined, v.get("st", 0) == 1) << v.id();
      if (v.get("st", 0) == 1) {
        EXPECT_TRUE(candidate) << v.id();
        ++staged;
      } else {
        plain += candidate;
      }
    }
    EXPECT_EQ(staged, plain);
    all_staged += staged;
  }
  EXPECT_EQ(all_staged, 12 + 6);  // bf16 rows (native or not): 2 x 3 lanes x 2 blocks; fp32 cumprod: 3 lanes x 2
                                  // blocks; fp16 [4096,4095] has no vector loads, fp32 cumsum no lane tiles
}

TEST(ScanPlan, VectorWidthFollowsLayoutAndAlignment) {
  EXPECT_EQ(max_vec(sp("cumsum", at::kFloat, {64, 4096}, 1)), 4);
  EXPECT_EQ(max_vec(sp("cumsum", at::kFloat, {64, 4098}, 1)), 2);
  EXPECT_EQ(max_vec(sp("cumsum", at::kFloat, {64, 4096}, 0)), 4);     // columns: vectors across the inner block
  EXPECT_EQ(max_vec(sp("cumsum", at::kHalf, {64, 4096}, 0)), 8);
  EXPECT_EQ(max_vec(sp("cumsum", at::kFloat, {64, 4097}, 0)), 1);
  EXPECT_EQ(max_vec(scan_problem("cumsum", at::kFloat, {64, 4096}, {4096, 1}, 1, 90, 2)), 2);  // offset
  EXPECT_EQ(max_vec(scan_problem("cumsum", at::kFloat, {64, 4096}, {1, 64}, 1)), 1);           // transposed
  EXPECT_EQ(max_vec(scan_problem("cumsum", at::kFloat, {64, 4096}, {8192, 2}, 0)), 1);         // strided inner
}

TEST(ScanPlan, FeaturesHaveOneLengthInUnitRange) {
  size_t len = 0;
  for (const auto& p : {sp("cumsum", at::kFloat, {4, 1 << 20}, 1), sp("cumprod", at::kHalf, {8, 300, 5}, 1),
                        sp("cumsum", at::kFloat, {4096, 4096}, 0)}) {
    auto plan = family().plan(p);
    ASSERT_TRUE(plan.ok()) << plan.status().to_string();
    const auto space = plan.value()->space();
    ASSERT_FALSE(space.empty());
    std::set<std::string> ids;
    for (const auto& v : space) {
      EXPECT_TRUE(ids.insert(v.id()).second) << v.id();
      const auto f = plan.value()->features(v);
      if (len == 0) len = f.size();
      EXPECT_EQ(f.size(), len);
      for (float x : f) EXPECT_TRUE(x >= 0.f && x <= 1.f);
    }
  }
}

TEST(ScanPlan, SourceIsSpecialisedAndRejectsForeignVariants) {
  auto plan = family().plan(sp("cumsum", at::kFloat, {64, 4096}, 1));
  ASSERT_TRUE(plan.ok());
  const auto space = plan.value()->space();
  auto src = plan.value()->source(space.front());
  ASSERT_TRUE(src.ok());
  EXPECT_NE(src->code.find("enum : index_t { kN = 4096 };"), std::string::npos);
  EXPECT_EQ(src->kernel_name, "cudal1_scan");
  EXPECT_FALSE(plan.value()->source(Variant{{{"mode", 0}, {"vec", 16}, {"block", 128}, {"splits", 1}}}).ok());
  EXPECT_FALSE(plan.value()->source(Variant{{{"mode", 5}, {"vec", 1}, {"block", 128}, {"splits", 4}}}).ok());
  EXPECT_FALSE(plan.value()->source(Variant{{{"mode", 3}}}).ok());
  EXPECT_FALSE(plan.value()->bind(space.front(), nullptr).ok());
  // fp16 rows: the tile emulation rounds every combine to the dtype.
  auto half = family().plan(sp("cumsum", at::kHalf, {8192, 4096}, 1));
  ASSERT_TRUE(half.ok());
  auto hs = half.value()->source(half.value()->space().front());
  ASSERT_TRUE(hs.ok());
  EXPECT_NE(hs->code.find("rnd(OP(v, u))"), std::string::npos);
  // The single-pass techniques: their bodies, and the look-back's tiling constants.
  for (const auto& v : half.value()->space())
    if (v.get("mode") == 6) {
      auto ls = half.value()->source(v);
      ASSERT_TRUE(ls.ok());
      EXPECT_NE(ls->code.find("chain_total(a, c)"), std::string::npos);
    }
  // Staged (coalesced) loads exactly for vec 1 on contiguous rows.
  auto staged = family().plan(sp("cumprod", at::kHalf, {4096, 4095}, 1));
  ASSERT_TRUE(staged.ok());
  auto ss = staged.value()->source(Variant{{{"mode", 6}, {"vec", 1}, {"block", 128}, {"splits", 8}}});
  ASSERT_TRUE(ss.ok()) << ss.status().to_string();
  EXPECT_NE(ss->code.find("enum : bool { kStaged = true };"), std::string::npos);
  auto direct = family().plan(scan_problem("cumprod", at::kHalf, {4096, 64}, {1, 4096}, 1));
  ASSERT_TRUE(direct.ok());
  auto ds = direct.value()->source(Variant{{{"mode", 6}, {"vec", 1}, {"block", 128}, {"splits", 8}}});
  ASSERT_TRUE(ds.ok()) << ds.status().to_string();
  EXPECT_NE(ds->code.find("enum : bool { kStaged = false };"), std::string::npos);
  auto cols = family().plan(sp("cumsum", at::kFloat, {4096, 8192}, 0));
  ASSERT_TRUE(cols.ok());
  auto lb = cols.value()->source(Variant{{{"mode", 7}, {"vec", 4}, {"block", 256}, {"splits", 16}}});
  ASSERT_TRUE(lb.ok()) << lb.status().to_string();
  EXPECT_NE(lb->code.find("enum : index_t { kGroups = 64 };"), std::string::npos);
  EXPECT_NE(lb->code.find("enum : index_t { kChunks = 32 };"), std::string::npos);
  EXPECT_NE(lb->code.find("enum : index_t { kChunk = 128 };"), std::string::npos);
}

// Note [Scans]: a technique's variant keeps the knobs {mode, vec, block, splits} (then nat, ahead and st where
// set) that caches, policy data and replay fixtures know.
TEST(ScanPlan, TechniquesKeepTheirVariants) {
  const auto warp = scan::variant_of(scan::RowWarp{2, 128});
  EXPECT_EQ(warp.id(), "mode0.vec2.block128.splits1");
  EXPECT_EQ(warp.to_json(), (Variant{{{"mode", 0}, {"vec", 2}, {"block", 128}, {"splits", 1}}}.to_json()));
  EXPECT_EQ(scan::variant_of(scan::RowBlock{4, 512}).id(), "mode1.vec4.block512.splits1");
  EXPECT_EQ(scan::variant_of(scan::RowSplit{4, 512, 32}).id(), "mode2.vec4.block512.splits32");
  EXPECT_EQ(scan::variant_of(scan::RowExact{256}).id(), "mode3.vec1.block256.splits1");
  EXPECT_EQ(scan::variant_of(scan::Column{8, 64}).id(), "mode4.vec8.block64.splits1");
  EXPECT_EQ(scan::variant_of(scan::ColumnSplit{2, 128, 16}).id(), "mode5.vec2.block128.splits16");
  EXPECT_EQ(scan::variant_of(scan::RowLanes{8, 128, 8, false, 1, false}).id(), "mode6.vec8.block128.splits8");
  EXPECT_EQ(scan::variant_of(scan::RowLanes{8, 256, 16, true, 2, false}).id(),
            "mode6.vec8.block256.splits16.nat1.ahead2");
  EXPECT_EQ(scan::variant_of(scan::RowLanes{4, 128, 4, true, 1, true}).id(), "mode6.vec4.block128.splits4.nat1.st1");
  EXPECT_EQ(scan::variant_of(scan::ColumnLookback{4, 256, 16}).id(), "mode7.vec4.block256.splits16");
  EXPECT_EQ(scan::variant_of(scan::ScanTechnique{}).id(), "mode0.vec1.block256.splits1");
}

}  // namespace
}  // namespace cudal1::optimizer
