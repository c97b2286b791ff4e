/// @brief The softmax family: what it accepts (rows, or columns: Note [Softmax columns]) and the features both
/// kinds of plan share.
#include "softmax_family.h"

#include <optional>

#include "codegen_common.h"
#include "cudal1/optimizer/layout.h"

namespace cudal1::optimizer::softmax {

std::vector<float> softmax_features(const SoftmaxClass& c, const Variant& v) {
  std::vector<float> knobs;
  for (int x : {1, 2, 4, 8}) knobs.push_back(v.get("vec") == x);
  for (int x : {128, 256, 512, 1024}) knobs.push_back(v.get("block") == x);
  knobs.push_back(v.get("warp", -1) == 1);  // rows only
  knobs.push_back(v.get("warp", -1) == 0);
  knobs.push_back(v.get("cache") == 1);
  knobs.push_back(v.get("cache") == 0);
  for (int x : {1, 4, 32}) knobs.push_back(v.get("split", 0) == x);  // columns only
  knobs.push_back(v.get("tile", 0) == 1);                             // column tiles only
  knobs.push_back(v.get("chunks", 1) > 1);
  knobs.push_back(v.get("head", 0) == 1);  // rows only
  knobs.push_back(v.get("tile", 0) == 2);  // shared column tiles (Note [Softmax shared tiles])
  knobs.push_back(v.get("cluster", 0) == 1);
  knobs.push_back(v.get("cluster", 0) == 2 || v.get("cluster", 0) == 4);
  knobs.push_back(v.get("cluster", 0) >= 8);
  knobs.push_back(v.get("keep", 0) == 1);
  knobs.push_back(v.get("two", 0) == 1);  // two passes on chip (Note [Softmax fast exp])
  knobs.push_back(v.get("pair", 0) == 1);  // Note [Softmax pair tiles]
  knobs.push_back(v.get("fast", 0) == 1);  // Note [Softmax fast tiles]
  knobs.push_back(v.get("tile", 0) == 3);  // Note [Softmax held slabs]
  auto f = [](bool b) { return b ? 1.f : 0.f; };
  const std::vector<float> ctx = {1.f,
                                  f(c.n <= 1024),
                                  f(c.n > 1024 && c.n <= 8192),
                                  f(c.n > 8192),
                                  f(c.half),
                                  f(c.log),
                                  f(c.columns),
                                  f(c.columns && c.inner <= 16),
                                  f(c.columns && c.column_count <= 16384)};
  return crossed_features(ctx, knobs);
}

namespace {

/// The one stride that steps through the dims before `dim` as a single flattened dim (size-1 dims ignored;
/// `dflt` when they are all size 1); nullopt when they have no such stride.
std::optional<int64_t> uniform_stride(const dispatcher::TensorSpec& t, int64_t dim, int64_t dflt) {
  int64_t stride = dflt, expect = -1;
  for (int64_t d = dim - 1; d >= 0; --d) {
    if (t.sizes[d] == 1) continue;
    if (expect < 0) {
      stride = t.strides[d];
    } else if (t.strides[d] != expect) {
      return std::nullopt;
    }
    expect = t.strides[d] * t.sizes[d];
  }
  return stride;
}

/// Rows: the softmax dim `dim` is the innermost one that is not size 1 (or the last).
Result<std::unique_ptr<Plan>> plan_rows(const dispatcher::TensorSpec& t, int64_t dim, SoftmaxShape s) {
  s.cols = t.sizes[dim];
  if (s.cols != 1 && t.strides[dim] != 1) return Status(Code::kUnsupported, "softmax dimension not contiguous");
  if (s.cols > (int64_t{1} << 30)) return Status(Code::kUnsupported, "rows too long");
  int64_t numel = 1;
  for (int64_t x : t.sizes) numel *= x;
  // Outer dimensions must form rows with one uniform stride (size-1 dimensions ignored).
  s.rows = numel / s.cols;
  const auto row_stride = uniform_stride(t, dim, s.cols);
  if (!row_stride) return Status(Code::kUnsupported, "rows do not have one uniform stride");
  s.row_stride = *row_stride;
  if (s.rows > 1 && s.row_stride < s.cols) return Status(Code::kUnsupported, "overlapping rows");
  if (s.rows >= (int64_t{1} << 31)) return Status(Code::kUnsupported, "too many rows");
  s.sizes = t.sizes;
  s.in_strides = t.strides;
  s.out_strides = contiguous_strides(t.sizes);  // ATen writes softmax into a contiguous tensor
  const int es = elem_size(s.dtype);
  s.max_vec = 16 / es;
  while (s.max_vec > 1 && (s.cols % s.max_vec != 0 || (s.rows > 1 && s.row_stride % s.max_vec != 0) ||
                           (t.storage_offset * es) % (s.max_vec * es) != 0))
    s.max_vec /= 2;
  // Note [Softmax row heads]: widest vector whose head length is the same for input and output rows.
  s.head_vec = 16 / es;
  while (s.head_vec > s.max_vec && ((s.rows > 1 && (s.row_stride - s.cols) % s.head_vec != 0) ||
                                    t.storage_offset % s.head_vec != 0 || s.cols < 2 * s.head_vec))
    s.head_vec /= 2;
  if (s.head_vec <= s.max_vec) s.head_vec = 1;  // plain vectors already reach it
  return row_plan(std::move(s));
}

/// Columns (Note [Softmax columns]): the dims after `dim` have a product > 1.
Result<std::unique_ptr<Plan>> plan_columns(const dispatcher::TensorSpec& t, int64_t dim, ColumnShape c) {
  const int64_t nd = static_cast<int64_t>(t.sizes.size());
  c.n = t.sizes[dim];
  c.inner = 1;
  for (int64_t d = nd - 1; d > dim; --d) {
    if (t.sizes[d] == 1) continue;
    if (t.strides[d] != c.inner) return Status(Code::kUnsupported, "dims after the softmax dim are not dense");
    c.inner *= t.sizes[d];
  }
  c.outer = 1;
  for (int64_t d = 0; d < dim; ++d) c.outer *= t.sizes[d];
  c.n_stride = c.n > 1 ? t.strides[dim] : c.inner;
  if (c.n > 1 && c.n_stride < c.inner) return Status(Code::kUnsupported, "overlapping softmax columns");
  const auto outer_stride = uniform_stride(t, dim, c.n * c.inner);
  if (!outer_stride) return Status(Code::kUnsupported, "outer dims do not have one uniform stride");
  c.outer_stride = *outer_stride;
  if (c.outer > 1 && c.outer_stride < (c.n - 1) * c.n_stride + c.inner)
    return Status(Code::kUnsupported, "overlapping outer slices");
  if (c.n > (int64_t{1} << 30)) return Status(Code::kUnsupported, "softmax dim too long");
  if (c.outer * c.inner >= (int64_t{1} << 31)) return Status(Code::kUnsupported, "too many columns");
  c.sizes = t.sizes;
  c.in_strides = t.strides;
  c.out_strides = contiguous_strides(t.sizes);  // ATen softmaxes input.contiguous() into a contiguous output
  const int es = elem_size(c.dtype);
  c.max_vec = 16 / es;
  while (c.max_vec > 1 && (c.inner % c.max_vec != 0 || c.n_stride % c.max_vec != 0 ||
                           c.outer_stride % c.max_vec != 0 || (t.storage_offset * es) % (c.max_vec * es) != 0))
    c.max_vec /= 2;
  c.aligned16 = (t.storage_offset * es) % 16 == 0 && (c.n_stride * es) % 16 == 0 &&
                (c.outer == 1 || (c.outer_stride * es) % 16 == 0);
  return column_plan(std::move(c));
}

class SoftmaxFamily final : public Family {
 public:
  const char* name() const override { return "softmax"; }
  // 2: row reductions from codegen_common; 3: column kernels; 4: column tiles (Note [Softmax column tiles]);
  // 5: shared tiles and cluster rows (Note [Softmax shared tiles]);
  // 6: cached exps and the one-rounding divide in the row epilogue (Note [Softmax epilogue]);
  // 7: merge_warps and cached_rows_source shared by the tile kernels (same arithmetic);
  // 8: two-pass shared tiles (Note [Softmax fast exp]), cp.async shared tiles (Note [Softmax async tiles]);
  // 9: cp.async from codegen_common (Note [Async copies]), the two merges as one two_pass_merge (same cubins);
  // 10: cluster merges by warp 0 with every rank's load in flight (Note [Softmax cluster merge]);
  // 11: held slabs (Note [Softmax held slabs]); 12: the held slabs' releases without fence.sc, finals as float4
  // loads with the epilogue's constant made by the merging block, one flag poller a block; 13: the held slabs'
  // grid (parts, rows, slots) compiled in for the plan's SM count; 14: the held slabs' output warps hold items in
  // registers (`hold`), the variants S 5 O 8 hold 2 and S 6 O 8 hold 1 in place of S 8 O 4 and S 6 O 8;
  // 15: the row techniques as classes (RowPerWarp, RowPerBlock, ClusterRows) with their device code in .cuh files
  // (same cubins); 16: the column techniques as classes (SplitColumns, ColumnTiles, SharedTiles, PairTiles,
  // HeldSlabs) with their device code in .cuh files (same cubins); 17: the online shared tiles dropped (no
  // benchmark row chose them; the kept variants' cubins are the same); 18: codegen_common's row reductions on typed
  // constants (framework/row_reduce.cuh) and its cp.async copies without the vector form (same cubins)
  int version() const override { return 18; }
  std::vector<std::string> ops() const override { return {"_softmax", "_log_softmax"}; }

  Result<std::unique_ptr<Plan>> plan(const Problem& p) const override {
    if ((p.op != "_softmax" && p.op != "_log_softmax") || !p.overload.empty())
      return Status(Code::kUnsupported, "op " + p.op + " is not in this family");
    if (p.args.size() != 3 || !p.args[0].is_tensor || !p.args[0].tensor.defined || !p.args[1].value.isInt() ||
        !p.args[2].value.isBool())
      return Status(Code::kUnsupported, "unexpected arguments");
    if (p.args[2].value.toBool()) return Status(Code::kUnsupported, "half_to_float=True");
    const auto& t = p.args[0].tensor;
    const bool log = p.op == "_log_softmax";
    if (!generated_dtype(t.dtype)) return Status(Code::kUnsupported, std::string("dtype ") + c10::toString(t.dtype));
    if (t.dtype == c10::ScalarType::BFloat16 && p.sm < 80) return Status(Code::kUnsupported, "bf16 needs sm_80+");
    const int64_t nd = static_cast<int64_t>(t.sizes.size());
    if (nd == 0) return Status(Code::kUnsupported, "0-d tensor");
    if (t.strides.size() != t.sizes.size()) return Status(Code::kUnsupported, "malformed layout");
    int64_t dim = p.args[1].value.toInt();
    if (dim < 0) dim += nd;
    if (dim < 0 || dim >= nd) return Status(Code::kUnsupported, "dim out of range");
    int64_t numel = 1, inner = 1;
    for (int64_t x : t.sizes) numel *= x;
    for (int64_t d = dim + 1; d < nd; ++d) inner *= t.sizes[d];
    if (numel == 0) return Status(Code::kUnsupported, "empty tensor");
    if (inner == 1) {
      SoftmaxShape s;
      s.log = log;
      s.dtype = t.dtype;
      s.sm = p.sm;
      return plan_rows(t, dim, std::move(s));
    }
    ColumnShape c;
    c.log = log;
    c.dtype = t.dtype;
    c.sm = p.sm;
    c.sm_count = p.sm_count;
    return plan_columns(t, dim, std::move(c));
  }
};

}  // namespace

const Family& softmax_family() {
  static const SoftmaxFamily f;
  return f;
}

}  // namespace cudal1::optimizer::softmax
