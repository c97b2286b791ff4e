// Probe (session 22): log_softmax bf16 [32,32000,64] dim 1 (32 dense slabs of 32000 x 64, column statistics) by
// "waves" that read each slab twice, the second time from L2, with many warps and no data held on chip: after
// the grid slabs (Note [Softmax grid slabs], commit e44019f: 160 us, 10 warps an SM, ~27 instructions an element)
// and against the kept pair tile (102 us) and a copy of the same bytes (~62.5 us). Not part of the library.
// A slab is cut into P parts of R = ceil(32000 / P) rows (R x 128 bytes); items (slab, part) go to the blocks of a
// cooperative grid in rounds (the grid a multiple of P, so a slab's parts share a round). Per item: pass A reads
// the part (16-byte loads, U rows a batch in flight), each thread folding online (max, sum) pairs of its 8 columns
// (the batch maximum on packed bf16x2, one rescale a batch, exp by ex2.approx of an FFMA); lanes and warps merge,
// the block publishes its 64 pairs and counts itself on the slab's counter, waits until the slab's P parts have
// arrived, merges the P pairs in part order and re-reads the part (hoping for L2) to write (x - max) - log(sum),
// packed by cvt.rn.bf16x2, with evict-first stores. Random normal input: no -Inf/NaN handling (a probe).
// Checked against a naive kernel (a thread a column, three passes, expf/logf): max |difference| is printed.
// Measured (H200, 2026-12-01, docs/PERF.md session 22, runs 6-8): 113.9 us at best (T 128, P 32), the wait
// costing ~1-8 us: not under the kept 102 us.
// Session 23 added `pipe` (below): rounds of S slabs, a part read ahead of the re-read, the last block to arrive
// merging a slab's pairs. Measured (H200, 2026-12-01, docs/PERF.md session 23, runs 2-4): 108-760 us, slower the
// more rounds (~17-47 us a round whatever its bytes), so not a way under 102 us either.
// Build and run on the GPU machine: nvcc -O3 -arch=sm_90 [-DSTAGED=0] [-DPIPE_ONLY [-DPIPE_ONE]] [-DPIPE_NOWAIT=1]
// [-DPIPE_NOMERGE=1] -o column_wave_probe column_wave_probe.cu && ./column_wave_probe
#include "column_probe.cuh"
#include "probe_timing.cuh"

#ifndef NOWAIT
#define NOWAIT 0  // 1: no wait for the slab's other parts (timing only: the statistics are then wrong; run 8)
#endif
#ifndef PIPE_NOWAIT
#define PIPE_NOWAIT 0  // pipe: 1 = no wait on the slab's flag (timing only)
#endif
#ifndef PIPE_NOMERGE
#define PIPE_NOMERGE 0  // pipe: 1 = the last block raises the flag without merging (timing only)
#endif
#ifndef STAGED
#define STAGED 1  // the slab's pairs staged in shared memory before the merge (run 7); 0: each read as merged (run 6)
#endif

__device__ __forceinline__ void st_cs(uint4* p, uint4 v) {
  asm volatile("st.global.cs.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w)
               : "memory");
}

/// Pass A of a part: rows [r0, r1) of slab x folded into per-column online (max, sum) pairs, merged over lanes and
/// then warps in warp order, and the part's 64 pairs stored at `dst` (each with a fence) before a block barrier.
template <int T, int U>
__device__ __forceinline__ void fold_part(const uint4* __restrict__ x, int r0, int r1, float2 (*red)[INNER],
                                          float2* dst) {
  constexpr int W = T / 32, RPB = T / 8;
  const int g = threadIdx.x % 8, lane = threadIdx.x % 32, w = threadIdx.x / 32;
  float m[8], s[8];
#pragma unroll
  for (int e = 0; e < 8; ++e) {
    m[e] = -INFINITY;
    s[e] = 0.f;
  }
  for (int r = r0 + threadIdx.x / 8; r < r1; r += U * RPB) {
    uint4 v[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int ru = r + u * RPB;
      v[u] = ru < r1 ? __ldcg(x + ru * 8 + g) : make_uint4(0xff80ff80u, 0xff80ff80u, 0xff80ff80u, 0xff80ff80u);
    }
    uint4 bm = v[0];
#pragma unroll
    for (int u = 1; u < U; ++u) {
      bm.x = max2(bm.x, v[u].x);
      bm.y = max2(bm.y, v[u].y);
      bm.z = max2(bm.z, v[u].z);
      bm.w = max2(bm.w, v[u].w);
    }
    const unsigned bw[4] = {bm.x, bm.y, bm.z, bm.w};
    float ml[8];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const float b[2] = {lo_f(bw[i]), hi_f(bw[i])};
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int e = 2 * i + h;
        if (b[h] > m[e]) {
          s[e] *= ex2((m[e] - b[h]) * L2E);
          m[e] = b[h];
        }
        ml[e] = m[e] * L2E;
      }
    }
    add_exp<U>(v, ml, s);
  }
#pragma unroll
  for (int o = 8; o < 32; o <<= 1)
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      const float m2 = __shfl_xor_sync(~0u, m[e], o), s2 = __shfl_xor_sync(~0u, s[e], o);
      merge(m[e], s[e], m2, s2);
    }
  if (lane < 8)
#pragma unroll
    for (int e = 0; e < 8; ++e) red[w][lane * 8 + e] = make_float2(m[e], s[e]);
  __syncthreads();
  if (threadIdx.x < INNER) {
    float2 a = red[0][threadIdx.x];
    for (int i = 1; i < W; ++i) merge(a.x, a.y, red[i][threadIdx.x].x, red[i][threadIdx.x].y);
    dst[threadIdx.x] = a;
    __threadfence();
  }
  __syncthreads();
}

/// ws: OUTER x P x 64 float2 pairs, then OUTER counters (zeroed before the launch).
template <int T, int P, int U>
__global__ void __launch_bounds__(T) wave(const uint4* __restrict__ in, uint4* __restrict__ out, float2* ws,
                                          unsigned* counters) {
  constexpr int R = (NROWS + P - 1) / P, W = T / 32, RPB = T / 8;  // rows a part, warps, rows a block step
  __shared__ float2 red[W][INNER];
  __shared__ float2 fin[INNER];  // (max, max + log sum) of the slab's columns
#if STAGED
  __shared__ float2 parts[P * INNER];
#endif
  const int g = threadIdx.x % 8;
  const int items = OUTER * P;
  for (int item = blockIdx.x; item < items; item += gridDim.x) {
    const int slab = item / P, part = item % P;
    const int r0 = part * R, r1 = min(NROWS, r0 + R);
    const uint4* x = in + (long long)slab * NROWS * 8;
    fold_part<T, U>(x, r0, r1, red, ws + ((long long)slab * P + part) * INNER);
    if (threadIdx.x == 0) {
      atomicAdd(counters + slab, 1u);
#if !NOWAIT
      while (*(volatile unsigned*)(counters + slab) < (unsigned)P) __nanosleep(64);
#endif
      __threadfence();
    }
    __syncthreads();
#if STAGED
    // Every thread copies the slab's P x 64 pairs into shared memory (loads in flight together), then 64 threads
    // merge them from there in part order.
    for (int i = threadIdx.x; i < P * INNER; i += T) parts[i] = __ldcg(ws + (long long)slab * P * INNER + i);
    __syncthreads();
    if (threadIdx.x < INNER) {
      float2 a = parts[threadIdx.x];
      for (int i = 1; i < P; ++i) merge(a.x, a.y, parts[i * INNER + threadIdx.x].x, parts[i * INNER + threadIdx.x].y);
      fin[threadIdx.x] = make_float2(a.x, a.x + logf(a.y));
    }
#else
    if (threadIdx.x < INNER) {
      const float2* p = ws + (long long)slab * P * INNER + threadIdx.x;
      float2 a = __ldcg(p);
      for (int i = 1; i < P; ++i) {
        const float2 b = __ldcg(p + i * INNER);
        merge(a.x, a.y, b.x, b.y);
      }
      fin[threadIdx.x] = make_float2(a.x, a.x + logf(a.y));
    }
#endif
    __syncthreads();
    float sub[8];
#pragma unroll
    for (int e = 0; e < 8; ++e) sub[e] = fin[g * 8 + e].y;
    uint4* y = out + (long long)slab * NROWS * 8;
    for (int r = r0 + threadIdx.x / 8; r < r1; r += RPB) {
      const uint4 v = __ldcg(x + r * 8 + g);
      const unsigned vw[4] = {v.x, v.y, v.z, v.w};
      unsigned o[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) o[i] = pack2(lo_f(vw[i]) - sub[2 * i], hi_f(vw[i]) - sub[2 * i + 1]);
      st_cs(y + r * 8 + g, make_uint4(o[0], o[1], o[2], o[3]));
    }
    __syncthreads();  // fin and red are rewritten by the next item
  }
}

/// Session 23: the waves above ran every slab at once (8 blocks an SM x 132 SMs >= 32 slabs x P parts), so the
/// whole input was read before any re-read and the re-reads missed L2. Here a round holds S slabs (S x P blocks,
/// G = the grid), rounds follow each other, and a block reads its part of round k before it re-reads and writes
/// its part of round k - 1 (a part ahead), so at most ~3 rounds (3 x S x 4 MB) are live in L2. The block that
/// arrives last on a slab's counter merges its P x 64 pairs in part order (T / 64 threads a column, each over a
/// run of parts, then those runs in order) and raises the slab's flag; the other blocks wait on the flag only when
/// they come to re-read, a round later.
/// ws: OUTER x P x 64 pairs, then OUTER x 64 finals (max, max + log sum); counters: OUTER arrivals, OUTER flags.
template <int T, int S, int P, int U, int NB>
__global__ void __launch_bounds__(T, NB) pipe(const uint4* __restrict__ in, uint4* __restrict__ out, float2* ws,
                                          unsigned* counters) {
  constexpr int R = (NROWS + P - 1) / P, W = T / 32, RPB = T / 8, NR = OUTER / S, C = T / INNER;
  static_assert(OUTER % S == 0 && T % INNER == 0, "rounds of whole slabs; whole columns a merge");
  __shared__ float2 red[W > C ? W : C][INNER];
  __shared__ int last;
  float2* const fin = ws + (long long)OUTER * P * INNER;
  unsigned* const flags = counters + OUTER;
  const int g = threadIdx.x % 8;
  const int part = blockIdx.x % P, r0 = part * R, r1 = min(NROWS, r0 + R);
  for (int k = 0; k <= NR; ++k) {
    if (k < NR) {  // pass A of round k
      const int slab = k * S + blockIdx.x / P;
      const uint4* x = in + (long long)slab * NROWS * 8;
      fold_part<T, U>(x, r0, r1, red, ws + ((long long)slab * P + part) * INNER);
      if (threadIdx.x == 0) {
        last = atomicAdd(counters + slab, 1u) == (unsigned)(P - 1);
        __threadfence();
      }
      __syncthreads();
      if (last && !PIPE_NOMERGE) {  // this block merges the slab's P parts, in part order
        const int c = threadIdx.x % INNER, j = threadIdx.x / INNER;
        constexpr int PC = (P + C - 1) / C;
        const float2* p = ws + (long long)slab * P * INNER + c;
        float2 a = make_float2(-INFINITY, 0.f);
#pragma unroll 8
        for (int i = j * PC; i < min(P, (j + 1) * PC); ++i) {
          const float2 b = __ldcg(p + (long long)i * INNER);
          merge(a.x, a.y, b.x, b.y);
        }
        red[j][c] = a;
        __syncthreads();
        if (threadIdx.x < INNER) {
          float2 f = red[0][threadIdx.x];
          for (int i = 1; i < C; ++i) merge(f.x, f.y, red[i][threadIdx.x].x, red[i][threadIdx.x].y);
          fin[(long long)slab * INNER + threadIdx.x] = make_float2(f.x, f.x + logf(f.y));
          __threadfence();
        }
      }
      if (last) {  // the finals are written (a fence each) before the flag rises
        __syncthreads();
        if (threadIdx.x == 0) atomicExch(flags + slab, 1u);
      }
    }
    if (k > 0) {  // pass B of round k - 1
      const int slab = (k - 1) * S + blockIdx.x / P;
      if (threadIdx.x == 0) {
        while (!PIPE_NOWAIT && *(volatile unsigned*)(flags + slab) == 0u) __nanosleep(64);
        __threadfence();
      }
      __syncthreads();
      float sub[8];
#pragma unroll
      for (int e = 0; e < 8; ++e) sub[e] = __ldcg(fin + (long long)slab * INNER + g * 8 + e).y;
      const uint4* x = in + (long long)slab * NROWS * 8;
      uint4* y = out + (long long)slab * NROWS * 8;
      for (int r = r0 + threadIdx.x / 8; r < r1; r += U * RPB) {
        uint4 v[U];
#pragma unroll
        for (int u = 0; u < U; ++u) {
          const int ru = r + u * RPB;
          if (ru < r1) v[u] = __ldcg(x + ru * 8 + g);
        }
#pragma unroll
        for (int u = 0; u < U; ++u) {
          const int ru = r + u * RPB;
          if (ru < r1) {
            const unsigned vw[4] = {v[u].x, v[u].y, v[u].z, v[u].w};
            unsigned o[4];
#pragma unroll
            for (int i = 0; i < 4; ++i) o[i] = pack2(lo_f(vw[i]) - sub[2 * i], hi_f(vw[i]) - sub[2 * i + 1]);
            st_cs(y + ru * 8 + g, make_uint4(o[0], o[1], o[2], o[3]));
          }
        }
      }
    }
    __syncthreads();  // red and last are rewritten by the next round
  }
}

template <int T, int P, int U>
void run(const uint4* in, uint4* out, const __nv_bfloat16* ref, float2* ws, unsigned* counters, float* d,
         float4* flush, float* sink, long long flush_n) {
  auto kern = wave<T, P, U>;
  int per_sm = 0, sms = 0;
  CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kern, T, 0));
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const int grid = std::min(OUTER * P, per_sm * sms / P * P);
  void* args[] = {(void*)&in, (void*)&out, (void*)&ws, (void*)&counters};
  auto launch = [&] {
    CK(cudaMemsetAsync(counters, 0, OUTER * sizeof(unsigned)));
    CK(cudaLaunchCooperativeKernel((void*)kern, grid, T, args, 0, 0));
  };
  CK(cudaMemset(out, 0, ELEMS * 2));
  launch();
  CK(cudaMemset(d, 0, 4));
  max_diff<<<1024, 256>>>(reinterpret_cast<const __nv_bfloat16*>(out), ref, ELEMS, d);
  float h = -1.f;
  CK(cudaMemcpy(&h, d, 4, cudaMemcpyDeviceToHost));
  const double us = median_us(flush, sink, flush_n, [] {}, launch);
  std::printf("wave T=%4d P=%3d U=%d: %3d blocks (%d an SM), %7.1f us, max |diff| %.4f\n", T, P, U, grid, per_sm, us,
              h);
}

template <int T, int S, int P, int U, int NB>
void run_pipe(const uint4* in, uint4* out, const __nv_bfloat16* ref, float2* ws, unsigned* counters, float* d,
              float4* flush, float* sink, long long flush_n) {
  auto kern = pipe<T, S, P, U, NB>;
  int per_sm = 0, sms = 0;
  CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kern, T, 0));
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const int grid = S * P;
  if (grid > per_sm * sms) {
    std::printf("pipe T=%4d S=%d P=%3d U=%d: %d blocks do not fit (%d an SM)\n", T, S, P, U, grid, per_sm);
    return;
  }
  void* args[] = {(void*)&in, (void*)&out, (void*)&ws, (void*)&counters};
  auto zero = [&] { CK(cudaMemsetAsync(counters, 0, 2 * OUTER * sizeof(unsigned))); };
  auto launch = [&] { CK(cudaLaunchCooperativeKernel((void*)kern, grid, T, args, 0, 0)); };
  CK(cudaMemset(out, 0, ELEMS * 2));
  zero();
  launch();
  CK(cudaMemset(d, 0, 4));
  max_diff<<<1024, 256>>>(reinterpret_cast<const __nv_bfloat16*>(out), ref, ELEMS, d);
  float h = -1.f;
  CK(cudaMemcpy(&h, d, 4, cudaMemcpyDeviceToHost));
  const double us = median_us(flush, sink, flush_n, zero, launch);
  std::printf("pipe T=%4d S=%d P=%3d U=%d: %4d blocks (%d an SM), %7.1f us, max |diff| %.4f\n", T, S, P, U, grid,
              per_sm, us, h);
}

int main() {
  ColumnBuffers b;
  float2* ws;
  unsigned* counters;
  CK(cudaMalloc(&ws, OUTER * (528 + 1) * INNER * sizeof(float2)));
  CK(cudaMalloc(&counters, 2 * OUTER * sizeof(unsigned)));
  const uint4* i4 = reinterpret_cast<const uint4*>(b.in);
  uint4* o4 = reinterpret_cast<uint4*>(b.out);
#ifndef PIPE_ONLY
  run<256, 16, 4>(i4, o4, b.ref, ws, counters, b.d, b.flush, b.sink, b.kFlushN);
  run<256, 32, 4>(i4, o4, b.ref, ws, counters, b.d, b.flush, b.sink, b.kFlushN);
  run<256, 64, 4>(i4, o4, b.ref, ws, counters, b.d, b.flush, b.sink, b.kFlushN);
  run<128, 16, 4>(i4, o4, b.ref, ws, counters, b.d, b.flush, b.sink, b.kFlushN);
  run<128, 32, 4>(i4, o4, b.ref, ws, counters, b.d, b.flush, b.sink, b.kFlushN);
  run<256, 32, 2>(i4, o4, b.ref, ws, counters, b.d, b.flush, b.sink, b.kFlushN);
  run<256, 32, 8>(i4, o4, b.ref, ws, counters, b.d, b.flush, b.sink, b.kFlushN);
  run<512, 16, 4>(i4, o4, b.ref, ws, counters, b.d, b.flush, b.sink, b.kFlushN);
  run<512, 32, 4>(i4, o4, b.ref, ws, counters, b.d, b.flush, b.sink, b.kFlushN);
#endif
#ifndef PIPE_ONE
  run_pipe<256, 8, 66, 4, 4>(i4, o4, b.ref, ws, counters, b.d, b.flush, b.sink, b.kFlushN);
  run_pipe<256, 16, 33, 4, 4>(i4, o4, b.ref, ws, counters, b.d, b.flush, b.sink, b.kFlushN);
  run_pipe<256, 32, 16, 4, 4>(i4, o4, b.ref, ws, counters, b.d, b.flush, b.sink, b.kFlushN);
  run_pipe<512, 4, 66, 4, 2>(i4, o4, b.ref, ws, counters, b.d, b.flush, b.sink, b.kFlushN);
#endif
  run_pipe<1024, 2, 66, 4, 1>(i4, o4, b.ref, ws, counters, b.d, b.flush, b.sink, b.kFlushN);
  return 0;
}
