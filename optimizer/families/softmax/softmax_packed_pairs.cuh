// @brief Packed 16-bit pairs (Notes [Softmax pair tiles], [Softmax held slabs]): two adjacent fp16 or bf16 elements
// of a 32-bit word (low half first) as floats, their packed maximum and the rounding of two floats into a word.
// Follows softmax_common.cuh and the constant (namespace softmax, Note [Device constants])
//   bool kBfloat16                       the words hold bf16 (else fp16)

namespace softmax {

/// -Inf in both halves.
enum : unsigned { kPackedNegInf = kBfloat16 ? 0xff80ff80u : 0xfc00fc00u };

__device__ __forceinline__ float lo_f(unsigned u) {
  if constexpr (kBfloat16) {
    return __uint_as_float(u << 16);
  } else {
    float f;
    asm("{ .reg .b16 l, h; mov.b32 {l, h}, %1; cvt.f32.f16 %0, l; }" : "=f"(f) : "r"(u));
    return f;
  }
}

__device__ __forceinline__ float hi_f(unsigned u) {
  if constexpr (kBfloat16) {
    return __uint_as_float(u & 0xffff0000u);
  } else {
    float f;
    asm("{ .reg .b16 l, h; mov.b32 {l, h}, %1; cvt.f32.f16 %0, h; }" : "=f"(f) : "r"(u));
    return f;
  }
}

/// The packed maximum of each half (NaN skipped, as fmaxf).
__device__ __forceinline__ unsigned max2(unsigned a, unsigned b) {
  unsigned d;
  if constexpr (kBfloat16)
    asm("max.bf16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
  else
    asm("max.f16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
  return d;
}

/// lo and hi rounded to nearest even into the low and high halves of a word.
__device__ __forceinline__ unsigned pack2(float lo, float hi) {
  unsigned d;
  if constexpr (kBfloat16)
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(d) : "f"(hi), "f"(lo));
  else
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(d) : "f"(hi), "f"(lo));
  return d;
}

}  // namespace softmax
