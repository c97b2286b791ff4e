/// @brief What the softmax family accepts and declines, how it reads rows and columns, and its technique spaces.
#include <gtest/gtest.h>

#include <set>

#include "cudal1/optimizer/family.h"
#include "optimizer/problems.h"

namespace cudal1::optimizer {
namespace {

using testing::contiguous;
using testing::softmax_problem;

const Family& family() { return *family_for("_softmax", ""); }

int max_vec(const Problem& p) {
  auto plan = family().plan(p);
  EXPECT_TRUE(plan.ok()) << plan.status().to_string();
  if (!plan.ok()) return 0;
  int m = 0;
  for (const auto& v : plan.value()->space())
    if (!v.get("head")) m = std::max(m, v.get("vec"));  // Note [Softmax row heads]: RowHeads below
  return m;
}

/// The widest vector of `p`'s head variants (Note [Softmax row heads]); 0 when none is offered.
int head_vec(const Problem& p) {
  auto plan = family().plan(p);
  EXPECT_TRUE(plan.ok()) << plan.status().to_string();
  if (!plan.ok()) return 0;
  int m = 0;
  for (const auto& v : plan.value()->space())
    if (v.get("head")) m = std::max(m, v.get("vec"));
  return m;
}

TEST(SoftmaxPlan, ServesBothOpsOverTheLastDimension) {
  ASSERT_EQ(family_for("_log_softmax", ""), &family());
  EXPECT_STREQ(family().name(), "softmax");
  EXPECT_TRUE(family().plan(softmax_problem("_softmax", at::kFloat, {8, 32000}, {32000, 1})).ok());
  EXPECT_TRUE(family().plan(softmax_problem("_log_softmax", at::kBFloat16, {2, 3, 4096}, {12288, 4096, 1}, 2)).ok());
  EXPECT_TRUE(family().plan(softmax_problem("_softmax", at::kHalf, {1, 1}, {1, 1})).ok());
  // Rows with a stride larger than the row (a slice of a wider tensor) are fine.
  EXPECT_TRUE(family().plan(softmax_problem("_softmax", at::kFloat, {64, 1000}, {1024, 1})).ok());
}

TEST(SoftmaxPlan, DeclinesWhatItCannotDoExactly) {
  auto code = [&](const Problem& p) { return family().plan(p).status().code(); };
  EXPECT_EQ(code(softmax_problem("_softmax", at::kHalf, {8, 16}, {16, 1}, -1, true)), Code::kUnsupported);
  EXPECT_EQ(code(softmax_problem("_softmax", at::kDouble, {8, 16}, {16, 1})), Code::kUnsupported);
  EXPECT_EQ(code(softmax_problem("_softmax", at::kFloat, {16, 8}, {1, 16})), Code::kUnsupported);  // transposed
  EXPECT_EQ(code(softmax_problem("_softmax", at::kFloat, {4, 5, 16}, {160, 16, 1})), Code::kUnsupported);  // 2 strides
  EXPECT_EQ(code(softmax_problem("_softmax", at::kFloat, {0, 16}, {16, 1})), Code::kUnsupported);
  EXPECT_EQ(code(softmax_problem("_softmax", at::kBFloat16, {8, 16}, {16, 1}, -1, false, 75)), Code::kUnsupported);
  EXPECT_EQ(code(softmax_problem("relu", at::kFloat, {8, 16}, {16, 1})), Code::kUnsupported);
  EXPECT_EQ(code(softmax_problem("_softmax", at::kFloat, {8, 16}, {16, 1}, 2)), Code::kUnsupported);   // no dim 2
  EXPECT_EQ(code(softmax_problem("_softmax", at::kFloat, {8, 16}, {16, 1}, -3)), Code::kUnsupported);
}

TEST(SoftmaxPlan, VectorWidthFollowsRowsAndAlignment) {
  EXPECT_EQ(max_vec(softmax_problem("_softmax", at::kFloat, {8, 4096}, {4096, 1})), 4);
  EXPECT_EQ(max_vec(softmax_problem("_softmax", at::kBFloat16, {8, 4096}, {4096, 1})), 8);
  EXPECT_EQ(max_vec(softmax_problem("_softmax", at::kFloat, {8, 4098}, {4098, 1})), 2);
  EXPECT_EQ(max_vec(softmax_problem("_softmax", at::kFloat, {8, 1000}, {1002, 1})), 2);
  EXPECT_EQ(max_vec(softmax_problem("_softmax", at::kHalf, {8, 4096}, {4096, 1}, -1, false, 90, 3)), 1);
}

TEST(SoftmaxPlan, RowHeadsVectoriseRowsOfAnyWidthWhoseInputAndOutputShareAlignment) {
  // The odd vocabulary: plain variants stay scalar, head variants read 16 bytes.
  EXPECT_EQ(max_vec(softmax_problem("_log_softmax", at::kFloat, {1024, 50257}, {50257, 1})), 1);
  EXPECT_EQ(head_vec(softmax_problem("_log_softmax", at::kFloat, {1024, 50257}, {50257, 1})), 4);
  EXPECT_EQ(head_vec(softmax_problem("_softmax", at::kBFloat16, {7, 999}, {999, 1})), 8);
  // Already vectorised: no head variants.
  EXPECT_EQ(head_vec(softmax_problem("_softmax", at::kFloat, {8, 4096}, {4096, 1})), 0);
  // Stride minus width a multiple of 2 but not 4 (fp32): head length differs between input and output at 4.
  EXPECT_EQ(head_vec(softmax_problem("_softmax", at::kFloat, {8, 1001}, {1003, 1})), 2);
  // Storage offset not a multiple of the vector; rows shorter than two vectors.
  EXPECT_EQ(head_vec(softmax_problem("_softmax", at::kHalf, {8, 1001}, {1001, 1}, -1, false, 90, 3)), 0);
  EXPECT_EQ(head_vec(softmax_problem("_softmax", at::kFloat, {8, 7}, {7, 1})), 2);  // 2 x 4 > 7
  EXPECT_EQ(head_vec(softmax_problem("_softmax", at::kFloat, {1, 3}, {3, 1})), 0);
  auto plan = family().plan(softmax_problem("_log_softmax", at::kFloat, {1024, 50257}, {50257, 1}));
  ASSERT_TRUE(plan.ok());
  const Variant v{{{"vec", 4}, {"block", 1024}, {"warp", 0}, {"cache", 1}, {"head", 1}}};
  auto src = plan.value()->source(v);
  ASSERT_TRUE(src.ok()) << src.status().to_string();
  EXPECT_NE(src->code.find("enum : bool { kHead = true };"), std::string::npos);
  EXPECT_NE(src->code.find("D = 50257"), std::string::npos);
  // Head variants only above the plain width; a plain variant cannot take the head's width.
  EXPECT_FALSE(
      plan.value()->source(Variant{{{"vec", 1}, {"block", 1024}, {"warp", 0}, {"cache", 1}, {"head", 1}}}).ok());
  EXPECT_FALSE(plan.value()->source(Variant{{{"vec", 4}, {"block", 1024}, {"warp", 0}, {"cache", 1}}}).ok());
  EXPECT_EQ(plan.value()->features(v).size(),
            plan.value()->features(Variant{{{"vec", 1}, {"block", 1024}, {"warp", 0}, {"cache", 1}}}).size());
}

TEST(SoftmaxPlan, CachingIsOfferedOnlyWhereRowsFitInRegisters) {
  auto plan = family().plan(softmax_problem("_softmax", at::kFloat, {4, 32768}, {32768, 1}));
  ASSERT_TRUE(plan.ok());
  int cached = 0;
  for (const auto& v : plan.value()->space()) {
    if (!v.get("cache")) continue;
    ++cached;
    EXPECT_EQ(v.get("warp"), 0) << v.id();  // a warp cannot hold 32768 floats in registers
    EXPECT_GE(v.get("block"), 512) << v.id();
  }
  EXPECT_GT(cached, 0);
  auto src = plan.value()->source(plan.value()->space().front());
  ASSERT_TRUE(src.ok());
  EXPECT_NE(src->code.find("D = 32768"), std::string::npos);
}


const Family& softmax() { return *family_for("_softmax", ""); }

std::unique_ptr<Plan> plan_of(const Problem& p) {
  auto plan = softmax().plan(p);
  EXPECT_TRUE(plan.ok()) << plan.status().to_string();
  return plan.ok() ? std::move(plan).value() : nullptr;
}

/// Softmax over `dim` of a contiguous tensor.
Problem over(c10::ScalarType dt, std::vector<int64_t> sizes, int64_t dim, const char* op = "_softmax",
             int sm = 90) {
  auto st = contiguous(sizes);
  return softmax_problem(op, dt, std::move(sizes), std::move(st), dim, false, sm);
}

bool is_column_plan(const Plan& plan) { return plan.space().front().get("split", 0) > 0; }

TEST(SoftmaxPlan, ServesEveryOuterDimOfContiguousInputs) {
  const std::vector<int64_t> sizes = {3, 4, 5, 6};
  for (int64_t dim = -4; dim < 3; ++dim) {
    if (dim == -1) continue;
    for (const char* op : {"_softmax", "_log_softmax"}) {
      auto plan = plan_of(over(at::kFloat, sizes, dim, op));
      ASSERT_NE(plan, nullptr) << dim;
      EXPECT_TRUE(is_column_plan(*plan)) << dim;
      auto src = plan->source(plan->space().front());
      ASSERT_TRUE(src.ok());
      const int64_t n = sizes[(dim + 4) % 4];
      EXPECT_NE(src->code.find("N = " + std::to_string(n) + ";"), std::string::npos) << src->code;
      EXPECT_NE(src->code.find(std::string("enum : bool { kLog = ") + (op[1] == 'l' ? "true" : "false") + " };"),
                std::string::npos);
    }
  }
  for (auto dt : {at::kFloat, at::kHalf, at::kBFloat16}) {
    EXPECT_NE(plan_of(over(dt, {64, 1000, 56, 56}, 1)), nullptr);
    EXPECT_NE(plan_of(over(dt, {32, 32000, 64}, -2)), nullptr);
    EXPECT_NE(plan_of(over(dt, {8, 16, 2048, 2048}, 2)), nullptr);
  }
  // A softmax dim followed only by size-1 dims is a row softmax (as in ATen: inner size 1).
  auto rows = plan_of(over(at::kFloat, {8, 1000, 1, 1}, 1));
  ASSERT_NE(rows, nullptr);
  EXPECT_FALSE(is_column_plan(*rows));
  EXPECT_EQ(rows->space().front().get("warp", -1), 1);
  // Size-1 softmax dim, size-1 outer dims.
  EXPECT_TRUE(is_column_plan(*plan_of(over(at::kHalf, {8, 1, 16}, 1))));
  EXPECT_TRUE(is_column_plan(*plan_of(over(at::kHalf, {1, 7, 1, 16}, 1))));
}

TEST(SoftmaxPlan, ServesColumnsOfExactlyMappedLayouts) {
  // A slice along the softmax dim: n stride larger than inner.
  auto sliced = plan_of(softmax_problem("_softmax", at::kFloat, {8, 10, 16}, {320, 16, 1}, 1));
  ASSERT_NE(sliced, nullptr);
  auto src = sliced->source(sliced->space().front());
  ASSERT_TRUE(src.ok());
  EXPECT_NE(src->code.find("OSV = 320, NSV = 16;"), std::string::npos) << src->code;  // vec 1 is first
  // A slice of the outer dim, and a transposed pair of outer dims that still has one uniform stride.
  EXPECT_NE(plan_of(softmax_problem("_softmax", at::kFloat, {4, 5, 16}, {160, 16, 1}, 1)), nullptr);
  EXPECT_NE(plan_of(softmax_problem("_softmax", at::kFloat, {4, 1, 5, 16}, {80, 3, 16, 1}, 2)), nullptr);
}

TEST(SoftmaxPlan, DeclinesColumnLayoutsItDoesNotMapExactly) {
  auto code = [&](const Problem& p) { return softmax().plan(p).status().code(); };
  // Transposed: the dim after the softmax dim is not dense.
  EXPECT_EQ(code(softmax_problem("_softmax", at::kFloat, {16, 8}, {1, 16}, 0)), Code::kUnsupported);
  EXPECT_EQ(code(softmax_problem("_softmax", at::kFloat, {4, 5, 16}, {160, 32, 2}, 1)), Code::kUnsupported);
  // Inner dims dense only up to a gap.
  EXPECT_EQ(code(softmax_problem("_softmax", at::kFloat, {4, 5, 6, 8}, {480, 96, 16, 1}, 1)), Code::kUnsupported);
  // Outer dims without one uniform stride.
  EXPECT_EQ(code(softmax_problem("_softmax", at::kFloat, {3, 4, 5, 16}, {640, 80, 16, 1}, 2)), Code::kUnsupported);
  // Overlapping (expanded) columns and outer slices.
  EXPECT_EQ(code(softmax_problem("_softmax", at::kFloat, {4, 5, 16}, {80, 0, 1}, 1)), Code::kUnsupported);
  EXPECT_EQ(code(softmax_problem("_softmax", at::kFloat, {4, 5, 16}, {0, 16, 1}, 1)), Code::kUnsupported);
  // What the row case declines, over an outer dim.
  EXPECT_EQ(code(softmax_problem("_softmax", at::kHalf, {8, 16, 4}, {64, 4, 1}, 1, true)), Code::kUnsupported);
  EXPECT_EQ(code(softmax_problem("_log_softmax", at::kDouble, {8, 16, 4}, {64, 4, 1}, 0)), Code::kUnsupported);
  EXPECT_EQ(code(softmax_problem("_softmax", at::kFloat, {8, 0, 4}, {4, 4, 1}, 0)), Code::kUnsupported);
  EXPECT_EQ(code(softmax_problem("_softmax", at::kFloat, {8, 16, 0}, {16, 1, 1}, 1)), Code::kUnsupported);
  EXPECT_EQ(code(softmax_problem("_softmax", at::kBFloat16, {8, 16, 4}, {64, 4, 1}, 1, false, 75)),
            Code::kUnsupported);
}

int column_max_vec(const Problem& p) {
  auto plan = plan_of(p);
  int m = 0;
  if (plan)
    for (const auto& v : plan->space()) m = std::max(m, v.get("vec"));
  return m;
}

TEST(SoftmaxPlan, ColumnVectorWidthFollowsInnerStridesAndAlignment) {
  EXPECT_EQ(column_max_vec(over(at::kFloat, {32, 100, 64}, 1)), 4);
  EXPECT_EQ(column_max_vec(over(at::kBFloat16, {32, 100, 64}, 1)), 8);
  EXPECT_EQ(column_max_vec(over(at::kHalf, {32, 100, 7}, 1)), 1);  // odd inner
  EXPECT_EQ(column_max_vec(over(at::kFloat, {32, 100, 6}, 1)), 2);
  EXPECT_EQ(column_max_vec(softmax_problem("_softmax", at::kFloat, {8, 10, 16}, {330, 33, 1}, 1)), 1);
  EXPECT_EQ(column_max_vec(softmax_problem("_softmax", at::kHalf, {8, 10, 16}, {160, 16, 1}, 1, false, 90, 2)), 2);
}

TEST(SoftmaxPlan, ColumnSpaceSplitsAndCachesOnlyWhereUseful) {
  auto wide = plan_of(over(at::kFloat, {4, 16, 3136}, 1));  // n = 16: every split caches
  ASSERT_NE(wide, nullptr);
  std::set<int> splits;
  int cached = 0;
  int split_variants = 0;
  for (const auto& v : wide->space()) {
    if (v.get("tile")) continue;  // Note [Softmax column tiles]: ColumnTiles below
    ++split_variants;
    splits.insert(v.get("split"));
    cached += v.get("cache");
  }
  EXPECT_EQ(2 * cached, split_variants);
  EXPECT_EQ(splits, (std::set<int>{1, 4}));  // split 32 > n = 16 would leave threads idle
  auto tiny = plan_of(over(at::kFloat, {4, 3, 3136}, 1));
  ASSERT_NE(tiny, nullptr);
  for (const auto& v : tiny->space()) {
    EXPECT_TRUE(v.get("tile") || v.get("split") == 1) << v.id();
  }
  auto tall = plan_of(over(at::kFloat, {32, 32000, 64}, 1));  // no column part fits in registers
  ASSERT_NE(tall, nullptr);
  cached = 0;
  for (const auto& v : tall->space()) cached += v.get("cache");
  EXPECT_EQ(cached, 0);
  auto mid = plan_of(over(at::kHalf, {32, 256, 64}, 1));  // caches 256 / split x vec <= 64 elements
  ASSERT_NE(mid, nullptr);
  std::set<std::pair<int, int>> cached_at;  // (split, vec)
  for (const auto& v : mid->space())
    if (v.get("cache") && !v.get("tile")) cached_at.insert({v.get("split"), v.get("vec")});
  EXPECT_EQ(cached_at, (std::set<std::pair<int, int>>{{4, 1}, {32, 1}, {32, 2}, {32, 4}, {32, 8}}));
  // Variants of another plan kind are rejected.
  EXPECT_FALSE(mid->source(Variant{{{"vec", 1}, {"block", 128}, {"warp", 1}, {"cache", 0}}}).ok());
  EXPECT_FALSE(mid->source(Variant{{{"vec", 1}, {"block", 128}, {"split", 8}, {"cache", 0}}}).ok());
  EXPECT_FALSE(mid->source(Variant{{{"vec", 16}, {"block", 128}, {"split", 1}, {"cache", 0}}}).ok());
}

TEST(SoftmaxPlan, RowAndColumnPlansShareOneFeatureLengthAndDistinctStrata) {
  std::vector<std::unique_ptr<Plan>> rows, cols;
  rows.push_back(plan_of(softmax_problem("_softmax", at::kFloat, {8, 32000}, {32000, 1})));
  rows.push_back(plan_of(softmax_problem("_log_softmax", at::kHalf, {8, 100}, {100, 1})));
  cols.push_back(plan_of(over(at::kFloat, {32, 32000, 64}, 1)));
  cols.push_back(plan_of(over(at::kBFloat16, {4, 16, 3136}, 1, "_log_softmax")));
  size_t len = 0;
  std::set<int> row_strata, col_strata;
  auto check = [&](const Plan& plan, std::set<int>* strata) {
    std::set<std::string> ids;
    for (const auto& v : plan.space()) {
      const auto f = plan.features(v);
      if (len == 0) len = f.size();
      EXPECT_EQ(f.size(), len) << v.id();
      for (float x : f) EXPECT_TRUE(x >= 0.f && x <= 1.f);
      strata->insert(plan.stratum(v));
      EXPECT_TRUE(ids.insert(v.id()).second) << v.id();
    }
  };
  for (const auto& p : rows) {
    ASSERT_NE(p, nullptr);
    check(*p, &row_strata);
  }
  for (const auto& p : cols) {
    ASSERT_NE(p, nullptr);
    check(*p, &col_strata);
  }
  EXPECT_GT(len, 0u);
  // 17..19: cluster rows; 20..23: the mappings at the widest vector
  for (int s : row_strata) EXPECT_TRUE((s >= 0 && s < 4) || (s >= 17 && s <= 23)) << s;
  for (int s = 20; s < 24; ++s) EXPECT_EQ(row_strata.count(s), 1u) << s;
  // 13: fast tiles; 14..16, 24..26 and 27..29: shared tiles, online, in two passes, and pair tiles; 30: held slabs
  for (int s : col_strata) EXPECT_TRUE((s >= 4 && s <= 16) || (s >= 24 && s <= 30)) << s;
  EXPECT_EQ(col_strata.count(13), 1u);  // bf16 [4,16,3136]
  EXPECT_TRUE(col_strata.count(27) + col_strata.count(28) + col_strata.count(29) > 0);  // bf16 [4,16,3136]
  EXPECT_GE(col_strata.size(), 4u);  // split 1 / 4 / 32, cached or not
  EXPECT_TRUE(col_strata.count(10) && col_strata.count(12));  // tiles re-read; chunked tiles
  EXPECT_TRUE(*row_strata.rbegin() >= 17 && *col_strata.rbegin() >= 14);  // cluster rows; shared tiles
}

/// The tile variants of `p`'s plan (Note [Softmax column tiles]).
std::vector<Variant> tiles_of(const Plan& plan) {
  std::vector<Variant> out;
  for (const auto& v : plan.space())
    if (v.get("tile") == 1) out.push_back(v);
  return out;
}

TEST(SoftmaxPlan, ColumnTilesCoverWholeLinesAndSplitLongColumnsOverBlocks) {
  // [32,32000,64] bf16: 32 tiles of 64 columns, so n is split over blocks (two launches, never cached).
  auto tall = plan_of(over(at::kBFloat16, {32, 32000, 64}, 1, "_log_softmax"));
  ASSERT_NE(tall, nullptr);
  std::set<int> chunks, vecs;
  for (const auto& v : tiles_of(*tall)) {
    chunks.insert(v.get("chunks"));
    vecs.insert(v.get("vec"));
    EXPECT_LE(v.get("block") * v.get("vec"), 4096) << v.id();  // the warp merge's shared memory
    EXPECT_TRUE(v.get("chunks") == 1 || v.get("cache") == 0) << v.id();
  }
  EXPECT_EQ(chunks, (std::set<int>{1, 8, 64}));
  EXPECT_EQ(vecs, (std::set<int>{1, 2, 4, 8}));
  const Variant chunked{{{"vec", 2}, {"block", 1024}, {"tile", 1}, {"chunks", 64}, {"cache", 0}}};
  auto src = tall->source(chunked);
  ASSERT_TRUE(src.ok()) << src.status().to_string();
  EXPECT_NE(src->code.find("N = 32000, NC = 500;"), std::string::npos) << src->code;
  EXPECT_NE(src->code.find("IV = 32, TILES = 1;"), std::string::npos);
  EXPECT_NE(src->code.find("BLOCKS = 2048;"), std::string::npos);
  EXPECT_NE(src->code.find("COLS = 2048;"), std::string::npos);  // chunked only
  EXPECT_NE(src->code.find("enum : bool { kLog = true };"), std::string::npos);
  EXPECT_EQ(tall->stratum(chunked), 12);
  // A chunked variant cannot cache; chunks are 1, 8 or 64; block x vec <= 4096 (shared memory of the merge).
  EXPECT_FALSE(tall->source(Variant{{{"vec", 2}, {"block", 1024}, {"tile", 1}, {"chunks", 64}, {"cache", 1}}}).ok());
  EXPECT_FALSE(tall->source(Variant{{{"vec", 8}, {"block", 1024}, {"tile", 1}, {"chunks", 1}, {"cache", 0}}}).ok());
  EXPECT_FALSE(tall->source(Variant{{{"vec", 2}, {"block", 256}, {"tile", 1}, {"chunks", 4}, {"cache", 0}}}).ok());
  EXPECT_FALSE(tall->source(Variant{{{"vec", 2}, {"block", 256}, {"tile", 2}, {"chunks", 1}, {"cache", 0}}}).ok());
  auto few = plan_of(over(at::kFloat, {2, 100, 64}, 1));
  ASSERT_NE(few, nullptr);
  for (const auto& v : tiles_of(*few)) {
    EXPECT_LE(v.get("chunks") * v.get("block") / 32, 100) << v.id();
  }

  // Spatial [64,1000,56,56] f32: 1000 rows cached at block 1024 (32 a thread), not at 256 (125).
  auto spatial = plan_of(over(at::kFloat, {64, 1000, 56, 56}, 1));
  ASSERT_NE(spatial, nullptr);
  std::set<std::pair<int, int>> cached;  // (block, vec)
  for (const auto& v : tiles_of(*spatial))
    if (v.get("cache")) cached.insert({v.get("block"), v.get("vec")});
  EXPECT_EQ(cached, (std::set<std::pair<int, int>>{{1024, 1}}));
  auto cached_src = spatial->source(Variant{{{"vec", 1}, {"block", 1024}, {"tile", 1}, {"chunks", 1}, {"cache", 1}}});
  ASSERT_TRUE(cached_src.ok());
  EXPECT_NE(cached_src->code.find("IV = 3136, TILES = 98;"), std::string::npos) << cached_src->code;
  EXPECT_NE(cached_src->code.find("enum : bool { kCache = true };"), std::string::npos);

  // Odd inner (vec 1) with a partial last tile, and a slice along n (input strides in vectors).
  auto odd = plan_of(softmax_problem("_softmax", at::kHalf, {3, 50, 33}, {3300, 66, 1}, 1));
  ASSERT_NE(odd, nullptr);
  const auto odd_tiles = tiles_of(*odd);
  ASSERT_FALSE(odd_tiles.empty());
  auto odd_src = odd->source(odd_tiles.front());
  ASSERT_TRUE(odd_src.ok());
  EXPECT_NE(odd_src->code.find("IV = 33, TILES = 2;"), std::string::npos) << odd_src->code;
  EXPECT_NE(odd_src->code.find("OSV = 3300, NSV = 66;"), std::string::npos);
}


/// Softmax over `dim` of a contiguous tensor, for compute capability `sm`.
Problem over_at(c10::ScalarType dt, std::vector<int64_t> sizes, int64_t dim, int sm, const char* op = "_softmax") {
  auto st = contiguous(sizes);
  return softmax_problem(op, dt, std::move(sizes), std::move(st), dim, false, sm);
}

/// The variants of `p`'s plan with knob `knob` (and tile `tile` when > 0).
std::vector<Variant> with_knob(const Problem& p, const char* knob, int tile = 0) {
  auto plan = family_for("_softmax", "")->plan(p);
  EXPECT_TRUE(plan.ok()) << plan.status().to_string();
  std::vector<Variant> out;
  if (plan.ok())
    for (const auto& v : plan.value()->space())
      if (v.get(knob, 0) > 0 && (tile == 0 || v.get("tile", 0) == tile)) out.push_back(v);
  return out;
}

/// (vec, cluster) of the variants in `vs` that keep rows in registers (`keep`) or do not.
std::set<std::pair<int, int>> vec_cluster(const std::vector<Variant>& vs, int keep = 0) {
  std::set<std::pair<int, int>> out;
  for (const auto& v : vs)
    if (v.get("keep", 0) == keep) out.insert({v.get("vec"), v.get("cluster")});
  return out;
}

TEST(SoftmaxPlan, SharedTilesFitTheBlockAndSplitLongColumnsOverClusters) {
  // Note [Softmax shared tiles]. [32,32000,64] bf16: only 64-byte half lines fit, in clusters of 16 (128 KB each);
  // keeping 20 rows a thread in registers at block 512, half lines fit twice an SM and whole lines once.
  const auto tall = with_knob(over_at(at::kBFloat16, {32, 32000, 64}, 1, 90, "_log_softmax"), "cluster", 2);
  EXPECT_EQ(vec_cluster(tall), (std::set<std::pair<int, int>>{{1, 16}}));
  EXPECT_EQ(vec_cluster(tall, 1), (std::set<std::pair<int, int>>{{1, 16}, {2, 16}}));
  for (const auto& v : tall) EXPECT_EQ(v.get("block") == 512, v.get("keep", 0) == 1) << v.id();
  // [8,16,2048,2048] f16: vec 1 (128 KB tiles) from one block, vec 2 (256 KB) from 2, vec 4 (512 KB) from 4.
  const auto attn = with_knob(over_at(at::kHalf, {8, 16, 2048, 2048}, 2, 90), "cluster", 2);
  EXPECT_EQ(vec_cluster(attn), (std::set<std::pair<int, int>>{{1, 1}, {1, 2}, {1, 4}, {1, 8}, {1, 16}, {2, 2}, {2, 4},
                                                              {2, 8}, {2, 16}, {4, 4}, {4, 8}, {4, 16}}));
  for (const auto& v : attn) EXPECT_LE(v.get("block") * v.get("vec"), 2048) << v.id();
  EXPECT_TRUE(vec_cluster(attn, 1).count({2, 1}));  // 1728 rows of 128 bytes + 20 a thread in registers
  // Spatial f32: 128-byte rows at vec 1, 256 at vec 2; never wider.
  const auto spatial = with_knob(over_at(at::kFloat, {64, 1000, 56, 56}, 1, 90), "cluster", 2);
  for (const auto& v : spatial) EXPECT_LE(v.get("vec"), 2) << v.id();
  EXPECT_TRUE(vec_cluster(spatial).count({1, 2}));
  // Small n: clusters wherever every block gets two rows.
  const auto small = with_knob(over_at(at::kFloat, {3, 9, 33}, 1, 90), "cluster", 2);
  EXPECT_EQ(vec_cluster(small), (std::set<std::pair<int, int>>{{1, 1}, {1, 2}, {1, 4}}));
  // Not before sm_90.
  EXPECT_TRUE(with_knob(over_at(at::kHalf, {8, 16, 256, 256}, 2, 80), "cluster").empty());

  auto plan = family_for("_softmax", "")->plan(over_at(at::kHalf, {8, 16, 2048, 2048}, 2, 90));
  ASSERT_TRUE(plan.ok());
  const Variant v{{{"vec", 2}, {"block", 256}, {"tile", 2}, {"cluster", 4}, {"two", 1}, {"async", 1}}};
  auto src = plan.value()->source(v);
  ASSERT_TRUE(src.ok()) << src.status().to_string();
  EXPECT_NE(src->code.find("N = 2048, NB = 512;"), std::string::npos) << src->code;
  EXPECT_NE(src->code.find("IV = 1024, TILES = 32;"), std::string::npos);
  EXPECT_NE(src->code.find("enum : int { kCluster = 4 };"), std::string::npos);
  EXPECT_EQ(plan.value()->stratum(v), 26);  // 68.5 KB: three blocks an SM
  EXPECT_EQ(plan.value()->stratum(
                Variant{{{"vec", 2}, {"block", 256}, {"tile", 2}, {"cluster", 2}, {"two", 1}, {"async", 1}}}),
            24);
  EXPECT_EQ(plan.value()->features(v).size(),
            plan.value()->features(Variant{{{"vec", 1}, {"block", 128}, {"split", 1}, {"cache", 0}}}).size());
  auto keep_src = plan.value()->source(
      Variant{{{"vec", 2}, {"block", 512}, {"tile", 2}, {"cluster", 2}, {"keep", 1}, {"two", 1}, {"async", 1}}});
  ASSERT_TRUE(keep_src.ok()) << keep_src.status().to_string();
  EXPECT_NE(keep_src->code.find("enum : int { kKeep = 20 };"), std::string::npos) << keep_src->code;
  // Keeping needs at least twice the kept rows (20 x 16 warps) in each block: 512 rows at a cluster of 4 are not.
  auto tiled = [&](std::vector<std::pair<std::string, int>> knobs) {  // then two 1, async 1
    knobs.emplace_back("two", 1);
    knobs.emplace_back("async", 1);
    return plan.value()->source(Variant{std::move(knobs)});
  };
  EXPECT_FALSE(tiled({{"vec", 2}, {"block", 512}, {"tile", 2}, {"cluster", 4}, {"keep", 1}}).ok());
  // Outside the space: a cluster of 3, block 512 without keep (or keep without it), block x vec above 2048,
  // 512-byte rows, a missing knob.
  EXPECT_FALSE(tiled({{"vec", 2}, {"block", 256}, {"tile", 2}, {"cluster", 3}}).ok());
  EXPECT_FALSE(tiled({{"vec", 2}, {"block", 512}, {"tile", 2}, {"cluster", 4}}).ok());
  EXPECT_FALSE(tiled({{"vec", 2}, {"block", 256}, {"tile", 2}, {"cluster", 4}, {"keep", 1}}).ok());
  EXPECT_FALSE(tiled({{"vec", 4}, {"block", 1024}, {"tile", 2}, {"cluster", 8}}).ok());
  EXPECT_FALSE(tiled({{"vec", 8}, {"block", 256}, {"tile", 2}, {"cluster", 16}}).ok());
  EXPECT_FALSE(tiled({{"vec", 2}, {"block", 256}, {"tile", 2}}).ok());
}

// Note [Softmax fast exp]: every shared tile folds in two passes (the online ones were dropped: Note [Softmax shared
// tiles]); only 16-bit outputs get the fast exp (f16 flushing what fp16 cannot hold anyway, bf16 keeping fp32
// subnormals); fp32 keeps expf and div_rn.
TEST(SoftmaxPlan, SharedTilesComeInTwoPassesWithTheFastExpFor16BitOutputs) {
  for (const auto* p : {"_softmax", "_log_softmax"})
    for (const auto& problem : {over_at(at::kHalf, {8, 16, 2048, 2048}, 2, 90, p),
                                over_at(at::kFloat, {64, 1000, 56, 56}, 1, 90, p),
                                over_at(at::kFloat, {3, 9, 33}, 1, 90, p)}) {
      const auto shared = with_knob(problem, "cluster", 2);
      EXPECT_FALSE(shared.empty());
      for (const auto& v : shared) EXPECT_EQ(v.get("two", 0), 1) << v.id();
    }
  auto plan = family_for("_softmax", "")->plan(over_at(at::kHalf, {8, 16, 2048, 2048}, 2, 90));
  ASSERT_TRUE(plan.ok());
  const Variant v{{{"vec", 2}, {"block", 256}, {"tile", 2}, {"cluster", 4}, {"two", 1}, {"async", 1}}};
  EXPECT_EQ(plan.value()->stratum(v), 26);  // three blocks an SM
  auto src = plan.value()->source(v);
  ASSERT_TRUE(src.ok()) << src.status().to_string();
  EXPECT_NE(src->code.find(" SharedTiles "), std::string::npos);
  EXPECT_NE(src->code.find("enum : bool { kFastExp = true };"), std::string::npos);  // ex2.approx, a * (1 / s)
  EXPECT_NE(src->code.find("enum : bool { kFlushSubnormals = true };"), std::string::npos);  // fp16: .ftz
  EXPECT_FALSE(
      plan.value()
          ->source(Variant{{{"vec", 2}, {"block", 256}, {"tile", 2}, {"cluster", 4}, {"two", 2}, {"async", 1}}})
          .ok());
  // The online twin (no `two`) names nothing.
  EXPECT_FALSE(
      plan.value()->source(Variant{{{"vec", 2}, {"block", 256}, {"tile", 2}, {"cluster", 4}, {"async", 1}}}).ok());

  auto bf16 = family_for("_log_softmax", "")->plan(over_at(at::kBFloat16, {32, 32000, 64}, 1, 90, "_log_softmax"));
  ASSERT_TRUE(bf16.ok());
  auto bsrc = bf16.value()->source(
      Variant{{{"vec", 1}, {"block", 512}, {"tile", 2}, {"cluster", 16}, {"keep", 1}, {"two", 1}, {"async", 1}}});
  ASSERT_TRUE(bsrc.ok()) << bsrc.status().to_string();
  EXPECT_NE(bsrc->code.find("enum : bool { kFastExp = true };"), std::string::npos);
  EXPECT_NE(bsrc->code.find("enum : bool { kFlushSubnormals = false };"), std::string::npos);  // bf16 keeps them

  auto f32 = family_for("_softmax", "")->plan(over_at(at::kFloat, {64, 1000, 56, 56}, 1, 90));
  ASSERT_TRUE(f32.ok());
  auto fsrc =
      f32.value()->source(Variant{{{"vec", 1}, {"block", 256}, {"tile", 2}, {"cluster", 2}, {"two", 1}, {"async", 1}}});
  ASSERT_TRUE(fsrc.ok()) << fsrc.status().to_string();
  EXPECT_NE(fsrc->code.find("enum : bool { kFastExp = false };"), std::string::npos);  // fp32: expf and div_rn
}

// Note [Softmax async tiles]: cp.async copies whole tiles whose rows start on 16 bytes, on every such shared tile.
TEST(SoftmaxPlan, SharedTilesCopyWholeAlignedTilesAsynchronously) {
  for (const auto& v : with_knob(over_at(at::kHalf, {8, 16, 2048, 2048}, 2, 90), "cluster", 2))
    EXPECT_EQ(v.get("async", 0), 1) << v.id();
  for (const auto& v : with_knob(over_at(at::kFloat, {3, 9, 33}, 1, 90), "cluster", 2))  // 33 columns: a dead lane
    EXPECT_EQ(v.get("async", 0), 0) << v.id();
  // 64 fp16 columns: whole tiles at vec 1 and 2; with an n stride of 68 elements (136 bytes) rows miss 16 bytes.
  for (const auto& v : with_knob(over_at(at::kHalf, {4, 64, 64}, 1, 90), "cluster", 2))
    EXPECT_EQ(v.get("async", 0), v.get("vec") <= 2 ? 1 : 0) << v.id();
  const auto padded = softmax_problem("_softmax", at::kHalf, {4, 64, 64}, {64 * 68, 68, 1}, 1, false, 90);
  const auto padded_tiles = with_knob(padded, "cluster", 2);
  EXPECT_FALSE(padded_tiles.empty());
  for (const auto& v : padded_tiles) EXPECT_EQ(v.get("async", 0), 0) << v.id();
  auto plan = family_for("_softmax", "")->plan(over_at(at::kHalf, {8, 16, 2048, 2048}, 2, 90));
  ASSERT_TRUE(plan.ok());
  const Variant v{{{"vec", 2}, {"block", 256}, {"tile", 2}, {"cluster", 4}, {"two", 1}, {"async", 1}}};
  auto src = plan.value()->source(v);
  ASSERT_TRUE(src.ok()) << src.status().to_string();
  EXPECT_NE(src->code.find("enum : bool { kAsync = true };"), std::string::npos);
  EXPECT_NE(src->code.find("cp.async.cg.shared.global"), std::string::npos);
  // The knob follows the layout: not omitted where it applies, not set where it does not.
  EXPECT_FALSE(
      plan.value()->source(Variant{{{"vec", 2}, {"block", 256}, {"tile", 2}, {"cluster", 4}, {"two", 1}}}).ok());
  auto odd = family_for("_softmax", "")->plan(over_at(at::kFloat, {3, 9, 33}, 1, 90));
  ASSERT_TRUE(odd.ok());
  const Variant partial{{{"vec", 1}, {"block", 256}, {"tile", 2}, {"cluster", 2}, {"two", 1}}};
  Variant partial_async = partial;
  partial_async.knobs.emplace_back("async", 1);
  EXPECT_FALSE(odd.value()->source(partial_async).ok());
  EXPECT_TRUE(odd.value()->source(partial).ok());
}

// Note [Softmax pair tiles]: two-pass async tiles of 16-bit dtypes at vec 1 and 2 also come as pairs.
TEST(SoftmaxPlan, PairTilesTakeTwoVectorsALaneOf16BitTwoPassAsyncTiles) {
  const auto tall = with_knob(over_at(at::kBFloat16, {32, 32000, 64}, 1, 90, "_log_softmax"), "pair", 2);
  ASSERT_FALSE(tall.empty());
  for (const auto& v : tall) {
    EXPECT_EQ(v.get("two", 0), 1) << v.id();
    EXPECT_EQ(v.get("async", 0), 1) << v.id();
    EXPECT_LE(v.get("vec"), 2) << v.id();
  }
  // Each pair variant has its twin without the knob.
  const auto twins = with_knob(over_at(at::kBFloat16, {32, 32000, 64}, 1, 90, "_log_softmax"), "two", 2);
  EXPECT_EQ(twins.size(), 2 * tall.size());
  EXPECT_FALSE(with_knob(over_at(at::kHalf, {2, 4, 2048, 256}, 2, 90), "pair", 2).empty());
  EXPECT_TRUE(with_knob(over_at(at::kFloat, {32, 32000, 64}, 1, 90), "pair", 2).empty());  // fp32
  EXPECT_TRUE(with_knob(over_at(at::kHalf, {8, 16, 256, 256}, 2, 80), "pair").empty());     // sm_80
  const auto padded = softmax_problem("_softmax", at::kHalf, {4, 64, 64}, {64 * 68, 68, 1}, 1, false, 90);
  EXPECT_TRUE(with_knob(padded, "pair").empty());  // rows off 16 bytes: no cp.async, no pairs

  auto plan = family_for("_log_softmax", "")->plan(over_at(at::kBFloat16, {32, 32000, 64}, 1, 90, "_log_softmax"));
  ASSERT_TRUE(plan.ok());
  const Variant v{{{"vec", 1}, {"block", 512}, {"tile", 2}, {"cluster", 16}, {"keep", 1}, {"two", 1}, {"async", 1},
                   {"pair", 1}}};
  auto src = plan.value()->source(v);
  ASSERT_TRUE(src.ok()) << src.status().to_string();
  EXPECT_NE(src->code.find("enum : bool { kPair = true };"), std::string::npos);
  EXPECT_NE(src->code.find("enum : int { kKeep = 20 };"), std::string::npos);  // 20 words: 640 rows of 16 warps
  EXPECT_NE(src->code.find("enum : bool { kBfloat16 = true };"), std::string::npos);  // max.bf16x2, cvt.rn.bf16x2
  const int stratum = plan.value()->stratum(v);
  EXPECT_TRUE(stratum >= 27 && stratum <= 29) << stratum;
  Variant online = v;
  online.knobs.erase(online.knobs.begin() + 5);  // pair without two: not in the space
  EXPECT_FALSE(plan.value()->source(online).ok());
  auto half = family_for("_softmax", "")->plan(over_at(at::kHalf, {2, 4, 2048, 256}, 2, 90));
  ASSERT_TRUE(half.ok());
  auto hsrc = half.value()->source(
      Variant{{{"vec", 2}, {"block", 256}, {"tile", 2}, {"cluster", 2}, {"two", 1}, {"async", 1}, {"pair", 1}}});
  ASSERT_TRUE(hsrc.ok()) << hsrc.status().to_string();
  EXPECT_NE(hsrc->code.find("enum : bool { kBfloat16 = false };"), std::string::npos);  // max.f16x2, cvt.rn.f16x2
}

// Note [Softmax fast tiles]: tiles of 16-bit dtypes whose rows are read (not cached) also come folded in batches.
TEST(SoftmaxPlan, FastTilesFoldBatchesOf16BitRows) {
  const auto fast = with_knob(over_at(at::kBFloat16, {32, 32000, 64}, 1, 90, "_log_softmax"), "fast", 1);
  ASSERT_FALSE(fast.empty());
  for (const auto& v : fast) EXPECT_EQ(v.get("cache"), 0) << v.id();
  EXPECT_TRUE(with_knob(over_at(at::kFloat, {32, 32000, 64}, 1, 90), "fast").empty());  // fp32: exact expf
  EXPECT_FALSE(with_knob(over_at(at::kHalf, {32, 32000, 64}, 1, 80), "fast").empty());  // not only sm_90
  auto plan = family_for("_log_softmax", "")->plan(over_at(at::kBFloat16, {32, 32000, 64}, 1, 90, "_log_softmax"));
  ASSERT_TRUE(plan.ok());
  const Variant v{{{"vec", 2}, {"block", 256}, {"tile", 1}, {"chunks", 64}, {"cache", 0}, {"fast", 1}}};
  EXPECT_EQ(plan.value()->stratum(v), 13);
  auto src = plan.value()->source(v);
  ASSERT_TRUE(src.ok()) << src.status().to_string();
  EXPECT_NE(src->code.find("enum : bool { kFast = true };"), std::string::npos);
  EXPECT_NE(src->code.find("enum : int { kUnroll = 8 };"), std::string::npos);
  EXPECT_NE(src->code.find("enum : bool { kFastExp = true };"), std::string::npos);
  EXPECT_FALSE(
      plan.value()
          ->source(Variant{{{"vec", 2}, {"block", 256}, {"tile", 1}, {"chunks", 1}, {"cache", 1}, {"fast", 1}}})
          .ok());  // cached rows are not batched
}

TEST(SoftmaxPlan, ClusterRowsSplitLongRowsAtTheWidestVector) {
  // f32 [4096,65536]: 256 KB rows need 2 blocks at least; the slice 64 KB at 4.
  const auto rows = with_knob(over_at(at::kFloat, {4096, 65536}, 1, 90), "cluster");
  std::set<int> clusters;
  for (const auto& v : rows) {
    clusters.insert(v.get("cluster"));
    EXPECT_EQ(v.get("vec"), 4) << v.id();
    EXPECT_FALSE(v.get("tile", 0)) << v.id();
  }
  EXPECT_EQ(clusters, (std::set<int>{2, 4, 8, 16}));
  // Short rows: clusters while each block gets two vectors; none before sm_90.
  std::set<int> short_clusters;
  for (const auto& v : with_knob(over_at(at::kHalf, {5, 40}, 1, 90), "cluster"))
    short_clusters.insert(v.get("cluster"));
  EXPECT_EQ(short_clusters, (std::set<int>{1, 2}));  // 5 vectors of 8; 1: one block holds the row
  EXPECT_TRUE(with_knob(over_at(at::kFloat, {4096, 65536}, 1, 80), "cluster").empty());

  auto plan = family_for("_softmax", "")->plan(over_at(at::kFloat, {4096, 65536}, 1, 90));
  ASSERT_TRUE(plan.ok());
  const Variant v{{{"vec", 4}, {"block", 512}, {"cluster", 4}, {"async", 1}}};
  auto src = plan.value()->source(v);
  ASSERT_TRUE(src.ok()) << src.status().to_string();
  EXPECT_NE(src->code.find("D = 65536, NV = 16384, P = 4096;"), std::string::npos) << src->code;
  EXPECT_NE(src->code.find("enum : bool { kAsync = true };"), std::string::npos);
  EXPECT_NE(src->code.find("enum : bool { kFastExp = false };"), std::string::npos);  // fp32: div_rn and expf
  EXPECT_EQ(plan.value()->stratum(v), 19);  // 64 KB slices: three blocks an SM
  EXPECT_EQ(plan.value()->stratum(Variant{{{"vec", 4}, {"block", 512}, {"cluster", 2}, {"async", 1}}}), 17);
  EXPECT_FALSE(plan.value()->source(Variant{{{"vec", 4}, {"block", 512}, {"cluster", 4}}}).ok());  // async missing
  // A 64 KB bf16 row fits one block (no cluster), copied by cp.async, with the fast exp.
  auto bf16 = family_for("_log_softmax", "")->plan(softmax_problem("_log_softmax", at::kBFloat16, {8192, 32000},
                                                                   {32000, 1}, 1, false, 90));
  ASSERT_TRUE(bf16.ok());
  auto one = bf16.value()->source(Variant{{{"vec", 8}, {"block", 512}, {"cluster", 1}, {"async", 1}}});
  ASSERT_TRUE(one.ok()) << one.status().to_string();
  EXPECT_NE(one->code.find("enum : int { kCluster = 1 };"), std::string::npos);
  EXPECT_NE(one->code.find("enum : bool { kFastExp = true };"), std::string::npos);
  EXPECT_NE(one->code.find("enum : bool { kFlushSubnormals = false };"), std::string::npos);  // bf16 keeps them
  // 2-byte vectors (an odd fp16 row) are not copied by cp.async.
  for (const auto& w : with_knob(over_at(at::kHalf, {64, 4097}, 1, 90), "cluster")) EXPECT_EQ(w.get("async", 0), 0);
  EXPECT_FALSE(plan.value()->source(Variant{{{"vec", 2}, {"block", 512}, {"cluster", 4}, {"async", 1}}}).ok());
  EXPECT_FALSE(plan.value()->source(Variant{{{"vec", 4}, {"block", 1024}, {"cluster", 4}, {"async", 1}}}).ok());
  EXPECT_FALSE(plan.value()->source(Variant{{{"vec", 4}, {"block", 512}, {"cluster", 32}, {"async", 1}}}).ok());
}

// Note [Softmax epilogue]: cached softmax rows keep their exps for the epilogue; log-softmax and uncached rows
// do not (nothing to keep); every row kernel divides through div_rn.
TEST(SoftmaxPlan, CachedSoftmaxRowsReuseTheirExpsInTheEpilogue) {
  const Variant cached{{{"vec", 8}, {"block", 256}, {"warp", 1}, {"cache", 1}}};
  const Variant streamed{{{"vec", 8}, {"block", 256}, {"warp", 1}, {"cache", 0}}};
  auto soft = plan_of(softmax_problem("_softmax", at::kHalf, {16384, 1024}, {1024, 1}));
  auto log = plan_of(softmax_problem("_log_softmax", at::kHalf, {16384, 1024}, {1024, 1}));
  ASSERT_NE(soft, nullptr);
  ASSERT_NE(log, nullptr);
  auto code = [](const Plan& p, const Variant& v) {
    auto src = p.source(v);
    EXPECT_TRUE(src.ok()) << v.id();
    return src.ok() ? src->code : std::string();
  };
  EXPECT_NE(code(*soft, cached).find("enum : bool { kKeepExp = true };"), std::string::npos);
  EXPECT_NE(code(*soft, streamed).find("enum : bool { kKeepExp = false };"), std::string::npos);
  EXPECT_NE(code(*log, cached).find("enum : bool { kKeepExp = false };"), std::string::npos);
  EXPECT_NE(code(*soft, streamed).find("enum : bool { kFastExp = false };"), std::string::npos);  // div_rn
  // Every mapping is a stratum at the widest vector too (20..23), so the tuner tries each with it.
  EXPECT_EQ(soft->stratum(cached), 23);
  EXPECT_EQ(soft->stratum(Variant{{{"vec", 4}, {"block", 256}, {"warp", 1}, {"cache", 1}}}), 3);
}

}  // namespace
}  // namespace cudal1::optimizer
