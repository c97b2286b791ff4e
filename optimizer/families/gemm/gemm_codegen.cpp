/// @brief Source generation for the gemm family's unpadding copy (Note [Padded GEMM]): the first N of every NP
/// elements of the scratch, in order, into the contiguous result; a thread gathers VEC consecutive result
/// elements (they may straddle two scratch rows) and stores them with one aligned VEC-wide store.
#include <algorithm>
#include <sstream>

#include "gemm_family.h"

namespace cudal1::optimizer::gemm {

int64_t unpad_grid(const GemmShape& s, const GemmKnobs& k) {
  const int64_t vecs = s.m * s.n / k.vec;
  return std::max<int64_t>(1, std::min<int64_t>((vecs + k.block - 1) / k.block, (int64_t{1} << 31) - 1));
}

KernelSource generate_unpad(const GemmShape& s, const GemmKnobs& k) {
  std::ostringstream o;
  o << "// cudal1 gemm family: unpadding copy (Note [Padded GEMM])\n"
    << "constexpr long long kM = " << s.m << "LL, kN = " << s.n << "LL, kNP = " << k.padded_n(s.n) << "LL;\n"
    << "constexpr int kVec = " << k.vec << ", kBlock = " << k.block << ";\n"
    << R"(constexpr long long kTotal = kM * kN, kVecs = kTotal / kVec;
struct __align__(2 * kVec) pack_t { unsigned short e[kVec]; };
extern "C" __global__ void __launch_bounds__(kBlock)
cudal1_gemm_unpad(const unsigned short* __restrict__ src, unsigned short* __restrict__ dst) {
  const long long threads = (long long)gridDim.x * kBlock;
  const long long tid = (long long)blockIdx.x * kBlock + threadIdx.x;
  for (long long v = tid; v < kVecs; v += threads) {
    const long long i = v * kVec;
    long long r = i / kN, c = i - r * kN;
    pack_t p;
#pragma unroll
    for (int j = 0; j < kVec; ++j) {
      p.e[j] = src[r * kNP + c];
      if (++c == kN) { c = 0; ++r; }
    }
    *reinterpret_cast<pack_t*>(dst + i) = p;
  }
  for (long long i = kVecs * kVec + tid; i < kTotal; i += threads) {
    const long long r = i / kN;
    dst[i] = src[r * kNP + (i - r * kN)];
  }
}
)";
  return KernelSource{o.str(), "cudal1_gemm_unpad"};
}

}  // namespace cudal1::optimizer::gemm
