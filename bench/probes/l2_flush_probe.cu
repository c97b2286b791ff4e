/// @brief Standalone probe behind the timing method's L2 flush (Note [Timing] in optimizer/measure.h;
/// docs/PERF.md, session 10, run 1). Times a 32 MB device copy, a band sum reading whole rows and column sums of a
/// [4096,4096] f32 matrix with strips of 128 B to 8 KB (64 MB moved each), each after a 256 MiB memset ("dirty":
/// L2 left holding dirty lines, as Triton's do_bench and nvbench flush) and after a 256 MiB read ("clean").
/// Built with -DCUDAL1_BUILD_PROBES=ON (bench/probes/README.md), or with nvcc on the GPU machine:
///   nvcc -O3 -arch=sm_90 -std=c++17 -o l2_flush_probe bench/probes/l2_flush_probe.cu && ./l2_flush_probe
/// Prints one line per case: the median of 40 event-timed repetitions.
#include <cuda_runtime.h>
#include <cstdio>
#include <vector>
#include <algorithm>
#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e)); exit(1);} } while (0)
constexpr int N = 4096, K = 4096;  // K rows of N floats; sum over rows
// A block of 16 warps: WX across the columns (a warp reads 32 x VEC floats of a row), 16 / WX down the rows.
template <int VEC, int WX, int UNR>
__global__ void __launch_bounds__(512) colsum(const float* __restrict__ x, float* __restrict__ ws, int rows_per_split) {
  constexpr int WY = 16 / WX;
  constexpr int TILE = WX * 32 * VEC;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int wx = warp % WX, wy = warp / WX;
  const int tiles = N / TILE;
  const int tile = blockIdx.x % tiles, split = blockIdx.x / tiles;
  const int col = tile * TILE + (wx * 32 + lane) * VEC;
  const int r0 = split * rows_per_split, r1 = r0 + rows_per_split;
  float acc[VEC] = {};
  int r = r0 + wy;
  for (; r + (UNR - 1) * WY < r1; r += UNR * WY) {
    float v[UNR][VEC];
#pragma unroll
    for (int u = 0; u < UNR; ++u) {
      const float* p = x + (size_t)(r + u * WY) * N + col;
      if constexpr (VEC == 4) { float4 t = __ldg((const float4*)p); v[u][0]=t.x; v[u][1]=t.y; v[u][2]=t.z; v[u][3]=t.w; }
      else if constexpr (VEC == 2) { float2 t = __ldg((const float2*)p); v[u][0]=t.x; v[u][1]=t.y; }
      else { v[u][0] = __ldg(p); }
    }
#pragma unroll
    for (int u = 0; u < UNR; ++u)
#pragma unroll
      for (int i = 0; i < VEC; ++i) acc[i] += v[u][i];
  }
  for (; r < r1; r += WY)
#pragma unroll
    for (int i = 0; i < VEC; ++i) acc[i] += x[(size_t)r * N + col + i];
  __shared__ float sm[WY][TILE];
#pragma unroll
  for (int i = 0; i < VEC; ++i) sm[wy][(wx * 32 + lane) * VEC + i] = acc[i];
  __syncthreads();
  for (int c = threadIdx.x; c < TILE; c += 512) {
    float s = 0;
    for (int y = 0; y < WY; ++y) s += sm[y][c];
    ws[(size_t)split * N + tile * TILE + c] = s;
  }
}
// Contiguous: each block reads whole rows (a band of rows), all columns, column partials per block.
template <int UNR>
__global__ void __launch_bounds__(1024) bandsum(const float* __restrict__ x, float* __restrict__ ws, int rows_per_block) {
  // 1024 threads x float4 = 4096 floats = one row
  const int r0 = blockIdx.x * rows_per_block, r1 = min(K, r0 + rows_per_block);
  const int col = threadIdx.x * 4;
  float a0 = 0, a1 = 0, a2 = 0, a3 = 0;
  int r = r0;
  for (; r + UNR <= r1; r += UNR) {
    float4 v[UNR];
#pragma unroll
    for (int u = 0; u < UNR; ++u) v[u] = __ldg((const float4*)(x + (size_t)(r + u) * N + col));
#pragma unroll
    for (int u = 0; u < UNR; ++u) { a0 += v[u].x; a1 += v[u].y; a2 += v[u].z; a3 += v[u].w; }
  }
  for (; r < r1; ++r) { float4 t = __ldg((const float4*)(x + (size_t)r * N + col)); a0 += t.x; a1 += t.y; a2 += t.z; a3 += t.w; }
  float4 o = {a0, a1, a2, a3};
  *(float4*)(ws + (size_t)blockIdx.x * N + col) = o;
}
__global__ void readflush(const float4* p, size_t n, float* sink) {
  float s = 0;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) { float4 t = p[i]; s += t.x + t.y + t.z + t.w; }
  if (s == 123.f) *sink = s;
}
void* gflush; float* gsink; int gmode;
void flush(cudaStream_t st) {
  if (gmode == 0) CK(cudaMemsetAsync(gflush, gmode + 1, 256 << 20, st));
  else readflush<<<132 * 4, 512, 0, st>>>((const float4*)gflush, (256u << 20) / 16, gsink);
}
template <class F>
float timeit(F f, cudaStream_t st, int reps = 40) {
  cudaEvent_t a, b; CK(cudaEventCreate(&a)); CK(cudaEventCreate(&b));
  std::vector<float> t;
  for (int i = 0; i < reps + 3; ++i) {
    flush(st);
    CK(cudaEventRecord(a, st)); f(); CK(cudaEventRecord(b, st)); CK(cudaEventSynchronize(b));
    float ms; CK(cudaEventElapsedTime(&ms, a, b)); if (i >= 3) t.push_back(ms * 1000);
  }
  CK(cudaGetLastError());
  std::sort(t.begin(), t.end()); return t[t.size() / 2];
}
template <int VEC, int WX, int UNR>
void run_cols(const float* x, float* ws, int splits, cudaStream_t st) {
  constexpr int TILE = WX * 32 * VEC;
  const int tiles = N / TILE;
  float us = timeit([&] { colsum<VEC, WX, UNR><<<tiles * splits, 512, 0, st>>>(x, ws, K / splits); }, st);
  printf("%-6s cols vec%d wx%-2d unr%d strip %5d B  blocks %4d  %7.2f us  %5.2f TB/s\n", gmode ? "clean" : "dirty", VEC, WX, UNR, TILE * 4, tiles * splits, us, 64.0 * (1 << 20) / us / 1e6);
}
int main() {
  float *x, *ws; CK(cudaMalloc(&x, (size_t)N * K * 4)); CK(cudaMalloc(&ws, 64 << 20)); CK(cudaMalloc(&gflush, 256 << 20)); CK(cudaMalloc(&gsink, 4));
  CK(cudaMemset(x, 0x3f, (size_t)N * K * 4)); CK(cudaMemset(gflush, 0, 256 << 20));
  float* y; CK(cudaMalloc(&y, 32 << 20));
  cudaStream_t st; CK(cudaStreamCreate(&st));
  for (gmode = 0; gmode < 2; ++gmode) {
    printf("%-6s copy 32 MB (64 MB moved)  %7.2f us\n", gmode ? "clean" : "dirty", timeit([&] { CK(cudaMemcpyAsync(y, x, 32 << 20, cudaMemcpyDeviceToDevice, st)); }, st));
    for (int rpb : {32, 31})  // 128 / 133 blocks (the last one short)
      printf("%-6s band rows/block %d blocks %d  %7.2f us\n", gmode ? "clean" : "dirty", rpb, (K + rpb - 1) / rpb,
             timeit([&] { bandsum<4><<<(K + rpb - 1) / rpb, 1024, 0, st>>>(x, ws, rpb); }, st));
    printf("%-6s band16 rows/block 16 blocks 256  %7.2f us\n", gmode ? "clean" : "dirty", timeit([&] { bandsum<4><<<256, 1024, 0, st>>>(x, ws, 16); }, st));
    run_cols<2, 1, 4>(x, ws, 8, st);   // 256 B strips: 64 tiles x 8 splits
    run_cols<2, 1, 4>(x, ws, 16, st);
    run_cols<4, 1, 4>(x, ws, 8, st);   // 512 B, 32 tiles
    run_cols<4, 1, 4>(x, ws, 4, st);
    run_cols<4, 2, 4>(x, ws, 16, st);  // 1 KB
    run_cols<4, 2, 4>(x, ws, 8, st);
    run_cols<4, 4, 4>(x, ws, 32, st);  // 2 KB, 8 tiles
    run_cols<4, 4, 4>(x, ws, 16, st);
    run_cols<4, 8, 4>(x, ws, 32, st);  // 4 KB
    run_cols<4, 16, 4>(x, ws, 64, st); // 8 KB
    run_cols<4, 16, 4>(x, ws, 128, st);
    run_cols<1, 1, 8>(x, ws, 8, st);   // 128 B strips
  }
  return 0;
}
