// Shared by the bulk-copy norm probes (bulk_hold_probe.cu, bulk_hybrid_probe.cu, session 20): mbarriers, bulk copies
// and st.async; (n, mean, m2) triples; a host check of the layer norm of rows; the buffers of the test; and the timed
// cluster launch. Not part of the library.
#pragma once

#include <cooperative_groups.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "probe_timing.cuh"

namespace cg = cooperative_groups;

__device__ __forceinline__ unsigned sa(const void* p) { return static_cast<unsigned>(__cvta_generic_to_shared(p)); }
__device__ __forceinline__ void mbar_init(uint64_t* bar) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(sa(bar)) : "memory");
}
__device__ __forceinline__ void mbar_wait(uint64_t* bar, unsigned parity) {
  asm volatile(
      "{\n .reg .pred p;\n W_%=:\n mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n @!p bra W_%=;\n}" ::"r"(
          sa(bar)),
      "r"(parity)
      : "memory");
}
/// Thread 0 only: `bytes` from global `src` into shared `dst`, completing on `bar` (which expects them).
__device__ __forceinline__ void bulk_load(void* dst, const void* src, unsigned bytes, uint64_t* bar) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(sa(bar)), "r"(bytes) : "memory");
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                   sa(dst)),
               "l"(src), "r"(bytes), "r"(sa(bar))
               : "memory");
}
__device__ __forceinline__ void bulk_store(void* dst, const void* src, unsigned bytes) {
  asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" ::"l"(dst), "r"(sa(src)), "r"(bytes)
               : "memory");
  asm volatile("cp.async.bulk.commit_group;" ::: "memory");
}
/// Sends v to `rank`'s shared `dst`, completing 16 bytes on `rank`'s mbarrier `bar` (local addresses, mapped).
__device__ __forceinline__ void send(float4* dst, float4 v, uint64_t* bar, unsigned rank) {
  unsigned rd, rb;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(rd) : "r"(sa(dst)), "r"(rank));
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(rb) : "r"(sa(bar)), "r"(rank));
  asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.f32 [%0], {%1, %2, %3, %4}, [%5];" ::"r"(rd),
               "f"(v.x), "f"(v.y), "f"(v.z), "f"(v.w), "r"(rb)
               : "memory");
}
template <int N>
__device__ __forceinline__ void bulk_wait_read() {
  asm volatile("cp.async.bulk.wait_group.read %0;" ::"n"(N) : "memory");
}

/// The block's sum of v (every thread gets it).
template <int BLOCK>
__device__ __forceinline__ float block_sum(float v, float* red) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(~0u, v, o);
  if (threadIdx.x % 32 == 0) red[threadIdx.x / 32] = v;
  __syncthreads();
  float t = 0.f;
#pragma unroll
  for (int w = 0; w < BLOCK / 32; ++w) t += red[w];
  __syncthreads();  // red is reused
  return t;
}

/// Sum over the BLOCK consumer threads (named barrier 1: the producer warp does not take part).
template <int BLOCK>
__device__ __forceinline__ float consumer_sum(float v, float* red) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(~0u, v, o);
  if (threadIdx.x % 32 == 0) red[threadIdx.x / 32] = v;
  asm volatile("bar.sync 1, %0;" ::"n"(BLOCK) : "memory");
  float t = 0.f;
#pragma unroll
  for (int w = 0; w < BLOCK / 32; ++w) t += red[w];
  asm volatile("bar.sync 1, %0;" ::"n"(BLOCK) : "memory");
  return t;
}
__device__ __forceinline__ void mbar_init_n(uint64_t* bar, unsigned n) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(sa(bar)), "r"(n) : "memory");
}

__device__ __forceinline__ unsigned long long l2_policy(bool last) {
  unsigned long long p;
  if (last)
    asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(p));
  else
    asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(p));
  return p;
}
/// bulk_load with an L2 policy.
__device__ __forceinline__ void bulk_load_hint(void* dst, const void* src, unsigned bytes, uint64_t* bar,
                                               unsigned long long pol) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(sa(bar)), "r"(bytes) : "memory");
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1], %2, [%3], %4;" ::"r"(
          sa(dst)),
      "l"(src), "r"(bytes), "r"(sa(bar)), "l"(pol)
      : "memory");
}

/// Largest |error| of rows 0, rows / 2 + 1 and rows - 1 of out against the host's layer norm of host.
double check(const float* out, int rows, long long cols, const std::vector<float>& host, float eps) {
  double worst = 0;
  std::vector<float> row(cols);
  for (int r : {0, rows / 2 + 1, rows - 1}) {
    CK(cudaMemcpy(row.data(), out + r * cols, cols * sizeof(float), cudaMemcpyDeviceToHost));
    double mean = 0, m2 = 0;
    for (long long i = 0; i < cols; ++i) mean += host[r * cols + i];
    mean /= cols;
    for (long long i = 0; i < cols; ++i) m2 += (host[r * cols + i] - mean) * (host[r * cols + i] - mean);
    const double rstd = 1.0 / std::sqrt(m2 / cols + eps);
    for (long long i = 0; i < cols; ++i) {
      const double e = std::fabs(row[i] - (host[r * cols + i] - mean) * rstd);
      worst = std::isnan(e) ? 1e30 : std::max(worst, e);
    }
  }
  return worst;
}

/// The test's data: 64M floats in and out (256 MB each), an input whose every 8 MB is shifted by 1 more, the
/// host copy for check(), and the L2 flush buffer of median_us().
struct Buffers {
  static constexpr long long kTotal = 64ll << 20;
  static constexpr long long kFlushN = (256ll << 20) / 16;
  float *in = nullptr, *out = nullptr;
  float4* flush = nullptr;
  float* sink = nullptr;
  std::vector<float> host;
  Buffers() : host(kTotal) {
    CK(cudaMalloc(&in, kTotal * 4));
    CK(cudaMalloc(&out, kTotal * 4));
    CK(cudaMalloc(&flush, kFlushN * 16));
    CK(cudaMalloc(&sink, sizeof(float)));
    CK(cudaMemset(flush, 0, kFlushN * 16));
    for (long long i = 0; i < kTotal; ++i) host[i] = (float)((i * 2654435761ull) % 1000) / 1000.f + (float)(i >> 21);
    CK(cudaMemcpy(in, host.data(), kTotal * 4, cudaMemcpyHostToDevice));
  }
  /// Prints the median time of a copy of the same bytes (256 MB -> 256 MB).
  void print_copy() {
    std::printf("%-46s %7.1f us\n", "copy 256 MB -> 256 MB", median_us(flush, sink, kFlushN, [] {}, [&] {
                  copy_kernel<<<264 * 4, 512>>>(reinterpret_cast<float4*>(in), reinterpret_cast<float4*>(out),
                                                kTotal / 4);
                }));
  }
};

/// Times `kern(in, out, rows, cols, eps)` launched in clusters of `cl` blocks of `threads` threads with `smem`
/// bytes of dynamic shared memory, as many clusters as the device holds (at most `rows`; *clusters receives the
/// count), on outputs poisoned first: the median after an L2 flush (median_us), in us.
template <class Kern>
double time_clusters(Kern kern, int cl, int threads, int smem, int rows, long long cols, Buffers& b, int* clusters) {
  CK(cudaMemset(b.out, 0xff, rows * cols * 4));
  return cluster_median_us(b.flush, b.sink, Buffers::kFlushN, kern, cl, threads, smem, rows, clusters,
                           (const float*)b.in, b.out, rows, cols, 1e-5f);
}
