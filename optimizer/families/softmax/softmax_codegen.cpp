/// @brief Source generation for the softmax family's row techniques (RowPerWarp, RowPerBlock, ClusterRows): a head
/// of typed constants, then the device code of softmax_common.cuh and of the technique's .cuh (embedded at build
/// time). The arithmetic follows ATen's CUDA kernels exactly where it
/// matters for results: the row maximum first (fmaxf, so NaN is skipped there and surfaces through the sum, as in
/// ATen), then the sum of exp(x - max) in fp32, then softmax = exp(x - max) / sum and
/// log_softmax = x - (max + log(sum)). That gives ATen's NaN/Inf behaviour row for row. With `head`, each row is
/// read as a scalar head up to its first VEC-aligned element, whole vectors, and a scalar tail (Note [Softmax
/// row heads]). Also the head every softmax source starts with (device_head) and the enumerators bound to a head's
/// module variables, which the column techniques' generators share.
///
/// Note [Softmax epilogue]
/// Short rows (a 2 KB f16 row of attention scores) are limited by instruction issue, not HBM (Nsight Compute: SM 80%,
/// DRAM 33% on f16 [16384,1024] with expf twice per element, the sum and then the epilogue, and an IEEE division,
/// div.rn: a reciprocal, Newton steps and a slow-path test). So softmax (not log) (1) keeps exp(x - max) from the sum
/// in fp32 registers when the row is cached, so the epilogue reuses the same bits instead of recomputing them, and (2)
/// divides by the row sum as q = a * r, e = fma(-q, s, a), q + e * r with r = 1 / s rounded once per row (div_rn,
/// codegen_common's exact_divide_source; the epilogue of every softmax kernel uses it: rows, columns, column tiles,
/// cluster rows): Markstein's correction, which returns the correctly rounded a / s whenever the quotient is a normal
/// number (s >= 1 here: the max element contributes exp(0) = 1; NaN and Inf propagate as in a / s). Where a / s is
/// subnormal (a < 2^-126 s) it may differ from div.rn by one subnormal ulp (< 1.5e-45, far inside every tolerance;
/// fp16/bf16 round it to 0 anyway). Log-softmax keeps x - logsum. ~20 instructions an element instead of ~35 on
/// the f16 attention rows, which then run at ~1.03x the device copy of the same bytes (warp per row, vec 4, cached).
#include <ostream>
#include <sstream>
#include <type_traits>

#include "codegen_common.h"
#include "softmax_codegen.h"
#include "softmax_cuda.h"

namespace cudal1::optimizer::softmax {

// Note [Softmax row constants]
// A row technique's head declares the row's sizes as the constexpr variables the family's row cubins have always
// held: NVRTC emits every namespace-scope variable as a global of the module (.nv.global.init data; ROWS is also a
// symbol), so ROWS, RS and D, NV where a technique declared it and PER (plain rows) or P (cluster rows) keep
// their names, types, values and order, and nothing is added beside them: a variable more or less changes the
// cubin. The device code reads them through enumerators bound to them (kRows = ROWS, ...; Note [Device
// constants] in codegen_common.h), which add nothing to the module.

namespace {

/// The head every row technique starts with, up to its row variables: its first line and device_head.
void head(std::ostream& o, const SoftmaxShape& s, const char* name, const Variant& v, int vec, int block,
          bool fast_exp, bool primitives) {
  o << "// cudal1 softmax rows: " << name << " " << v.id() << " log=" << s.log << " " << c10::toString(s.dtype)
    << " rows=" << s.rows << " cols=" << s.cols << "\n";
  device_head(o, s.dtype, s.log, vec, block, fast_exp, primitives);
}

/// The rest of the head: codegen_common's row reductions over `tpr` threads of a row in a `block`-thread block,
/// and softmax_common.cuh.
void reduction(std::ostream& o, int tpr, int block) {
  row_reduce_source(o, tpr, block);
  o << device_sources::kSoftmaxCommon;
}

template <class Technique>
KernelSource plain_rows(const SoftmaxShape& s, const Technique& t) {
  const int tpr = t.threads_per_row();
  std::ostringstream o;
  head(o, s, Technique::kName, variant_of(t), t.vec, t.block, false, false);
  constant(o, "int", "kThreadsPerRow", tpr);
  constant(o, "bool", "kCache", t.cache);
  constant(o, "bool", "kHead", t.head);
  constant(o, "bool", "kKeepExp", t.cache && !s.log);  // Note [Softmax epilogue]
  o << "}  // namespace softmax\n";
  const int64_t nv = s.cols / t.vec;
  o << "static constexpr index_t ROWS = " << s.rows << ";\nstatic constexpr index_t RS = " << s.row_stride
    << ";\nstatic constexpr int D = " << s.cols << ";\n";
  const bool has_nv = !t.head || t.cache, has_per = t.cache;
  if (has_nv) o << "static constexpr int NV = " << nv << ";\n";
  if (has_per) o << "static constexpr int PER = " << (nv + tpr - 1) / tpr << ";\n";
  o << "namespace softmax {\n";
  bound_constant(o, "index_t", "kRows", "ROWS");
  bound_constant(o, "index_t", "kRowStride", "RS");
  bound_constant(o, "int", "kCols", "D");
  bound_or_constant(o, "int", "kVectors", "NV", has_nv, nv);
  bound_or_constant(o, "int", "kPer", "PER", has_per, 1);
  o << "}  // namespace softmax\n";
  reduction(o, tpr, t.block);
  o << device_sources::kSoftmaxPlainRows;
  return KernelSource{o.str(), "cudal1_softmax"};
}

KernelSource cluster_rows(const SoftmaxShape& s, const ClusterRows& t) {
  const int64_t nv = s.cols / t.vec, part = (nv + t.cluster - 1) / t.cluster;
  const int resident = resident_blocks(cluster_row_bytes(s, t.vec, t.cluster), t.block);
  std::ostringstream o;
  head(o, s, ClusterRows::kName, variant_of(t), t.vec, t.block, true, true);
  constant(o, "int", "kCluster", t.cluster);
  constant(o, "int", "kResident", resident);
  constant(o, "int", "kUnroll", copy_unroll(s.dtype, t.vec, t.block, resident, 0));
  constant(o, "bool", "kAsync", t.async);
  o << "}  // namespace softmax\n";
  o << "static constexpr index_t RS = " << s.row_stride << ";\nstatic constexpr int D = " << s.cols
    << ", NV = " << nv << ", P = " << part << ";\n";
  o << "namespace softmax {\n";
  bound_constant(o, "index_t", "kRowStride", "RS");
  bound_constant(o, "int", "kCols", "D");
  bound_constant(o, "int", "kVectors", "NV");
  bound_constant(o, "int", "kPart", "P");
  o << "}  // namespace softmax\n";
  reduction(o, t.block, t.block);
  o << device_sources::kSoftmaxClusterRows;
  return KernelSource{o.str(), "cudal1_softmax"};
}

}  // namespace

void bound_constant(std::ostream& o, const char* type, const char* name, const char* variable) {
  o << "enum : " << type << " { " << name << " = ::" << variable << " };\n";
}

void bound_or_constant(std::ostream& o, const char* type, const char* name, const char* variable, bool declared,
                       int64_t value) {
  if (declared)
    bound_constant(o, type, name, variable);
  else
    constant(o, type, name, value);
}

void device_head(std::ostream& o, c10::ScalarType dtype, bool log, int vec, int block, bool fast_exp, bool primitives) {
  o << "typedef long long index_t;\n" << dtype_prelude(dtype) << exact_divide_source();
  if (primitives) o << cluster_primitives_source() << async_copy_source();
  const bool fast = fast_exp && elem_size(dtype) == 2;
  o << "namespace softmax {\n";
  constant(o, "int", "kVec", vec);
  constant(o, "int", "kBlock", block);
  constant(o, "bool", "kLog", log);
  constant(o, "bool", "kFastExp", fast);
  constant(o, "bool", "kFlushSubnormals", fast && dtype == c10::ScalarType::Half);  // fp16 cannot hold them
}

Variant variant_of(const RowTechnique& t) {
  return std::visit(
      [](const auto& k) {
        if constexpr (std::is_same_v<std::decay_t<decltype(k)>, ClusterRows>) {
          Variant v{{{"vec", k.vec}, {"block", k.block}, {"cluster", k.cluster}}};
          if (k.async) v.knobs.emplace_back("async", 1);
          return v;
        } else {
          Variant v{{{"vec", k.vec}, {"block", k.block}, {"warp", k.kWarp}, {"cache", k.cache ? 1 : 0}}};
          if (k.head) v.knobs.emplace_back("head", 1);
          return v;
        }
      },
      t);
}

KernelSource generate_softmax_rows(const SoftmaxShape& s, const RowTechnique& t) {
  return std::visit(
      [&](const auto& k) {
        if constexpr (std::is_same_v<std::decay_t<decltype(k)>, ClusterRows>)
          return cluster_rows(s, k);
        else
          return plain_rows(s, k);
      },
      t);
}

}  // namespace cudal1::optimizer::softmax
