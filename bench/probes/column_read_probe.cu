// Probe (session 17): how fast can 64 MB be read in the access patterns of the column-reduction tiles
// (Note [Column tiles in flight] and after), with nothing else in the kernel? The tuned column rows (var f32
// [4096,4096] dim 0, argmax f32 [128,4096,32] dim 1, vector_norm ord 1 dim 0) run 20-23 us against a 17.7 us
// device copy and a 15.9 us floor; Nsight Compute put the best tile at DRAM 68% with one 16-warp block an SM.
// Each kernel sums what it reads (so nothing is dead) and writes one float a thread. Not part of the library.
//   flat<U>:           contiguous 16-byte loads, each block a contiguous chunk, U loads a thread in flight;
//   tile<VEC, SPLITS, BLOCK, U>: [4096 rows, 4096 cols] f32; block (tile, split) reads 32 x VEC adjacent columns
//                      of 4096 / SPLITS rows, warps split the rows, U rows a batch, the next batch loaded before
//                      this one is summed (the pipelined tile's shape);
//   band<COLS, SPLITS, U>: the same, but a block's warps lie side by side along a band of COLS columns (16-byte
//                      lanes; a block reads whole 2-8 KB row segments), so fewer blocks share a row;
//   then flat reads of 4 MB (the small sum's input) to 1 GB, and an empty kernel, for the read-only yardstick.
// Build and run on the GPU machine:
//   nvcc -O3 -arch=sm_90 -o column_read_probe column_read_probe.cu && ./column_read_probe
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CK(x)                                                                                       \
  do {                                                                                              \
    cudaError_t e = (x);                                                                            \
    if (e != cudaSuccess) { std::printf("%s: %s\n", #x, cudaGetErrorString(e)); std::exit(1); }      \
  } while (0)

constexpr int R = 4096, C = 4096;  // 64 MB of f32

template <int U>
__global__ void flat(const float4* __restrict__ in, float* __restrict__ out, long long n4) {
  const long long per_block = n4 / gridDim.x;
  const float4* p = in + blockIdx.x * per_block;
  float s = 0.f;
  for (long long i = threadIdx.x; i < per_block; i += (long long)blockDim.x * U) {
    float4 v[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const long long j = i + (long long)u * blockDim.x;
      v[u] = j < per_block ? p[j] : make_float4(0.f, 0.f, 0.f, 0.f);
    }
#pragma unroll
    for (int u = 0; u < U; ++u) s += v[u].x + v[u].y + v[u].z + v[u].w;
  }
  out[blockIdx.x * blockDim.x + threadIdx.x] = s;
}

template <int VEC>
struct Vec;
template <>
struct Vec<1> { using T = float; __device__ static float sum(float v) { return v; } };
template <>
struct Vec<2> { using T = float2; __device__ static float sum(float2 v) { return v.x + v.y; } };
template <>
struct Vec<4> { using T = float4; __device__ static float sum(float4 v) { return v.x + v.y + v.z + v.w; } };

template <int VEC, int SPLITS, int U>
__global__ void tile(const float* __restrict__ in, float* __restrict__ out) {
  using T = typename Vec<VEC>::T;
  constexpr int TILE = 32 * VEC, ROWS = R / SPLITS;
  const int t = blockIdx.x / SPLITS, split = blockIdx.x % SPLITS;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, nw = blockDim.x / 32;
  const float* base = in + (long long)split * ROWS * C + t * TILE + lane * VEC;
  float s = 0.f;
  T a[U], b[U];
  int r = warp;
#pragma unroll
  for (int u = 0; u < U; ++u) a[u] = *reinterpret_cast<const T*>(base + (long long)(r + u * nw) * C);
  for (; r < ROWS; r += U * nw) {
    const int next = r + U * nw;
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int rr = next + u * nw;
      if (rr < ROWS) b[u] = *reinterpret_cast<const T*>(base + (long long)rr * C);
    }
#pragma unroll
    for (int u = 0; u < U; ++u) s += Vec<VEC>::sum(a[u]);
#pragma unroll
    for (int u = 0; u < U; ++u) a[u] = b[u];
  }
  out[blockIdx.x * blockDim.x + threadIdx.x] = s;
}

template <int COLS, int SPLITS, int U>
__global__ void band(const float* __restrict__ in, float* __restrict__ out) {
  constexpr int LANES = COLS / 4, ROWS = R / SPLITS;  // float4 lanes across the band
  const int t = blockIdx.x / SPLITS, split = blockIdx.x % SPLITS;
  const int col = threadIdx.x % LANES, row0 = threadIdx.x / LANES, nr = blockDim.x / LANES;
  const float* base = in + (long long)split * ROWS * C + t * COLS + col * 4;
  float s = 0.f;
  float4 a[U], b[U];
  int r = row0;
#pragma unroll
  for (int u = 0; u < U; ++u) a[u] = *reinterpret_cast<const float4*>(base + (long long)(r + u * nr) * C);
  for (; r < ROWS; r += U * nr) {
    const int next = r + U * nr;
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int rr = next + u * nr;
      if (rr < ROWS) b[u] = *reinterpret_cast<const float4*>(base + (long long)rr * C);
    }
#pragma unroll
    for (int u = 0; u < U; ++u) s += a[u].x + a[u].y + a[u].z + a[u].w;
#pragma unroll
    for (int u = 0; u < U; ++u) a[u] = b[u];
  }
  out[blockIdx.x * blockDim.x + threadIdx.x] = s;
}

__global__ void empty_kernel() {}

int main() {
  float *in, *out, *flush;
  const size_t flush_bytes = 256u << 20;
  CK(cudaMalloc(&in, sizeof(float) * R * C));
  CK(cudaMalloc(&out, 64u << 20));
  CK(cudaMalloc(&flush, flush_bytes));
  CK(cudaMemset(in, 0, sizeof(float) * R * C));
  CK(cudaMemset(flush, 0, flush_bytes));
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  auto time = [&](const char* name, auto launch) {
    std::vector<float> ms;
    for (int rep = 0; rep < 30; ++rep) {
      flat<4><<<264, 512>>>(reinterpret_cast<const float4*>(flush), out, flush_bytes / 16);  // read: L2 clean
      CK(cudaEventRecord(e0));
      launch();
      CK(cudaEventRecord(e1));
      CK(cudaEventSynchronize(e1));
      float m;
      CK(cudaEventElapsedTime(&m, e0, e1));
      ms.push_back(m);
    }
    CK(cudaGetLastError());
    std::sort(ms.begin(), ms.end());
    const double us = ms[ms.size() / 2] * 1e3;
    std::printf("%-44s %7.2f us  %5.2f TB/s\n", name, us, sizeof(float) * R * C / us / 1e6);
  };
  const long long n4 = (long long)R * C / 4;
  time("flat U4, 264 x 512", [&] { flat<4><<<264, 512>>>(reinterpret_cast<const float4*>(in), out, n4); });
  time("flat U8, 264 x 512", [&] { flat<8><<<264, 512>>>(reinterpret_cast<const float4*>(in), out, n4); });
  time("flat U4, 528 x 256", [&] { flat<4><<<528, 256>>>(reinterpret_cast<const float4*>(in), out, n4); });
  time("flat U8, 128 x 512 (one block an SM)",
       [&] { flat<8><<<128, 512>>>(reinterpret_cast<const float4*>(in), out, n4); });
  time("flat U8, 128 x 1024", [&] { flat<8><<<128, 1024>>>(reinterpret_cast<const float4*>(in), out, n4); });
  // The column tiles: 4096 / (32 VEC) tiles x SPLITS blocks.
  time("tile vec2 S2 b512 U4 (128 blocks)", [&] { tile<2, 2, 4><<<64 * 2, 512>>>(in, out); });
  time("tile vec2 S2 b512 U8 (128 blocks)", [&] { tile<2, 2, 8><<<64 * 2, 512>>>(in, out); });
  time("tile vec1 S1 b1024 U8 (128 blocks)", [&] { tile<1, 1, 8><<<128, 1024>>>(in, out); });
  time("tile vec4 S4 b512 U4 (128 blocks)", [&] { tile<4, 4, 4><<<32 * 4, 512>>>(in, out); });
  time("tile vec2 S8 b256 U4 (512 blocks)", [&] { tile<2, 8, 4><<<64 * 8, 256>>>(in, out); });
  time("tile vec4 S16 b256 U2 (512 blocks)", [&] { tile<4, 16, 2><<<32 * 16, 256>>>(in, out); });
  time("tile vec4 S8 b512 U4 (256 blocks)", [&] { tile<4, 8, 4><<<32 * 8, 512>>>(in, out); });
  // Bands: a block reads whole COLS-wide row segments.
  time("band 1024 cols S32 b512 U4 (128 blocks)", [&] { band<1024, 32, 4><<<4 * 32, 512>>>(in, out); });
  time("band 1024 cols S64 b256 U4 (256 blocks)", [&] { band<1024, 64, 4><<<4 * 64, 256>>>(in, out); });
  time("band 512 cols S32 b512 U4 (256 blocks)", [&] { band<512, 32, 4><<<8 * 32, 512>>>(in, out); });
  time("band 2048 cols S64 b512 U4 (128 blocks)", [&] { band<2048, 64, 4><<<2 * 64, 512>>>(in, out); });
  time("band 4096 cols S128 b1024 U4 (128 blocks)", [&] { band<4096, 128, 4><<<128, 1024>>>(in, out); });
  for (long long mb : {4LL, 16LL, 64LL, 256LL, 1024LL}) {
    float* big;
    CK(cudaMalloc(&big, mb << 20));
    CK(cudaMemset(big, 0, mb << 20));
    const long long n = (mb << 20) / 16;
    char name[64];
    for (int blocks : {132, 264}) {
      std::snprintf(name, sizeof name, "flat U8 %d x 512, %lld MB", blocks, mb);
      std::vector<float> ms;
      for (int rep = 0; rep < 30; ++rep) {
        flat<4><<<264, 512>>>(reinterpret_cast<const float4*>(flush), out, flush_bytes / 16);
        CK(cudaEventRecord(e0));
        flat<8><<<blocks, 512>>>(reinterpret_cast<const float4*>(big), out, n);
        CK(cudaEventRecord(e1));
        CK(cudaEventSynchronize(e1));
        float m;
        CK(cudaEventElapsedTime(&m, e0, e1));
        ms.push_back(m);
      }
      std::sort(ms.begin(), ms.end());
      const double us = ms[ms.size() / 2] * 1e3;
      std::printf("%-44s %7.2f us  %5.2f TB/s\n", name, us, (mb << 20) / us / 1e6);
    }
    CK(cudaFree(big));
  }
  time("empty kernel 132 x 512 (ignore TB/s)", [&] { empty_kernel<<<132, 512>>>(); });
  std::printf("done\n");
  return 0;
}
