// @brief The combine of a scan (Note [Scans] in scan_family.h) in fp32, at global scope: the part of a scan's
// source that combine_source() writes, which the GPU test ScanNative also compiles alone with a probe of its own
// (the probe calls OP, lv_op, to_float and to_storage).
//
// Follows the dtype prelude (storage_t, to_float, to_storage) and a constant (Note [Device constants] in
// codegen_common.h):
//   bool kProd   cumprod, else cumsum
// and is followed by the lane values (scan_lane_values.cuh or scan_lane_values_native.cuh).

enum : unsigned { kFull = 0xffffffffu };  ///< every lane of a warp, for __shfl_*_sync

/// The fp32 combine: a * b for cumprod, a + b for cumsum.
__device__ __forceinline__ float OP(float a, float b) {
  if constexpr (kProd)
    return a * b;
  else
    return a + b;
}

/// OP's identity.
__device__ __forceinline__ float ident() { return kProd ? 1.f : 0.f; }

/// `v` rounded to the dtype and back, as each combine of ATen's at::Half / at::BFloat16 arithmetic rounds.
__device__ __forceinline__ float rnd(float v) { return to_float(to_storage(v)); }
