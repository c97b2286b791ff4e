/// @brief Source generation for the normalisation family: a head of typed constants, then the device code of
/// norm_common.cuh and of the technique's .cuh files (embedded at build time), then norm_entry.cuh; and the row
/// and split techniques' sizing and source. Statistics are fp32: a row kept in registers gets the exact two-pass
/// mean and variance (sum, then sum of squared deviations); a row streamed through gets per-thread Welford over
/// vectors, merged with Chan's formula, so it is read once for its statistics. The output is
/// (x - mean) * rstd * weight + bias with rstd = rsqrtf(var + eps), var biased, as ATen. Reductions end in lane 0
/// and are broadcast, so every thread of a row normalises with the same mean and rstd.
#include <ostream>
#include <sstream>

#include "codegen_common.h"
#include "norm_cuda.h"
#include "norm_family.h"

namespace cudal1::optimizer::norm {
namespace {

/// The source of `k` on `s`: the head norm_common.cuh describes, then the device code.
template <class Technique>
KernelSource generate(const NormShape& s, const Technique& k) {
  std::ostringstream o;
  o << "// cudal1 norm: " << (s.group ? "group" : "layer") << " " << c10::toString(s.dtype) << " rows=" << s.rows
    << " cols=" << s.cols << " " << Technique::kName << " " << variant_of(k).id() << "\n";
  o << "typedef long long index_t;\n" << dtype_prelude(s.dtype);
  if (s.stat_dtype == c10::ScalarType::Float)
    o << "typedef float stat_t;\n__device__ __forceinline__ stat_t to_stat(float f) { return f; }\n";
  else
    o << "typedef storage_t stat_t;\n__device__ __forceinline__ stat_t to_stat(float f) { return to_storage(f); }\n";
  o << "namespace rownorm {\n";
  constant(o, "int", "kVec", k.vec);
  constant(o, "int", "kBlock", k.block);
  constant(o, "int", "kTpr", k.row_threads());
  constant(o, "int", "kThreads", k.threads(s));
  constant(o, "int", "kMinBlocks", k.min_blocks());
  constant(o, "bool", "kHasWeight", s.has_weight);
  constant(o, "bool", "kHasBias", s.has_bias);
  constant(o, "bool", "kGroup", s.group);
  constant(o, "bool", "kFusedAffine", s.group && s.hw > 1);
  constant(o, "bool", "kRoundStats", s.round_stats);
  constant(o, "unsigned", "kEpsBits", float_bits_hex(s.eps));
  constant(o, "index_t", "kRows", s.rows);
  constant(o, "index_t", "kCols", s.cols);
  constant(o, "index_t", "kVectors", s.cols / k.vec);
  constant(o, "index_t", "kGroups", s.groups);
  constant(o, "index_t", "kChannelsPerGroup", s.channels_per_group);
  constant(o, "index_t", "kHw", s.hw);
  o << "}  // namespace rownorm\n";
  // codegen_common's row reductions, over named barrier 1 where the reducing threads are not the whole block: the
  // held rows' consumers reduce without the producer warps.
  row_reduce_source(o, k.row_threads(), k.block, Technique::kMode >= HeldCluster::kMode);
  o << welford_source() << device_sources::kNormCommon;
  k.source(o, s);
  o << device_sources::kNormEntry;
  return KernelSource{o.str(), "cudal1_norm"};
}

/// RowPerWarp and RowPerBlock: their constants and norm_rows.cuh. With `cache`, the vectors a thread keeps are
/// also the namespace-scope variable PER, a global of the module (Note [Device constants]) that the cached
/// kernels' cubins hold: dropping it would change those cubins, not their code. The device code reads the
/// enumerator kCachedVectors.
void row_source(std::ostream& o, const NormShape& s, int vec, int block, int tpr, bool cache) {
  const int64_t nv = s.cols / vec;
  if (cache) o << "static constexpr int PER = " << (nv + tpr - 1) / tpr << ";  // vectors each thread keeps\n";
  o << "namespace rownorm {\n";
  constant(o, "index_t", "kRowsPerBlock", block / tpr);
  constant(o, "bool", "kCache", cache);
  constant(o, "int", "kCachedVectors", cache ? "PER" : "1");
  o << "}  // namespace rownorm\n" << device_sources::kNormRows;
}

}  // namespace

void RowPerWarp::source(std::ostream& o, const NormShape& s) const {
  row_source(o, s, vec, block, row_threads(), cache);
}

void RowPerBlock::source(std::ostream& o, const NormShape& s) const {
  row_source(o, s, vec, block, row_threads(), cache);
}

int64_t SplitRow::chunk_vectors(const NormShape& s) const {
  const int64_t nv = s.cols / vec;
  return (nv + splits - 1) / splits;
}

void SplitRow::source(std::ostream& o, const NormShape& s) const {
  o << "namespace rownorm {\n";
  constant(o, "index_t", "kSplits", splits);
  constant(o, "index_t", "kChunkVectors", chunk_vectors(s));
  constant(o, "bool", "kReverse", reverse);
  o << "}  // namespace rownorm\n" << device_sources::kNormSplitRow;
}

KernelSource generate_norm(const NormShape& s, const NormTechnique& t) {
  return std::visit([&](const auto& k) { return generate(s, k); }, t);
}

}  // namespace cudal1::optimizer::norm
