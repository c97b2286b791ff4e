// Probe (session 24): log_softmax bf16 [32,32000,64] dim 1 (32 dense slabs of 32000 x 64, column statistics) with
// each slab's parts held in shared memory by the bulk copy engine, after the packed-pair stem (docs/PERF.md session
// 24): fewer, wider accesses and no data in registers across the wait. Against the kept pair tile (102 us) and a
// copy of the same bytes (~62.5 us). Not part of the library.
// A slab is cut into P parts of R = ceil(32000 / P) rows (R x 128 contiguous bytes). Items (slab, part) are dealt to
// the G blocks of a cooperative grid (one an SM): block b takes items b, b + G, ... Each block keeps NB shared slots;
// item t lands in slot t % NB by one bulk copy (cp.async.bulk, an mbarrier). Per item: each thread reads its rows'
// 16-byte vectors from the slot once into registers, folds its 8 columns' maximum (packed bf16x2) and then the sum
// of exp(x - max) (ex2.approx of an FFMA), lanes and warps merge, and the block publishes its 64 (max, sum) pairs and
// counts itself on the slab's counter. Then, one item behind, it waits for the previous item's slab to be complete,
// merges the slab's P pairs (every thread a run of parts, loaded at once; then the runs in order: every block the
// same bits),
// writes (x - max) - log(sum) in place in the slot (packed by cvt.rn.bf16x2) and stores the slot by one bulk copy;
// once that copy has read the slot, the slot takes item t - 1 + NB. So a load is always in flight and no block
// waits on a slab while it has nothing loading. Random normal input (no -Inf/NaN handling: a probe); checked
// against a naive kernel (a thread a column, three passes, expf/logf): max |difference| printed.
// Measured (H200, 2026-12-02, docs/PERF.md session 24, runs 3-7; copy kernel 65.3-65.7 us, the kept pair tile 102 us):
// `held` 158-392 us (run 3), 127-249 us with the parts' pairs loaded at once (run 4); `held2` (a producer warp, a lag)
// 125-240 us (run 5); `held3` (several blocks an SM, the last arriver merges) 130-280 us (run 6), 123.7 us with thread
// stores (run 7). Always ~7-10 us an item, more with more parts, whatever the lag, the blocks an SM or the store path:
// not under 102 us. Run 11 (held3, DIAG): without the wait for the slab 135.5 us (129.5 with it), without the
// statistics' arithmetic as well 71.1-74.9 us: the data path alone is near the copy, and the statistics pass (not the
// waits) adds ~55-60 us, unhidden behind the bulk copies. (Run 8's first diagnostic hung: its skip also skipped the
// slot's release.)
// Only the last version, held3, is kept here (runs 6, 7 and 11); `held` and `held2` are in commit dd0f1c3.
// Build and run on the GPU machine: nvcc -O3 -std=c++17 -arch=sm_90 -o column_held_probe column_held_probe.cu
#include "bulk_probe.cuh"
#include "column_probe.cuh"

__device__ __forceinline__ void mbar_arrive(uint64_t* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(sa(bar)) : "memory");
}
__device__ __forceinline__ void cons_sync(int n) { asm volatile("bar.sync 1, %0;" ::"r"(n) : "memory"); }
/// Version 3 (run 6): held2 measured ~7-8 us an item whatever its bytes or lag, so the item's own chain (statistics,
/// merges over warps and parts, barriers, the output pass) at one block an SM is what costs. Here NBLK blocks share
/// an SM (smaller slots, more items), and only the last block to count itself on a slab merges its P pairs and
/// publishes the final (max + log sum) of each column with a flag; the others wait for the flag and read their 8
/// columns' finals (two 16-byte loads a thread, no merge, no barrier). ws: OUTER x P x 64 pairs, then OUTER x 64
/// finals; counters: OUTER counts, OUTER flags (zeroed).
template <int CONS, int P, int NB, int LAG, int NBLK, int TST, int DIAG>
__global__ void __launch_bounds__(CONS + 32, NBLK) held3(const __nv_bfloat16* __restrict__ in,
                                                         __nv_bfloat16* __restrict__ out, float2* ws,
                                                         unsigned* counters) {
  static_assert(NB >= LAG + 2, "a load ahead");
  constexpr int R = (NROWS + P - 1) / P, SLOT = R * INNER * 2, W = CONS / 32, RPS = CONS / 8,
                NV = (R + RPS - 1) / RPS;
  extern __shared__ __align__(128) unsigned char slots[];
  __shared__ __align__(8) uint64_t full[NB], written[NB];
  __shared__ float2 red[W][INNER];
  __shared__ int last;
  float* const finals = reinterpret_cast<float*>(ws + (long long)OUTER * P * INNER);
  unsigned* const flags = counters + OUTER;
  const int G = gridDim.x, items = OUTER * P, tid = threadIdx.x, g = tid % 8, lane = tid % 32, w = tid / 32;
  const int my = blockIdx.x < items ? (items - blockIdx.x + G - 1) / G : 0;
  if (tid == 0) {
    for (int i = 0; i < NB; ++i) mbar_init(&full[i]), mbar_init_n(&written[i], W);
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  auto rows_of = [&](int t, int& slab, int& r0, int& rows) {
    const int k = blockIdx.x + t * G;
    slab = k / P;
    r0 = (k % P) * R;
    rows = min(R, NROWS - r0);
  };
  if (tid >= CONS) {  // the producer warp (lane 0)
    if (tid == CONS) {
      auto issue = [&](int t) {
        int slab, r0, rows;
        rows_of(t, slab, r0, rows);
        bulk_load(slots + (t % NB) * SLOT, in + ((long long)slab * NROWS + r0) * INNER, rows * INNER * 2,
                  &full[t % NB]);
      };
      for (int t = 0; t < min(NB, my); ++t) issue(t);
      for (int u = 0; u < my; ++u) {
        int slab, r0, rows;
        rows_of(u, slab, r0, rows);
        mbar_wait(&written[u % NB], (unsigned)((u / NB) & 1));
        if (!TST) bulk_store(out + ((long long)slab * NROWS + r0) * INNER, slots + (u % NB) * SLOT, rows * INNER * 2);
        if (u + NB < my) {
          if (!TST) bulk_wait_read<0>();
          issue(u + NB);
        }
      }
      asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
    }
    return;
  }
  for (int t = 0; t < my + LAG; ++t) {
    if (t < my && DIAG == 2) {  // DIAG 2 (timing only): the slot is waited for, no statistics are made
      mbar_wait(&full[t % NB], (unsigned)((t / NB) & 1));
    } else if (t < my) {  // statistics of item t
      int slab, r0, rows;
      rows_of(t, slab, r0, rows);
      mbar_wait(&full[t % NB], (unsigned)((t / NB) & 1));
      const uint4* s = reinterpret_cast<const uint4*>(slots + (t % NB) * SLOT);
      float m[8], sm[8];
      warp_column_stats<NV, RPS>(s, rows, tid, m, sm);
      if (lane < 8)
#pragma unroll
        for (int e = 0; e < 8; ++e) red[w][lane * 8 + e] = make_float2(m[e], sm[e]);
      cons_sync(CONS);
      if (tid < INNER) {
        float2 a = red[0][tid];
        for (int i = 1; i < W; ++i) merge(a.x, a.y, red[i][tid].x, red[i][tid].y);
        ws[((long long)slab * P + (blockIdx.x + t * G) % P) * INNER + tid] = a;
      }
      cons_sync(CONS);
      if (tid == 0) {
        __threadfence();
        last = atomicAdd(counters + slab, 1u) == (unsigned)(P - 1);
        __threadfence();
      }
      cons_sync(CONS);
      if (last) {  // every part is in: merge the slab's pairs in part order, publish the finals, raise the flag
        constexpr int C = CONS / INNER, PC = (P + C - 1) / C;
        const int col = tid % INNER, j = tid / INNER;
        const float2* p = ws + (long long)slab * P * INNER + col;
        float2 a = make_float2(-INFINITY, 0.f);
        for (int i0 = 0; i0 < PC; i0 += 8) {  // 8 loads in flight, merged in part order
          float2 b[8];
#pragma unroll
          for (int i = 0; i < 8; ++i)
            b[i] = i0 + i < PC && j * PC + i0 + i < P ? __ldcg(p + (j * PC + i0 + i) * INNER)
                                                      : make_float2(-INFINITY, 0.f);
#pragma unroll
          for (int i = 0; i < 8; ++i) merge(a.x, a.y, b[i].x, b[i].y);
        }
        red[j][col] = a;
        cons_sync(CONS);
        if (tid < INNER) {
          float2 f = red[0][tid];
          for (int i = 1; i < C; ++i) merge(f.x, f.y, red[i][tid].x, red[i][tid].y);
          finals[slab * INNER + tid] = f.x + logf(f.y);
        }
        cons_sync(CONS);
        if (tid == 0) {
          __threadfence();
          atomicExch(flags + slab, 1u);
        }
      }
    }
    if (t >= LAG) {  // output of item t - LAG
      const int u = t - LAG;
      int slab, r0, rows;
      rows_of(u, slab, r0, rows);
      if (tid == 0) {
        while (DIAG == 0 && *(volatile unsigned*)(flags + slab) == 0u) __nanosleep(32);  // DIAG 1, 2: no wait
        __threadfence();
      }
      cons_sync(CONS);
      const float4 c0 = __ldcg(reinterpret_cast<const float4*>(finals + slab * INNER + g * 8));
      const float4 c1 = __ldcg(reinterpret_cast<const float4*>(finals + slab * INNER + g * 8 + 4));
      const float c[8] = {c0.x, c0.y, c0.z, c0.w, c1.x, c1.y, c1.z, c1.w};
      uint4* s = reinterpret_cast<uint4*>(slots + (u % NB) * SLOT);
#pragma unroll
      for (int i = 0; i < NV; ++i) {
        const int r = tid / 8 + i * RPS;
        if (r < rows) {
          const uint4 x = s[r * 8 + g];
          const unsigned vw[4] = {x.x, x.y, x.z, x.w};
          unsigned o[4];
#pragma unroll
          for (int q = 0; q < 4; ++q) o[q] = pack2(lo_f(vw[q]) - c[2 * q], hi_f(vw[q]) - c[2 * q + 1]);
          if (TST)  // TST: stored by the threads (16 bytes each, a warp 512 contiguous bytes)
            reinterpret_cast<uint4*>(out + ((long long)slab * NROWS + r0) * INNER)[r * 8 + g] =
                make_uint4(o[0], o[1], o[2], o[3]);
          else
            s[r * 8 + g] = make_uint4(o[0], o[1], o[2], o[3]);
        }
      }
      if (!TST) asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
      __syncwarp();
      if (lane == 0) mbar_arrive(&written[u % NB]);
    }
  }
}

template <int CONS, int P, int NB, int LAG, int NBLK, int TST = 0, int DIAG = 0>
void run3(const __nv_bfloat16* in, __nv_bfloat16* out, const __nv_bfloat16* ref, float2* ws, unsigned* counters,
          float* d, float4* flush, float* sink, long long flush_n) {
  auto kern = held3<CONS, P, NB, LAG, NBLK, TST, DIAG>;
  constexpr int R = (NROWS + P - 1) / P, smem = NB * R * INNER * 2;
  CK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  int per_sm = 0, sms = 0;
  CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kern, CONS + 32, smem));
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const int grid = sms * std::min(per_sm, NBLK);
  if (grid < P) {
    std::printf("held3 CONS=%4d P=%3d NB=%d LAG=%d: grid %d < P\n", CONS, P, NB, LAG, grid);
    return;
  }
  void* args[] = {(void*)&in, (void*)&out, (void*)&ws, (void*)&counters};
  auto zero = [&] { CK(cudaMemsetAsync(counters, 0, 2 * OUTER * sizeof(unsigned))); };
  auto launch = [&] { CK(cudaLaunchCooperativeKernel((void*)kern, grid, CONS + 32, args, smem, 0)); };
  CK(cudaMemset(out, 0, ELEMS * 2));
  zero();
  launch();
  CK(cudaGetLastError());
  CK(cudaMemset(d, 0, 4));
  max_diff<<<1024, 256>>>(out, ref, ELEMS, d);
  float h = -1.f;
  CK(cudaMemcpy(&h, d, 4, cudaMemcpyDeviceToHost));
  const double us = median_us(flush, sink, flush_n, zero, launch);
  std::printf("held3 DIAG=%d CONS=%4d P=%3d NB=%d LAG=%d TST=%d: %3d blocks (%d an SM), %3d KB slots, %7.1f us, "
              "max |diff| %.4f\n",
              DIAG, CONS, P, NB, LAG, TST, grid, std::min(per_sm, NBLK), smem / 1024, us, h);
  std::fflush(stdout);
}

int main() {
  ColumnBuffers b;
  float2* ws;
  unsigned* counters;
  CK(cudaMalloc(&ws, OUTER * 257 * INNER * sizeof(float2)));
  CK(cudaMalloc(&counters, 2 * OUTER * sizeof(unsigned)));
  // Session 24 run 11: what the wait and the statistics cost (DIAG 1: no wait for the slab; 2: no statistics either).
  run3<512, 64, 3, 1, 1, 1, 0>(b.in, b.out, b.ref, ws, counters, b.d, b.flush, b.sink, b.kFlushN);
  run3<512, 64, 3, 1, 1, 1, 1>(b.in, b.out, b.ref, ws, counters, b.d, b.flush, b.sink, b.kFlushN);
  run3<512, 64, 3, 1, 1, 1, 2>(b.in, b.out, b.ref, ws, counters, b.d, b.flush, b.sink, b.kFlushN);
  run3<512, 64, 3, 1, 1, 0, 2>(b.in, b.out, b.ref, ws, counters, b.d, b.flush, b.sink, b.kFlushN);
  run3<256, 128, 3, 1, 2, 1, 2>(b.in, b.out, b.ref, ws, counters, b.d, b.flush, b.sink, b.kFlushN);
  return 0;
}
