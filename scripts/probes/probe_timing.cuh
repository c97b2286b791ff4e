// Shared by the norm probes (row_sync_probe.cu, cluster_reread_probe.cu): the CUDA error check, a copy and an
// L2-flushing read kernel, and the median event time of a launch after an L2 flush. Not part of the library.
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
