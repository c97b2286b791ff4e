// Shared by the probes (row_sync_probe.cu, cluster_reread_probe.cu, the bulk_*_probe.cu, column_wave_probe.cu): the
// CUDA error check, a copy and an L2-flushing read kernel, the median event time of a launch after an L2 flush, and the
// same for a launch in thread-block clusters; and (n, mean, m2) triples merged as Chan et al. Not part of the library.
#pragma once

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CK(x)                                                                                       \
  do {                                                                                              \
    cudaError_t e = (x);                                                                            \
    if (e != cudaSuccess) { std::printf("%s: %s\n", #x, cudaGetErrorString(e)); std::exit(1); }      \
  } while (0)

/// (n, mean, m2) merged as Chan et al.
struct Stat {
  float n, mean, m2;
};
__device__ __forceinline__ Stat merge(Stat a, Stat b) {
  const float n = a.n + b.n;
  if (n == 0.f) return a;
  const float d = b.mean - a.mean, f = b.n / n;
  return Stat{n, a.mean + d * f, a.m2 + b.m2 + d * d * a.n * f};
}
__device__ __forceinline__ Stat warp_merge(Stat s) {
  for (int o = 16; o > 0; o >>= 1)
    s = merge(s, Stat{__shfl_xor_sync(~0u, s.n, o), __shfl_xor_sync(~0u, s.mean, o), __shfl_xor_sync(~0u, s.m2, o)});
  return s;
}

__global__ void copy_kernel(const float4* __restrict__ in, float4* __restrict__ out, long long n) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
    out[i] = in[i];
}

__global__ void read_flush(const float4* __restrict__ in, float* __restrict__ sink, long long n) {
  float s = 0.f;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
    const float4 v = in[i];
    s += v.x + v.y + v.z + v.w;
  }
  if (s == 1.2345f) sink[0] = s;  // keeps the loads
}

/// Median (us) of 20 repetitions of `launch`, each after `before` (set-up outside the timed region) and the L2
/// flush, between two events on the default stream.
template <class Before, class Launch>
double median_us(float4* flush, float* sink, long long flush_n, Before before, Launch launch) {
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  std::vector<float> ms;
  for (int rep = 0; rep < 20; ++rep) {
    before();
    read_flush<<<264, 512>>>(flush, sink, flush_n);
    CK(cudaEventRecord(e0));
    launch();
    CK(cudaEventRecord(e1));
    CK(cudaEventSynchronize(e1));
    float m;
    CK(cudaEventElapsedTime(&m, e0, e1));
    ms.push_back(m);
  }
  CK(cudaEventDestroy(e0));
  CK(cudaEventDestroy(e1));
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2] * 1e3;
}

/// median_us of `kern(args...)` launched in clusters of `cl` blocks of `threads` threads with `smem` bytes of
/// dynamic shared memory, as many clusters as the device holds (at most `most`; *clusters receives the count).
template <class Kern, class... Args>
double cluster_median_us(float4* flush, float* sink, long long flush_n, Kern kern, int cl, int threads, int smem,
                         int most, int* clusters, Args... args) {
  if (cl > 8) CK(cudaFuncSetAttribute(kern, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
  CK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  cudaLaunchConfig_t cfg = {};
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = cl;
  attr[0].val.clusterDim.y = 1;
  attr[0].val.clusterDim.z = 1;
  cfg.blockDim = dim3(threads);
  cfg.dynamicSmemBytes = smem;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  int active = 0;
  cfg.gridDim = dim3(cl * 64);
  CK(cudaOccupancyMaxActiveClusters(&active, (void*)kern, &cfg));
  *clusters = std::min(active, most);
  cfg.gridDim = dim3(cl * *clusters);
  const double us = median_us(flush, sink, flush_n, [] {}, [&] { CK(cudaLaunchKernelEx(&cfg, kern, args...)); });
  CK(cudaGetLastError());
  return us;
}
