/// @brief What the reduction family accepts and declines, the outputs it promises (ATen's sizes, contiguous
/// strides, dtypes), its "outputs x reduced" mapping, and its space (Note [Reductions]).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <numeric>
#include <set>

#include "cudal1/optimizer/family.h"
#include "optimizer/problems.h"
#include "reduce/reduce_family.h"

namespace cudal1::optimizer {
namespace {

using testing::contiguous;
using testing::dims;
using testing::reduce_problem;

const Family& family() { return *family_for("amax", ""); }

Code code(const Problem& p) { return family().plan(p).status().code(); }

std::vector<Variant> space(const Problem& p) { return testing::planned_space(family(), p); }

/// The outputs a bound kernel of `p` promises (the first variant; no module needed to ask).
std::vector<OutputSpec> outputs(const Problem& p) {
  auto s = reduce::parse_reduction(p);
  EXPECT_TRUE(s.ok()) << s.status().to_string();
  if (!s.ok()) return {};
  return reduce::make_reduce_kernel(s.value(), reduce::ReduceTechnique{}, nullptr)->outputs();
}

Problem contiguous_problem(const std::string& spec, c10::ScalarType dt, const std::vector<int64_t>& sizes,
                           c10::IValue dim, bool keepdim = false, c10::IValue extra = c10::IValue()) {
  return reduce_problem(spec, dt, sizes, contiguous(sizes), std::move(dim), keepdim, std::move(extra));
}

TEST(ReducePlan, ServesEveryOp) {
  EXPECT_STREQ(family().name(), "reduce");
  for (const char* spec : {"sum.dim_IntList", "mean.dim", "amax", "amin", "max.dim", "min.dim", "argmax", "argmin",
                           "var.correction", "std.correction"}) {
    const std::string s = spec;
    const auto dot = s.find('.');
    EXPECT_EQ(family_for(s.substr(0, dot), dot == std::string::npos ? "" : s.substr(dot + 1)), &family()) << s;
  }
  EXPECT_TRUE(family().plan(contiguous_problem("sum.dim_IntList", at::kFloat, {16, 256, 256}, dims({1}))).ok());
  EXPECT_TRUE(family().plan(contiguous_problem("mean.dim", at::kBFloat16, {8192, 4096}, dims({-1}))).ok());
  EXPECT_TRUE(family().plan(contiguous_problem("amin", at::kHalf, {3, 5, 7}, dims({0, 2}), true)).ok());
  EXPECT_TRUE(family().plan(contiguous_problem("max.dim", at::kFloat, {128, 4096}, c10::IValue(int64_t{1}))).ok());
  EXPECT_TRUE(family().plan(contiguous_problem("argmin", at::kHalf, {7, 9}, c10::IValue())).ok());
  EXPECT_TRUE(family().plan(contiguous_problem("var.correction", at::kFloat, {64, 33}, dims({0}), false,
                                               c10::IValue(0.5))).ok());
  EXPECT_TRUE(family().plan(contiguous_problem("std.correction", at::kBFloat16, {4, 4}, c10::IValue(), true)).ok());
  EXPECT_TRUE(family().plan(contiguous_problem("sum.dim_IntList", at::kHalf, {4, 4}, dims({1}), false,
                                               c10::IValue(static_cast<int64_t>(at::kHalf)))).ok());
  // Any strides: a transposed, a sliced and an expanded (stride 0) input.
  EXPECT_TRUE(family().plan(reduce_problem("argmax", at::kFloat, {64, 32}, {1, 64}, c10::IValue(int64_t{0}))).ok());
  EXPECT_TRUE(family().plan(reduce_problem("sum.dim_IntList", at::kFloat, {8, 8}, {16, 2}, dims({1}), false,
                                           c10::IValue(), 90, 3)).ok());
  EXPECT_TRUE(family().plan(reduce_problem("amax", at::kFloat, {8, 8}, {0, 1}, dims({0}))).ok());
}

TEST(ReducePlan, DeclinesWhatItCannotDoExactly) {
  EXPECT_EQ(code(contiguous_problem("sum.dim_IntList", at::kDouble, {8, 16}, dims({1}))), Code::kUnsupported);
  EXPECT_EQ(code(contiguous_problem("amax", at::kInt, {8, 16}, dims({1}))), Code::kUnsupported);
  EXPECT_EQ(code(contiguous_problem("argmax", at::kBool, {8, 16}, c10::IValue(int64_t{1}))), Code::kUnsupported);
  EXPECT_EQ(code(contiguous_problem("sum.dim_IntList", at::kHalf, {8, 16}, dims({1}), false,
                                    c10::IValue(static_cast<int64_t>(at::kFloat)))),
            Code::kUnsupported);  // dtype= converts
  EXPECT_EQ(code(contiguous_problem("mean.dim", at::kFloat, {0, 16}, dims({1}))), Code::kUnsupported);
  EXPECT_EQ(code(contiguous_problem("amax", at::kFloat, {8, 0}, dims({1}))), Code::kUnsupported);
  EXPECT_EQ(code(contiguous_problem("amax", at::kFloat, {}, dims({0}))), Code::kUnsupported);  // 0-dim
  EXPECT_EQ(code(contiguous_problem("amax", at::kFloat, {8, 16}, dims({}))), Code::kUnsupported);
  EXPECT_EQ(code(contiguous_problem("sum.dim_IntList", at::kFloat, {8, 16}, dims({2}))), Code::kUnsupported);
  EXPECT_EQ(code(contiguous_problem("sum.dim_IntList", at::kFloat, {8, 16}, dims({-3}))), Code::kUnsupported);
  EXPECT_EQ(code(contiguous_problem("sum.dim_IntList", at::kFloat, {8, 16}, dims({1, -1}))), Code::kUnsupported);
  EXPECT_EQ(code(contiguous_problem("max.dim", at::kFloat, {8, 16}, c10::IValue(int64_t{2}))), Code::kUnsupported);
  EXPECT_EQ(code(contiguous_problem("amax", at::kFloat, {8, 16}, c10::IValue())), Code::kUnsupported);
  EXPECT_EQ(code(contiguous_problem("var.correction", at::kFloat, {1 << 24}, dims({0}))), Code::kUnsupported);
  EXPECT_EQ(code(contiguous_problem("sum.dim_IntList", at::kFloat, {1 << 16, 1 << 15}, dims({0}))),
            Code::kUnsupported);  // 2^31 elements: 64-bit indexing
  auto bf16_old = contiguous_problem("amax", at::kBFloat16, {8, 16}, dims({1}));
  bf16_old.sm = 75;
  EXPECT_EQ(code(bf16_old), Code::kUnsupported);
  auto bad_keepdim = contiguous_problem("amax", at::kFloat, {8, 16}, dims({1}));
  bad_keepdim.args[2].value = c10::IValue(int64_t{1});
  EXPECT_EQ(code(bad_keepdim), Code::kUnsupported);
  EXPECT_EQ(code(contiguous_problem("prod.dim_int", at::kFloat, {8, 16}, c10::IValue(int64_t{1}))), Code::kUnsupported);
}

TEST(ReducePlan, OutputsAreAtensSizesContiguous) {
  auto expect = [](const Problem& p, std::vector<int64_t> sizes, std::vector<c10::ScalarType> dtypes) {
    const auto outs = outputs(p);
    ASSERT_EQ(outs.size(), dtypes.size());
    for (size_t i = 0; i < outs.size(); ++i) {
      EXPECT_EQ(outs[i].dtype, dtypes[i]);
      EXPECT_EQ(outs[i].sizes, sizes);
      EXPECT_EQ(outs[i].strides, contiguous(sizes));
    }
  };
  const std::vector<int64_t> x = {4, 5, 6, 7};
  expect(contiguous_problem("sum.dim_IntList", at::kHalf, x, dims({1, 3})), {4, 6}, {at::kHalf});
  expect(contiguous_problem("sum.dim_IntList", at::kHalf, x, dims({-1, 1}), true), {4, 1, 6, 1}, {at::kHalf});
  expect(contiguous_problem("mean.dim", at::kFloat, x, c10::IValue()), {}, {at::kFloat});
  expect(contiguous_problem("mean.dim", at::kFloat, x, c10::IValue(), true), {1, 1, 1, 1}, {at::kFloat});
  expect(contiguous_problem("max.dim", at::kBFloat16, x, c10::IValue(int64_t{-2})), {4, 5, 7},
         {at::kBFloat16, at::kLong});
  expect(contiguous_problem("min.dim", at::kFloat, x, c10::IValue(int64_t{0}), true), {1, 5, 6, 7},
         {at::kFloat, at::kLong});
  expect(contiguous_problem("argmax", at::kFloat, x, c10::IValue(int64_t{2})), {4, 5, 7}, {at::kLong});
  expect(contiguous_problem("argmin", at::kFloat, x, c10::IValue()), {}, {at::kLong});
  expect(contiguous_problem("argmax", at::kFloat, x, c10::IValue(), true), {1, 1, 1, 1}, {at::kLong});
  expect(contiguous_problem("std.correction", at::kHalf, x, dims({0, 1, 2, 3}), true), {1, 1, 1, 1}, {at::kHalf});
  // A permuted input still gives a contiguous result in the input's dim order (ATen's resize_reduction).
  expect(reduce_problem("amax", at::kFloat, {6, 4}, {1, 6}, dims({0})), {4}, {at::kFloat});
}

TEST(ReducePlan, MapsRowsColumnsAndGathers) {
  // KernelBench L1_47: [16, 256, 256] over dim 1 is 16 x 256 columns of length 256, vectorisable over columns.
  auto col = reduce::parse_reduction(contiguous_problem("sum.dim_IntList", at::kFloat, {16, 256, 256}, dims({1})));
  ASSERT_TRUE(col.ok());
  EXPECT_EQ(col->outputs, 16 * 256);
  EXPECT_EQ(col->length, 256);
  EXPECT_EQ(col->kept_sizes, (std::vector<int64_t>{16, 256}));
  EXPECT_EQ(col->red_strides, (std::vector<int64_t>{256}));
  EXPECT_EQ(col->col_vec, 4);
  EXPECT_EQ(col->row_vec, 1);
  // The last two dims of a contiguous tensor merge into one row of 8 * 9 elements; size-1 dims vanish.
  auto row = reduce::parse_reduction(contiguous_problem("amax", at::kHalf, {3, 1, 8, 9}, dims({2, 3, 1})));
  ASSERT_TRUE(row.ok());
  EXPECT_EQ(row->red_sizes, (std::vector<int64_t>{72}));
  EXPECT_EQ(row->kept_sizes, (std::vector<int64_t>{3}));
  EXPECT_EQ(row->row_vec, 8);
  // Reducing dims 0 and 2 of [4, 5, 6] keeps two reduced runs (a gather), indexed row-major.
  auto gather = reduce::parse_reduction(contiguous_problem("var.correction", at::kFloat, {4, 5, 6}, dims({0, 2})));
  ASSERT_TRUE(gather.ok());
  EXPECT_EQ(gather->red_sizes, (std::vector<int64_t>{4, 6}));
  EXPECT_EQ(gather->red_strides, (std::vector<int64_t>{30, 1}));
  EXPECT_EQ(gather->row_vec, 1);
  // A misaligned slice narrows the vector width; mean's factor is ATen's float(O) / numel.
  auto sliced = reduce::parse_reduction(
      reduce_problem("mean.dim", at::kBFloat16, {10, 64}, {66, 1}, dims({1}), false, c10::IValue(), 90, 2));
  ASSERT_TRUE(sliced.ok());
  EXPECT_EQ(sliced->row_vec, 2);
  EXPECT_EQ(sliced->mean_factor, 10.f / 640.f);
}

TEST(ReducePlan, SpaceFitsTheLayout) {
  // Few long rows: split rows are offered; many short rows: not.
  std::set<int> modes;
  for (const auto& v : space(contiguous_problem("sum.dim_IntList", at::kFloat, {16, 1 << 20}, dims({1})))) {
    modes.insert(v.get("mode"));
    if (v.get("mode") == 2) {
      EXPECT_GE(v.get("splits"), 4) << v.id();
    }
  }
  EXPECT_EQ(modes, (std::set<int>{1, 2, 3}));
  for (const auto& v : space(contiguous_problem("mean.dim", at::kBFloat16, {8192, 4096}, dims({1})))) {
    EXPECT_NE(v.get("mode"), 2) << v.id();
    EXPECT_NE(v.get("mode"), 4) << v.id();  // no column tiles on a row layout
    if (v.get("mode") == 3) {
      EXPECT_EQ(v.get("vec"), 1) << v.id();  // a column fallback on a row layout
    }
  }
  // Columns: vectorised over kept columns, split over the reduced extent when it is long; column tiles too.
  int col_vec4 = 0, col_split = 0, tile_vec4 = 0, tile_split = 0;
  for (const auto& v : space(contiguous_problem("amax", at::kFloat, {4096, 512}, dims({0})))) {
    if (v.get("mode") == 4) {
      tile_vec4 += v.get("vec") == 4;
      tile_split += v.get("splits") > 1;
      EXPECT_LE(v.get("block") * v.get("ty") * v.get("vec"), 2048) << v.id();
      continue;
    }
    if (v.get("mode") != 3) {
      EXPECT_EQ(v.get("vec"), 1) << v.id();
      continue;
    }
    col_vec4 += v.get("vec") == 4;
    col_split += v.get("splits") > 1;
  }
  EXPECT_GT(col_vec4, 0);
  EXPECT_GT(col_split, 0);
  EXPECT_GT(tile_vec4, 0);
  EXPECT_GT(tile_split, 0);
}

TEST(ReducePlan, ColumnTilesServeOddColumns) {
  // KernelBench L1_49: max.dim over the middle dim of [128, 4096, 4095]: 4095 columns (odd: no vectors), tiles of
  // 32 or 64 columns per warp, the old thread-per-column mode still offered; a tile's source runs (value, index)
  // in 32 bits.
  auto plan = family().plan(contiguous_problem("max.dim", at::kFloat, {128, 4096, 4095}, c10::IValue(int64_t{1})));
  ASSERT_TRUE(plan.ok());
  std::set<int> cpts, modes, strata;
  const Variant* tile = nullptr;
  const auto sp = plan.value()->space();
  for (const auto& v : sp) {
    modes.insert(v.get("mode"));
    strata.insert(plan.value()->stratum(v));
    if (v.get("mode") != 4) continue;
    EXPECT_EQ(v.get("vec"), 1) << v.id();
    cpts.insert(v.get("ty"));
    if (!tile && v.get("splits") == 1) tile = &v;
  }
  EXPECT_TRUE(modes.count(3) && modes.count(4));
  EXPECT_EQ(cpts, (std::set<int>{1, 2}));
  EXPECT_TRUE(strata.count(5) && strata.count(6));
  ASSERT_NE(tile, nullptr);
  auto src = plan.value()->source(*tile);
  ASSERT_TRUE(src.ok());
  EXPECT_NE(src->code.find("struct run_t { float v; int i; };"), std::string::npos);
  EXPECT_NE(src->code.find(" ColumnTile mode4."), std::string::npos);
  // A single output (every dim) gets no tiles.
  for (const auto& v : space(contiguous_problem("sum.dim_IntList", at::kFloat, {64, 64}, c10::IValue())))
    EXPECT_NE(v.get("mode"), 4) << v.id();
}

Problem norm(c10::ScalarType dt, const std::vector<int64_t>& sizes, c10::IValue ord, c10::IValue dim,
             bool keepdim = false, c10::IValue dtype = c10::IValue()) {
  return testing::vector_norm_problem(dt, sizes, contiguous(sizes), std::move(ord), std::move(dim), keepdim,
                                      std::move(dtype));
}

// Note [Norm chains]: no accumulator of a norm of ord 1, 2 or p takes a serial chain of more than 8192 terms
// (the fuzz caught a thread summing 1.26 M squares 3.7e-4 low); signed sums keep every mapping.
TEST(ReducePlan, NormSumsKeepEverySerialChainShort) {
  const auto chain = [](const Variant& v, int64_t len) -> int64_t {
    const int64_t block = v.get("block"), splits = v.get("splits"), ty = v.get("ty");
    const int64_t chunk = (len + splits - 1) / splits;
    switch (v.get("mode")) {
      case 0: return (len + 31) / 32;
      case 1: return (len + block - 1) / block;
      case 2: return (chunk + block - 1) / block;
      case 3: return (chunk + ty - 1) / ty;
      default: return (chunk + block / 32 - 1) / (block / 32);
    }
  };
  for (const auto& sizes : {std::vector<int64_t>{48, 63, 13, 32}, std::vector<int64_t>{16, 64, 256, 256}}) {
    const int64_t len = std::accumulate(sizes.begin(), sizes.end(), int64_t{1}, std::multiplies<int64_t>());
    for (const c10::IValue& ord : {c10::IValue(1.0), c10::IValue(2.0), c10::IValue(3.0)}) {
      const auto vs = space(norm(at::kFloat, sizes, ord, c10::IValue()));
      EXPECT_FALSE(vs.empty());
      for (const auto& v : vs) EXPECT_LE(chain(v, len), 8192) << v.id();
    }
    bool serial = false;  // a signed sum still gets the thread-per-output mapping
    for (const auto& v : space(contiguous_problem("sum.dim_IntList", at::kFloat, sizes, c10::IValue())))
      serial = serial || (v.get("mode") == 3 && v.get("ty") == 1);
    EXPECT_TRUE(serial);
  }
}

TEST(ReducePlan, VectorNormOrdsDtypesAndDeclines) {
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_EQ(family_for("linalg_vector_norm", ""), &family());
  // Every ord class, int or double ords; dim None and [] are every dim (one output); keepdim.
  auto two = reduce::parse_reduction(norm(at::kBFloat16, {8192, 4096}, c10::IValue(int64_t{2}), dims({-1})));
  ASSERT_TRUE(two.ok()) << two.status().to_string();
  EXPECT_EQ(two->ord, reduce::NormOrd::kTwo);
  EXPECT_EQ(two->out_dtype, at::kBFloat16);
  EXPECT_EQ(two->length, 4096);
  EXPECT_EQ(reduce::parse_reduction(norm(at::kFloat, {4, 5}, c10::IValue(0.0), dims({1})))->ord,
            reduce::NormOrd::kZero);
  EXPECT_EQ(reduce::parse_reduction(norm(at::kFloat, {4, 5}, c10::IValue(1.0), dims({1})))->ord, reduce::NormOrd::kOne);
  EXPECT_EQ(reduce::parse_reduction(norm(at::kHalf, {4, 5}, c10::IValue(inf), dims({0})))->ord, reduce::NormOrd::kInf);
  EXPECT_EQ(reduce::parse_reduction(norm(at::kHalf, {4, 5}, c10::IValue(-inf), dims({0})))->ord,
            reduce::NormOrd::kNegInf);
  auto p3 = reduce::parse_reduction(norm(at::kFloat, {4, 5}, c10::IValue(int64_t{3}), dims({1})));
  ASSERT_TRUE(p3.ok());
  EXPECT_EQ(p3->ord, reduce::NormOrd::kP);
  EXPECT_EQ(p3->norm_p, 3.f);
  auto all = reduce::parse_reduction(norm(at::kFloat, {16, 64, 256, 256}, c10::IValue(2.0), c10::IValue()));
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->outputs, 1);
  EXPECT_TRUE(all->out_sizes.empty());
  EXPECT_EQ(reduce::parse_reduction(norm(at::kFloat, {3, 4}, c10::IValue(2.0), dims({}), true))->out_sizes,
            (std::vector<int64_t>{1, 1}));
  // dtype=float of fp16/bf16 input: fp32 result; the input's own dtype: unchanged.
  const auto f32 = c10::IValue(static_cast<int64_t>(at::kFloat));
  auto widened = reduce::parse_reduction(norm(at::kHalf, {64, 100}, c10::IValue(2.0), dims({1}), false, f32));
  ASSERT_TRUE(widened.ok());
  EXPECT_EQ(widened->out_dtype, at::kFloat);
  EXPECT_EQ(outputs(norm(at::kBFloat16, {64, 100}, c10::IValue(1.0), dims({1}), true, f32)).front().dtype, at::kFloat);
  EXPECT_EQ(outputs(norm(at::kHalf, {64, 100}, c10::IValue(1.0), dims({0}), true)).front().sizes,
            (std::vector<int64_t>{1, 100}));
  EXPECT_TRUE(family().plan(norm(at::kHalf, {64, 100}, c10::IValue(2.0), dims({1}), false,
                                 c10::IValue(static_cast<int64_t>(at::kHalf)))).ok());
  // Declined: fp64, dtype= double or narrowing, exotic ords, empty input, one element per output (ATen's abs
  // path), ord 0 past fp32 counts, bool ord.
  EXPECT_EQ(code(norm(at::kDouble, {4, 5}, c10::IValue(2.0), dims({1}))), Code::kUnsupported);
  EXPECT_EQ(code(norm(at::kFloat, {4, 5}, c10::IValue(2.0), dims({1}), false,
                      c10::IValue(static_cast<int64_t>(at::kDouble)))), Code::kUnsupported);
  EXPECT_EQ(code(norm(at::kFloat, {4, 5}, c10::IValue(2.0), dims({1}), false,
                      c10::IValue(static_cast<int64_t>(at::kHalf)))), Code::kUnsupported);
  EXPECT_EQ(code(norm(at::kFloat, {4, 5}, c10::IValue(0.1), dims({1}))), Code::kUnsupported);
  EXPECT_EQ(code(norm(at::kFloat, {4, 5}, c10::IValue(100.0), dims({1}))), Code::kUnsupported);
  EXPECT_EQ(code(norm(at::kFloat, {4, 5}, c10::IValue(std::nan("")), dims({1}))), Code::kUnsupported);
  EXPECT_EQ(code(norm(at::kFloat, {4, 0}, c10::IValue(2.0), dims({1}))), Code::kUnsupported);
  EXPECT_EQ(code(norm(at::kFloat, {4, 1}, c10::IValue(2.0), dims({1}))), Code::kUnsupported);
  EXPECT_EQ(code(norm(at::kFloat, {1, 1}, c10::IValue(2.0), c10::IValue())), Code::kUnsupported);
  EXPECT_EQ(code(norm(at::kFloat, {1 << 24, 2}, c10::IValue(0.0), dims({0}))), Code::kUnsupported);
  EXPECT_TRUE(family().plan(norm(at::kFloat, {1 << 24, 2}, c10::IValue(2.0), dims({0}))).ok());
  EXPECT_EQ(code(norm(at::kFloat, {4, 5}, c10::IValue(true), dims({1}))), Code::kUnsupported);
  // The source carries the term and the projection: ord p (NormOrd::kP) with p = 3 and 1 / p in fp32.
  auto plan = family().plan(norm(at::kFloat, {64, 100}, c10::IValue(3.0), dims({1})));
  ASSERT_TRUE(plan.ok());
  auto src = plan.value()->source(plan.value()->space().front());
  ASSERT_TRUE(src.ok());
  EXPECT_NE(src->code.find("enum : bool { kNorm = true };"), std::string::npos);
  EXPECT_NE(src->code.find("enum : int { kOrd = 5 };"), std::string::npos);
  EXPECT_NE(src->code.find("enum : unsigned { kNormPBits = 0x40400000u };"), std::string::npos);
  EXPECT_NE(src->code.find("enum : unsigned { kNormInvPBits = 0x3eaaaaabu };"), std::string::npos);
}

TEST(ReducePlan, SourceIsSpecialisedAndRejectsForeignVariants) {
  auto plan = family().plan(contiguous_problem("max.dim", at::kHalf, {64, 1000}, c10::IValue(int64_t{1})));
  ASSERT_TRUE(plan.ok());
  const auto sp = plan.value()->space();
  ASSERT_FALSE(sp.empty());
  auto src = plan.value()->source(sp.front());
  ASSERT_TRUE(src.ok());
  EXPECT_NE(src->code.find("enum : index_t { kLength = 1000 };"), std::string::npos);
  EXPECT_NE(src->code.find("enum : int { kKind = 2 };"), std::string::npos);
  EXPECT_NE(src->code.find("enum : bool { kHasValues = true };"), std::string::npos);
  EXPECT_EQ(src->kernel_name, "cudal1_reduce");
  EXPECT_FALSE(plan.value()->source(Variant{{{"mode", 2}, {"vec", 16}}}).ok());
  std::set<std::string> ids;
  std::set<int> strata;
  for (const auto& v : sp) {
    EXPECT_TRUE(ids.insert(v.id()).second) << v.id();
    strata.insert(plan.value()->stratum(v));
    const auto f = plan.value()->features(v);
    EXPECT_EQ(f.size(), plan.value()->features(sp.front()).size());
    for (float x : f) EXPECT_TRUE(x >= 0.f && x <= 1.f);
  }
  EXPECT_GE(strata.size(), 3u);
}

/// The bench's column rows (Note [Column tiles in flight]) and a bf16 one whose rows are not a multiple of U.
std::vector<Problem> column_rows() {
  return {
      contiguous_problem("var.correction", at::kFloat, {4096, 4096}, dims({0})),
      contiguous_problem("argmax", at::kFloat, {128, 4096, 32}, c10::IValue(int64_t{1})),
      norm(at::kFloat, {4096, 4096}, c10::IValue(int64_t{1}), dims({0})),
      contiguous_problem("sum.dim_IntList", at::kBFloat16, {4095, 96}, dims({0})),
  };
}

TEST(ReducePlan, PipelinedColumnTilesReachTheTargetRows) {
  // Note [Column tiles in flight]: the bench's column rows get pipelined tiles in one launch (splits > 1) and
  // without splits, in their own strata (the tuner tries each stratum); the older tiles keep their ids.
  for (const auto& p : column_rows()) {
    auto plan = family().plan(p);
    ASSERT_TRUE(plan.ok()) << p.op << ": " << plan.status().to_string();
    auto shape = reduce::parse_reduction(p);
    ASSERT_TRUE(shape.ok());
    std::set<int> strata, unrs;
    int one_launch = 0, plain_tiles = 0;
    for (const auto& v : plan.value()->space()) {
      if (v.get("mode") != 4 || v.get("cluster", 0) > 0) continue;  // cluster tiles: the next test
      const int unr = v.get("unr", 0);
      if (unr == 0) {
        ++plain_tiles;
        EXPECT_EQ(v.id().find("unr"), std::string::npos) << v.id();
        continue;
      }
      strata.insert(plan.value()->stratum(v));
      unrs.insert(unr);
      EXPECT_LE(unr * v.get("vec") * v.get("ty"), 16) << v.id();
      EXPECT_GE(unr * v.get("vec") * v.get("ty"), 8) << v.id();
      EXPECT_LE(v.get("block") * v.get("ty") * v.get("vec"), 2048) << v.id();
      const reduce::PipelinedTile k{{{v.get("vec"), v.get("block")}, v.get("ty"), v.get("splits")}, unr};
      const int64_t cnt = k.counter_bytes(shape.value());
      EXPECT_EQ(cnt % 16, 0);
      EXPECT_GE(cnt, k.splits > 1 ? k.tiles(shape.value()) * 4 : 0) << v.id();
      if (k.splits == 1) {
        EXPECT_EQ(cnt, 0) << v.id();
      }
      auto src = plan.value()->source(v);
      ASSERT_TRUE(src.ok()) << v.id();
      EXPECT_NE(src->code.find("enum : bool { kPipe = true };"), std::string::npos) << v.id();
      EXPECT_NE(src->code.find("enum : int { kUnr = " + std::to_string(unr) + " };"), std::string::npos) << v.id();
      EXPECT_NE(src->code.find(std::string("enum : bool { kOneLaunch = ") + (k.splits > 1 ? "true" : "false")),
                std::string::npos);
      EXPECT_NE(src->code.find("enum : int { kCounterBytes = " + std::to_string(cnt) + " };"), std::string::npos)
          << v.id();
      one_launch += k.splits > 1;
    }
    EXPECT_GT(plain_tiles, 0) << p.op;
    EXPECT_GT(one_launch, 0) << p.op;
    EXPECT_EQ(strata, (std::set<int>{7, 8})) << p.op;
    EXPECT_EQ(unrs, (std::set<int>{4, 8})) << p.op;
  }
  // A plain tile's source is the older kernel (no pipelining, a second pass for splits, the bare launch bound).
  for (const auto& v : space(contiguous_problem("amax", at::kFloat, {4096, 512}, dims({0})))) {
    if (v.get("mode") != 4 || v.get("unr", 0) != 0) continue;
    auto plan = family().plan(contiguous_problem("amax", at::kFloat, {4096, 512}, dims({0})));
    auto src = plan.value()->source(v);
    ASSERT_TRUE(src.ok());
    EXPECT_NE(src->code.find("enum : bool { kPipe = false };"), std::string::npos);
    EXPECT_NE(src->code.find("enum : bool { kOneLaunch = false };"), std::string::npos);
    EXPECT_NE(src->code.find("enum : bool { kCluster = false };"), std::string::npos);
    EXPECT_NE(src->code.find("enum : int { kMinBlocks = 0 };"), std::string::npos);
    break;
  }
}

TEST(ReducePlan, ClusterTilesFillOneWaveOnTheTargetRows) {
  // Note [Column tiles in clusters]: on sm_90 the bench's column rows get cluster tiles of 16-byte loads whose
  // grid fills one wave of a 132-SM part at 1024 threads per SM, 3/4 of it (block 192) or half of it, in strata
  // of their own; narrower loads in a fourth; none before sm_90 (clusters).
  for (const auto& p : column_rows()) {
    auto plan = family().plan(p);
    ASSERT_TRUE(plan.ok()) << p.op << ": " << plan.status().to_string();
    auto shape = reduce::parse_reduction(p);
    ASSERT_TRUE(shape.ok());
    const int es = shape->dtype == at::kFloat ? 4 : 2;
    std::set<int> strata;
    std::set<std::string> ids;
    for (const auto& v : plan.value()->space()) {
      if (v.get("cluster", 0) == 0) continue;
      ids.insert(v.id());
      strata.insert(plan.value()->stratum(v));
      const reduce::ClusterTile k{
          {{v.get("vec"), v.get("block")}, v.get("ty"), v.get("splits")}, v.get("unr"), v.get("ring", 0) > 0};
      EXPECT_EQ(v.get("mode"), 4);
      EXPECT_EQ(k.columns, 1) << v.id();
      EXPECT_LE(k.vec * es, 16) << v.id();
      EXPECT_GE(k.vec * k.batch, 8) << v.id();
      EXPECT_LE(k.vec * k.batch, 16) << v.id();
      EXPECT_TRUE(k.splits == 2 || k.splits == 4 || k.splits == 8 || k.splits == 16) << v.id();
      EXPECT_TRUE(k.block == 192 || k.block == 256 || k.block == 512) << v.id();
      EXPECT_LE(32 * k.vec, k.block) << v.id();  // a thread per tile column in the merge
      EXPECT_LE(k.tiles(shape.value()) * k.splits * k.block, 132 * 1024) << v.id();
      EXPECT_GE(k.chunk_rows(shape.value()), int64_t{k.batch} * (k.block / 32)) << v.id();
      EXPECT_EQ(k.grid(shape.value()).workspace, 0) << v.id();  // no counters, no partials
      EXPECT_EQ(k.grid(shape.value()).cluster, k.splits) << v.id();
      auto src = plan.value()->source(v);
      ASSERT_TRUE(src.ok()) << v.id();
      EXPECT_NE(src->code.find("enum : bool { kCluster = true };"), std::string::npos) << v.id();
      EXPECT_NE(src->code.find("enum : int { kMinBlocks = " + std::to_string(1024 / k.block) + " };"),
                std::string::npos) << v.id();
      EXPECT_NE(src->code.find("barrier.cluster.arrive"), std::string::npos) << v.id();
      EXPECT_NE(src->code.find("enum : bool { kOneLaunch = false };"), std::string::npos) << v.id();
      // Note [Column tiles in rings]: every cluster tile of 4+ byte vectors also streams through a ring, in a
      // stratum of its own, 4 stages of 32 bytes a thread.
      const int stages = k.ring_stages();
      EXPECT_NE(src->code.find(std::string("enum : bool { kRing = ") + (k.ring ? "true" : "false") + " };"),
                std::string::npos) << v.id();
      if (k.ring) {
        EXPECT_EQ(plan.value()->stratum(v), 13) << v.id();
        EXPECT_GE(k.vec * es, 4) << v.id();
        EXPECT_EQ(stages, 4) << v.id();
        EXPECT_EQ(k.batch * k.vec * es, 32) << v.id();
        EXPECT_EQ(k.ring_smem_bytes(shape.value()), size_t{128} * k.block) << v.id();
        EXPECT_NE(src->code.find("enum : int { kRingStages = 4 };"), std::string::npos) << v.id();
        EXPECT_NE(src->code.find("cp.async.wait_group"), std::string::npos) << v.id();
      } else {
        EXPECT_EQ(stages, 0);
        EXPECT_EQ(k.ring_smem_bytes(shape.value()), 0u);
      }
    }
    for (const auto& id : ids) {  // each ring tile comes with its plain twin
      if (id.size() > 6 && id.compare(id.size() - 6, 6, ".ring1") == 0) {
        EXPECT_EQ(ids.count(id.substr(0, id.size() - 6)), 1u) << id;
      }
    }
    // A 96-column tile cannot fill a wave: its 16-byte loads are all in the half-wave stratum.
    const std::set<int> want = es == 4 ? std::set<int>{9, 10, 11, 12, 13} : std::set<int>{11, 12, 13};
    EXPECT_EQ(strata, want) << p.op;
    if (es == 4) {  // the two ways to fill the wave with 16-byte loads, 64 bytes a thread per batch, and 3/4
      EXPECT_EQ(ids.count("mode4.vec4.block256.splits16.ty1.unr4.cluster1"), 1u) << p.op;
      EXPECT_EQ(ids.count("mode4.vec4.block512.splits8.ty1.unr4.cluster1"), 1u) << p.op;
      EXPECT_EQ(ids.count("mode4.vec4.block192.splits16.ty1.unr4.cluster1"), 1u) << p.op;
    }
    Problem p80 = p;
    p80.sm = 80;
    for (const auto& v : space(p80)) EXPECT_EQ(v.get("cluster", 0), 0) << v.id();
  }
  // Eight Welford runs a thread spill at 64 registers: var/std keep to four columns (8-byte bf16 loads).
  for (const auto& v : space(contiguous_problem("std.correction", at::kBFloat16, {4095, 96}, dims({0}))))
    if (v.get("cluster", 0) > 0) {
      EXPECT_LE(v.get("vec"), 4) << v.id();
    }
}

}  // namespace
}  // namespace cudal1::optimizer
