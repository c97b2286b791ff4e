/// @brief Source generation for the reduction family (Note [Reductions]): a head of typed constants and the offset
/// maps kept_off/red_off generated from the signature's sizes and strides, then the device code of
/// reduce_common.cuh, the op's accumulator (fp32 sum, NaN-propagating max/min, (value, index) under ATen's
/// GreaterOrNan/LessOrNan order, Welford), reduce_combine.cuh and the technique's .cuh (embedded at build time);
/// and the row and column-thread techniques' sizing, launches and source. Only thread 0 of an output's group
/// writes it.
#include <ostream>
#include <sstream>
#include <type_traits>

#include "codegen_common.h"
#include "reduce_cuda.h"
#include "reduce_family.h"

namespace cudal1::optimizer::reduce {
namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

/// `name(i)`: the offset of row-major index i over dims (sizes, strides), outermost first; constants inlined.
void offset_map(std::ostream& o, const char* name, const std::vector<int64_t>& sizes,
                const std::vector<int64_t>& strides) {
  o << "__device__ __forceinline__ index_t " << name << "(index_t i) {\n  index_t off = 0;\n";
  for (size_t d = sizes.size(); d-- > 1;)
    o << "  off += (i % " << sizes[d] << ") * " << strides[d] << "; i /= " << sizes[d] << ";\n";
  if (!sizes.empty()) o << "  off += i * " << strides[0] << ";\n";
  o << "  return off;\n}\n";
}

/// The accumulator (kKind of reduce_common.cuh): 0 sums, 1 NaN-propagating extremes, 2 (value, index), 3 Welford.
int kind_of(const ReduceShape& s) {
  switch (s.op) {
    case Reduction::kSum: case Reduction::kMean: return 0;
    case Reduction::kAmax: case Reduction::kAmin: return 1;
    case Reduction::kVar: case Reduction::kStd: return 3;
    case Reduction::kNorm: return s.ord == NormOrd::kInf || s.ord == NormOrd::kNegInf ? 1 : 0;
    default: return 2;
  }
}

/// The accumulator's device code: its file, after codegen_common's Welford merge for var/std.
void accumulator(std::ostream& o, const ReduceShape& s) {
  switch (kind_of(s)) {
    case 2: o << device_sources::kReduceArgAcc; break;
    case 3: o << welford_source() << device_sources::kReduceWelfordAcc; break;
    default: o << device_sources::kReduceFloatAcc;
  }
}

/// The source of `k` on `s`: the head reduce_common.cuh describes, then the device code.
template <class Technique>
KernelSource generate(const ReduceShape& s, const Technique& k) {
  const Reduction op = s.op;
  const bool greater = op == Reduction::kAmax || op == Reduction::kMaxDim || op == Reduction::kArgmax ||
                       (op == Reduction::kNorm && s.ord == NormOrd::kInf);
  const Variant v = variant_of(k);
  int min_blocks = 0;  // ClusterTile: 64 registers a thread (Note [Column tiles in clusters]); else the bare bound
  if constexpr (std::is_same_v<Technique, ClusterTile>) min_blocks = kClusterTileThreadsPerSm / k.block;
  std::ostringstream o;
  o << "// cudal1 reduce: op=" << static_cast<int>(op) << " " << c10::toString(s.dtype) << " O=" << s.outputs
    << " K=" << s.length << " " << Technique::kName << " " << v.id() << "\n";
  o << "typedef int index_t;  // extent < 2^31 (planned)\n" << dtype_prelude(s.dtype)
    << (s.out_dtype == s.dtype ? "typedef storage_t out_t;\n" : "typedef float out_t;\n") << "namespace reduce {\n";
  constant(o, "int", "kKind", kind_of(s));
  constant(o, "bool", "kGreater", greater);
  constant(o, "bool", "kMean", op == Reduction::kMean);
  constant(o, "bool", "kTakeSqrt", op == Reduction::kStd);
  constant(o, "bool", "kHasValues", s.has_values());
  constant(o, "bool", "kNorm", op == Reduction::kNorm);
  constant(o, "int", "kOrd", static_cast<int>(s.ord));
  constant(o, "bool", "kFloatOut", s.out_dtype != s.dtype);
  constant(o, "unsigned", "kMeanFactorBits", float_bits_hex(s.mean_factor));
  constant(o, "unsigned", "kCorrectionBits", float_bits_hex(s.correction));
  // ATen: pow(|x|, acc_t(p)) and pow(s, acc_t(1.0) / acc_t(p)), the division in fp32.
  constant(o, "unsigned", "kNormPBits", float_bits_hex(s.norm_p));
  constant(o, "unsigned", "kNormInvPBits", float_bits_hex(1.f / s.norm_p));
  constant(o, "int", "kVec", k.vec);
  constant(o, "int", "kBlock", k.block);
  constant(o, "int", "kMinBlocks", min_blocks);
  constant(o, "index_t", "kSplits", v.get("splits"));
  constant(o, "index_t", "kOutputs", s.outputs);
  constant(o, "index_t", "kLength", s.length);
  offset_map(o, "kept_off", s.kept_sizes, s.kept_strides);
  offset_map(o, "red_off", s.red_sizes, s.red_strides);
  o << "}  // namespace reduce\n" << device_sources::kReduceCommon;
  accumulator(o, s);
  o << device_sources::kReduceCombine;
  k.source(o, s);
  return KernelSource{o.str(), "cudal1_reduce"};
}

/// The row techniques' constants (kVectors, and SplitRow's kChunk where `chunk` > 0) and their file.
void row_source(std::ostream& o, const ReduceShape& s, int vec, int64_t chunk, std::string_view file) {
  o << "namespace reduce {\n";
  constant(o, "index_t", "kVectors", s.length / vec);
  if (chunk > 0) constant(o, "index_t", "kChunk", chunk);
  o << "}  // namespace reduce\n" << file;
}

}  // namespace

int64_t RowPerWarp::chain(const ReduceShape& s) const { return ceil_div(s.length, 32); }

ReduceGrid RowPerWarp::grid(const ReduceShape& s) const {
  ReduceGrid g;
  g.x = ceil_div(s.outputs, block / 32);
  return g;
}

void RowPerWarp::source(std::ostream& o, const ReduceShape& s) const {
  row_source(o, s, vec, 0, device_sources::kReduceRowPerWarp);
}

int64_t RowPerBlock::chain(const ReduceShape& s) const { return ceil_div(s.length, block); }

ReduceGrid RowPerBlock::grid(const ReduceShape& s) const {
  ReduceGrid g;
  g.x = s.outputs;
  return g;
}

void RowPerBlock::source(std::ostream& o, const ReduceShape& s) const {
  row_source(o, s, vec, 0, device_sources::kReduceRowPerBlock);
}

int64_t SplitRow::chunk_vectors(const ReduceShape& s) const { return ceil_div(s.length / vec, splits); }

int64_t SplitRow::chain(const ReduceShape& s) const { return ceil_div(chunk_vectors(s) * vec, block); }

ReduceGrid SplitRow::grid(const ReduceShape& s) const {
  ReduceGrid g;
  g.x = s.outputs * splits;
  g.second_x = s.outputs;
  g.workspace = s.outputs * splits * kAccBytes;
  return g;
}

void SplitRow::source(std::ostream& o, const ReduceShape& s) const {
  row_source(o, s, vec, chunk_vectors(s), device_sources::kReduceSplitRow);
}

int64_t ColumnThreads::chunk_rows(const ReduceShape& s) const { return ceil_div(s.length, splits); }

int64_t ColumnThreads::chain(const ReduceShape& s) const { return ceil_div(chunk_rows(s), threads); }

ReduceGrid ColumnThreads::grid(const ReduceShape& s) const {
  ReduceGrid g;
  g.x = ceil_div(s.outputs / vec, block / threads);
  g.y = splits;
  if (splits > 1) {
    g.second_x = ceil_div(s.outputs, block);
    g.workspace = s.outputs * splits * kAccBytes;
  }
  return g;
}

void ColumnThreads::source(std::ostream& o, const ReduceShape& s) const {
  o << "namespace reduce {\n";
  constant(o, "int", "kThreadsPerColumn", threads);
  constant(o, "int", "kColumnsPerBlock", block / threads);
  constant(o, "index_t", "kChunk", chunk_rows(s));
  o << "}  // namespace reduce\n" << device_sources::kReduceColumnThreads;
}

KernelSource generate_reduce(const ReduceShape& s, const ReduceTechnique& t) {
  return std::visit([&](const auto& k) { return generate(s, k); }, t);
}

}  // namespace cudal1::optimizer::reduce
