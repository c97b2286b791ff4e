/// @brief Source generation for the softmax family's column kernels (Note [Softmax columns]): each thread owns
/// VEC adjacent inner positions of one outer index and a 1/TPC share of the n elements of those columns.
#include <sstream>

#include "codegen_common.h"
#include "softmax_family.h"

namespace cudal1::optimizer::softmax {

std::string epilogue_prep_source(const char* count) {
  const std::string n = count;
  return R"(#ifndef EXP_SUB  // the exact forms; Note [Softmax fast exp] defines others for 16-bit two-pass tiles
#define EXP_SUB(v, mx) expf((v) - (mx))
#define DIV_SUM(a, sum, r) div_rn(a, sum, r)
#endif
#if LOG
  float ls[)" + n + R"(];
#pragma unroll
  for (int e = 0; e < )" + n + R"(; ++e) ls[e] = logf(s[e]);
#define EPILOGUE(v, e) (((v) - m[e]) - ls[e])  // LogSoftMaxForwardEpilogue
#else
  float rs[)" + n + R"(];  // Note [Softmax epilogue]
#pragma unroll
  for (int e = 0; e < )" + n + R"(; ++e) rs[e] = 1.f / s[e];
#define EPILOGUE(v, e) DIV_SUM(EXP_SUB(v, m[e]), s[e], rs[e])  // SoftMaxForwardEpilogue, one rounding
#endif
)";
}

std::string column_epilogue_source() {
  return epilogue_prep_source("VEC") + R"(  FOR_EACH_PART(vec_t r;
                _Pragma("unroll") for (int e = 0; e < VEC; ++e) r.v[e] = to_storage(EPILOGUE(to_float(t.v[e]), e));
                y[j * IV] = r;)
}
)";
}

KernelSource generate_softmax_columns(const ColumnShape& c, int vec, int block, int split, bool cache) {
  std::ostringstream k;
  k << "// cudal1 softmax columns: log=" << c.log << " " << c10::toString(c.dtype) << " outer=" << c.outer
    << " n=" << c.n << " inner=" << c.inner << " vec=" << vec << " block=" << block << " split=" << split
    << " cache=" << cache << "\n";
  k << "typedef long long index_t;\n" << dtype_prelude(c.dtype) << exact_divide_source();
  k << "#define VEC " << vec << "\n#define BLOCK " << block << "\n#define TPC " << split
    << "\n#define CPB (BLOCK / TPC)\n#define CACHE " << (cache ? 1 : 0) << "\n#define LOG " << (c.log ? 1 : 0)
    << "\n";
  k << "static constexpr int N = " << c.n << ";\n"
    << "static constexpr index_t IV = " << c.inner / vec << ";  // vectors along inner\n"
    << "static constexpr index_t COLS = " << c.outer * (c.inner / vec) << ";  // column vectors\n"
    << "static constexpr index_t OSV = " << c.outer_stride / vec << ", NSV = " << c.n_stride / vec
    << ";  // input strides in vectors\n";
  if (cache) k << "static constexpr int PER = (N + TPC - 1) / TPC;  // vectors each thread keeps\n";
  k << R"(#define NEG_INF __int_as_float(0xff800000u)
struct __align__(VEC * sizeof(storage_t)) vec_t { storage_t v[VEC]; };
#if TPC > 1
// Combines the TPC partials of each column (threads t with equal t % CPB): warp shuffles over the lanes of a
// column inside a warp, then G partials per column through shared memory, folded in order.
#if CPB >= 32
#define G TPC
#else
#define G (BLOCK / 32)
#endif
__device__ __forceinline__ void col_combine(float* v, float* red, bool is_max) {
  const int col = threadIdx.x % CPB;
#if CPB < 32
#pragma unroll
  for (int o = 16; o >= CPB; o >>= 1)
#pragma unroll
    for (int e = 0; e < VEC; ++e) {
      const float w = __shfl_xor_sync(0xffffffffu, v[e], o);
      v[e] = is_max ? fmaxf(v[e], w) : v[e] + w;
    }
  const int g = threadIdx.x / 32;
  const bool writer = threadIdx.x % 32 < CPB;
#else
  const int g = threadIdx.x / CPB;
  const bool writer = true;
#endif
  __syncthreads();  // earlier readers of red are done
  if (writer)
#pragma unroll
    for (int e = 0; e < VEC; ++e) red[(e * G + g) * CPB + col] = v[e];
  __syncthreads();
#pragma unroll
  for (int e = 0; e < VEC; ++e) {
    float a = is_max ? NEG_INF : 0.f;
    for (int i = 0; i < G; ++i) {
      const float w = red[(e * G + i) * CPB + col];
      a = is_max ? fmaxf(a, w) : a + w;
    }
    v[e] = a;
  }
}
#endif
extern "C" __global__ void __launch_bounds__(BLOCK)
cudal1_softmax(const storage_t* __restrict__ in, storage_t* __restrict__ out) {
#if TPC > 1
  __shared__ float red[BLOCK * VEC];
#endif
  const int part = threadIdx.x / CPB;  // this thread's share of n: part, part + TPC, ...
  const index_t cv = (index_t)blockIdx.x * CPB + threadIdx.x % CPB;
  const bool live = cv < COLS;  // dead threads still take part in the combines
  const index_t o = live ? cv / IV : 0, iv = live ? cv % IV : 0;
  const vec_t* __restrict__ x = reinterpret_cast<const vec_t*>(in) + o * OSV + iv;
  vec_t* __restrict__ y = reinterpret_cast<vec_t*>(out) + o * (N * IV) + iv;
  float m[VEC], s[VEC];
#pragma unroll
  for (int e = 0; e < VEC; ++e) { m[e] = NEG_INF; s[e] = 0.f; }
  // FOR_EACH_PART(body): runs `body` with `j` (index along n) and `t` (the vector there) over this thread's share.
#if CACHE
  vec_t cached[PER];
#pragma unroll
  for (int i = 0; i < PER; ++i)
    if (live && part + i * TPC < N) cached[i] = x[(part + i * TPC) * NSV];
#define FOR_EACH_PART(...) \
  _Pragma("unroll") for (int i = 0; i < PER; ++i) { \
    const int j = part + i * TPC; \
    if (live && j < N) { const vec_t t = cached[i]; __VA_ARGS__ } \
  }
#else
#define FOR_EACH_PART(...) \
  for (int j = part; live && j < N; j += TPC) { const vec_t t = x[j * NSV]; __VA_ARGS__ }
#endif
  FOR_EACH_PART(_Pragma("unroll") for (int e = 0; e < VEC; ++e) m[e] = fmaxf(m[e], to_float(t.v[e]));)
#if TPC > 1
  col_combine(m, red, true);
#endif
  FOR_EACH_PART(_Pragma("unroll") for (int e = 0; e < VEC; ++e) s[e] += expf(to_float(t.v[e]) - m[e]);)
#if TPC > 1
  col_combine(s, red, false);
#endif
)" << column_epilogue_source();
  return KernelSource{k.str(), "cudal1_softmax"};
}

}  // namespace cudal1::optimizer::softmax
