/// @brief The scan family: what it accepts (Note [Scans]), its technique space, features and binding.
#include "scan_family.h"

#include <algorithm>
#include <cmath>
#include <type_traits>
#include <utility>
#include <variant>

#include "codegen_common.h"

namespace cudal1::optimizer::scan {
namespace {

constexpr int kBlocks[] = {64, 128, 256, 512, 1024};
constexpr int kVecs[] = {1, 2, 4, 8};
constexpr int kSplits[] = {1, 4, 8, 16, 32, 64, 128};
constexpr int64_t kMax32 = (int64_t{1} << 31) - 1;
constexpr int kModes = static_cast<int>(std::variant_size_v<ScanTechnique>);  ///< modes 0 .. kModes - 1

/// ScanTechnique's alternatives stand in the order of their modes (features and strata count on it).
template <size_t... I>
constexpr bool modes_in_order(std::index_sequence<I...>) {
  return ((std::variant_alternative_t<I, ScanTechnique>::kMode == static_cast<int>(I)) && ...);
}
static_assert(modes_in_order(std::make_index_sequence<kModes>{}));

int ceil_log2(int64_t x) {
  int l = 0;
  while ((int64_t{1} << l) < x) ++l;
  return l;
}

/// Largest power-of-two width <= 16 bytes for which `ok(width)` holds.
template <typename F>
int widest(c10::ScalarType dt, F ok) {
  int v = 16 / elem_size(dt);
  while (v > 1 && !ok(v)) v /= 2;
  return v;
}

class ScanPlan final : public Plan {
 public:
  explicit ScanPlan(ScanShape s) : s_(std::move(s)) {}

  std::vector<Variant> space() const override {
    std::vector<Variant> out;
    for (const ScanTechnique& t : techniques()) out.push_back(variant_of(t));
    return out;
  }

  std::vector<float> features(const Variant& v) const override {
    std::vector<float> knobs;
    for (int m = 0; m < kModes; ++m) knobs.push_back(v.get("mode") == m);
    for (int x : kVecs) knobs.push_back(v.get("vec") == x);
    for (int x : kBlocks) knobs.push_back(v.get("block") == x);
    for (int x : kSplits) knobs.push_back(v.get("splits") == x);
    knobs.push_back(v.get("nat", 0) == 1);
    knobs.push_back(v.get("ahead", 1) == 2);
    knobs.push_back(v.get("st", 0) == 1);
    const int64_t lines = s_.outer * s_.inner;  // independent scans
    const std::vector<float> ctx = {1.f,
                                    s_.n <= 1024 ? 1.f : 0.f,
                                    s_.n > 1024 && s_.n <= 32768 ? 1.f : 0.f,
                                    s_.n > 32768 ? 1.f : 0.f,
                                    lines < 1024 ? 1.f : 0.f,
                                    s_.inner > 1 ? 1.f : 0.f,
                                    elem_size(s_.dtype) == 2 ? 1.f : 0.f,
                                    s_.prod ? 1.f : 0.f};
    return crossed_features(ctx, knobs);
  }

  /// The technique; native RowLanes combines are a stratum of their own, so the tuner tries both kinds.
  int stratum(const Variant& v) const override { return v.get("nat", 0) == 1 ? kModes : v.get("mode"); }

  Result<KernelSource> source(const Variant& v) const override {
    CUDAL1_ASSIGN_OR_RETURN(const ScanTechnique t, technique_of(v));
    return generate_scan(s_, t);
  }

  Result<std::unique_ptr<BoundKernel>> bind(const Variant& v, std::shared_ptr<LoadedModule> m) const override {
    if (!m) return Status(Code::kInvalidArgument, "no module");
    CUDAL1_ASSIGN_OR_RETURN(const ScanTechnique t, technique_of(v));
    return make_scan_kernel(s_, t, std::move(m));
  }

 private:
  /// The space in its order: each technique where it applies (Note [Scans]).
  std::vector<ScanTechnique> techniques() const {
    std::vector<ScanTechnique> out;
    if (s_.inner == 1) {
      if (s_.reassociate) {
        for (int vec : kVecs) {
          if (vec > s_.max_vec_row) continue;
          for (int block : {128, 256}) out.push_back(RowWarp{vec, block});
          for (int block : {128, 256, 512, 1024}) out.push_back(RowBlock{vec, block});
          if (s_.outer <= 512 && s_.n >= 8192)
            for (int splits : {8, 32, 128}) out.push_back(RowSplit{vec, 512, splits});
        }
      }
      if (s_.reassociate || s_.row_exact)
        for (int block : {128, 256}) out.push_back(RowExact{block});
      // ATen's tiles with a tile per lane (Note [Scans]): exact wherever RowExact is; the widest loads, and on
      // contiguous rows vec 1 = coalesced accesses transposed through shared memory. Only where the exact order
      // is required: fp32 cumsum rows already reach the floor reassociated, and more strata dilute the tuner.
      if (s_.row_exact && !s_.reassociate) {
        std::vector<int> vecs = {s_.max_vec_row};
        if (s_.max_vec_row > 1) vecs.push_back(1);  // vector loads need sd == 1: vec 1 is then the staged one
        // fp16/bf16 cumsum may also combine in the dtype itself (Note [Scans], native combines).
        const bool native = !s_.prod && s_.dtype != c10::ScalarType::Float;
        for (int nat = 0; nat <= (native ? 1 : 0); ++nat)
          for (int vec : vecs)
            for (int lanes : {4, 8, 16})
              for (int block : {128, 256})
                for (int ahead = 1; ahead <= (vec > 1 ? 2 : 1); ++ahead) {
                  out.push_back(RowLanes{vec, block, lanes, nat == 1, ahead, false});
                  // Whole-sector stores through shared memory (Note [Scans], "Whole-sector stores").
                  if (vec > 1 && ahead == 1) out.push_back(RowLanes{vec, block, lanes, nat == 1, ahead, true});
                }
      }
      // A thread per row walking it serially: ATen's own path for rows of an outer dimension with trailing
      // size-1 dimensions, else only worth trying on short rows.
      if (s_.column_exact || (s_.reassociate && s_.n <= 64))
        for (int block : {64, 128, 256}) out.push_back(Column{1, block});
    } else {
      for (int vec : kVecs) {
        if (vec > s_.max_vec_col) continue;
        if (s_.column_exact || s_.reassociate)
          for (int block : {64, 128, 256, 512}) out.push_back(Column{vec, block});
        if (s_.reassociate && s_.n >= 64)
          for (int splits : {4, 16, 64})
            if (s_.n >= 8 * splits)
              for (int block : {128, 256}) out.push_back(ColumnSplit{vec, block, splits});
        // Single pass: up to 64 registers of data per thread, at most 64 chunks (each tile sums the totals of
        // the chunks before it, a quadratic but L2-resident read).
        if (s_.reassociate && s_.n >= 16)
          for (int rows : {8, 16, 32})
            for (int block : {128, 256}) {
              const ColumnLookback k{vec, block, rows};
              if (rows * vec <= 64 && k.chunks(s_) <= 64 && k.chunks(s_) * k.groups(s_) <= kMax32) out.push_back(k);
            }
      }
    }
    return out;
  }

  /// The technique of a variant of this plan's space, else InvalidArgument.
  Result<ScanTechnique> technique_of(const Variant& v) const {
    for (const ScanTechnique& t : techniques())
      if (variant_of(t).knobs == v.knobs) return t;
    return Status(Code::kInvalidArgument, "variant " + v.id() + " is not in this plan's space");
  }

  ScanShape s_;
};

class ScanFamily final : public Family {
 public:
  const char* name() const override { return "scan"; }
  int version() const override { return 5; }
  std::vector<std::string> ops() const override { return {"cumsum", "cumprod"}; }

  Result<std::unique_ptr<Plan>> plan(const Problem& p) const override {
    if ((p.op != "cumsum" && p.op != "cumprod") || !p.overload.empty())
      return Status(Code::kUnsupported, "op " + p.op + (p.overload.empty() ? "" : "." + p.overload) +
                                            " is not in this family");
    if (p.args.size() != 3 || !p.args[0].is_tensor || !p.args[0].tensor.defined || p.args[1].is_tensor ||
        !p.args[1].value.isInt() || p.args[2].is_tensor)
      return Status(Code::kUnsupported, "unexpected arguments");
    const auto& t = p.args[0].tensor;
    ScanShape s;
    s.prod = p.op == "cumprod";
    s.dtype = t.dtype;
    if (!generated_dtype(s.dtype))
      return Status(Code::kUnsupported, std::string("dtype ") + c10::toString(s.dtype) + " (only fp32/fp16/bf16)");
    const c10::IValue& dt = p.args[2].value;
    if (!dt.isNone() && !(dt.isInt() && dt.toInt() == static_cast<int64_t>(s.dtype)))
      return Status(Code::kUnsupported, "dtype argument converts the input");
    if (s.dtype == c10::ScalarType::BFloat16 && p.sm < 80) return Status(Code::kUnsupported, "bf16 needs sm_80+");
    const int64_t nd = static_cast<int64_t>(t.sizes.size());
    if (nd == 0) return Status(Code::kUnsupported, "0-d tensor");
    if (t.strides.size() != t.sizes.size()) return Status(Code::kUnsupported, "strides do not match sizes");
    s.dim = p.args[1].value.toInt();
    if (s.dim < -nd || s.dim >= nd) return Status(Code::kUnsupported, "dim out of range");
    if (s.dim < 0) s.dim += nd;
    int64_t numel = 1;
    for (int64_t d = 0; d < nd; ++d) {
      if (t.sizes[d] < 0) return Status(Code::kUnsupported, "negative size");
      if (t.sizes[d] > 1 && t.strides[d] < 0) return Status(Code::kUnsupported, "negative stride");
      numel *= t.sizes[d];
      (d < s.dim ? s.outer : d > s.dim ? s.inner : s.n) *= t.sizes[d];
    }
    if (numel == 0) return Status(Code::kUnsupported, "empty tensor");
    if (s.n > kMax32 || s.outer * s.inner > kMax32 || numel > (int64_t{1} << 40))
      return Status(Code::kUnsupported, "tensor too large for 32-bit grids and scan lengths");
    s.sizes = t.sizes;
    s.in_strides = t.strides;
    s.sd = s.n > 1 ? t.strides[s.dim] : 1;
    scan_exactness(s, nd);
    if (!s.reassociate && !s.row_exact && !s.column_exact)
      return Status(Code::kUnsupported, std::string(s.prod ? "cumprod" : "cumsum") + " in " +
                                            c10::toString(s.dtype) +
                                            ": no variant reproduces ATen's association for this shape");
    // Vector widths: the storage offset and the strides of the dims before `first` divisible by the width.
    auto strides_ok = [&](int vec, int64_t first) {
      if (t.storage_offset % vec != 0) return false;
      for (int64_t d = 0; d < first; ++d)
        if (t.sizes[d] > 1 && t.strides[d] % vec != 0) return false;
      return true;
    };
    if (s.inner == 1)
      s.max_vec_row = widest(s.dtype, [&](int v) { return s.sd == 1 && s.n % v == 0 && strides_ok(v, s.dim); });
    else {
      // The inner block must be contiguous in the input (stride 1 innermost, dense) for vector loads.
      bool dense_inner = true;
      int64_t expect = 1;
      for (int64_t d = nd - 1; d > s.dim; --d) {
        if (t.sizes[d] != 1 && t.strides[d] != expect) dense_inner = false;
        expect *= t.sizes[d];
      }
      s.max_vec_col = widest(s.dtype, [&](int v) {
        return dense_inner && s.inner % v == 0 && (s.n == 1 || s.sd % v == 0) && strides_ok(v, s.dim + 1);
      });
    }
    return std::unique_ptr<Plan>(new ScanPlan(std::move(s)));
  }
};

}  // namespace

int aten_tile_threads(int64_t rows, int64_t size) {
  // ATen 2.x get_log_num_threads_x_inner_scan<uint32_t>: the difference wraps in unsigned arithmetic.
  const uint32_t lx = static_cast<uint32_t>(ceil_log2(size)), ly = static_cast<uint32_t>(ceil_log2(rows));
  const uint32_t diff = lx - ly;
  const uint32_t l = std::min<uint32_t>(std::max<uint32_t>(4u, (9u + diff) / 2u), 9u);
  return 1 << l;
}

void scan_exactness(ScanShape& s, int64_t ndim) {
  s.reassociate = !s.prod && s.dtype == c10::ScalarType::Float;
  const bool one_row = s.outer * s.inner == 1;  // ATen: cub::DeviceScan
  if (s.n <= 2) {  // one combine at most: every association is the same
    s.row_exact = s.column_exact = true;
    return;
  }
  if (one_row) return;
  if (s.dim == ndim - 1) {
    // A tile's element e depends only on e's bits below the tile size, so tiles of 32 match ATen's wider tiles
    // for rows of at most 32.
    s.row_exact = aten_tile_threads(s.outer, s.n) == 16 || s.n <= 32;
  } else {
    s.column_exact = true;
  }
}

Variant variant_of(const ScanTechnique& t) {
  return std::visit(
      [](const auto& k) {
        using T = std::decay_t<decltype(k)>;
        int splits = 1;
        if constexpr (std::is_same_v<T, RowSplit> || std::is_same_v<T, ColumnSplit>) splits = k.splits;
        if constexpr (std::is_same_v<T, RowLanes>) splits = k.lanes;
        if constexpr (std::is_same_v<T, ColumnLookback>) splits = k.rows;
        Variant v{{{"mode", T::kMode}, {"vec", k.vec}, {"block", k.block}, {"splits", splits}}};
        if constexpr (std::is_same_v<T, RowLanes>) {
          if (k.native) v.knobs.push_back({"nat", 1});
          if (k.ahead > 1) v.knobs.push_back({"ahead", k.ahead});
          if (k.staged_stores) v.knobs.push_back({"st", 1});
        }
        return v;
      },
      t);
}

double scan_output_scaled_tolerance(const ScanShape& s, const ScanTechnique& t) {
  const bool exact = std::visit([&](const auto& k) { return k.exact(s); }, t);
  if (exact && !s.reassociate) return 0;
  // fp32 cumsum, any association: every combine of a prefix tree rounds a sum of a contiguous range, whose
  // magnitude is at most 2 max|prefix|, with relative error u = eps/2; a prefix of length k has k - 1 combines,
  // so each side errs by at most n * eps * max|prefix| (first order) and the two differ by at most 2n of our
  // units. 3n leaves room for max|prefix| vs max|ATen output| and second-order terms.
  // That worst case is loose enough to miss a dropped element on long rows (3n eps max|out| is several sigma of
  // the inputs at n = 32768). Verification draws random inputs, whose rounding errors have random signs and add
  // like a random walk: the difference of the two scans has a standard deviation of about 0.8 sqrt(n) of our
  // units, so 32 sqrt(n) (about 40 standard deviations) is never exceeded by a correct kernel and catches an
  // element lost or counted twice of more than about 0.3 sigma at n = 32768.
  const double n = static_cast<double>(s.n);
  return std::min(3.0 * n, 32.0 * std::sqrt(n));
}

const Family& scan_family() {
  static const ScanFamily f;
  return f;
}

}  // namespace cudal1::optimizer::scan
