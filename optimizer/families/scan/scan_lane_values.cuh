// @brief RowLanes' lane values in fp32, rounded to the dtype after every combine (Note [Scans]). Follows
// scan_combine.cuh; scan_lane_values_native.cuh is the same interface in the dtype's own arithmetic.

typedef float lv_t;
__device__ __forceinline__ lv_t lv_ident() { return ident(); }
__device__ __forceinline__ lv_t lv_from(storage_t v) { return to_float(v); }
__device__ __forceinline__ storage_t lv_to(lv_t v) { return to_storage(v); }
/// The rounded combine rnd(OP(a, b)).
__device__ __forceinline__ lv_t lv_op(lv_t a, lv_t b) { return rnd(OP(a, b)); }
__device__ __forceinline__ lv_t lv_shfl(lv_t v, int src) { return __shfl_sync(kFull, v, src); }
