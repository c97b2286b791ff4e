/// @brief Source generation for the gemm family: the padded GEMM's unpadding copy (Note [Padded GEMM]: the first
/// N of every NP elements of the scratch, in order, into the contiguous result; a thread gathers VEC consecutive
/// result elements, which may straddle two scratch rows, and stores them with one aligned VEC-wide store), and the
/// residue technique's remainder kernel (Note [Residue rows]).
#include <algorithm>
#include <sstream>

#include "codegen_common.h"
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

ResidueSplit residue_split(int64_t n_cols, int rows, int j) {
  ResidueSplit r;
  r.shift = std::min<int64_t>(n_cols, (rows - (static_cast<int64_t>(j) * n_cols) % rows) % rows);
  r.width = std::max<int64_t>(0, (n_cols - r.shift) / rows * rows);
  return r;
}

bool residue_layout(const GemmShape& s) {
  constexpr int r = kResidueRows;
  return !s.bias && s.a_strides.size() == 2 && s.b_strides.size() == 2 && s.a_strides[1] == 1 &&
         s.a_strides[0] % r == 0 && s.a_strides[0] >= s.k && s.b_strides[0] == 1 && s.b_strides[1] % r == 0 &&
         s.b_strides[1] >= s.k && s.a_offset % r == 0 && s.b_offset % r == 0;
}

int residue_slots(const GemmShape& s, const GemmKnobs& k) {
  int64_t most = 0;
  for (int j = 0; j < k.rows; ++j) most = std::max(most, s.n - residue_split(s.n, k.rows, j).width);
  return static_cast<int>(most);
}

KernelSource generate_remainder(const GemmShape& s, const GemmKnobs& k) {
  std::ostringstream o;
  o << "// cudal1 gemm family: the remainder columns of the residue-rows GEMM (Note [Residue rows])\n"
    << dtype_prelude(s.dtype)
    << "constexpr long long kM = " << s.m << "LL, kN = " << s.n << "LL, kK = " << s.k << "LL;\n"
    << "constexpr long long kLda = " << s.a_strides[0] << "LL, kLdw = " << s.b_strides[1] << "LL;\n"
    << "constexpr int kRows = " << k.rows << ", kSlots = " << residue_slots(s, k) << ", kWarps = " << k.warps
    << ";\n"
    << R"(struct __align__(16) pack_t { storage_t e[8]; };
// Warp w computes slot (w % kSlots) of row (w / kSlots): a column left of the residue's aligned GEMM, or right of
// it, or none. Its lanes stride over K with 16-byte loads; the sum is rounded to the dtype once.
extern "C" __global__ void __launch_bounds__(kWarps * 32)
cudal1_gemm_remainder(const storage_t* __restrict__ a, const storage_t* __restrict__ w, storage_t* __restrict__ out) {
  const long long task = (long long)blockIdx.x * kWarps + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (task >= kM * kSlots) return;
  const long long r = task / kSlots;
  const long long q = task - r * kSlots;
  const long long j = r % kRows;
  const long long first = (kRows - (j * kN) % kRows) % kRows;  // the residue's first aligned column
  const long long shift = first < kN ? first : kN;
  const long long width = (kN - shift) / kRows * kRows;
  long long c;
  if (q < shift) c = q;
  else if (q < kN - width) c = width + q;
  else return;  // the whole warp: its task is one element
  const storage_t* ar = a + r * kLda;
  const storage_t* wr = w + c * kLdw;
  float acc = 0.f;
  for (long long k = lane * 8; k < kK; k += 256) {
    const pack_t av = *reinterpret_cast<const pack_t*>(ar + k);
    const pack_t wv = *reinterpret_cast<const pack_t*>(wr + k);
#pragma unroll
    for (int e = 0; e < 8; ++e) acc = fmaf(to_float(av.e[e]), to_float(wv.e[e]), acc);
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
  if (lane == 0) out[r * kN + c] = to_storage(acc);
}
)";
  return KernelSource{o.str(), "cudal1_gemm_remainder"};
}

}  // namespace cudal1::optimizer::gemm
