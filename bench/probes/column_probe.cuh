// Shared by the column log_softmax probes (column_wave_probe.cu, column_split_probe.cu, held_cubin_probe.cu): the
// problem, log_softmax bf16 [32,32000,64] dim 1; bf16 pair helpers; the fast sum of exp; a warp's column statistics
// of an item in shared memory; the (max, sum) merge; a naive reference kernel, the max |difference| and the N(0, 1)
// fill; the buffers every probe's main sets up. Not part of the library.
#pragma once

#include <cuda_bf16.h>

#include "probe_timing.cuh"

constexpr int OUTER = 32, NROWS = 32000, INNER = 64;
constexpr long long ELEMS = (long long)OUTER * NROWS * INNER;
constexpr float L2E = 1.4426950408889634f;

__device__ __forceinline__ float lo_f(unsigned u) { return __uint_as_float(u << 16); }
__device__ __forceinline__ float hi_f(unsigned u) { return __uint_as_float(u & 0xffff0000u); }
__device__ __forceinline__ unsigned max2(unsigned a, unsigned b) {
  unsigned d;
  asm("max.bf16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
  return d;
}
__device__ __forceinline__ unsigned pack2(float lo, float hi) {
  unsigned d;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(d) : "f"(hi), "f"(lo));
  return d;
}
__device__ __forceinline__ float ex2(float t) {
  float r;
  asm("ex2.approx.f32 %0, %1;" : "=f"(r) : "f"(t));
  return r;
}
/// The bf16 halves as floats by PRMT: another expression than lo_f / hi_f, so that the compiler does not keep a
/// statistics pass's unpacked values alive for a later output pass (128 registers instead of 64 packed ones).
__device__ __forceinline__ float lo_p(unsigned u) {
  unsigned d;
  asm("prmt.b32 %0, 0, %1, 0x5400;" : "=r"(d) : "r"(u));
  return __uint_as_float(d);
}
__device__ __forceinline__ float hi_p(unsigned u) {
  unsigned d;
  asm("prmt.b32 %0, 0, %1, 0x7600;" : "=r"(d) : "r"(u));
  return __uint_as_float(d);
}
/// s[c] += 2^(x_c log2 e - ml[c]) over N 16-byte vectors of 8 bf16 columns c (the sum of Note [Softmax fast exp];
/// ml = the maximum times log2 e). PRMT: unpack by lo_p / hi_p.
template <int N, bool PRMT = false>
__device__ __forceinline__ void add_exp(const uint4 (&v)[N], const float (&ml)[8], float (&s)[8]) {
#pragma unroll
  for (int i = 0; i < N; ++i) {
    const unsigned q[4] = {v[i].x, v[i].y, v[i].z, v[i].w};
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      s[2 * k] += ex2(fmaf(PRMT ? lo_p(q[k]) : lo_f(q[k]), L2E, -ml[2 * k]));
      s[2 * k + 1] += ex2(fmaf(PRMT ? hi_p(q[k]) : hi_f(q[k]), L2E, -ml[2 * k + 1]));
    }
  }
}
/// A warp's statistics of its 8 columns (16-byte group g = tid % 8) over an item in shared memory s (rows x 8
/// vectors): thread tid reads rows tid / 8 + i * RPS (i < NV; those >= rows count as -Inf). The warp's maximum of
/// each column first (packed), so that every lane sums against the same maximum and the lanes' sums add without
/// rescaling; m[c] is that maximum and sm[c] the warp's sum of exp(x - m[c]) (every lane of group g holds both).
template <int NV, int RPS>
__device__ __forceinline__ void warp_column_stats(const uint4* s, int rows, int tid, float (&m)[8], float (&sm)[8]) {
  constexpr unsigned kNegInf2 = 0xff80ff80u;
  const int g = tid % 8;
  uint4 v[NV];
  uint4 bm = make_uint4(kNegInf2, kNegInf2, kNegInf2, kNegInf2);
#pragma unroll
  for (int i = 0; i < NV; ++i) {
    const int r = tid / 8 + i * RPS;
    v[i] = r < rows ? s[r * 8 + g] : make_uint4(kNegInf2, kNegInf2, kNegInf2, kNegInf2);
    bm.x = max2(bm.x, v[i].x);
    bm.y = max2(bm.y, v[i].y);
    bm.z = max2(bm.z, v[i].z);
    bm.w = max2(bm.w, v[i].w);
  }
#pragma unroll
  for (int o = 8; o < 32; o <<= 1) {
    bm.x = max2(bm.x, __shfl_xor_sync(~0u, bm.x, o));
    bm.y = max2(bm.y, __shfl_xor_sync(~0u, bm.y, o));
    bm.z = max2(bm.z, __shfl_xor_sync(~0u, bm.z, o));
    bm.w = max2(bm.w, __shfl_xor_sync(~0u, bm.w, o));
  }
  const unsigned bw[4] = {bm.x, bm.y, bm.z, bm.w};
  float ml[8];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    m[2 * i] = lo_f(bw[i]);
    m[2 * i + 1] = hi_f(bw[i]);
  }
#pragma unroll
  for (int e = 0; e < 8; ++e) {
    sm[e] = 0.f;
    ml[e] = m[e] == -INFINITY ? 0.f : m[e] * L2E;
  }
  add_exp<NV>(v, ml, sm);
#pragma unroll
  for (int o = 8; o < 32; o <<= 1)
#pragma unroll
    for (int e = 0; e < 8; ++e) sm[e] += __shfl_xor_sync(~0u, sm[e], o);
}
__device__ __forceinline__ void merge(float& m, float& s, float m2, float s2) {
  if (m2 == -INFINITY) return;  // an empty side
  if (m == -INFINITY) {
    m = m2;
    s = s2;
    return;
  }
  const float mm = fmaxf(m, m2);
  s = s * ex2((m - mm) * L2E) + s2 * ex2((m2 - mm) * L2E);
  m = mm;
}
/// A thread a column: max, sum of exp(x - max), (x - max) - log(sum), fp32, exact expf/logf.
__global__ void naive(const __nv_bfloat16* __restrict__ in, __nv_bfloat16* __restrict__ out) {
  const int col = blockIdx.x * blockDim.x + threadIdx.x;
  if (col >= OUTER * INNER) return;
  const long long base = (long long)(col / INNER) * NROWS * INNER + col % INNER;
  float m = -INFINITY, s = 0.f;
  for (int r = 0; r < NROWS; ++r) m = fmaxf(m, __bfloat162float(in[base + (long long)r * INNER]));
  for (int r = 0; r < NROWS; ++r) s += expf(__bfloat162float(in[base + (long long)r * INNER]) - m);
  const float ls = logf(s);
  for (int r = 0; r < NROWS; ++r)
    out[base + (long long)r * INNER] = __float2bfloat16((__bfloat162float(in[base + (long long)r * INNER]) - m) - ls);
}

__global__ void max_diff(const __nv_bfloat16* a, const __nv_bfloat16* b, long long n, float* d) {
  float mx = 0.f;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
    mx = fmaxf(mx, fabsf(__bfloat162float(a[i]) - __bfloat162float(b[i])));
  atomicMax(reinterpret_cast<int*>(d), __float_as_int(mx));  // non-negative floats order as ints
}

__global__ void fill(__nv_bfloat16* p, long long n, unsigned seed) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
    unsigned h = (unsigned)i * 2654435761u ^ seed;
    h ^= h >> 15;
    h *= 2246822519u;
    h ^= h >> 13;
    const unsigned h2 = h * 3266489917u ^ (h >> 16);
    const float u1 = ((h & 0xffffff) + 1) / 16777217.f, u2 = (h2 & 0xffffff) / 16777216.f;
    p[i] = __float2bfloat16(sqrtf(-2.f * logf(u1)) * cospif(2.f * u2));  // N(0, 1)
  }
}

/// The probes' buffers: the input (filled N(0, 1)), the output, the naive reference, a cell for max_diff and the L2
/// flush of median_us. Set-up prints the time of a copy of the same bytes, the yardstick of every probe's table.
struct ColumnBuffers {
  static constexpr long long kFlushN = (256ll << 20) / 16;
  __nv_bfloat16 *in = nullptr, *out = nullptr, *ref = nullptr;
  float *d = nullptr, *sink = nullptr;
  float4* flush = nullptr;
  ColumnBuffers() {
    CK(cudaMalloc(&in, ELEMS * 2));
    CK(cudaMalloc(&out, ELEMS * 2));
    CK(cudaMalloc(&ref, ELEMS * 2));
    CK(cudaMalloc(&d, 4));
    CK(cudaMalloc(&sink, 4));
    CK(cudaMalloc(&flush, kFlushN * 16));
    CK(cudaMemset(flush, 0, kFlushN * 16));
    fill<<<1024, 256>>>(in, ELEMS, 12345u);
    naive<<<(OUTER * INNER + 127) / 128, 128>>>(in, ref);
    CK(cudaDeviceSynchronize());
    const long long n4 = ELEMS * 2 / 16;
    const __nv_bfloat16 *i = in;
    __nv_bfloat16* o = out;
    std::printf("copy of the same bytes: %.1f us\n", median_us(flush, sink, kFlushN, [] {}, [&] {
                  copy_kernel<<<264 * 4, 512>>>(reinterpret_cast<const float4*>(i), reinterpret_cast<float4*>(o), n4);
                }));
    std::fflush(stdout);
  }
};
