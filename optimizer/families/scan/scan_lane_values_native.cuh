// @brief RowLanes' lane values of an fp16 / bf16 cumsum kept in the dtype's bits (knob nat; Note [Scans], native
// combines): RN(a + b) in the dtype is fma(a, 1, b), one rounding, bit for bit the fp32 sum rounded to the dtype.
// Follows scan_combine.cuh and a constant (Note [Device constants] in codegen_common.h):
//   bool kBf16   the dtype is bf16, else fp16
// The interface of scan_lane_values.cuh.

typedef unsigned short lv_t;
__device__ __forceinline__ lv_t lv_ident() { return (lv_t)0; }
__device__ __forceinline__ lv_t lv_from(storage_t v) { return v; }
__device__ __forceinline__ storage_t lv_to(lv_t v) { return v; }
/// RN(a + b) in the dtype: one fma.rn of a x 1 + b.
__device__ __forceinline__ lv_t lv_op(lv_t a, lv_t b) {
  lv_t d;
  if constexpr (kBf16)
    asm("fma.rn.bf16 %0, %1, %2, %3;" : "=h"(d) : "h"(a), "h"((lv_t)0x3F80), "h"(b));
  else
    asm("fma.rn.f16 %0, %1, %2, %3;" : "=h"(d) : "h"(a), "h"((lv_t)0x3C00), "h"(b));
  return d;
}
__device__ __forceinline__ lv_t lv_shfl(lv_t v, int src) { return (lv_t)__shfl_sync(kFull, (unsigned)v, src); }
