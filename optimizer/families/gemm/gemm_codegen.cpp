/// @brief Source generation for the gemm family: a head of typed constants, then the device code of the padded
/// GEMM's unpadding copy (gemm_unpad.cuh, Note [Padded GEMM]) or of the residue technique's remainder kernel
/// (gemm_remainder.cuh, Note [Residue rows]), embedded at build time.
#include <algorithm>
#include <sstream>

#include "codegen_common.h"
#include "gemm_cuda.h"
#include "gemm_family.h"

namespace cudal1::optimizer::gemm {

// Note [Gemm constants]
// The head gives the device code its compile-time values as constexpr variables, `constexpr long long kM = 4096LL,
// ...;`, not as the enumerators of Note [Device constants]: NVRTC emits each of them as a global of the module,
// so the gemm family's cubins hold them (symbols kM, kN, ... and .nv.global.init data), and the enumerator form
// would change every cubin of the family. The two kernels read them as typed constants either way.

int64_t PaddedGemm::grid(const GemmShape& s) const {
  const int64_t vecs = s.m * s.n / vec;
  return std::max<int64_t>(1, std::min<int64_t>((vecs + block - 1) / block, (int64_t{1} << 31) - 1));
}

KernelSource PaddedGemm::source(const GemmShape& s) const {
  std::ostringstream o;
  o << "// cudal1 gemm family: unpadding copy (Note [Padded GEMM])\n"
    << "constexpr long long kM = " << s.m << "LL, kN = " << s.n << "LL, kNP = " << padded_n(s.n) << "LL;\n"
    << "constexpr int kVec = " << vec << ", kBlock = " << block << ";\n"
    << device_sources::kGemmUnpad;
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

int ResidueRows::slots(const GemmShape& s) const {
  int64_t most = 0;
  for (int j = 0; j < kResidueRows; ++j) most = std::max(most, s.n - residue_split(s.n, kResidueRows, j).width);
  return static_cast<int>(most);
}

KernelSource ResidueRows::source(const GemmShape& s) const {
  std::ostringstream o;
  o << "// cudal1 gemm family: the remainder columns of the residue-rows GEMM (Note [Residue rows])\n"
    << dtype_prelude(s.dtype)
    << "constexpr long long kM = " << s.m << "LL, kN = " << s.n << "LL, kK = " << s.k << "LL;\n"
    << "constexpr long long kLda = " << s.a_strides[0] << "LL, kLdw = " << s.b_strides[1] << "LL;\n"
    << "constexpr int kRows = " << kResidueRows << ", kSlots = " << slots(s) << ", kWarps = " << warps
    << ";\n"
    << device_sources::kGemmRemainder;
  return KernelSource{o.str(), "cudal1_gemm_remainder"};
}

}  // namespace cudal1::optimizer::gemm
