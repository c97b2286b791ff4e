// @brief The fp32 accumulator of sums (kKind kSumKind: sum, mean, norms of ord 0, 1, 2, p) and of NaN-propagating
// extremes (kExtremeKind: amax, amin, norms of ord inf, -inf; ATen's MaxNanFunctor / MinNanFunctor), and the column
// tiles' running state, which is the accumulator itself. Follows reduce_common.cuh.

namespace reduce {

struct acc_t { float v; };
__device__ __forceinline__ acc_t acc_init() {
  if constexpr (kKind == kSumKind)
    return acc_t{0.f};
  else
    return acc_t{kGreater ? neg_inf() : pos_inf()};
}
__device__ __forceinline__ acc_t acc_combine(acc_t a, acc_t b) {
  if constexpr (kKind == kSumKind)
    return acc_t{a.v + b.v};
  else
    return (a.v != a.v || (kGreater ? a.v > b.v : a.v < b.v)) ? a : b;
}
__device__ __forceinline__ void acc_push(acc_t& a, float x, long long) {
  if constexpr (kKind == kSumKind)
    a.v += elem(x);
  else
    a = acc_combine(acc_t{elem(x)}, a);
}
__device__ __forceinline__ acc_t acc_shfl(acc_t a, int o) { return acc_t{__shfl_xor_sync(0xffffffffu, a.v, o)}; }
__device__ __forceinline__ acc_t acc_ldcg(const acc_t* p) { return acc_t{__ldcg(&p->v)}; }
__device__ __forceinline__ void acc_store(acc_t a, out_t* y, long long*, index_t o) {
  if constexpr (kKind == kSumKind && kMean)
    y[o] = to_out(a.v * mean_factor());  // ATen's MeanOps::project
  else if constexpr (kKind == kSumKind)
    y[o] = to_out(project(a.v));
  else
    y[o] = to_out(a.v);
}

typedef acc_t run_t;
__device__ __forceinline__ run_t run_init(index_t) { return acc_init(); }
__device__ __forceinline__ void run_push(run_t& a, float x, index_t r) { acc_push(a, x, r); }
__device__ __forceinline__ acc_t run_acc(run_t a, bool) { return a; }

}  // namespace reduce
