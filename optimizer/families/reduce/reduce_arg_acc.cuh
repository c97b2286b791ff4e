// @brief The (value, index) accumulator (kKind kArgKind: max.dim, min.dim, argmax, argmin) under ATen's
// GreaterOrNan / LessOrNan (SharedReduceOps.h): NaN wins, equal values (and NaNs) go to the lower index. A total
// order on (value, index), so the result does not depend on the combine order. And the column tiles' running state
// in 32 bits. Follows reduce_common.cuh.

namespace reduce {

struct acc_t { float v; long long i; };
__device__ __forceinline__ acc_t acc_init() { return acc_t{kGreater ? neg_inf() : pos_inf(), 0x7fffffffffffffffLL}; }
__device__ __forceinline__ bool acc_before(const acc_t& a, const acc_t& b) {
  if (a.v != a.v) return b.v != b.v ? a.i < b.i : true;
  if (b.v != b.v) return false;
  return a.v == b.v ? a.i < b.i : (kGreater ? a.v > b.v : a.v < b.v);
}
__device__ __forceinline__ acc_t acc_combine(acc_t a, acc_t b) { return acc_before(a, b) ? a : b; }
// Each thread pushes its elements in increasing r, so a new element is "before" the running one only when it is
// strictly greater (smaller), or NaN over a non-NaN, or the running one is still the initial sentinel: the
// same outcome as acc_combine with 32-bit compares on the hot path.
__device__ __forceinline__ void acc_push(acc_t& a, float x, long long r) {
  if (a.v != a.v) return;
  if (x != x || (kGreater ? x > a.v : x < a.v) || (x == a.v && a.i == 0x7fffffffffffffffLL)) a = acc_t{x, r};
}
__device__ __forceinline__ acc_t acc_shfl(acc_t a, int o) {
  return acc_t{__shfl_xor_sync(0xffffffffu, a.v, o), __shfl_xor_sync(0xffffffffu, a.i, o)};
}
__device__ __forceinline__ acc_t acc_ldcg(const acc_t* p) { return acc_t{__ldcg(&p->v), __ldcg(&p->i)}; }
__device__ __forceinline__ void acc_store(acc_t a, out_t* y, long long* yi, index_t o) {
  if constexpr (kHasValues) y[o] = to_out(a.v);
  yi[o] = a.i;
}

// The column tile's running state. (value, index) runs in 32 bits (K < 2^31, planned), started as (+-inf, the
// thread's first r): the first push then leaves exactly that element, so each later push in increasing r replaces
// only a strictly greater (smaller) value or a NaN over a non-NaN (GreaterOrNan / LessOrNan with the lower index
// kept): two compares. A thread without rows contributes acc_init().
struct run_t { float v; int i; };
__device__ __forceinline__ run_t run_init(index_t r) { return run_t{kGreater ? neg_inf() : pos_inf(), r}; }
__device__ __forceinline__ void run_push(run_t& a, float x, index_t r) {
  if (a.v == a.v && !(kGreater ? a.v >= x : a.v <= x)) a = run_t{x, r};
}
__device__ __forceinline__ acc_t run_acc(run_t a, bool any) { return any ? acc_t{a.v, (long long)a.i} : acc_init(); }

}  // namespace reduce
