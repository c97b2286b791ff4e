// @brief Note [Async copies] (codegen_common.h): copies of whole vectors from global into shared memory, cp.async
// where a vector is 4, 8 or 16 bytes, a plain load and store for 2-byte vectors (codegen_common.h:
// vector_copy_source).
//
// Compiled by NVRTC after async_copy.cuh and the family's vector type at namespace scope (vec_t, 2, 4, 8 or 16
// bytes; its size is what these read).

/// Starts copying *g to *s: cp.async where the vector is 4, 8 or 16 bytes (complete after copy_wait), a plain
/// load and store for 2-byte vectors (copy_commit and copy_wait then do nothing). A template, so that the
/// cp.async branch of a 2-byte vector is discarded, not instantiated.
template <class V>
__device__ __forceinline__ void copy_in(V* s, const V* g) {
  if constexpr (sizeof(V) >= 4) {
    const unsigned sa = (unsigned)__cvta_generic_to_shared(s);
    unsigned long long ga;
    asm("cvta.to.global.u64 %0, %1;" : "=l"(ga) : "l"((unsigned long long)g));
    cp_async<sizeof(V)>(sa, (const void*)ga);
  } else {
    *s = *g;
  }
}
__device__ __forceinline__ void copy_commit() {
  if constexpr (sizeof(vec_t) >= 4) cp_async_commit();
}
/// Waits until at most N of this thread's committed copy groups are pending.
template <int N>
__device__ __forceinline__ void copy_wait() {
  if constexpr (sizeof(vec_t) >= 4) cp_async_wait<N>();
}
