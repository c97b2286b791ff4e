/// @brief What the pooling family accepts and declines, the output sizes it plans (ATen's rules, ceil mode
/// included), the layout it picks and its technique space.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <tuple>

#include "cudal1/optimizer/family.h"
#include "optimizer/problems.h"

namespace cudal1::optimizer {
namespace {

using testing::adaptive_avg_pool_problem;
using testing::avg_pool_problem;
using testing::channels_last;
using testing::max_pool_problem;

const Family& family() { return *family_for("max_pool2d_with_indices", ""); }

Code code(const Problem& p) { return family().plan(p).status().code(); }

/// The generated source of the first variant (its typed constants state the planned sizes and layout).
std::string source(const Problem& p) {
  auto plan = family().plan(p);
  EXPECT_TRUE(plan.ok()) << plan.status().to_string();
  if (!plan.ok()) return "";
  auto src = plan.value()->source(plan.value()->space().front());
  EXPECT_TRUE(src.ok()) << src.status().to_string();
  return src.ok() ? src->code : "";
}

bool has(const std::string& code, const std::string& line) { return code.find(line + "\n") != std::string::npos; }

/// The value of the typed constant `name` (`enum : <type> { name = value };`) in a generated source, -1 if absent.
int64_t constant(const std::string& code, const std::string& name) {
  const auto at = code.find(" { " + name + " = ");
  return at == std::string::npos ? -1 : std::stoll(code.substr(at + name.size() + 6));
}

TEST(PoolPlan, ServesTheFourOps) {
  EXPECT_STREQ(family().name(), "pool");
  for (const char* op : {"max_pool2d", "max_pool2d_with_indices", "avg_pool2d", "_adaptive_avg_pool2d"})
    EXPECT_EQ(family_for(op, ""), &family()) << op;
}

TEST(PoolPlan, OutputSizesFollowAtenIncludingCeilMode) {
  // (33 + 2 - 3 - 1) / 1 + 1 = 32 rows; (40 + 2 - 3 - 1) / 1 + 1 = 39 columns.
  const auto a = source(max_pool_problem(at::kFloat, {2, 16, 33, 40}, {}, {4, 4}, {1, 1}, {1, 1}, {1, 1}, false));
  EXPECT_TRUE(constant(a, "kOh") == 32 && constant(a, "kOw") == 39) << a.substr(0, 400);
  // Dilation 3, kernel 2, stride 2, pad 1 on 128: (128 + 2 - 3 - 1) / 2 + 1 = 64.
  EXPECT_EQ(code(max_pool_problem(at::kHalf, {128, 128}, {}, {2}, {2}, {1}, {3}, false, false)), Code::kUnsupported)
      << "a 2-d input is not a pooling input";
  const auto c = source(max_pool_problem(at::kHalf, {3, 128, 128}, {}, {2}, {2}, {1}, {3}, false, false));
  EXPECT_TRUE(constant(c, "kOh") == 64 && constant(c, "kOw") == 64 && constant(c, "kDlh") == 3) << c.substr(0, 400);
  // Ceil mode: 5 wide, kernel 2, stride 2 -> 3 windows (the last one starts inside the image) ...
  const auto d = source(avg_pool_problem(at::kFloat, {1, 1, 5, 5}, {}, {2, 2}, {2, 2}, {0, 0}, true, true));
  EXPECT_TRUE(constant(d, "kOh") == 3 && constant(d, "kOw") == 3) << d.substr(0, 400);
  // ... but a window that would start in the right padding is dropped: 5 wide, kernel 2, stride 2, pad 1 gives
  // (5 + 2 - 1 - 1 + 1) / 2 + 1 = 4 windows, the 4th starting at 6 - 1 = 5, outside the image.
  const auto e = source(avg_pool_problem(at::kFloat, {1, 1, 5, 5}, {}, {2, 2}, {2, 2}, {1, 1}, true, true));
  EXPECT_TRUE(constant(e, "kOh") == 3 && constant(e, "kOw") == 3) << e.substr(0, 400);
  // Empty stride means stride = kernel.
  const auto f = source(avg_pool_problem(at::kFloat, {1, 2, 9, 9}, {}, {3}, {}, {0}, false, true, 4));
  EXPECT_TRUE(constant(f, "kDh") == 3 && constant(f, "kOh") == 3 && constant(f, "kDivisor") == 4) << f.substr(0, 400);
  const auto g = source(adaptive_avg_pool_problem(at::kBFloat16, {2, 8, 14, 15}, {}, {7, 4}));
  EXPECT_TRUE(constant(g, "kOh") == 7 && constant(g, "kOw") == 4) << g.substr(0, 400);
}

TEST(PoolPlan, ChannelsLastInputGivesChannelsLastKernel) {
  const std::vector<int64_t> s = {4, 64, 28, 28};
  const auto cl = source(max_pool_problem(at::kFloat, s, channels_last(s), {3, 3}, {2, 2}, {1, 1}, {1, 1}, false));
  EXPECT_NE(cl.find("channels-last"), std::string::npos);
  const auto nchw = source(max_pool_problem(at::kFloat, s, {}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, false));
  EXPECT_NE(nchw.find(" nchw "), std::string::npos);
  // An N111 tensor is NCHW in ATen's reading, whatever its strides say.
  const std::vector<int64_t> one = {4, 1, 1, 1};
  EXPECT_NE(source(max_pool_problem(at::kFloat, one, {1, 1, 1, 1}, {1, 1}, {}, {0, 0}, {1, 1}, false)).find(" nchw "),
            std::string::npos);
}

TEST(PoolPlan, DeclinesWhatAtenRejectsOrItCannotDo) {
  const std::vector<int64_t> s = {2, 4, 16, 16};
  EXPECT_EQ(code(max_pool_problem(at::kDouble, s, {}, {2, 2}, {2, 2}, {0, 0}, {1, 1}, false)), Code::kUnsupported);
  EXPECT_EQ(code(max_pool_problem(at::kFloat, {0, 4, 16, 16}, {}, {2, 2}, {2, 2}, {0, 0}, {1, 1}, false)),
            Code::kUnsupported);
  EXPECT_EQ(code(max_pool_problem(at::kFloat, {1, 2, 4, 16, 16}, {}, {2, 2}, {2, 2}, {0, 0}, {1, 1}, false)),
            Code::kUnsupported);
  EXPECT_EQ(code(max_pool_problem(at::kFloat, s, {}, {2, 2}, {2, 2}, {2, 2}, {1, 1}, false)), Code::kUnsupported)
      << "padding above half the kernel";
  EXPECT_EQ(code(max_pool_problem(at::kFloat, s, {}, {2, 2}, {0, 2}, {0, 0}, {1, 1}, false)), Code::kUnsupported);
  EXPECT_EQ(code(max_pool_problem(at::kFloat, s, {}, {2, 2, 2}, {2, 2}, {0, 0}, {1, 1}, false)), Code::kUnsupported);
  EXPECT_EQ(code(max_pool_problem(at::kFloat, s, {}, {20, 20}, {1, 1}, {0, 0}, {1, 1}, false)), Code::kUnsupported)
      << "window larger than the image: no output";
  EXPECT_EQ(code(max_pool_problem(at::kBFloat16, s, {}, {2, 2}, {2, 2}, {0, 0}, {1, 1}, false, true, 75)),
            Code::kUnsupported);
  EXPECT_EQ(code(avg_pool_problem(at::kFloat, s, {}, {2, 2}, {2, 2}, {0, 0}, false, true, 0)), Code::kUnsupported)
      << "divisor_override 0";
  EXPECT_EQ(code(adaptive_avg_pool_problem(at::kFloat, s, channels_last(s), {4, 4})), Code::kUnsupported);
  EXPECT_EQ(code(adaptive_avg_pool_problem(at::kFloat, s, {}, {0, 4})), Code::kUnsupported);
  auto other = max_pool_problem(at::kFloat, s, {}, {2, 2}, {2, 2}, {0, 0}, {1, 1}, false);
  other.op = "max_pool3d";
  EXPECT_EQ(code(other), Code::kUnsupported);
}

TEST(PoolPlan, SpaceTilesOnlyWherePatchesFitAndChannelsLastHasNoRowTiles) {
  auto space = [&](const Problem& p) {
    auto plan = family().plan(p);
    EXPECT_TRUE(plan.ok()) << plan.status().to_string();
    return plan.ok() ? plan.value()->space() : std::vector<Variant>{};
  };
  const std::vector<int64_t> s = {2, 16, 64, 64};
  const auto small = space(max_pool_problem(at::kFloat, s, {}, {2, 2}, {2, 2}, {0, 0}, {1, 1}, false));
  std::set<std::pair<int, int>> tiles;
  for (const auto& v : small) tiles.insert({v.get("opw"), v.get("oph")});
  EXPECT_EQ(tiles.size(), 11u);  // 4 widths x 3 heights but 8 x 4 (an 8 x 16 patch)
  EXPECT_EQ(tiles.count({8, 4}), 0u);
  EXPECT_EQ(tiles.count({4, 4}), 1u);  // an 8 x 8 patch
  for (const auto& v : space(max_pool_problem(at::kFloat, s, {}, {8, 8}, {1, 1}, {0, 0}, {1, 1}, false)))
    EXPECT_TRUE(v.get("opw") == 1 && v.get("oph") == 1) << v.id() << ": an 8x8 window leaves no room for a tile";
  for (const auto& v : space(max_pool_problem(at::kHalf, s, channels_last(s), {3, 3}, {2, 2}, {1, 1}, {1, 1}, false)))
    EXPECT_EQ(v.get("oph"), 1) << v.id();
  auto plan = family().plan(max_pool_problem(at::kFloat, s, {}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, false));
  ASSERT_TRUE(plan.ok());
  std::set<size_t> lengths;
  std::set<int> strata;
  for (const auto& v : plan.value()->space()) {
    lengths.insert(plan.value()->features(v).size());
    strata.insert(plan.value()->stratum(v));
    EXPECT_TRUE(plan.value()->source(v).ok()) << v.id();
  }
  EXPECT_EQ(lengths.size(), 1u);
  EXPECT_EQ(strata.size(), 4u);  // tiles across rows, down columns, both, neither
  EXPECT_FALSE(plan.value()->source(Variant{{{"opw", 3}, {"oph", 1}, {"block", 256}}}).ok());
  EXPECT_FALSE(plan.value()->bind(plan.value()->space().front(), nullptr).ok());
}

/// Every variant of the plan of `p` with its generated source.
std::vector<std::pair<Variant, std::string>> variants(const Problem& p) {
  auto plan = family().plan(p);
  EXPECT_TRUE(plan.ok()) << plan.status().to_string();
  std::vector<std::pair<Variant, std::string>> out;
  if (!plan.ok()) return out;
  for (const auto& v : plan.value()->space()) {
    auto src = plan.value()->source(v);
    EXPECT_TRUE(src.ok()) << v.id();
    if (src.ok()) out.emplace_back(v, src->code);
  }
  return out;
}

TEST(PoolPlan, EveryVariantNamesItsTechniqueInTheFirstLine) {
  // Note [Pooling techniques]: the class a variant's knobs select, the last word of its source's first line.
  auto expected = [](const Variant& v, bool channels_last) -> std::string {
    if (v.get("pair", 0)) return "PackedPairs";
    if (v.get("flat", 0)) return "AdaptiveStaging";
    if (v.get("walk", 0)) return "ChannelsLastWalk";
    if (v.get("cpx", 1) > 1) return "ChannelsLastRuns";
    if (v.get("slide")) return "SlidingWindows";
    if (channels_last) return v.get("px") ? "ChannelsLastTiles" : "ChannelsLastVectors";
    return "RegisterTiles";
  };
  const std::vector<int64_t> s = {2, 16, 28, 28};
  std::set<std::string> seen;
  for (const auto& [p, cl] : std::vector<std::pair<Problem, bool>>{
           {max_pool_problem(at::kFloat, {2, 16, 64, 64}, {}, {4, 4}, {1, 1}, {1, 1}, {1, 1}, false), false},
           {max_pool_problem(at::kHalf, {2, 8, 20, 112}, {}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, false), false},
           {avg_pool_problem(at::kBFloat16, s, channels_last(s), {3, 3}, {1, 1}, {1, 1}, false, false), true},
           {adaptive_avg_pool_problem(at::kFloat, {2, 4, 14, 14}, {}, {7, 7}), false}})
    for (const auto& [v, code] : variants(p)) {
      const std::string first = code.substr(0, code.find('\n'));
      const std::string name = first.substr(first.rfind(' ') + 1);
      EXPECT_EQ(name, expected(v, cl)) << v.id();
      seen.insert(name);
    }
  EXPECT_EQ(seen.size(), 8u) << "every technique class";
}

TEST(PoolPlan, KnobSmemIsZeroInEveryVariant) {
  // Note [Pooling techniques]: knob smem stays in the ids, always 0; an id with smem 1 is not in any space.
  const std::vector<int64_t> s = {2, 4, 256, 256};
  for (const auto& p : {max_pool_problem(at::kFloat, s, {}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, false),
                        max_pool_problem(at::kHalf, s, {}, {2, 2}, {2, 2}, {1, 1}, {3, 3}, true, false),
                        avg_pool_problem(at::kBFloat16, {7, 13, 31}, {}, {5, 5}, {1, 1}, {2, 2}, true, false, 3)})
    for (const auto& [v, code] : variants(p)) {
      EXPECT_EQ(v.get("smem", -1), 0) << v.id();
      EXPECT_NE(code.find(" smem=0 "), std::string::npos) << v.id();
    }
  auto plan = family().plan(max_pool_problem(at::kFloat, s, {}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, false));
  ASSERT_TRUE(plan.ok());
  EXPECT_FALSE(plan.value()->source(Variant{{{"opw", 1}, {"oph", 1}, {"block", 256}, {"smem", 1}, {"px", 0},
                                             {"slide", 0}, {"seg", 0}, {"cpx", 1}, {"walk", 0}, {"flat", 0}}}).ok());
  EXPECT_TRUE(plan.value()->source(Variant{{{"opw", 1}, {"oph", 1}, {"block", 256}, {"smem", 0}, {"px", 0},
                                            {"slide", 0}, {"seg", 0}, {"cpx", 1}, {"walk", 0}, {"flat", 0}}}).ok());
}

TEST(PoolPlan, ChannelsLastPixelTilesOnlyForOverlappingWindows) {
  auto tiled = [&](const Problem& p) {
    auto out = variants(p);
    out.erase(std::remove_if(out.begin(), out.end(), [](const auto& x) { return x.first.get("px") == 0; }), out.end());
    return out;
  };
  const std::vector<int64_t> s = {2, 512, 28, 28};
  const auto bf16 = tiled(avg_pool_problem(at::kBFloat16, s, channels_last(s), {3, 3}, {1, 1}, {1, 1}, false, false));
  std::set<std::pair<int, int>> seen;
  for (const auto& [v, code] : bf16) {
    seen.insert({v.get("opw"), v.get("px")});
    EXPECT_EQ(constant(code, "kTileW"), v.get("px")) << v.id();
    EXPECT_EQ(constant(code, "kSlices") * constant(code, "kTileH") * v.get("px"), v.get("block")) << v.id();
    EXPECT_LE(constant(code, "kSlices") * v.get("opw") * 2, 128) << v.id() << ": a slice is at most 128 bytes";
    EXPECT_EQ(512 / v.get("opw") % constant(code, "kSlices"), 0) << v.id();
  }
  EXPECT_EQ(seen.count({8, 8}), 1u);
  EXPECT_EQ(seen.count({8, 4}), 1u);
  // Odd channel counts give one group per slice; windows that do not overlap and NCHW inputs get no tiles.
  const std::vector<int64_t> odd = {3, 7, 13, 5};
  const auto o =
      tiled(max_pool_problem(at::kHalf, odd, channels_last(odd), {3, 3}, {1, 2}, {1, 1}, {2, 1}, true, true));
  ASSERT_FALSE(o.empty());
  for (const auto& [v, code] : o) EXPECT_EQ(constant(code, "kSlices"), 1) << v.id();
  for (const auto& [v, code] : o) EXPECT_LT(v.get("px"), 2 * 3) << v.id() << ": OW is 3 (ceil mode)";
  EXPECT_TRUE(tiled(avg_pool_problem(at::kHalf, s, channels_last(s), {2, 2}, {}, {0, 0}, false, true)).empty());
  EXPECT_TRUE(tiled(avg_pool_problem(at::kHalf, s, {}, {3, 3}, {1, 1}, {1, 1}, false, true)).empty());
}

TEST(PoolPlan, AvgDivisorIsACompileTimeConstantWhereEveryWindowHasTheSameOne) {
  // Note [Pooling exact division]: kConstDiv is ATen's divisor where it is the same for every window, else 0;
  // kInnerDiv the divisor of a window wholly in the image.
  using Divs = std::pair<int64_t, int64_t>;
  const std::vector<int64_t> s = {2, 4, 16, 16};
  auto divs = [&](const Problem& p) {
    const auto code = source(p);
    return std::make_pair(constant(code, "kConstDiv"), constant(code, "kInnerDiv"));
  };
  EXPECT_EQ(divs(avg_pool_problem(at::kHalf, s, {}, {3, 3}, {1, 1}, {1, 1}, false, true)), Divs(9, 9));
  EXPECT_EQ(divs(avg_pool_problem(at::kHalf, s, {}, {3, 2}, {1, 1}, {1, 1}, false, false)), Divs(0, 6))
      << "count_include_pad=False: the border windows count fewer cells";
  EXPECT_EQ(divs(avg_pool_problem(at::kFloat, s, {}, {3, 3}, {2, 2}, {1, 1}, false, true, -2)), Divs(-2, -2));
  // Ceil mode: 16 wide, k2 s3 -> 6 windows, the last one at 15 overhangs the image (no padding): 0.
  EXPECT_EQ(divs(avg_pool_problem(at::kFloat, s, {}, {2, 2}, {3, 3}, {0, 0}, true, true)).first, 0);
  // ... while 16 wide, k2 s2 in ceil mode gives exactly 8 windows, none overhanging.
  EXPECT_EQ(divs(avg_pool_problem(at::kFloat, s, {}, {2, 2}, {2, 2}, {0, 0}, true, true)).first, 4);
  EXPECT_EQ(divs(max_pool_problem(at::kFloat, s, {}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, false)).first, 0);
}

TEST(PoolPlan, ChannelsLastRunsForAvgWithStrideOneColumnsAndWholeVectors) {
  auto runs = [&](const Problem& p) {
    std::multiset<std::pair<int, int>> out;  // (cpx, opw)
    auto plan = family().plan(p);
    EXPECT_TRUE(plan.ok()) << plan.status().to_string();
    if (!plan.ok()) return out;
    for (const auto& v : plan.value()->space()) {
      if (v.get("cpx", 1) == 1 || v.get("walk", 0)) continue;  // walks: their own test below
      out.insert({v.get("cpx"), v.get("opw")});
      EXPECT_EQ(plan.value()->stratum(v), 11) << v.id();
      auto src = plan.value()->source(v);
      EXPECT_TRUE(src.ok()) << v.id();
      if (!src.ok()) continue;
      EXPECT_EQ(constant(src->code, "kCpx"), v.get("cpx")) << v.id();
      EXPECT_EQ(constant(src->code, "kThreads"),
                constant(src->code, "kN") * constant(src->code, "kOh") *
                    ((constant(src->code, "kOw") + v.get("cpx") - 1) / v.get("cpx")) *
                    (constant(src->code, "kC") / v.get("opw")))
          << v.id();
    }
    return out;
  };
  const std::vector<int64_t> s = {2, 512, 28, 28};
  // bf16 [.., 28, 28] k3 s1 p1 (the bench row): 16-byte vectors of 8 channels, runs of 2 and 4, three blocks each.
  const auto bf16 = runs(avg_pool_problem(at::kBFloat16, s, channels_last(s), {3, 3}, {1, 1}, {1, 1}, false, false));
  EXPECT_EQ(bf16.size(), 6u);
  EXPECT_EQ(bf16.count({4, 8}), 3u);
  EXPECT_EQ(bf16.count({2, 8}), 3u);
  // fp32: 4 channels a vector; rows may be strided (stride 2 down H).
  for (const auto& x : runs(avg_pool_problem(at::kFloat, s, channels_last(s), {3, 3}, {2, 1}, {1, 1}, true, true)))
    EXPECT_EQ(x.second, 4);
  // None: max, NCHW, column stride 2, a one-column window, channels that take no 16-byte vector.
  EXPECT_TRUE(
      runs(max_pool_problem(at::kHalf, s, channels_last(s), {3, 3}, {1, 1}, {1, 1}, {1, 1}, false, false)).empty());
  EXPECT_TRUE(runs(avg_pool_problem(at::kHalf, s, {}, {3, 3}, {1, 1}, {1, 1}, false, true)).empty());
  EXPECT_TRUE(runs(avg_pool_problem(at::kHalf, s, channels_last(s), {3, 3}, {1, 2}, {1, 1}, false, true)).empty());
  EXPECT_TRUE(runs(avg_pool_problem(at::kHalf, s, channels_last(s), {3, 1}, {1, 1}, {1, 0}, false, true)).empty());
  const std::vector<int64_t> odd = {2, 12, 8, 8};
  EXPECT_TRUE(runs(avg_pool_problem(at::kHalf, odd, channels_last(odd), {3, 3}, {1, 1}, {1, 1}, false, true)).empty());
}

TEST(PoolPlan, SlidingWindowsForStrideOneOverlappingAlignedNchw) {
  // (vec, seg) pairs of the slide variants, each offered at every block size; the constants of each source.
  auto slides = [&](const Problem& p) {
    std::multiset<std::pair<int, int>> out;
    for (const auto& [v, code] : variants(p)) {
      if (!v.get("slide")) continue;
      out.insert({v.get("slide"), v.get("seg")});
      EXPECT_EQ(constant(code, "kVec"), v.get("slide")) << v.id();
      EXPECT_EQ(v.get("opw") * v.get("oph"), 1) << v.id();
      EXPECT_EQ(v.get("smem") + v.get("px"), 0) << v.id();
    }
    return out;
  };
  // fp32 k4 s1 p1 with indices: VEC 4 only (16-byte loads), chunks cover max(W, OW) = 64 columns, OW = 63 makes
  // the stores scalar; segments of 8 and 32 rows and the whole plane.
  const auto f32 = max_pool_problem(at::kFloat, {2, 16, 64, 64}, {}, {4, 4}, {1, 1}, {1, 1}, {1, 1}, false);
  const auto a = slides(f32);
  EXPECT_EQ(a.size(), 9u);
  EXPECT_EQ(a.count({4, 8}), 3u);
  EXPECT_EQ(a.count({4, 32}), 3u);
  EXPECT_EQ(a.count({4, 0}), 3u);
  for (const auto& [v, code] : variants(f32))
    if (v.get("slide") && v.get("seg") == 8) {
      EXPECT_TRUE(constant(code, "kChunks") == 16 && has(code, "enum : bool { kStoreVec = false };") &&
                  constant(code, "kSegments") == 8)
          << v.id();
      EXPECT_EQ(constant(code, "kThreads"), 2 * 16 * 8 * 16) << v.id();
    }
  // fp16 avg k3 s1 p1: VEC 4 and 8, vector stores (OW = W); a 5-row plane gets only whole-plane walks.
  const auto h = slides(avg_pool_problem(at::kHalf, {2, 8, 56, 56}, {}, {3, 3}, {1, 1}, {1, 1}, false, true));
  EXPECT_EQ(h.size(), 18u);
  const auto short_plane =
      slides(avg_pool_problem(at::kBFloat16, {3, 5, 16}, {}, {3, 3}, {1, 1}, {1, 1}, true, false, 3));
  EXPECT_EQ(short_plane.size(), 6u);
  EXPECT_EQ(short_plane.count({8, 0}), 3u);
  for (const auto& [v, code] :
       variants(avg_pool_problem(at::kHalf, {2, 8, 56, 56}, {}, {3, 3}, {1, 1}, {1, 1}, false, true)))
    if (v.get("slide") == 8) {
      EXPECT_TRUE(constant(code, "kChunks") == 7 && has(code, "enum : bool { kStoreVec = true };")) << v.id();
    }
  // Even kernel with pad k/2: OW = W + 1, one more chunk; fp16 max k4 with indices: VEC 8 would keep
  // 4 x 8 x 2 + 11 = 75 floats, over kMaxPatch, so VEC 4 only.
  for (const auto& [v, code] :
       variants(max_pool_problem(at::kFloat, {1, 2, 8, 64}, {}, {2, 2}, {1, 1}, {1, 1}, {1, 1}, false)))
    if (v.get("slide")) {
      EXPECT_TRUE(constant(code, "kOw") == 65 && constant(code, "kChunks") == 17) << v.id();
    }
  for (const auto& x : slides(max_pool_problem(at::kHalf, {2, 16, 64, 64}, {}, {4, 4}, {1, 1}, {1, 1}, {1, 1}, false)))
    EXPECT_EQ(x.first, 4);
  EXPECT_EQ(slides(max_pool_problem(at::kHalf, {2, 16, 64, 64}, {}, {4, 4}, {1, 1}, {1, 1}, {1, 1}, false, false))
                .count({8, 8}),
            3u)
      << "without indices the VEC 8 ring fits";
  // Declined: stride 2, dilation, W not a multiple of VEC, a row pitch that breaks alignment, columns not
  // contiguous, channels-last, adaptive, a 1x1 window, a right halo wider than one chunk, a ring too large.
  const std::vector<int64_t> s = {2, 4, 32, 32};
  EXPECT_TRUE(slides(max_pool_problem(at::kFloat, s, {}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, false)).empty());
  EXPECT_TRUE(slides(max_pool_problem(at::kFloat, s, {}, {3, 3}, {1, 1}, {1, 1}, {2, 2}, false)).empty());
  EXPECT_TRUE(slides(max_pool_problem(at::kFloat, {2, 4, 32, 30}, {}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, false)).empty());
  EXPECT_TRUE(
      slides(max_pool_problem(at::kFloat, s, {4 * 32 * 34, 32 * 34, 34, 1}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, false))
          .empty());
  EXPECT_TRUE(
      slides(max_pool_problem(at::kFloat, s, {4 * 32 * 32, 1, 4 * 32, 4}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, false))
          .empty());
  EXPECT_TRUE(slides(avg_pool_problem(at::kFloat, s, channels_last(s), {3, 3}, {1, 1}, {1, 1}, false, true)).empty());
  EXPECT_TRUE(slides(adaptive_avg_pool_problem(at::kFloat, s, {}, {30, 30})).empty());
  EXPECT_TRUE(slides(max_pool_problem(at::kFloat, s, {}, {1, 1}, {1, 1}, {0, 0}, {1, 1}, false)).empty());
  EXPECT_TRUE(slides(max_pool_problem(at::kFloat, s, {}, {7, 7}, {1, 1}, {0, 0}, {1, 1}, false)).empty());
  EXPECT_TRUE(slides(avg_pool_problem(at::kFloat, s, {}, {7, 7}, {1, 1}, {3, 3}, false, true)).empty());
  EXPECT_FALSE(slides(max_pool_problem(at::kFloat, s, {}, {7, 7}, {1, 1}, {3, 3}, {1, 1}, false, false)).empty());
  // The slide strata are their own; features keep one length.
  auto plan = family().plan(f32);
  ASSERT_TRUE(plan.ok());
  std::set<int> strata;
  std::set<size_t> lengths;
  for (const auto& v : plan.value()->space()) {
    strata.insert(plan.value()->stratum(v));
    lengths.insert(plan.value()->features(v).size());
  }
  EXPECT_EQ(strata.count(8) + strata.count(9) + strata.count(10), 3u) << "one stratum per segment length";
  EXPECT_EQ(lengths.size(), 1u);
  EXPECT_FALSE(plan.value()->source(Variant{{{"opw", 1}, {"oph", 1}, {"block", 256}, {"smem", 0}, {"px", 0},
                                             {"slide", 8}, {"seg", 8}}}).ok())
      << "fp32 takes no 32-byte vectors";
}

}  // namespace
}  // namespace cudal1::optimizer

namespace cudal1::optimizer {
namespace {

TEST(PoolPlan, ChannelsLastWalksForStrideOneAvgWithinTheRegisterBudget) {
  // Note [Pooling channels-last walk]: (opw, cpx, walk) of every walk variant, two blocks each, each in ATen's
  // order and separable (Note [Pooling separable sums]); constants, threads, strata.
  auto walks = [&](const Problem& p) {
    std::multiset<std::tuple<int, int, int>> out;
    for (const auto& [v, code] : variants(p)) {
      if (!v.get("walk", 0)) continue;
      out.insert({v.get("opw"), v.get("cpx"), v.get("walk")});
      EXPECT_TRUE(v.get("block") == 128 || v.get("block") == 256) << v.id();
      EXPECT_TRUE(has(code, std::string("enum : bool { kSeparable = ") + (v.get("sep", 0) ? "true" : "false") + " };"))
          << v.id();
      EXPECT_EQ(v.id().find("sep0"), std::string::npos) << v.id() << ": ATen-order ids stay as they were";
      const int64_t rows = v.get("walk") * constant(code, "kKh");
      EXPECT_EQ(constant(code, "kWalkRows"), rows) << v.id();
      EXPECT_EQ(constant(code, "kMinBlocks"), 65536 / (v.get("block") * 128)) << v.id();
      EXPECT_EQ(constant(code, "kThreads"), constant(code, "kN") * ((constant(code, "kOh") + rows - 1) / rows) *
                                                ((constant(code, "kOw") + v.get("cpx") - 1) / v.get("cpx")) *
                                                (constant(code, "kC") / v.get("opw")))
          << v.id();
    }
    return out;
  };
  const std::vector<int64_t> s = {2, 512, 28, 28};
  // bf16 k3 s1 p1 (the bench row): 16-byte vectors of 1 or 2 pixels, 8-byte vectors of 2 or 4 (16-byte runs of
  // 4 pixels would keep 144 floats); walks of 6, 9 and 12 output rows.
  const auto bf16 = walks(avg_pool_problem(at::kBFloat16, s, channels_last(s), {3, 3}, {1, 1}, {1, 1}, false, false));
  EXPECT_EQ(bf16.size(), 48u);
  for (const auto& [opw, cpx] : std::vector<std::pair<int, int>>{{8, 1}, {8, 2}, {4, 2}, {4, 4}})
    for (int walk : {2, 3, 4}) EXPECT_EQ(bf16.count({opw, cpx, walk}), 4u) << opw << " " << cpx << " " << walk;
  auto plan = family().plan(avg_pool_problem(at::kBFloat16, s, channels_last(s), {3, 3}, {1, 1}, {1, 1}, false, false));
  ASSERT_TRUE(plan.ok());
  for (const auto& v : plan.value()->space()) {
    if (v.get("walk", 0)) {
      EXPECT_EQ(plan.value()->stratum(v), 10 + v.get("walk")) << v.id() << ": one stratum a length";
    }
  }
  // fp32 (rows strided by a divisor's windows too): 4 channels of 2 pixels or 2 channels of 4.
  std::set<std::pair<int, int>> f32;
  for (const auto& [opw, cpx, walk] :
       walks(avg_pool_problem(at::kFloat, s, channels_last(s), {3, 2}, {1, 1}, {1, 1}, true, true, 3)))
    f32.insert({opw, cpx});
  EXPECT_EQ(f32, (std::set<std::pair<int, int>>{{4, 2}, {2, 4}}));
  // A 5-row image: a walk of 2 steps covers 6 >= 5 rows, so no longer walk; a 1-column output takes runs of one
  // pixel only.
  const std::vector<int64_t> low = {1, 16, 5, 1};
  for (const auto& [opw, cpx, walk] :
       walks(avg_pool_problem(at::kHalf, low, channels_last(low), {3, 1}, {1, 1}, {1, 0}, false, true))) {
    EXPECT_EQ(walk, 2);
    EXPECT_EQ(cpx, 1);
  }
  // None: max, NCHW, stride 2 down the rows or across, a one-row window, channels taking no 8-byte vector.
  EXPECT_TRUE(
      walks(max_pool_problem(at::kHalf, s, channels_last(s), {3, 3}, {1, 1}, {1, 1}, {1, 1}, false, false)).empty());
  EXPECT_TRUE(walks(avg_pool_problem(at::kHalf, s, {}, {3, 3}, {1, 1}, {1, 1}, false, true)).empty());
  EXPECT_TRUE(walks(avg_pool_problem(at::kHalf, s, channels_last(s), {3, 3}, {2, 1}, {1, 1}, false, true)).empty());
  EXPECT_TRUE(walks(avg_pool_problem(at::kHalf, s, channels_last(s), {3, 3}, {1, 2}, {1, 1}, false, true)).empty());
  EXPECT_TRUE(walks(avg_pool_problem(at::kHalf, s, channels_last(s), {1, 3}, {1, 1}, {0, 1}, false, true)).empty());
  const std::vector<int64_t> odd = {2, 6, 8, 8};
  EXPECT_TRUE(walks(avg_pool_problem(at::kHalf, odd, channels_last(odd), {3, 3}, {1, 1}, {1, 1}, false, true)).empty());
}

TEST(PoolPlan, StagedAdaptiveForUniformWindowsOfDenseNchw) {
  // Note [Pooling adaptive staging]: (flat, block) of every staged variant; its constants and launch size.
  auto staged = [&](const Problem& p) {
    std::vector<std::pair<Variant, std::string>> out;
    for (auto& [v, code] : variants(p))
      if (v.get("flat", 0)) out.emplace_back(v, code);
    return out;
  };
  auto plan = family().plan(adaptive_avg_pool_problem(at::kFloat, {128, 512, 14, 14}, {}, {7, 7}));
  ASSERT_TRUE(plan.ok());
  const auto f32 = staged(adaptive_avg_pool_problem(at::kFloat, {128, 512, 14, 14}, {}, {7, 7}));
  EXPECT_EQ(f32.size(), 9u);  // flat 1, 2, 4 x blocks 128, 256, 512
  for (const auto& [v, code] : f32) {
    EXPECT_EQ(plan.value()->stratum(v), 15) << v.id();
    EXPECT_TRUE(has(code, "enum : int { kWinH = 2 };") && has(code, "enum : int { kWinW = 2 };") &&
                has(code, "enum : int { kRowElems = 28 };"))
        << v.id();
    // 28 floats a row are 7 whole vectors: the block takes as many rows as block x flat vectors hold.
    const int64_t rb = v.get("block") * v.get("flat") * 4 / 28;
    EXPECT_EQ(constant(code, "kBlockRows"), rb) << v.id();
    EXPECT_EQ(constant(code, "kThreads"), (128 * 512 * 7 + rb - 1) / rb * v.get("block")) << v.id();
  }
  // 45 floats a row: whole vectors only every 4 rows; a 3-d bf16 input (24 elements a row: 3 vectors).
  for (const auto& [v, code] : staged(adaptive_avg_pool_problem(at::kFloat, {1, 3, 9, 15}, {}, {3, 5})))
    EXPECT_EQ(constant(code, "kBlockRows") % 4, 0) << v.id();
  for (const auto& [v, code] : staged(adaptive_avg_pool_problem(at::kBFloat16, {3, 14, 12}, {}, {7, 4})))
    EXPECT_TRUE(has(code, "enum : int { kRowElems = 24 };") && has(code, "enum : int { kVecElems = 8 };")) << v.id();
  // Size-1 dims may have any stride.
  EXPECT_FALSE(staged(adaptive_avg_pool_problem(at::kHalf, {1, 3, 4, 4}, {7, 16, 4, 1}, {2, 2})).empty());
  // None: windows of unequal sizes, a row pitch or plane stride that is not dense, windows over 64 elements.
  EXPECT_TRUE(staged(adaptive_avg_pool_problem(at::kFloat, {2, 8, 14, 14}, {}, {4, 7})).empty());
  EXPECT_TRUE(
      staged(adaptive_avg_pool_problem(at::kFloat, {2, 8, 14, 14}, {8 * 14 * 16, 14 * 16, 16, 1}, {7, 7})).empty());
  EXPECT_TRUE(staged(adaptive_avg_pool_problem(at::kFloat, {2, 8, 14, 14}, {8 * 200, 200, 14, 1}, {7, 7})).empty());
  EXPECT_TRUE(staged(adaptive_avg_pool_problem(at::kFloat, {1, 2, 16, 8}, {}, {1, 1})).empty());
  EXPECT_FALSE(staged(adaptive_avg_pool_problem(at::kFloat, {1, 2, 16, 8}, {}, {2, 1})).empty());
}

TEST(PoolPlan, PackedPairsForSixteenBitMaxAtColumnStrideTwo) {
  // (pair, block) of the packed-pair variants; each source states its geometry.
  auto pairs = [&](const Problem& p) {
    std::multiset<std::pair<int, int>> out;
    for (const auto& [v, code] : variants(p)) {
      if (!v.get("pair", 0)) continue;
      out.insert({v.get("pair", 0), v.get("block")});
      EXPECT_EQ(constant(code, "kRowsPerSeg"), v.get("pair", 0)) << v.id();
      EXPECT_EQ(v.get("slide") + v.get("smem") + v.get("px"), 0) << v.id();
    }
    return out;
  };
  // The fp16 ResNet stem: 28 lanes a row in one warp, segments of 4 or 8 of the 56 output rows, a left halo only.
  const auto stem = max_pool_problem(at::kHalf, {64, 64, 112, 112}, {}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, false);
  EXPECT_EQ(pairs(stem), (std::multiset<std::pair<int, int>>{{4, 128}, {4, 256}, {8, 128}, {8, 256}}));
  auto plan = family().plan(stem);
  ASSERT_TRUE(plan.ok());
  for (const auto& [v, code] : variants(stem))
    if (v.get("pair", 0) == 8) {
      EXPECT_EQ(plan.value()->stratum(v), 16) << v.id();
      EXPECT_TRUE(constant(code, "kLanes") == 28 && constant(code, "kChunks") == 1 &&
                  constant(code, "kSegments") == 7 && constant(code, "kRows") == 17 &&
                  has(code, "enum : bool { kNeedLeft = true };") && has(code, "enum : bool { kNeedRight = false };"))
          << v.id();
      EXPECT_EQ(constant(code, "kThreads"), 64 * 64 * 7 * 32) << v.id();
    }
  // bf16 rows of 66 lanes (3 warps) with halos on both sides; a 3-row plane takes segments of 4 only.
  for (const auto& [v, code] : variants(max_pool_problem(at::kBFloat16, {3, 10, 264}, {}, {3, 4}, {1, 2}, {1, 1},
                                                          {2, 1}, true, false)))
    if (v.get("pair", 0)) {
      EXPECT_TRUE(constant(code, "kChunks") == 3 && has(code, "enum : bool { kNeedLeft = true };") &&
                  has(code, "enum : bool { kNeedRight = true };") &&
                  has(code, "enum : unsigned { kNeg2 = 0xFF80FF80u };"))
          << v.id();
    }
  const auto short_plane = max_pool_problem(at::kHalf, {1, 4, 5, 12}, {}, {2, 2}, {2, 2}, {0, 0}, {1, 1}, false);
  EXPECT_EQ(pairs(short_plane), (std::multiset<std::pair<int, int>>{{4, 128}, {4, 256}}));
  // None: fp32, avg, column stride 1 or 3, dilated columns, W not a multiple of 4, a row pitch off 8 bytes,
  // channels-last, a left padding of 3 (k7), windows reaching past the right halo word, OW > W / 2.
  const std::vector<int64_t> s = {2, 4, 32, 32};
  EXPECT_TRUE(pairs(max_pool_problem(at::kFloat, s, {}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, false)).empty());
  EXPECT_TRUE(pairs(avg_pool_problem(at::kHalf, s, {}, {3, 3}, {2, 2}, {1, 1}, false, true)).empty());
  EXPECT_TRUE(pairs(max_pool_problem(at::kHalf, s, {}, {3, 3}, {2, 1}, {1, 1}, {1, 1}, false)).empty());
  EXPECT_TRUE(pairs(max_pool_problem(at::kHalf, s, {}, {3, 3}, {2, 3}, {1, 1}, {1, 1}, false)).empty());
  EXPECT_TRUE(pairs(max_pool_problem(at::kHalf, s, {}, {3, 3}, {2, 2}, {1, 1}, {1, 2}, false)).empty());
  EXPECT_TRUE(pairs(max_pool_problem(at::kHalf, {2, 4, 32, 30}, {}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, false)).empty());
  const std::vector<int64_t> pitch34 = {4 * 32 * 34, 32 * 34, 34, 1}, pitch36 = {4 * 32 * 36, 32 * 36, 36, 1};
  EXPECT_TRUE(pairs(max_pool_problem(at::kHalf, s, pitch34, {3, 3}, {2, 2}, {1, 1}, {1, 1}, false)).empty());
  EXPECT_FALSE(pairs(max_pool_problem(at::kHalf, s, pitch36, {3, 3}, {2, 2}, {1, 1}, {1, 1}, false)).empty())
      << "a row pitch of whole 8 bytes";
  EXPECT_TRUE(pairs(max_pool_problem(at::kHalf, s, channels_last(s), {3, 3}, {2, 2}, {1, 1}, {1, 1}, false)).empty());
  EXPECT_TRUE(pairs(max_pool_problem(at::kHalf, s, {}, {7, 7}, {2, 2}, {3, 3}, {1, 1}, false)).empty());
  EXPECT_TRUE(pairs(max_pool_problem(at::kHalf, s, {}, {5, 5}, {2, 2}, {0, 0}, {1, 1}, false)).empty());
  EXPECT_TRUE(pairs(max_pool_problem(at::kHalf, s, {}, {2, 2}, {2, 2}, {1, 1}, {1, 1}, false)).empty())
      << "OW = 17 outputs from 8 lanes of 2";
}

}  // namespace
}  // namespace cudal1::optimizer
