typedef unsigned short storage_t;
__device__ __forceinline__ float to_float(storage_t h) {
  float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h)); return f; }
__device__ __forceinline__ storage_t to_storage(float f) {
  storage_t h; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h; }
