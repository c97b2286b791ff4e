// @brief The padded GEMM's unpadding copy (Note [Padded GEMM] in gemm_family.h): the first kN of every kNP
// elements of the [kM, kNP] scratch, in order, into the contiguous [kM, kN] result. A thread gathers kVec
// consecutive result elements, which may straddle two scratch rows, and stores them with one aligned kVec-wide
// store; the last kTotal % kVec elements are copied one at a time.
//
// Compiled by NVRTC after a generated head (gemm_codegen.cpp) that defines, with no CUDA headers, the constexpr
// variables (Note [Gemm constants] in gemm_codegen.cpp)
//   long long kM, kN, kNP   result rows, result columns, scratch row length (kN rounded up to the pad)
//   int kVec, kBlock        elements per thread's aligned store (2-byte elements), threads per block
constexpr long long kTotal = kM * kN, kVecs = kTotal / kVec;
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
