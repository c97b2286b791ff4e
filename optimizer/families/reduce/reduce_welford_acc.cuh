// @brief The Welford accumulator (kKind kWelfordKind: var, std) as ATen's WelfordOps: reduce per element, Chan's
// combine (codegen_common's wf_combine), project with divisor max(0, n - correction); and the column tiles'
// running state, which is the accumulator itself. Follows reduce_common.cuh and welford_source.

namespace reduce {

typedef Welford acc_t;
__device__ __forceinline__ acc_t acc_init() { return acc_t{0.f, 0.f, 0.f}; }
__device__ __forceinline__ acc_t acc_combine(acc_t a, acc_t b) { return wf_combine(a, b); }
__device__ __forceinline__ void acc_push(acc_t& a, float x, long long) {
  const float n = a.n + 1.f, d = x - a.mean, m = a.mean + d / n;
  a = acc_t{n, m, a.m2 + d * (x - m)};
}
__device__ __forceinline__ acc_t acc_shfl(acc_t a, int o) {
  return acc_t{__shfl_xor_sync(0xffffffffu, a.n, o), __shfl_xor_sync(0xffffffffu, a.mean, o),
               __shfl_xor_sync(0xffffffffu, a.m2, o)};
}
__device__ __forceinline__ acc_t acc_ldcg(const acc_t* p) {
  return acc_t{__ldcg(&p->n), __ldcg(&p->mean), __ldcg(&p->m2)};
}
__device__ __forceinline__ void acc_store(acc_t a, out_t* y, long long*, index_t o) {
  const float divisor = a.n > correction() ? a.n - correction() : 0.f;
  const float var = a.m2 / divisor;
  if constexpr (kTakeSqrt)
    y[o] = to_out(sqrtf(var));
  else
    y[o] = to_out(var);
}

typedef acc_t run_t;
__device__ __forceinline__ run_t run_init(index_t) { return acc_init(); }
__device__ __forceinline__ void run_push(run_t& a, float x, index_t r) { acc_push(a, x, r); }
__device__ __forceinline__ acc_t run_acc(run_t a, bool) { return a; }

}  // namespace reduce
