// Shared by the column log_softmax probes (column_wave_probe.cu, column_held_probe.cu): the problem, log_softmax bf16
// [32,32000,64] dim 1; bf16 pair helpers; the (max, sum) merge; a naive reference kernel, the max |difference| and
// the N(0, 1) fill. Not part of the library.
#pragma once

#include <cuda_bf16.h>

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
