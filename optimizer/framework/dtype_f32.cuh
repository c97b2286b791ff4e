typedef float storage_t;
__device__ __forceinline__ float to_float(storage_t v) { return v; }
__device__ __forceinline__ storage_t to_storage(float f) { return f; }
