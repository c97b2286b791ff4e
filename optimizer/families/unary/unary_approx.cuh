// @brief PTX's approximate reciprocal and exp2 (~1 ulp of fp32, flushing fp32 subnormals), which the op table's
// short forms for 16-bit outputs call (Note [Unary math for 16-bit outputs] in unary_math.cpp).
__device__ __forceinline__ float rcp_approx(float a) {
  float r; asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(a)); return r;
}
__device__ __forceinline__ float ex2_approx(float a) {
  float r; asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(a)); return r;
}
