// @brief Welford statistics (fp32) and Chan's merge of two of them, as ATen's WelfordOps::combine (codegen_common.h:
// welford_source). Needs nothing before it.
struct Welford { float n, mean, m2; };
__device__ __forceinline__ Welford wf_combine(Welford a, Welford b) {
  if (b.n == 0.f) return a;
  if (a.n == 0.f) return b;
  const float n = a.n + b.n, f = b.n / n, d = b.mean - a.mean;
  return Welford{n, a.mean + d * f, a.m2 + b.m2 + d * d * a.n * f};
}
