// Probe (session 17): what does a row-wide statistic cost when a row is spread over the whole GPU? The norm rows
// that stay above the line (layer norm [64,1048576], group norm g8, KernelBench layer norm: rows of 2-16 MB) run
// mode 6 (Note [Norm parts]) at 187-191 us against a 126 us copy of the same bytes; its profile blamed barriers,
// fences and load latency. Here the least such a kernel must do, with nothing else: f32 [64, 1048576], each row
// split in equal static parts over a cooperative grid (block b always takes part b; no tickets), each thread holding
// VPT 16-byte vectors of a row in registers. Per row: sum the part, publish it (one atomicAdd of the block's sum,
// then one arrival on the row's counter), wait until every block has arrived, subtract the row's mean, store.
// D rows ahead: row r + D is summed and published, and row r + D + 1's loads issued, before the block waits on row
// r, so loads stay in flight through the waits. PAD 32 puts each row's counter and sum in a line of their own;
// SLEEP spaces the polls by __nanosleep. Outputs are checked against a host reference. Not part of the library.
// Build and run on the GPU machine:
//   nvcc -O3 -arch=sm_90 -o row_sync_probe row_sync_probe.cu && ./row_sync_probe
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "probe_timing.cuh"

constexpr int ROWS = 64;
constexpr long long COLS = 1 << 20;         // floats a row (4 MB)
constexpr long long V4 = COLS / 4;          // float4 a row

__device__ __forceinline__ float block_sum(float v, float* red) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, nw = blockDim.x / 32;
  if (lane == 0) red[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < nw ? red[lane] : 0.f;
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  }
  return v;  // valid in thread 0
}

__device__ __forceinline__ unsigned load_acquire(const unsigned* p) {
  unsigned v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

template <int VPT, int D, int PAD = 1, int SLEEP = 0>
__global__ void __launch_bounds__(256, 8 / VPT) row_sync(const float4* __restrict__ in, float4* __restrict__ out,
                                                float* __restrict__ sums, unsigned* __restrict__ counts) {
  __shared__ float red[32];
  __shared__ float mean_s;
  const long long part = (long long)blockIdx.x * blockDim.x * VPT;  // this block's first float4 of a row
  float4 buf[D + 1][VPT];
  const auto load = [&](int r, float4* b) {
    if (r >= ROWS) return;
    const float4* p = in + r * V4 + part + threadIdx.x;
#pragma unroll
    for (int v = 0; v < VPT; ++v) b[v] = p[v * blockDim.x];
  };
  const auto publish = [&](int r, const float4* b) {
    if (r >= ROWS) return;
    float s = 0.f;
#pragma unroll
    for (int v = 0; v < VPT; ++v) s += (b[v].x + b[v].y) + (b[v].z + b[v].w);
    s = block_sum(s, red);
    if (threadIdx.x == 0) {
      atomicAdd(sums + r * PAD, s);
      __threadfence();
      atomicAdd(counts + r * PAD, 1u);
    }
    __syncthreads();  // red is reused by the next sum
  };
  // Prologue: rows 0 .. D loaded, rows 0 .. D - 1 published.
#pragma unroll
  for (int j = 0; j <= D; ++j) load(j, buf[j]);
#pragma unroll
  for (int j = 0; j < D; ++j) publish(j, buf[j]);
  for (int r0 = 0; r0 < ROWS; r0 += D + 1) {
#pragma unroll
    for (int j = 0; j <= D; ++j) {
      const int r = r0 + j;
      if (r >= ROWS) break;
      publish(r + D, buf[(j + D) % (D + 1)]);  // loaded one step ago
      if (threadIdx.x == 0) {
        while (load_acquire(counts + r * PAD) < gridDim.x) {
          if (SLEEP > 0) __nanosleep(SLEEP);
        }
        mean_s = *(volatile float*)(sums + r * PAD) / (float)COLS;
      }
      __syncthreads();
      const float m = mean_s;
      float4* o = out + r * V4 + part + threadIdx.x;
#pragma unroll
      for (int v = 0; v < VPT; ++v)
        o[v * blockDim.x] = make_float4(buf[j][v].x - m, buf[j][v].y - m, buf[j][v].z - m, buf[j][v].w - m);
      load(r + D + 1, buf[j]);
      __syncthreads();  // mean_s is rewritten by the next row
    }
  }
}

template <int VPT, int D, int PAD = 1, int SLEEP = 0>
void run(const char* name, float4* in, float4* out, float* sums, unsigned* counts, float4* flush, float* sink,
         long long flush_n, const std::vector<float>& host_in) {
  const int block = 256;
  const int grid = (int)(V4 / (block * VPT));
  int per_sm = 0, sms = 0;
  CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, row_sync<VPT, D, PAD, SLEEP>, block, 0));
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  if (per_sm * sms < grid) {
    std::printf("%-34s grid %d > %d resident: skipped\n", name, grid, per_sm * sms);
    return;
  }
  const double us = median_us(
      flush, sink, flush_n,
      [&] {
        CK(cudaMemsetAsync(sums, 0, ROWS * 32 * sizeof(float)));
        CK(cudaMemsetAsync(counts, 0, ROWS * 32 * sizeof(unsigned)));
      },
      [&] {
        void* args[] = {&in, &out, &sums, &counts};
        CK(cudaLaunchCooperativeKernel((void*)row_sync<VPT, D, PAD, SLEEP>, grid, block, args, 0, 0));
      });
  // Check two rows against the host.
  double worst = 0;
  std::vector<float> row(COLS);
  for (int r : {0, ROWS - 1}) {
    CK(cudaMemcpy(row.data(), reinterpret_cast<float*>(out) + r * COLS, COLS * sizeof(float), cudaMemcpyDeviceToHost));
    double mean = 0;
    for (long long i = 0; i < COLS; ++i) mean += host_in[r * COLS + i];
    mean /= COLS;
    for (long long i = 0; i < COLS; ++i) worst = std::max(worst, std::fabs(row[i] - (host_in[r * COLS + i] - mean)));
  }
  std::printf("%-34s grid %4d x %d, %d an SM: %7.1f us (max |error| %.2e)\n", name, grid, block, per_sm,
              us, worst);
}

int main() {
  const long long n4 = ROWS * V4;
  const long long flush_n = (256ll << 20) / 16;
  float4 *in, *out, *flush;
  float *sums, *sink;
  unsigned* counts;
  CK(cudaMalloc(&in, n4 * 16));
  CK(cudaMalloc(&out, n4 * 16));
  CK(cudaMalloc(&flush, flush_n * 16));
  CK(cudaMalloc(&sums, ROWS * 32 * sizeof(float)));
  CK(cudaMalloc(&sink, sizeof(float)));
  CK(cudaMalloc(&counts, ROWS * 32 * sizeof(unsigned)));
  CK(cudaMemset(flush, 0, flush_n * 16));
  std::vector<float> host(n4 * 4);
  for (long long i = 0; i < n4 * 4; ++i) host[i] = (float)((i * 2654435761ull) % 1000) / 1000.f + (i / COLS);
  CK(cudaMemcpy(in, host.data(), n4 * 16, cudaMemcpyHostToDevice));
  std::printf("%-34s %7.1f us\n", "copy 256 MB -> 256 MB",
              median_us(flush, sink, flush_n, [] {}, [&] { copy_kernel<<<264 * 4, 512>>>(in, out, n4); }));
  run<4, 0>("row_sync VPT 4, 0 rows ahead", in, out, sums, counts, flush, sink, flush_n, host);
  run<4, 1>("row_sync VPT 4, 1 row ahead", in, out, sums, counts, flush, sink, flush_n, host);
  run<4, 2>("row_sync VPT 4, 2 rows ahead", in, out, sums, counts, flush, sink, flush_n, host);
  run<4, 3>("row_sync VPT 4, 3 rows ahead", in, out, sums, counts, flush, sink, flush_n, host);
  run<2, 1>("row_sync VPT 2, 1 row ahead", in, out, sums, counts, flush, sink, flush_n, host);
  run<2, 3>("row_sync VPT 2, 3 rows ahead", in, out, sums, counts, flush, sink, flush_n, host);
  run<2, 2>("row_sync VPT 2, 2 rows ahead", in, out, sums, counts, flush, sink, flush_n, host);
  run<1, 1>("row_sync VPT 1, 1 row ahead", in, out, sums, counts, flush, sink, flush_n, host);
  // The row's counter and sum alone in a 128-byte line (PAD 32), and polls spaced by __nanosleep.
  run<4, 3, 32>("  + own line", in, out, sums, counts, flush, sink, flush_n, host);
  run<4, 3, 32, 100>("  + own line, sleep 100 ns", in, out, sums, counts, flush, sink, flush_n, host);
  run<4, 3, 32, 500>("  + own line, sleep 500 ns", in, out, sums, counts, flush, sink, flush_n, host);
  run<2, 3, 32>("VPT 2, 3 ahead, own line", in, out, sums, counts, flush, sink, flush_n, host);
  run<2, 3, 32, 200>("VPT 2, 3 ahead, own line, sleep 200", in, out, sums, counts, flush, sink, flush_n, host);
  std::printf("done\n");
  return 0;
}
