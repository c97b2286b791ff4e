/// @brief Source generation for the batch-norm family (Note [Batch norm inference]): a head of typed constants,
/// then the device code of batchnorm_common.cuh and of the technique's .cuh (embedded at build time); and each
/// technique's grid.
#include <ostream>
#include <sstream>

#include "batchnorm_cuda.h"
#include "batchnorm_family.h"
#include "codegen_common.h"
#include "cudal1/dispatcher/signature_of.h"

namespace cudal1::optimizer::batchnorm {

// The head's values are enumerators written by constant(): Note [Device constants] in codegen_common.h.
namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

/// The source of `k` on `s`: the head batchnorm_common.cuh describes, then the device code.
template <class Technique>
KernelSource generate(const BnShape& s, const Technique& k) {
  std::ostringstream o;
  o << "// cudal1 batchnorm: " << (s.cudnn ? "cudnn" : "native") << " " << c10::toString(s.dtype) << " params "
    << c10::toString(s.param_dtype) << " numel=" << s.numel << " C=" << s.channels << " inner=" << s.inner << " "
    << Technique::kName << " " << variant_of(k).id() << "\n";
  o << "typedef long long index_t;\n" << dtype_prelude(s.dtype) << mixed_dtype_prelude();
  o << "typedef " << mixed_storage_type(s.param_dtype) << " param_t;\n";
  o << "namespace bn {\n__device__ __forceinline__ float param_float(param_t v) { return cvt_"
    << dispatcher::dtype_short_name(s.param_dtype) << "(v); }\n";
  constant(o, "int", "kVec", k.vec);
  constant(o, "int", "kBlock", k.block);
  constant(o, "bool", "kHasWeight", s.has_weight);
  constant(o, "bool", "kHasBias", s.has_bias);
  constant(o, "bool", "kStats", !s.cudnn);
  constant(o, "unsigned", "kEpsBits", float_bits_hex(s.eps));
  constant(o, "index_t", "kNumel", s.numel);
  constant(o, "index_t", "kChannels", s.channels);
  constant(o, "index_t", "kInner", s.inner);
  o << "}  // namespace bn\n" << device_sources::kBatchnormCommon;
  k.source(o, s);
  return KernelSource{o.str(), "cudal1_bn"};
}

}  // namespace

int64_t FlatVectors::grid(const BnShape& s) const { return ceil_div(s.numel / vec, block); }
void FlatVectors::source(std::ostream& o, const BnShape&) const { o << device_sources::kBatchnormFlatVectors; }

int64_t PlanePerBlock::grid(const BnShape& s) const { return s.planes(); }
void PlanePerBlock::source(std::ostream& o, const BnShape&) const { o << device_sources::kBatchnormPlanePerBlock; }

int64_t ChannelColumns::grid(const BnShape& s) const { return ceil_div(slots(s) * (s.channels / vec), block); }
void ChannelColumns::source(std::ostream& o, const BnShape& s) const {
  o << "namespace bn {\n";
  constant(o, "index_t", "kSlots", slots(s));
  o << "}  // namespace bn\n" << device_sources::kBatchnormChannelColumns;
}

KernelSource generate_batchnorm(const BnShape& s, const BnTechnique& t) {
  return std::visit([&](const auto& k) { return generate(s, k); }, t);
}

}  // namespace cudal1::optimizer::batchnorm
