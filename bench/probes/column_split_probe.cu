// Probe (session 26): log_softmax bf16 [32,32000,64] dim 1 with parts of whole rows held in shared memory (as
// session 24's held3, column_held_probe.cu) and each block's work split over warps of their own: one producer warp
// (bulk loads), S statistics warps that run ahead, O output warps that follow. held3 ran each item's chain (wait,
// statistics, merges over warps, a global counter, a flag, the output) in series in the same warps: ~8 us an item
// against ~4 us of bytes, 123.7 us at best, while its data path alone ran 71-75 us. Here the statistics warps take
// item t + k while the output warps write item t, so the counters' and flags' round trips and the merges sit behind
// the bytes. Against the kept pair tile (102 us) and a copy of the same bytes (~65.5 us). Not part of the library.
// A slab is cut into P parts of R = ceil(32000 / P) rows; items (slab, part) are dealt to the G blocks of a
// cooperative grid (block b: items b, b + G, ...). Item t lands in slot t % NB by one bulk copy (mbarrier full).
// Version 1 (run 3, replaced by `split` below, see its comment): 103.6-280 us. Version 2: 83.7-86.1 us (runs 5-7, 9).
// TAG (run 6, tried; its code is in commit a5eb6c3): pairs and finals carrying the launch's tag in the same 8-byte
// word, spun on by every lane instead of counters and flags: 112-123 us (every lane's spinning loads load L2).
// Run 8: a trace of each item's steps (%globaltimer, -DTRACE; the marks' checks cost ~18 us themselves, so the trace
// build is not timed): an item's slot cycle ~19 us against the ~15 us of reads the 7 slots hold. Run 9: more output
// warps, fewer mergers: 86.1-99.3 us (the merge doubled). Not built (docs/PERF.md session 26).
// Session 27 (docs/PERF.md session 27): PF, each item's bytes prefetched into L2 (cp.async.bulk.prefetch.L2) PF items
// before its bulk load: 82.9-101 us, no help beyond PF 1-2. GM, GM blocks of the grid that only merge (every thread
// of the block; the data blocks have no merger warps, P = the data blocks) with all output warps in one group (OG 1):
// **74.8-76.2 us** (GM 2-4, S 6-8, O 4-8), 1.14-1.17x the copy; the data path and output alone 66.5, without the
// cross-grid wait 71.8.
// Random normal input (no -Inf/NaN handling: a probe); checked against a naive kernel (a thread a column, expf/logf).
// Build and run on the GPU machine: nvcc -O3 -std=c++17 -arch=sm_90 -o column_split_probe column_split_probe.cu
#include "bulk_probe.cuh"
#include "column_probe.cuh"

__device__ __forceinline__ void mbar_arrive(uint64_t* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(sa(bar)) : "memory");
}
__device__ __forceinline__ void merge_sync(int n) { asm volatile("bar.sync 2, %0;" ::"r"(n) : "memory"); }
__device__ __forceinline__ void red_release_add(unsigned* p, unsigned v) {
  asm volatile("red.release.gpu.global.add.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
__device__ __forceinline__ unsigned ld_acquire(const unsigned* p) {
  unsigned v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ void st_release(unsigned* p, unsigned v) {
  asm volatile("st.release.gpu.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
/// Trace (run 8): when set, %globaltimer of each item's events, [block][item][event] (kEvents a slot, kMaxItems items
/// a block), and of each slab's merge, [slab][2]: when the counter was seen full and when the flag was raised.
[[maybe_unused]] constexpr int kEvents = 8, kMaxItems = 64;
enum Ev { kIssued, kLanded, kPublished, kFlagSeen, kWritten, kStart, kEnd };
__device__ unsigned long long* g_trace = nullptr;
__device__ unsigned long long* g_merge_trace = nullptr;
__device__ __forceinline__ unsigned long long now() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
__device__ __forceinline__ void mark(int t, Ev e) {
#ifdef TRACE  // the timed build has no marks: their checks cost ~18 us (run 8: 84 -> 102.6 us)
  if (g_trace && t < kMaxItems) g_trace[((long long)blockIdx.x * kMaxItems + t) * kEvents + e] = now();
#endif
}
#ifndef MERGE_POLL_NS  // the pollers' sleep between looks at a counter or a flag
#define MERGE_POLL_NS 64
#endif
#ifndef OUT_POLL_NS
#define OUT_POLL_NS 32
#endif
/// Merges N (max, sum) pairs into a in two passes: the maximum of all, then the sums rescaled to it and added in
/// order (independent terms, not a chain of N merges).
template <int N, class Get>
__device__ __forceinline__ void fold_by(Get b, float2& a) {
  float mm = a.x;
#pragma unroll
  for (int i = 0; i < N; ++i) mm = fmaxf(mm, b(i).x);
  if (mm == -INFINITY) return;
  float t = a.x == -INFINITY ? 0.f : a.y * ex2((a.x - mm) * L2E);
#pragma unroll
  for (int i = 0; i < N; ++i) t += b(i).x == -INFINITY ? 0.f : b(i).y * ex2((b(i).x - mm) * L2E);
  a = make_float2(mm, t);
}
template <int N>
__device__ __forceinline__ void fold(const float2 (&b)[N], float2& a) {
  fold_by<N>([&](int i) { return b[i]; }, a);
}

__device__ __forceinline__ float* finals_of(float2* ws, int p) {
  return reinterpret_cast<float*>(ws + (long long)OUTER * p * INNER);
}
/// A merging block (session 27, GM > 0): slabs s = block, block + GM, ...; all T threads wait for the slab's P parts,
/// fold them in part order (chunk j of MC takes parts j x PCM ..., then the MC chunks in order) and raise the flag.
template <int P, int T>
__device__ void merge_block(const float2* ws, const unsigned* counters, float* finals, unsigned* flags, int gm,
                            float2* red) {
  constexpr int MC = T / INNER, PCM = (P + MC - 1) / MC;
  const int tid = threadIdx.x, col = tid % INNER, j = tid / INNER;
  for (int slab = blockIdx.x; slab < OUTER; slab += gm) {
    if (tid == 0)
      while (ld_acquire(counters + slab) != (unsigned)P) __nanosleep(MERGE_POLL_NS);
    __syncthreads();
    if (j < MC) {
      const float2* p = ws + (long long)slab * P * INNER + col;
      float2 b[PCM];
#pragma unroll
      for (int i = 0; i < PCM; ++i)
        b[i] = j * PCM + i < P ? __ldcg(p + (j * PCM + i) * INNER) : make_float2(-INFINITY, 0.f);
      float2 a = make_float2(-INFINITY, 0.f);
      fold<PCM>(b, a);
      red[j * INNER + col] = a;
    }
    __syncthreads();
    if (tid < INNER) {
      float2 a = make_float2(-INFINITY, 0.f);
      fold_by<MC>([&](int i) { return red[i * INNER + tid]; }, a);
      finals[slab * INNER + tid] = a.x + logf(a.y);
    }
    __syncthreads();
    if (tid == 0) st_release(flags + slab, 1u);
  }
}

/// Version 2 (run 4). Version 1 (run 3: a stats barrier an item, the stats warps' publisher fenced and counted, the
/// output warps of the slab's block merged its pairs) ran 103.6-280 us: the merge sat in the output warps' serial path
/// (flag s needed the merger's output warps at item s, after flag s - 1) and the fences in the stats warps'.
/// Here every chain has warps of its own, coupled by rings of mbarriers:
/// - S stats warps: item t's (max, sum) per warp into red[t % K], then an arrival on statted[t % K]; no CTA barrier.
/// - 2 publisher warps (items alternate): merge red[t % K]'s S pairs, free it (taken), store the item's 64 pairs to
///   ws and count the part on the slab's counter (red.release).
/// - M merger warps: slabs s = block, block + G, ...: wait for the counter to reach P, merge the P pairs in part
///   order, store max + log sum and raise the flag (st.release).
/// - O output warps in OG groups (items alternate): wait for the slot and the flag, load the finals, write the output.
/// DIAG 1: only the data path and the output pass (the output is wrong). DIAG 2: statistics made and published, no
/// merges, and the output warps follow the local stats warps instead of flags (their pace; the output is wrong).
template <int S, int O, int OG, int M, int P, int NB, int K, int TST, int DIAG, int PF, int HINT, int GM>
__global__ void __launch_bounds__((S + O + 2 + M + 1) * 32, 1) split(const __nv_bfloat16* __restrict__ in,
                                                                    __nv_bfloat16* __restrict__ out, float2* ws,
                                                                    unsigned* counters) {
  static_assert(NB >= 2 && O % OG == 0 && (GM > 0 ? M == 0 : M * 32 >= INNER) && K >= 2, "shape");
  constexpr int R = (NROWS + P - 1) / P, SLOT = R * INNER * 2, ST = S * 32, RPS = ST / 8, NV = (R + RPS - 1) / RPS,
                OW = O / OG, ORPS = OW * 4, ONV = (R + ORPS - 1) / ORPS, MT = M * 32, C = MT >= INNER ? MT / INNER : 1,
                PC = (P + C - 1) / C, CH = PC < 36 ? PC : 36;
  extern __shared__ __align__(128) unsigned char slots[];
  float2(*red)[S][INNER] = reinterpret_cast<float2(*)[S][INNER]>(slots + NB * SLOT);  // [K][S][INNER]
  __shared__ __align__(8) uint64_t full[NB], written[NB], statted[K], taken[K];
  float2(*ored)[INNER] = reinterpret_cast<float2(*)[INNER]>(slots + NB * SLOT + K * S * INNER * 8);  // [C], GM == 0
  __shared__ int prog[S];
  float* const finals = finals_of(ws, P);
  unsigned* const flags = counters + OUTER;
  // GM > 0 (session 27): blocks 0 .. GM - 1 only merge (every thread), the G data blocks after them hold items
  const int G = gridDim.x - GM, bd = (int)blockIdx.x - GM, items = OUTER * P, tid = threadIdx.x, lane = tid % 32,
            g = lane % 8, w = tid / 32;
  if (GM > 0 && bd < 0) {
    if (DIAG != 1)  // DIAG 1 publishes nothing: the merging blocks would wait for ever (run 3 hung so)
      merge_block<P, (S + O + 2 + M + 1) * 32>(ws, counters, finals_of(ws, P), counters + OUTER, GM,
                                              reinterpret_cast<float2*>(slots));
    return;
  }
  const int my = bd < items ? (items - bd + G - 1) / G : 0;
  if (tid == 0) {
    for (int i = 0; i < NB; ++i) mbar_init(&full[i]), mbar_init_n(&written[i], OW);
    for (int i = 0; i < K; ++i) mbar_init_n(&statted[i], S), mbar_init(&taken[i]);
    for (int i = 0; i < S; ++i) prog[i] = 0;
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  if (tid == 0) mark(0, kStart);
  auto rows_of = [&](int t, int& slab, int& r0, int& rows) {
    const int k = bd + t * G;
    slab = k / P;
    r0 = (k % P) * R;
    rows = min(R, NROWS - r0);
  };
  if (w == S + O + 2 + M) {  // the producer warp (lane 0)
    if (lane == 0) {
      const unsigned long long keep = l2_policy(true), drop = l2_policy(false);
      auto prefetch = [&](int t) {  // item t into L2, PF items before its bulk load (session 27)
        if (PF == 0 || t >= my) return;
        int slab, r0, rows;
        rows_of(t, slab, r0, rows);
        const void* src = in + ((long long)slab * NROWS + r0) * INNER;
        if (HINT)
          asm volatile("cp.async.bulk.prefetch.L2.global.L2::cache_hint [%0], %1, %2;" ::"l"(src),
                       "r"(rows * INNER * 2), "l"(keep)
                       : "memory");
        else
          asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(src), "r"(rows * INNER * 2) : "memory");
      };
      auto issue = [&](int t) {
        int slab, r0, rows;
        rows_of(t, slab, r0, rows);
        mark(t, kIssued);
        const __nv_bfloat16* src = in + ((long long)slab * NROWS + r0) * INNER;
        if (HINT == 2)
          bulk_load_hint(slots + (t % NB) * SLOT, src, rows * INNER * 2, &full[t % NB], drop);
        else
          bulk_load(slots + (t % NB) * SLOT, src, rows * INNER * 2, &full[t % NB]);
        if (t + PF >= NB) prefetch(t + PF);  // items below NB are loaded at once
      };
      for (int t = NB; t < min(PF, my); ++t) prefetch(t);  // what the first NB issues do not reach
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
      mark(0, kEnd);
    }
    return;
  }
  if (w < S) {  // statistics warps
    if (DIAG == 1) return;
    for (int t = 0; t < my; ++t) {
      int slab, r0, rows;
      rows_of(t, slab, r0, rows);
      mbar_wait(&full[t % NB], (unsigned)((t / NB) & 1));
      if (tid == 0) mark(t, kLanded);
      const uint4* s = reinterpret_cast<const uint4*>(slots + (t % NB) * SLOT);
      float m[8], sm[8];
      warp_column_stats<NV, RPS>(s, rows, tid, m, sm);
      if (t >= K) mbar_wait(&taken[t % K], (unsigned)((t / K - 1) & 1));
      if (lane < 8)
#pragma unroll
        for (int e = 0; e < 8; ++e) red[t % K][w][lane * 8 + e] = make_float2(m[e], sm[e]);
      __syncwarp();
      if (lane == 0) {
        mbar_arrive(&statted[t % K]);
        if (DIAG == 2) *(volatile int*)&prog[w] = t + 1;
      }
    }
    return;
  }
  if (w >= S + O && w < S + O + 2) {  // publisher warps: items alternate
    if (DIAG == 1) return;
    for (int t = w - (S + O); t < my; t += 2) {
      int slab, r0, rows;
      rows_of(t, slab, r0, rows);
      mbar_wait(&statted[t % K], (unsigned)((t / K) & 1));
      float2 a[2];
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        float2 b[S];
#pragma unroll
        for (int i = 0; i < S; ++i) b[i] = red[t % K][i][lane + 32 * h];
        a[h] = make_float2(-INFINITY, 0.f);
        fold<S>(b, a[h]);
      }
      __syncwarp();
      if (lane == 0) mbar_arrive(&taken[t % K]);
      float2* const dst = ws + ((long long)slab * P + (bd + t * G) % P) * INNER;
      dst[lane] = a[0];
      dst[lane + 32] = a[1];
      __syncwarp();
      if (lane == 0) red_release_add(counters + slab, 1u), mark(t, kPublished);
    }
    return;
  }
  if (w >= S + O + 2) {  // merger warps: the slabs s = block, block + G, ...
    if (DIAG != 0) return;
    const int mt = tid - (S + O + 2) * 32, col = mt % INNER, j = mt / INNER;
    for (int slab = blockIdx.x; slab < OUTER; slab += G) {
      if (mt == 0) {
        while (ld_acquire(counters + slab) != (unsigned)P) __nanosleep(MERGE_POLL_NS);
#ifdef TRACE
        if (g_merge_trace) g_merge_trace[slab * 2] = now();
#endif
      }
      merge_sync(MT);
      float2 a = make_float2(-INFINITY, 0.f);
      if (j < C) {
        const float2* p = ws + (long long)slab * P * INNER + col;
        for (int i0 = 0; i0 < PC; i0 += CH) {  // CH loads in flight, folded in part order
          float2 b[CH];
#pragma unroll
          for (int i = 0; i < CH; ++i)
            b[i] = i0 + i < PC && j * PC + i0 + i < P ? __ldcg(p + (j * PC + i0 + i) * INNER)
                                                      : make_float2(-INFINITY, 0.f);
          fold<CH>(b, a);
        }
        ored[j][col] = a;
      }
      merge_sync(MT);
      if (mt < INNER) {
        float2 f = ored[0][mt];
#pragma unroll
        for (int i = 1; i < C; ++i) merge(f.x, f.y, ored[i][mt].x, ored[i][mt].y);
        finals[slab * INNER + mt] = f.x + logf(f.y);
      }
      merge_sync(MT);
      if (mt == 0) {
        st_release(flags + slab, 1u);
#ifdef TRACE
        if (g_merge_trace) g_merge_trace[slab * 2 + 1] = now();
#endif
      }
    }
    return;
  }
  // output warps: group q takes items q, q + OG, ...
  const int q = (w - S) / OW, ot = tid - S * 32 - q * OW * 32;
  for (int u = q; u < my; u += OG) {
    int slab, r0, rows;
    rows_of(u, slab, r0, rows);
    mbar_wait(&full[u % NB], (unsigned)((u / NB) & 1));
    if (lane == 0 && DIAG == 0)
      while (ld_acquire(flags + slab) == 0u) __nanosleep(OUT_POLL_NS);
    if (ot == 0) mark(u, kFlagSeen);
    if (lane == 0 && DIAG == 2)
      for (int i = 0; i < S; ++i)
        while (*(volatile int*)&prog[i] <= u) __nanosleep(32);
    __syncwarp();
    const float4 c0 = __ldcg(reinterpret_cast<const float4*>(finals + slab * INNER + g * 8));
    const float4 c1 = __ldcg(reinterpret_cast<const float4*>(finals + slab * INNER + g * 8 + 4));
    const float c[8] = {c0.x, c0.y, c0.z, c0.w, c1.x, c1.y, c1.z, c1.w};
    uint4* s = reinterpret_cast<uint4*>(slots + (u % NB) * SLOT);
#pragma unroll
    for (int i = 0; i < ONV; ++i) {
      const int r = ot / 8 + i * ORPS;
      if (r < rows) {
        const uint4 x = s[r * 8 + g];
        const unsigned vw[4] = {x.x, x.y, x.z, x.w};
        unsigned o[4];
#pragma unroll
        for (int e = 0; e < 4; ++e) o[e] = pack2(lo_f(vw[e]) - c[2 * e], hi_f(vw[e]) - c[2 * e + 1]);
        if (TST)
          reinterpret_cast<uint4*>(out + ((long long)slab * NROWS + r0) * INNER)[r * 8 + g] =
              make_uint4(o[0], o[1], o[2], o[3]);
        else
          s[r * 8 + g] = make_uint4(o[0], o[1], o[2], o[3]);
      }
    }
    if (!TST) asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    __syncwarp();
    if (lane == 0) mbar_arrive(&written[u % NB]);
    if (ot == 0) mark(u, kWritten);
  }
}

template <int S, int O, int OG, int M, int P, int NB, int PF = 0, int HINT = 0, int GM = 0, int K = 2, int TST = 1,
          int DIAG = 0>
void run(ColumnBuffers& b, float2* ws, unsigned* counters) {
  auto kern = split<S, O, OG, M, P, NB, K, TST, DIAG, PF, HINT, GM>;
  constexpr int R = (NROWS + P - 1) / P, smem = NB * R * INNER * 2 + K * S * INNER * 8 + (GM ? 0 : M * 32 * 8),
                threads = (S + O + 2 + M + 1) * 32;
  CK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  int per_sm = 0, sms = 0;
  CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kern, threads, smem));
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const int grid = sms * std::min(per_sm, 1);
  if (grid == 0 || grid < P / 2) {
    std::printf("split S=%d O=%d P=%d NB=%d: grid %d\n", S, O, P, NB, grid);
    return;
  }
  void* args[] = {(void*)&b.in, (void*)&b.out, (void*)&ws, (void*)&counters};
  auto zero = [&] { CK(cudaMemsetAsync(counters, 0, 2 * OUTER * sizeof(unsigned))); };
  auto launch = [&] { CK(cudaLaunchCooperativeKernel((void*)kern, grid, threads, args, smem, 0)); };
  CK(cudaMemset(b.out, 0, ELEMS * 2));
  zero();
  launch();
  CK(cudaGetLastError());
  CK(cudaDeviceSynchronize());
  CK(cudaMemset(b.d, 0, 4));
  max_diff<<<1024, 256>>>(b.out, b.ref, ELEMS, b.d);
  float h = -1.f;
  CK(cudaMemcpy(&h, b.d, 4, cudaMemcpyDeviceToHost));
  const double us = median_us(b.flush, b.sink, b.kFlushN, zero, launch);
  std::printf("split2 DIAG=%d S=%2d O=%2d/%d M=%d GM=%d P=%3d NB=%d PF=%2d HINT=%d K=%d TST=%d: %3d threads, %3d KB, "
              "%7.1f us, max |diff| %.4f\n",
              DIAG, S, O, OG, M, GM, P, NB, PF, HINT, K, TST, threads, smem / 1024, us, h);
  std::fflush(stdout);
}

/// One traced launch of the configuration: the medians of each step's time over (block, item), and the tail.
template <int S, int O, int OG, int M, int P, int NB, int PF = 0, int HINT = 0, int GM = 0>
void trace(ColumnBuffers& b, float2* ws, unsigned* counters) {
  auto kern = split<S, O, OG, M, P, NB, 2, 1, 0, PF, HINT, GM>;
  constexpr int R = (NROWS + P - 1) / P, smem = NB * R * INNER * 2 + 2 * S * INNER * 8 + (GM ? 0 : M * 32 * 8),
                threads = (S + O + 2 + M + 1) * 32;
  int sms = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  CK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  const long long n = (long long)sms * kMaxItems * kEvents;
  unsigned long long *tr, *mt;
  CK(cudaMalloc(&tr, n * 8));
  CK(cudaMalloc(&mt, OUTER * 2 * 8));
  CK(cudaMemset(tr, 0, n * 8));
  CK(cudaMemcpyToSymbol(g_trace, &tr, sizeof(tr)));
  CK(cudaMemcpyToSymbol(g_merge_trace, &mt, sizeof(mt)));
  void* args[] = {(void*)&b.in, (void*)&b.out, (void*)&ws, (void*)&counters};
  for (int rep = 0; rep < 3; ++rep) {  // the last launch's trace is read
    CK(cudaMemset(counters, 0, 2 * OUTER * sizeof(unsigned)));
    CK(cudaLaunchCooperativeKernel((void*)kern, sms, threads, args, smem, 0));
    CK(cudaDeviceSynchronize());
  }
  std::vector<unsigned long long> h(n), hm(OUTER * 2);
  CK(cudaMemcpy(h.data(), tr, n * 8, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(hm.data(), mt, OUTER * 2 * 8, cudaMemcpyDeviceToHost));
  unsigned long long* null = nullptr;
  CK(cudaMemcpyToSymbol(g_trace, &null, sizeof(null)));
  CK(cudaMemcpyToSymbol(g_merge_trace, &null, sizeof(null)));
  const int items = OUTER * P;
  unsigned long long t0 = ~0ull, t1 = 0;
  for (int bk = 0; bk < sms; ++bk) {
    t0 = std::min(t0, h[((long long)bk * kMaxItems) * kEvents + kStart]);
    t1 = std::max(t1, h[((long long)bk * kMaxItems) * kEvents + kEnd]);
  }
  auto ev = [&](int bk, int t, int e) { return (double)h[((long long)bk * kMaxItems + t) * kEvents + e]; };
  std::vector<double> land, pub, flag, out, cyc, last_land, slab_lag, merge_lag;
  for (int bk = 0; bk < sms; ++bk) {
    const int my = (items - bk + sms - 1) / sms;
    for (int t = 0; t < my && t < kMaxItems; ++t) {
      land.push_back(ev(bk, t, kLanded) - ev(bk, t, kIssued));
      pub.push_back(ev(bk, t, kPublished) - ev(bk, t, kLanded));
      flag.push_back(ev(bk, t, kFlagSeen) - ev(bk, t, kPublished));
      out.push_back(ev(bk, t, kWritten) - ev(bk, t, kFlagSeen));
      if (t >= NB) cyc.push_back(ev(bk, t, kIssued) - ev(bk, t - NB, kIssued));
    }
    last_land.push_back((double)t1 - ev(bk, my - 1, kLanded));
  }
  for (int s = 0; s < OUTER; ++s) {
    double mx = 0;
    for (int k = s * P; k < (s + 1) * P; ++k) mx = std::max(mx, ev(k % sms, k / sms, kPublished));
    slab_lag.push_back((double)hm[s * 2] - mx);
    merge_lag.push_back((double)hm[s * 2 + 1] - (double)hm[s * 2]);
  }
  auto med = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0.0 : v[v.size() / 2] / 1e3;
  };
  auto p90 = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0.0 : v[v.size() * 9 / 10] / 1e3;
  };
  std::printf("trace S=%d O=%d/%d M=%d P=%d NB=%d PF=%d HINT=%d: span %.1f us; median (p90) us: "
              "issue->landed %.2f (%.2f), landed->published %.2f (%.2f), published->flag seen %.2f (%.2f), "
              "flag seen->written %.2f (%.2f), "
              "slot cycle (issue t - NB -> issue t) %.2f (%.2f); last published->counter seen %.2f (%.2f), "
              "counter seen->flag raised %.2f (%.2f); last landed->end %.2f (%.2f)\n",
              S, O, OG, M, P, NB, PF, HINT, (t1 - t0) / 1e3, med(land), p90(land), med(pub), p90(pub), med(flag),
              p90(flag), med(out), p90(out), med(cyc), p90(cyc), med(slab_lag), p90(slab_lag), med(merge_lag),
              p90(merge_lag), med(last_land), p90(last_land));
  std::fflush(stdout);
  CK(cudaFree(tr));
  CK(cudaFree(mt));
}

int main() {
  ColumnBuffers b;
  float2* ws;
  unsigned* counters;
  CK(cudaMalloc(&ws, OUTER * 257 * INNER * sizeof(float2)));
  CK(cudaMalloc(&counters, 2 * OUTER * sizeof(unsigned)));
#ifdef TRACE
  trace<8, 4, 2, 8, 132, 7>(b, ws, counters);
  trace<8, 4, 2, 8, 132, 7, 4, 1>(b, ws, counters);
#else
  run<8, 4, 2, 8, 132, 7>(b, ws, counters);  // session 26's best
  run<8, 8, 1, 0, 128, 7, 0, 0, 4>(b, ws, counters);  // GM merging blocks, one output group (runs 3-4)
  run<8, 8, 1, 0, 128, 7, 1, 0, 4>(b, ws, counters);
  run<8, 6, 1, 0, 128, 7, 1, 0, 4>(b, ws, counters);
  run<8, 10, 1, 0, 128, 7, 0, 0, 4>(b, ws, counters);
  run<8, 4, 1, 0, 128, 7, 0, 0, 4>(b, ws, counters);
  run<6, 8, 1, 0, 128, 7, 0, 0, 4>(b, ws, counters);
  run<8, 8, 1, 0, 130, 7, 0, 0, 2>(b, ws, counters);
  run<8, 8, 1, 0, 130, 7, 1, 0, 2>(b, ws, counters);
  run<8, 8, 1, 0, 126, 6, 0, 0, 6>(b, ws, counters);  // 7 slots of 254 rows do not fit (run 4)
  run<8, 8, 1, 0, 132, 7, 0, 0, 4>(b, ws, counters);  // P != data blocks
  run<8, 8, 1, 0, 128, 7, 0, 0, 4>(b, ws, counters);  // repeats
  run<8, 8, 1, 0, 128, 7, 1, 0, 4>(b, ws, counters);
  run<8, 8, 1, 0, 128, 7, 0, 0, 4, 2, 1, 2>(b, ws, counters);  // DIAG 2: no cross-grid wait (timing only)
  run<8, 8, 1, 0, 128, 7, 0, 0, 4, 2, 1, 1>(b, ws, counters);  // DIAG 1: the data path and output pass alone
#endif
  return 0;
}
