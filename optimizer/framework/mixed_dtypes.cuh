__device__ __forceinline__ float cvt_f32(float v) { return v; }
__device__ __forceinline__ float cvt_f16(unsigned short h) {
  float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h)); return f; }
__device__ __forceinline__ float cvt_bf16(unsigned short h) { return __uint_as_float(((unsigned int)h) << 16); }
__device__ __forceinline__ float cvt_f64(double v) { return (float)v; }
__device__ __forceinline__ float cvt_i64(long long v) { return (float)v; }
__device__ __forceinline__ float cvt_i32(int v) { return (float)v; }
__device__ __forceinline__ float cvt_b8(unsigned char v) { return v != 0 ? 1.f : 0.f; }
__device__ __forceinline__ float st_f32(float f) { return f; }
__device__ __forceinline__ unsigned short st_f16(float f) {
  unsigned short h; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h; }
__device__ __forceinline__ unsigned short st_bf16(float f) {
  unsigned short h; asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h; }
