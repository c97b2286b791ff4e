// @brief The residue technique's remainder kernel (Note [Residue rows] in gemm_family.h): the columns of each
// result row left of its residue's aligned GEMM, or right of it, a warp per element.
//
// Compiled by NVRTC after a generated head (gemm_codegen.cpp) that defines, with no CUDA headers:
//   storage_t, to_float(storage_t), to_storage(float)   the operands' dtype (dtype_prelude)
//   and the constexpr variables (Note [Gemm constants] in gemm_codegen.cpp)
//   long long kM, kN, kK     result rows, result columns, the reduced extent
//   long long kLda, kLdw     a's row stride; the weight's stride between columns of the result (w[k, c] at
//                            c * kLdw + k)
//   int kRows, kSlots        residues of the row index; remainder slots a row (the most over the residues)
//   int kWarps               warps per block
struct __align__(16) pack_t { storage_t e[8]; };
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
