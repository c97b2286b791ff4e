/// @brief Source generation for the pooling family (Note [Pooling], Note [Pooling techniques]): the head every
/// variant shares (the first line, the dtype prelude, the signature's typed constants and pool_common.cuh), the
/// technique a variant names, and its source and launch size.
#include <sstream>

#include "codegen_common.h"
#include "pool_cuda.h"
#include "pool_family.h"

namespace cudal1::optimizer::pool {
namespace {

/// avg: the divisor when every window of the signature has the same one (Note [Pooling exact division]):
/// divisor_override, or count_include_pad where no window overhangs the padded image (ceil mode can make the
/// last one overhang), else 0.
int64_t const_divisor(const PoolShape& s) {
  if (s.kind != PoolKind::kAvg) return 0;
  if (s.divisor) return s.divisor;
  const bool fits = (s.oh - 1) * s.dh - s.ph + s.kh <= s.h + s.ph && (s.ow - 1) * s.dw - s.pw + s.kw <= s.w + s.pw;
  return s.count_include_pad && fits ? int64_t{s.kh} * s.kw : 0;
}

}  // namespace

void pool_constants(std::ostream& o, const PoolShape& s, int block, int64_t threads) {
  o << "namespace pool {\n";
  constant(o, "bool", "kMaxPool", s.kind == PoolKind::kMax);
  constant(o, "bool", "kAvgPool", s.kind == PoolKind::kAvg);
  constant(o, "bool", "kAdaptivePool", s.kind == PoolKind::kAdaptiveAvg);
  constant(o, "int", "kN", s.n);
  constant(o, "int", "kC", s.c);
  constant(o, "int", "kH", s.h);
  constant(o, "int", "kW", s.w);
  constant(o, "int", "kOh", s.oh);
  constant(o, "int", "kOw", s.ow);
  constant(o, "index_t", "kSn", s.sn);
  constant(o, "index_t", "kSc", s.sc);
  constant(o, "index_t", "kSh", s.sh);
  constant(o, "index_t", "kSw", s.sw);
  constant(o, "int", "kKh", s.kh);
  constant(o, "int", "kKw", s.kw);
  constant(o, "int", "kDh", s.dh);
  constant(o, "int", "kDw", s.dw);
  constant(o, "int", "kPh", s.ph);
  constant(o, "int", "kPw", s.pw);
  constant(o, "int", "kDlh", s.dil_h);
  constant(o, "int", "kDlw", s.dil_w);
  constant(o, "int", "kDivisor", s.divisor);
  constant(o, "bool", "kCountPad", s.count_include_pad);
  constant(o, "int", "kConstDiv", const_divisor(s));
  constant(o, "int", "kInnerDiv", s.divisor ? s.divisor : int64_t{s.kh} * s.kw);
  constant(o, "int", "kStorageBits", 8 * elem_size(s.dtype));
  constant(o, "bool", "kStorageBf16", s.dtype == c10::ScalarType::BFloat16);
  constant(o, "bool", "kIndices", s.indices);
  constant(o, "bool", "kChannelsLast", s.channels_last);
  constant(o, "int", "kBlock", block);
  constant(o, "index_t", "kThreads", threads);
  o << "}  // namespace pool\n";
}

PoolTechnique pool_technique(const PoolShape& s, const PoolKnobs& k) {
  if (k.pair) return PackedPairs{k.block, k.pair};
  if (k.flat) return AdaptiveStaging{k.block, k.flat};
  if (k.walk) return ChannelsLastWalk{k.block, k.opw, k.cpx, k.walk, k.sep != 0};
  if (k.cpx > 1) return ChannelsLastRuns{k.block, k.opw, k.cpx};
  if (k.slide) return SlidingWindows{k.block, k.slide, k.seg};
  if (s.channels_last) {
    if (k.px) return ChannelsLastTiles{k.block, k.opw, k.px};
    return ChannelsLastVectors{k.block, k.opw};
  }
  return RegisterTiles{k.block, k.opw, k.oph};
}

int64_t pool_threads(const PoolShape& s, const PoolKnobs& k) {
  return std::visit([&](const auto& t) { return t.threads(s); }, pool_technique(s, k));
}

KernelSource generate_pool(const PoolShape& s, const PoolKnobs& kn) {
  std::ostringstream k;
  std::visit(
      [&](const auto& t) {
        // The head: the first line (the signature, the knobs and the technique), the dtype prelude, the
        // signature's typed constants and pool_common.cuh; then the technique's constants and device code.
        k << "// cudal1 pool: kind=" << static_cast<int>(s.kind) << " indices=" << s.indices << " "
          << c10::toString(s.dtype) << " in=" << c10::str(c10::IntArrayRef(s.in_sizes))
          << " out=" << c10::str(c10::IntArrayRef(s.out_sizes)) << (s.channels_last ? " channels-last" : " nchw")
          << " opw=" << kn.opw << " oph=" << kn.oph << " block=" << kn.block << " smem=" << kn.smem
          << " px=" << kn.px << " slide=" << kn.slide << " seg=" << kn.seg << " cpx=" << kn.cpx
          << " walk=" << kn.walk << " flat=" << kn.flat << " sep=" << kn.sep << " pair=" << kn.pair << " "
          << t.kName << "\n";
        k << "typedef long long index_t;\n" << dtype_prelude(s.dtype) << exact_divide_source();
        pool_constants(k, s, kn.block, t.threads(s));
        k << device_sources::kPoolCommon;
        t.source(k, s);
      },
      pool_technique(s, kn));
  return KernelSource{k.str(), "cudal1_pool"};
}

}  // namespace cudal1::optimizer::pool
