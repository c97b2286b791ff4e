__device__ __forceinline__ float div_rn(float a, float b, float rb) {
  const float q = __fmul_rn(a, rb);  // rounded on its own: never contracted into the correction
  return fmaf(fmaf(-q, b, a), rb, q);
}
