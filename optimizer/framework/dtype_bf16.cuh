typedef unsigned short storage_t;
__device__ __forceinline__ float to_float(storage_t h) {
  return __uint_as_float(static_cast<unsigned int>(h) << 16); }
__device__ __forceinline__ storage_t to_storage(float f) {
  storage_t h; asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h; }
