/// @brief Source generation for the softmax family. The arithmetic follows ATen's CUDA kernels exactly where it
/// matters for results: the row maximum first (fmaxf, so NaN is skipped there and surfaces through the sum, as in
/// ATen), then the sum of exp(x - max) in fp32, then softmax = exp(x - max) / sum and
/// log_softmax = x - (max + log(sum)). That gives ATen's NaN/Inf behaviour row for row. With `head`, each row is
/// read as a scalar head up to its first VEC-aligned element, whole vectors, and a scalar tail (Note [Softmax
/// row heads]).
///
/// Note [Softmax epilogue]
/// Short rows (a 2 KB f16 row of attention scores) are limited by instruction issue, not HBM (Nsight Compute: SM 80%,
/// DRAM 33% on f16 [16384,1024] with expf twice per element, the sum and then the epilogue, and an IEEE division,
/// div.rn: a reciprocal, Newton steps and a slow-path test). So softmax (not log) (1) keeps exp(x - max) from the sum
/// in fp32 registers when the row is cached, so the epilogue reuses the same bits instead of recomputing them, and (2)
/// divides by the row sum as q = a * r, e = fma(-q, s, a), q + e * r with r = 1 / s rounded once per row (div_rn,
/// codegen_common's exact_divide_source; the epilogue of every softmax kernel uses it: rows, columns, column tiles,
/// cluster rows): Markstein's correction, which returns the correctly rounded a / s whenever the quotient is a normal
/// number (s >= 1 here: the max element contributes exp(0) = 1; NaN and Inf propagate as in a / s). Where a / s is
/// subnormal (a < 2^-126 s) it may differ from div.rn by one subnormal ulp (< 1.5e-45, far inside every tolerance;
/// fp16/bf16 round it to 0 anyway). Log-softmax keeps x - logsum. ~20 instructions an element instead of ~35 on
/// the f16 attention rows, which then run at ~1.03x the device copy of the same bytes (warp per row, vec 4, cached).
#include <sstream>

#include "codegen_common.h"
#include "softmax_family.h"

namespace cudal1::optimizer::softmax {

KernelSource generate_softmax(const SoftmaxShape& s, int vec, int block, bool warp_per_row, bool cache, bool head) {
  const int tpr = warp_per_row ? 32 : block;  // threads per row
  std::ostringstream k;
  k << "// cudal1 softmax: log=" << s.log << " " << c10::toString(s.dtype) << " rows=" << s.rows
    << " cols=" << s.cols << " vec=" << vec << " block=" << block << " warp_per_row=" << warp_per_row
    << " cache=" << cache << " head=" << head << "\n";
  k << "typedef long long index_t;\n" << dtype_prelude(s.dtype);
  k << "#define VEC " << vec << "\n#define BLOCK " << block << "\n#define TPR " << tpr
    << "\n#define RPB (BLOCK / TPR)\n#define CACHE " << (cache ? 1 : 0) << "\n#define LOG " << (s.log ? 1 : 0)
    << "\n#define HEAD " << (head ? 1 : 0) << "\n";
  k << "static constexpr index_t ROWS = " << s.rows << ";\n"
    << "static constexpr index_t RS = " << s.row_stride << ";\n"
    << "static constexpr int D = " << s.cols << ";\n";
  if (!head || cache) k << "static constexpr int NV = D / VEC;  // vectors of a row (an upper bound with HEAD)\n";
  if (cache) k << "static constexpr int PER = (NV + TPR - 1) / TPR;  // vectors each thread keeps\n";
  k << "#define KEEP_EXP " << (cache && !s.log ? 1 : 0) << "  // Note [Softmax epilogue]\n";
  k << R"(#define NEG_INF __int_as_float(0xff800000u)
struct __align__(VEC * sizeof(storage_t)) vec_t { storage_t v[VEC]; };
)" << exact_divide_source() << row_reduce_source() << R"(extern "C" __global__ void __launch_bounds__(BLOCK)
cudal1_softmax(const storage_t* __restrict__ in, storage_t* __restrict__ out) {
  __shared__ float red[32];
  const int lane = threadIdx.x % TPR;
  const index_t row = (index_t)blockIdx.x * RPB + threadIdx.x / TPR;
  const bool live = row < ROWS;  // dead rows still take part in the reductions
  const index_t bx = (live ? row : 0) * RS, by = (live ? row : 0) * (index_t)D;
#if HEAD
  // Note [Softmax row heads]: bx and by agree mod VEC (the planner asks (RS - D) % VEC == 0, both pointers
  // VEC-aligned), so one head length h serves input and output; lanes < h hold a head element, lanes < tn a
  // tail element (h, tn < VEC <= TPR).
  const int h = (int)((VEC - bx % VEC) % VEC), nv = (D - h) / VEC, tn = D - h - nv * VEC;
  const bool has_h = live && lane < h, has_t = live && lane < tn;
  const float hv = has_h ? to_float(in[bx + lane]) : 0.f;
  const float tv = has_t ? to_float(in[bx + h + nv * VEC + lane]) : 0.f;
#else
  const int h = 0, nv = NV;
#endif
  const vec_t* __restrict__ x = reinterpret_cast<const vec_t*>(in + bx + h);
  vec_t* __restrict__ y = reinterpret_cast<vec_t*>(out + by + h);
  float m = NEG_INF;
#if CACHE
  vec_t c[PER];
#pragma unroll
  for (int i = 0; i < PER; ++i) {
    const int j = lane + i * TPR;
    if (live && j < nv) {
      c[i] = x[j];
#pragma unroll
      for (int e = 0; e < VEC; ++e) m = fmaxf(m, to_float(c[i].v[e]));
    }
  }
#else
  for (int j = lane; live && j < nv; j += TPR) {
    const vec_t t = x[j];
#pragma unroll
    for (int e = 0; e < VEC; ++e) m = fmaxf(m, to_float(t.v[e]));
  }
#endif
#if HEAD
  if (has_h) m = fmaxf(m, hv);
  if (has_t) m = fmaxf(m, tv);
#endif
  m = row_max(m, red);
  float s = 0.f;
#if KEEP_EXP
  float ce[PER][VEC];  // exp(x - m), reused by the epilogue
#endif
#if CACHE
#pragma unroll
  for (int i = 0; i < PER; ++i) {
    const int j = lane + i * TPR;
    if (live && j < nv) {
#pragma unroll
      for (int e = 0; e < VEC; ++e) {
        const float ev = expf(to_float(c[i].v[e]) - m);
        s += ev;
#if KEEP_EXP
        ce[i][e] = ev;
#endif
      }
    }
  }
#else
  for (int j = lane; live && j < nv; j += TPR) {
    const vec_t t = x[j];
#pragma unroll
    for (int e = 0; e < VEC; ++e) s += expf(to_float(t.v[e]) - m);
  }
#endif
#if HEAD
  if (has_h) s += expf(hv - m);
  if (has_t) s += expf(tv - m);
#endif
  s = row_sum(s, red);
  const float logsum = m + logf(s), rs = 1.f / s;
#define EPILOGUE(v) (LOG ? (v) - logsum : div_rn(expf((v) - m), s, rs))
#if HEAD
  if (has_h) out[by + lane] = to_storage(EPILOGUE(hv));
  if (has_t) out[by + h + nv * VEC + lane] = to_storage(EPILOGUE(tv));
#endif
#if CACHE
#pragma unroll
  for (int i = 0; i < PER; ++i) {
    const int j = lane + i * TPR;
    if (live && j < nv) {
      vec_t o;
#pragma unroll
      for (int e = 0; e < VEC; ++e) {
#if KEEP_EXP
        o.v[e] = to_storage(div_rn(ce[i][e], s, rs));
#else
        const float v = to_float(c[i].v[e]);
        o.v[e] = to_storage(EPILOGUE(v));
#endif
      }
      y[j] = o;
    }
  }
#else
  for (int j = lane; live && j < nv; j += TPR) {
    const vec_t t = x[j];
    vec_t o;
#pragma unroll
    for (int e = 0; e < VEC; ++e) {
      const float v = to_float(t.v[e]);
      o.v[e] = to_storage(EPILOGUE(v));
    }
    y[j] = o;
  }
#endif
}
)";
  return KernelSource{k.str(), "cudal1_softmax"};
}

}  // namespace cudal1::optimizer::softmax
