/// @brief Source generation for the scan family (Note [Scans]): a head of typed constants, then the device code
/// of scan_common.cuh and of the technique's .cuh (embedded at build time); and each technique's launch. Every
/// variant is one entry point cudal1_scan(in, out, ws, phase); the input is read through in_base(outer, inner) +
/// k * kSd with the signature's sizes and strides as constants, the output is written contiguously as
/// [kOuter, kN, kInner].
#include <ostream>
#include <sstream>
#include <string>
#include <type_traits>

#include "codegen_common.h"
#include "scan_cuda.h"
#include "scan_family.h"

namespace cudal1::optimizer::scan {
namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

/// `in_base(o, i)`: the input offset of outer index `o`, inner index `i`, scan index 0.
std::string in_base_source(const ScanShape& s) {
  std::ostringstream k;
  k << "__device__ __forceinline__ index_t in_base(index_t o, index_t i) {\n  index_t off = 0;\n";
  const int64_t nd = static_cast<int64_t>(s.sizes.size());
  for (int64_t d = nd - 1; d > s.dim; --d)
    if (s.sizes[d] > 1)
      k << "  off += (i % " << s.sizes[d] << ") * " << s.in_strides[d] << "; i /= " << s.sizes[d] << ";\n";
  for (int64_t d = s.dim - 1; d >= 0; --d)
    if (s.sizes[d] > 1)
      k << "  off += (o % " << s.sizes[d] << ") * " << s.in_strides[d] << "; o /= " << s.sizes[d] << ";\n";
  k << "  return off;\n}\n";
  return k.str();
}

/// The source of `k` on `s`: the head scan_common.cuh describes, then the device code.
template <class Technique>
KernelSource generate(const ScanShape& s, const Technique& k) {
  bool native = false;
  if constexpr (std::is_same_v<Technique, RowLanes>) native = k.native;
  std::ostringstream o;
  o << "// cudal1 scan: " << (s.prod ? "cumprod " : "cumsum ") << c10::toString(s.dtype) << " outer=" << s.outer
    << " n=" << s.n << " inner=" << s.inner << " " << Technique::kName << " " << variant_of(k).id() << "\n";
  o << "typedef long long index_t;\n" << combine_source(s, native) << "namespace scan {\n";
  constant(o, "int", "kVec", k.vec);
  constant(o, "int", "kBlock", k.block);
  constant(o, "int", "kWarps", k.block / 32);
  constant(o, "index_t", "kOuter", s.outer);
  constant(o, "index_t", "kN", s.n);
  constant(o, "index_t", "kInner", s.inner);
  constant(o, "index_t", "kLines", s.outer * s.inner);
  constant(o, "index_t", "kSd", s.sd);
  o << in_base_source(s) << "}  // namespace scan\n" << device_sources::kScanCommon;
  k.source(o, s);
  return KernelSource{o.str(), "cudal1_scan"};
}

/// The constant kSplits of scan_row_block.cuh and scan_column.cuh.
void splits_constant(std::ostream& o, int splits) {
  o << "namespace scan {\n";
  constant(o, "int", "kSplits", splits);
  o << "}  // namespace scan\n";
}

/// Blocks of a warp per row.
int64_t warp_rows_grid(const ScanShape& s, int block) { return ceil_div(s.outer, block / 32); }

/// Blocks of a thread per `vec` lines.
int64_t lines_grid(const ScanShape& s, int vec, int block) { return ceil_div(ceil_div(s.outer * s.inner, vec), block); }

}  // namespace

std::string combine_source(const ScanShape& s, bool native) {
  std::ostringstream c;
  c << dtype_prelude(s.dtype);
  constant(c, "bool", "kProd", s.prod);
  c << device_sources::kScanCombine;
  if (!native) {
    c << device_sources::kScanLaneValues;
    return c.str();
  }
  constant(c, "bool", "kBf16", s.dtype == c10::ScalarType::BFloat16);
  c << device_sources::kScanLaneValuesNative;
  return c.str();
}

ScanGrid RowWarp::grid(const ScanShape& s) const { return ScanGrid{warp_rows_grid(s, block)}; }
void RowWarp::source(std::ostream& o, const ScanShape&) const {
  o << device_sources::kScanRowHelpers << device_sources::kScanRowWarp;
}

ScanGrid RowBlock::grid(const ScanShape& s) const { return ScanGrid{s.outer}; }
void RowBlock::source(std::ostream& o, const ScanShape&) const {
  splits_constant(o, 1);
  o << device_sources::kScanRowHelpers << device_sources::kScanRowBlock;
}

ScanGrid RowSplit::grid(const ScanShape& s) const {
  ScanGrid g{s.outer * splits};
  g.workspace = s.outer * splits;
  g.two_phase = true;
  return g;
}
void RowSplit::source(std::ostream& o, const ScanShape&) const {
  splits_constant(o, splits);
  o << device_sources::kScanRowHelpers << device_sources::kScanRowBlock;
}

ScanGrid RowExact::grid(const ScanShape& s) const { return ScanGrid{warp_rows_grid(s, block)}; }
void RowExact::source(std::ostream& o, const ScanShape&) const { o << device_sources::kScanRowExact; }

ScanGrid Column::grid(const ScanShape& s) const { return ScanGrid{lines_grid(s, vec, block)}; }
void Column::source(std::ostream& o, const ScanShape&) const {
  splits_constant(o, 1);
  o << device_sources::kScanColumn;
}

ScanGrid ColumnSplit::grid(const ScanShape& s) const {
  ScanGrid g{lines_grid(s, vec, block), splits};
  g.workspace = s.outer * s.inner * splits;
  g.two_phase = true;
  return g;
}
void ColumnSplit::source(std::ostream& o, const ScanShape&) const {
  splits_constant(o, splits);
  o << device_sources::kScanColumn;
}

ScanGrid RowLanes::grid(const ScanShape& s) const { return ScanGrid{ceil_div(s.outer, block / lanes)}; }
void RowLanes::source(std::ostream& o, const ScanShape& s) const {
  o << "namespace scan {\n";
  constant(o, "int", "kLanes", lanes);
  constant(o, "bool", "kStaged", vec == 1 && s.sd == 1);
  constant(o, "int", "kAhead", ahead);
  constant(o, "bool", "kStagedStores", staged_stores && vec > 1);
  o << "}  // namespace scan\n" << device_sources::kScanRowLanes;
}

int64_t ColumnLookback::groups(const ScanShape& s) const { return ceil_div(s.outer * s.inner, 32 * int64_t{vec}); }
int64_t ColumnLookback::chunks(const ScanShape& s) const { return ceil_div(s.n, chunk()); }
ScanGrid ColumnLookback::grid(const ScanShape& s) const {
  ScanGrid g{groups(s) * chunks(s)};
  g.workspace = 2 * s.outer * s.inner * chunks(s);  // a 64-bit status word per line and chunk
  g.zero_workspace = true;
  return g;
}
void ColumnLookback::source(std::ostream& o, const ScanShape& s) const {
  o << "namespace scan {\n";
  constant(o, "int", "kRows", rows);
  constant(o, "index_t", "kChunk", chunk());
  constant(o, "index_t", "kGroups", groups(s));
  constant(o, "index_t", "kChunks", chunks(s));
  o << "}  // namespace scan\n" << device_sources::kScanColumnLookback;
}

KernelSource generate_scan(const ScanShape& s, const ScanTechnique& t) {
  return std::visit([&](const auto& k) { return generate(s, k); }, t);
}

}  // namespace cudal1::optimizer::scan
