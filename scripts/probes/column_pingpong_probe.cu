// Probe (session 25): log_softmax bf16 [32,32000,64] dim 1 by persistent thread-block clusters whose threads hold a
// column tile's slice in registers, and overlap the next tile's loads with the current tile's stores by reusing each
// register as soon as its output is stored. After Note [Norm held] (norm rows of 2 MB held in registers over
// clusters of 16: 1.09-1.19x the copy) and session 22's grid slabs (latency-bound on ~27 instructions an element):
// no producer warp, no ring, no shared-memory data path; ~7 instructions an element.
// A tile is TC adjacent columns of one outer index over all 32000 rows (TC = 16: 1 MB; 32: 2 MB); a cluster of CL
// blocks takes tiles cid, cid + clusters, ...; block rank r holds rows [r RB, (r + 1) RB) of the tile, a thread 16-byte
// vectors of 8 columns (LPR = TC / 8 lanes a row, NV vectors a thread). Per tile: packed bf16x2 maxima (max.NaN), the
// block's column maxima (warp shuffles, then a thread a column over the warps), the sum of exp(x - max) by ex2.approx
// of an FFMA (as Note [Softmax fast exp]), the block's sums in warp order, (max, sum) pairs published in shared memory
// (two slots by tile parity), one cluster barrier, a thread a column merges the CL ranks' pairs in rank order through
// distributed shared memory (every block the same bits) into max + log(sum); then for each vector: its output stored
// (st.global.cs) and the register reloaded with the next tile (ld.global.nc). Random normal input; checked against a
// naive kernel (a thread a column, exact expf/logf): max |difference| printed. Not part of the library.
// Measured (H200, 2026-12-02, docs/PERF.md session 25, runs 1-2; copy of the same bytes 65.4-65.6 us, the kept pair
// tile 102 us): 125.6-148.2 us, every output within one bf16 ulp; the data path alone (DIAG 2) 102.1-115.1 us, and as
// plain copies 89.8-98.4 us for 64-byte pieces of each row, 105-110 us for 32-byte pieces, 77.7-92.6 us for whole
// rows. A thread's 16 vectors an SM's only loads in flight (one block an SM) do not keep HBM busy, and a 2 MB tile
// reads half rows: the data path alone is slower than the kept kernel. Not built.
// Build and run on the GPU machine: nvcc -O3 -std=c++17 -arch=sm_90a -o column_pingpong_probe column_pingpong_probe.cu
#include "probe_timing.cuh"
#include "column_probe.cuh"

__device__ __forceinline__ unsigned max2n(unsigned a, unsigned b) {
  unsigned d;
  asm("max.NaN.bf16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
  return d;
}
__device__ __forceinline__ uint4 ld_nc(const void* p) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}
__device__ __forceinline__ void st_cs(void* p, uint4 v) {
  asm volatile("st.global.cs.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w)
               : "memory");
}
__device__ __forceinline__ unsigned cluster_rank() {
  unsigned r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return r;
}
__device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;" ::: "memory");
}
__device__ __forceinline__ float2 ld_rank(const float2* p, unsigned rank) {
  unsigned a;
  float2 v;
  const unsigned local = static_cast<unsigned>(__cvta_generic_to_shared(p));
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(a) : "r"(local), "r"(rank));
  asm volatile("ld.shared::cluster.v2.f32 {%0, %1}, [%2];" : "=f"(v.x), "=f"(v.y) : "r"(a) : "memory");
  return v;
}

/// DIAG 0: the kernel; 1: no cluster exchange (each block's own statistics: what the barrier costs; wrong outputs);
/// 2: no statistics or exchange either (the data path alone; wrong outputs).
template <int CL, int TC, int T, int BPS, int DIAG>
__global__ void __launch_bounds__(T, BPS) pp(const __nv_bfloat16* __restrict__ in, __nv_bfloat16* __restrict__ out) {
  constexpr int LPR = TC / 8, RPV = T / LPR, RB = (NROWS + CL - 1) / CL, NV = (RB + RPV - 1) / RPV, W = T / 32;
  constexpr int QT = INNER / TC, NT = OUTER * QT;
  constexpr unsigned NEG = 0xff80ff80u;  // two bf16 -Inf: rows past the slice add nothing
  __shared__ float red[W][TC];
  __shared__ float bmax[TC];
  __shared__ float2 pub[2][TC];
  __shared__ __align__(16) float fin[TC];
  const int tid = threadIdx.x, lane = tid & 31, w = tid >> 5, sub = tid % LPR, rr = tid / LPR;
  const unsigned rank = cluster_rank();
  const int cid = blockIdx.x / CL, ncl = gridDim.x / CL;
  static_assert(NROWS % CL == 0, "every rank the same rows");
  constexpr int rows = RB;
  const int row0 = (int)rank * RB;
  auto at = [&](int t, int i) -> long long {
    const int o = t / QT, q = t % QT;
    return ((long long)o * NROWS + row0 + i * RPV + rr) * INNER + q * TC + sub * 8;
  };
  uint4 v[NV];
  int t = cid;
  if (t < NT) {
#pragma unroll
    for (int i = 0; i < NV; ++i)
      v[i] = i * RPV + rr < rows ? ld_nc(in + at(t, i)) : make_uint4(NEG, NEG, NEG, NEG);
  }
  for (int it = 0; t < NT; t += ncl, ++it) {
    float f[8];
    if (DIAG < 2) {
      unsigned pm[4] = {NEG, NEG, NEG, NEG};
#pragma unroll
      for (int i = 0; i < NV; ++i) {
        pm[0] = max2n(pm[0], v[i].x);
        pm[1] = max2n(pm[1], v[i].y);
        pm[2] = max2n(pm[2], v[i].z);
        pm[3] = max2n(pm[3], v[i].w);
      }
      float m[8];
#pragma unroll
      for (int k = 0; k < 4; ++k) m[2 * k] = lo_f(pm[k]), m[2 * k + 1] = hi_f(pm[k]);
#pragma unroll
      for (int o = LPR; o < 32; o <<= 1)
#pragma unroll
        for (int c = 0; c < 8; ++c) {
          const float y = __shfl_xor_sync(~0u, m[c], o);
          m[c] = (m[c] != m[c] || y != y) ? __int_as_float(0x7fc00000) : fmaxf(m[c], y);
        }
      if (lane < LPR) {
#pragma unroll
        for (int c = 0; c < 8; ++c) red[w][sub * 8 + c] = m[c];
      }
      __syncthreads();
      if (tid < TC) {
        float x = red[0][tid];
        for (int j = 1; j < W; ++j) x = (x != x || red[j][tid] != red[j][tid]) ? __int_as_float(0x7fc00000)
                                                                              : fmaxf(x, red[j][tid]);
        bmax[tid] = x;
      }
      __syncthreads();
      float mb[8], s[8];
#pragma unroll
      for (int c = 0; c < 8; ++c) {
        const float x = bmax[sub * 8 + c];
        mb[c] = x == -INFINITY ? 0.f : x * L2E;  // an all -Inf slice sums ex2(-Inf) = 0
        s[c] = 0.f;
      }
      add_exp<NV, true>(v, mb, s);
#pragma unroll
      for (int o = LPR; o < 32; o <<= 1)
#pragma unroll
        for (int c = 0; c < 8; ++c) s[c] += __shfl_xor_sync(~0u, s[c], o);
      if (lane < LPR) {
#pragma unroll
        for (int c = 0; c < 8; ++c) red[w][sub * 8 + c] = s[c];
      }
      __syncthreads();
      if (tid < TC) {
        float x = 0.f;
        for (int j = 0; j < W; ++j) x += red[j][tid];
        pub[it & 1][tid] = make_float2(bmax[tid], x);
      }
      if (DIAG == 0) {
        cluster_sync();
        if (tid < TC) {
          float mm = -INFINITY, ss = 0.f;
#pragma unroll
          for (int k0 = 0; k0 < CL; k0 += 4) {  // 4 remote loads in flight: v stays in registers meanwhile
            float2 r[4];
#pragma unroll
            for (int k = 0; k < 4; ++k) r[k] = ld_rank(&pub[it & 1][tid], k0 + k);
#pragma unroll
            for (int k = 0; k < 4; ++k) merge(mm, ss, r[k].x, r[k].y);
          }
          fin[tid] = mm + logf(ss);
        }
      } else if (tid < TC) {
        fin[tid] = pub[it & 1][tid].x + logf(pub[it & 1][tid].y);
      }
      __syncthreads();
      const float4* fin4 = reinterpret_cast<const float4*>(fin);
      const float4 f0 = fin4[sub * 2], f1 = fin4[sub * 2 + 1];
      f[0] = f0.x, f[1] = f0.y, f[2] = f0.z, f[3] = f0.w, f[4] = f1.x, f[5] = f1.y, f[6] = f1.z, f[7] = f1.w;
    } else {
#pragma unroll
      for (int c = 0; c < 8; ++c) f[c] = 10.f;
    }
    const int tn = t + ncl;
#pragma unroll
    for (int i = 0; i < NV; ++i) {
      if (i * RPV + rr < rows) {
        const unsigned q[4] = {v[i].x, v[i].y, v[i].z, v[i].w};
        uint4 o;
        o.x = pack2(lo_f(q[0]) - f[0], hi_f(q[0]) - f[1]);
        o.y = pack2(lo_f(q[1]) - f[2], hi_f(q[1]) - f[3]);
        o.z = pack2(lo_f(q[2]) - f[4], hi_f(q[2]) - f[5]);
        o.w = pack2(lo_f(q[3]) - f[6], hi_f(q[3]) - f[7]);
        st_cs(out + at(t, i), o);
        if (tn < NT) v[i] = ld_nc(in + at(tn, i));
      }
    }
  }
  if (DIAG == 0) cluster_sync();  // no block leaves while another may still read its pairs
}

/// The data path alone as a plain copy: items of NV x RPV rows of TC columns dealt over a persistent grid of `gridDim`
/// blocks; a thread's vectors are stored and reloaded with the next item one by one, as in pp. What the column
/// pieces' width (32, 64 or 128 bytes of each 128-byte row) and the cache hints cost.
template <int TC, int T, int NV, int HINT>
__global__ void __launch_bounds__(T, 1) copy_tiles(const __nv_bfloat16* __restrict__ in,
                                                   __nv_bfloat16* __restrict__ out) {
  constexpr int LPR = TC / 8, RPV = T / LPR, RI = NV * RPV, QT = INNER / TC, PI = (NROWS + RI - 1) / RI;
  constexpr int NI = OUTER * QT * PI;
  const int tid = threadIdx.x, sub = tid % LPR, rr = tid / LPR;
  auto row = [&](int t, int i) { return (t % PI) * RI + i * RPV + rr; };
  auto at = [&](int t, int i) -> long long {
    const int o = t / PI / QT, q = t / PI % QT;
    return ((long long)o * NROWS + row(t, i)) * INNER + q * TC + sub * 8;
  };
  uint4 v[NV];
  int t = blockIdx.x;
  if (t >= NI) return;
#pragma unroll
  for (int i = 0; i < NV; ++i)
    if (row(t, i) < NROWS) v[i] = HINT ? ld_nc(in + at(t, i)) : *reinterpret_cast<const uint4*>(in + at(t, i));
  for (; t < NI; t += gridDim.x) {
    const int tn = t + gridDim.x;
#pragma unroll
    for (int i = 0; i < NV; ++i) {
      if (row(t, i) < NROWS) {
        if (HINT) st_cs(out + at(t, i), v[i]);
        else *reinterpret_cast<uint4*>(out + at(t, i)) = v[i];
      }
      if (tn < NI && row(tn, i) < NROWS)
        v[i] = HINT ? ld_nc(in + at(tn, i)) : *reinterpret_cast<const uint4*>(in + at(tn, i));
    }
  }
}
template <int TC, int T, int NV, int HINT>
void run_copy(const __nv_bfloat16* in, __nv_bfloat16* out, int grid, float4* flush, float* sink, long long flush_n) {
  const double us = median_us(flush, sink, flush_n, [] {}, [&] { copy_tiles<TC, T, NV, HINT><<<grid, T>>>(in, out); });
  CK(cudaGetLastError());
  std::printf("copy_tiles TC=%2d T=%d NV=%2d HINT=%d grid %3d: %7.1f us\n", TC, T, NV, HINT, grid, us);
  std::fflush(stdout);
}

template <int CL, int TC, int T, int BPS, int DIAG = 0>
void run(const __nv_bfloat16* in, __nv_bfloat16* out, const __nv_bfloat16* ref, float* d, float4* flush, float* sink,
         long long flush_n) {
  auto kern = pp<CL, TC, T, BPS, DIAG>;
  cudaFuncAttributes fa;
  CK(cudaFuncGetAttributes(&fa, kern));
  CK(cudaMemset(out, 0xff, ELEMS * 2));
  int clusters = 0;
  const double us = cluster_median_us(flush, sink, flush_n, kern, CL, T, 0, OUTER * INNER / TC, &clusters, in, out);
  CK(cudaDeviceSynchronize());
  CK(cudaMemset(d, 0, 4));
  max_diff<<<1024, 256>>>(out, ref, ELEMS, d);
  float h = -1.f;
  CK(cudaMemcpy(&h, d, 4, cudaMemcpyDeviceToHost));
  std::printf("pp DIAG=%d CL=%2d TC=%2d T=%4d BPS=%d: %2d clusters, %3d regs, %4d B spill, %7.1f us, max |diff| %.4f\n",
              DIAG, CL, TC, T, BPS, clusters, fa.numRegs, (int)fa.localSizeBytes, us, h);
  std::fflush(stdout);
}

int main() {
  ColumnBuffers b;
  // Run 1 (session 25; copy 65.4 us): every output within one bf16 ulp (0.0625) of the naive kernel's.
  run<8, 16, 512, 1>(b.in, b.out, b.ref, b.d, b.flush, b.sink, b.kFlushN);    // 15 clusters: 148.2 us
  run<16, 32, 512, 1>(b.in, b.out, b.ref, b.d, b.flush, b.sink, b.kFlushN);   //  7 clusters: 125.6 us
  run<16, 16, 256, 2>(b.in, b.out, b.ref, b.d, b.flush, b.sink, b.kFlushN);   // 14 clusters: 131.4 us
  run<16, 16, 512, 2>(b.in, b.out, b.ref, b.d, b.flush, b.sink, b.kFlushN);   // 14 clusters: 137.9 us
  run<16, 32, 1024, 1>(b.in, b.out, b.ref, b.d, b.flush, b.sink, b.kFlushN);  //  7 clusters: 134.0 us
  run<8, 16, 512, 1, 1>(b.in, b.out, b.ref, b.d, b.flush, b.sink, b.kFlushN);    // no exchange: 133.2 us
  run<8, 16, 512, 1, 2>(b.in, b.out, b.ref, b.d, b.flush, b.sink, b.kFlushN);    // the data path alone: 109.8 us
  run<16, 16, 256, 2, 1>(b.in, b.out, b.ref, b.d, b.flush, b.sink, b.kFlushN);   // no exchange: 135.4 us
  run<16, 16, 256, 2, 2>(b.in, b.out, b.ref, b.d, b.flush, b.sink, b.kFlushN);   // the data path alone: 115.1 us
  // the data path alone, 102.1 us (run 2):
  run<16, 32, 512, 1, 2>(b.in, b.out, b.ref, b.d, b.flush, b.sink, b.kFlushN);
  // Run 2 (copy 65.6 us): the data path as plain copies, us at grids 120 / 132 / 264. Pieces of 32 bytes of each
  // row: 109.6 / 105.0 / 107.3 (hints), 187.0 / 175.1 / 189.4 (none); 64 bytes: 98.4 / 92.5 / 89.8; whole rows:
  // 92.6 / 86.1 / 82.1 (hints), 85.7 / 79.4 / 77.7 (none); whole rows, NV 8 at grid 264: 117.1; whole rows, 256
  // threads at grid 528: 73.8.
  for (int grid : {120, 132, 264}) {
    run_copy<16, 512, 16, 1>(b.in, b.out, grid, b.flush, b.sink, b.kFlushN);
    run_copy<32, 512, 16, 1>(b.in, b.out, grid, b.flush, b.sink, b.kFlushN);
    run_copy<64, 512, 16, 1>(b.in, b.out, grid, b.flush, b.sink, b.kFlushN);
    run_copy<16, 512, 16, 0>(b.in, b.out, grid, b.flush, b.sink, b.kFlushN);
    run_copy<64, 512, 16, 0>(b.in, b.out, grid, b.flush, b.sink, b.kFlushN);
  }
  run_copy<64, 512, 8, 0>(b.in, b.out, 264, b.flush, b.sink, b.kFlushN);
  run_copy<64, 256, 16, 0>(b.in, b.out, 528, b.flush, b.sink, b.kFlushN);
  return 0;
}
