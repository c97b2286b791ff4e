// @brief HeldSlabs (softmax_family.h, Note [Softmax held slabs]; sm_90+, fp16 / bf16): a cooperative grid whose
// data blocks hold parts of whole [kN, kInner] slabs in shared-memory slots, with statistics, publishing, output and
// bulk loads on warps of their own, and kMerge blocks that only merge each slab's parts.
// Follows softmax_packed_pairs.cuh (kFastExp set) and its own constants (namespace softmax, Note [Device
// constants]):
//   int kStats, kOut                     statistics warps, output warps (kBlock: theirs, two publishers', the
//                                        producer's threads)
//   int kMerge                           merging blocks
//   int kPrefetch                        items prefetched into L2 ahead of their bulk copies
//   int kHold                            items the output warps hold in registers (0: read from the slot)
//   int kMaxSlots                        mbarriers a kind (kHeldMaxSlots)
//   int kN, kInner, kLanesPerRow         rows and columns of a slab, lanes a row (16 bytes each)
//   int kOuter, kParts, kPartRows, kSlots   slabs, parts a slab, rows a part, slots a data block (held_grid for the
//                                        plan's SM count)
// (bound to the column variables N, INNER, LPR, OUTER, P, R, NB: Note [Softmax column constants] in
// softmax_columns_codegen.cpp).

namespace softmax {

/// Inline PTX of the kernel: mbarriers, bulk copies into shared memory, the L2 prefetch, ex2, and the global
/// counter's and flags' release and acquire.
__device__ __forceinline__ unsigned sa(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p)); }
__device__ __forceinline__ void mbar_init(unsigned long long* b, unsigned n) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(sa(b)), "r"(n) : "memory"); }
__device__ __forceinline__ void mbar_arrive(unsigned long long* b) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(sa(b)) : "memory"); }
__device__ __forceinline__ void mbar_wait(unsigned long long* b, unsigned parity) {
  asm volatile("{\n .reg .pred p;\n W_%=:\n mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n @!p bra W_%=;\n}"
               ::"r"(sa(b)), "r"(parity) : "memory"); }
/// `bytes` (a multiple of 16) from global `src` into shared `dst`, completing on `b` (which expects them).
__device__ __forceinline__ void bulk_load(void* dst, const void* src, unsigned bytes, unsigned long long* b) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(sa(b)), "r"(bytes) : "memory");
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
               ::"r"(sa(dst)), "l"(src), "r"(bytes), "r"(sa(b)) : "memory"); }
__device__ __forceinline__ void prefetch_l2(const void* src, unsigned bytes) {
  asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(src), "r"(bytes) : "memory"); }
__device__ __forceinline__ float ex2(float t) { float r; asm("ex2.approx.f32 %0, %1;" : "=f"(r) : "f"(t)); return r; }
__device__ __forceinline__ void red_release_add(unsigned* p, unsigned v) {
  asm volatile("red.release.gpu.global.add.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory"); }
__device__ __forceinline__ unsigned ld_acquire(const unsigned* p) {
  unsigned v; asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory"); return v; }
__device__ __forceinline__ void st_release(unsigned* p, unsigned v) {
  asm volatile("st.release.gpu.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory"); }

/// Folds acc and NN pairs b(i) in two passes: the maximum of all, then each sum rescaled to it. A pair
/// whose maximum is -Inf saw only -Inf and NaN: its sum (0 or NaN) is kept as sum x 0, so a NaN is never lost.
template <int NN, class Get>
__device__ __forceinline__ float2 fold_pairs(float2 acc, Get b) {
  constexpr float kLog2e = 1.4426950408889634f;
  float mm = acc.x;
#pragma unroll
  for (int i = 0; i < NN; ++i) mm = fmaxf(mm, b(i).x);
  float t = acc.x == neg_inf() ? acc.y * 0.f : acc.y * ex2((acc.x - mm) * kLog2e);
#pragma unroll
  for (int i = 0; i < NN; ++i) {
    const float2 p = b(i);
    t += p.x == neg_inf() ? p.y * 0.f : p.y * ex2((p.x - mm) * kLog2e);
  }
  return make_float2(mm, t);
}

/// ATen's epilogue of element v of a column of maximum m with c = log(sum) (log_softmax) or 1 / sum: 16-bit outputs,
/// so the division is div_sum's fast form.
__device__ __forceinline__ float held_epilogue(float v, float m, float c) {
  if constexpr (kLog)
    return (v - m) - c;  // LogSoftMaxForwardEpilogue
  else
    return exp_sub(v, m) * c;  // SoftMaxForwardEpilogue
}

}  // namespace softmax

/// Items: (slab, part) k = bd + t x GD for the data block bd = blockIdx.x - kMerge and t = 0, 1, ...; part p of a
/// slab is rows [p kPartRows, min(kN, (p + 1) kPartRows)). Workspace: kOuter x kParts x kInner pairs, kOuter x kInner
/// final pairs, then kOuter counters and kOuter flags (zeroed by the launch).
extern "C" __global__ void __launch_bounds__(softmax::kBlock, 1)
cudal1_softmax(const uint4* __restrict__ in, uint4* __restrict__ out, float2* __restrict__ ws) {
  using namespace softmax;
  extern __shared__ __align__(128) unsigned char smem[];
  __shared__ __align__(8) unsigned long long full[kMaxSlots], written[kMaxSlots], statted[2], taken[2];
  float2* const finals = ws + (index_t)kOuter * kParts * kInner;
  unsigned* const counters = reinterpret_cast<unsigned*>(finals + kOuter * kInner);
  unsigned* const flags = counters + kOuter;
  const int tid = threadIdx.x, lane = tid % 32, w = tid / 32;
  if ((int)blockIdx.x < kMerge) {  // a merging block: slabs blockIdx.x, + kMerge, ...; MC chunks of kInner threads
    constexpr int MC = kBlock / kInner;
    float2* const red = reinterpret_cast<float2*>(smem);
    const int col = tid % kInner, j = tid / kInner, pc = (kParts + MC - 1) / MC;
    for (int slab = blockIdx.x; slab < kOuter; slab += kMerge) {
      if (tid == 0)
        while (ld_acquire(counters + slab) != (unsigned)kParts) __nanosleep(32);
      __syncthreads();  // thread 0's acquire orders the pairs' loads (L2, __ldcg) of every thread after it
      if (j < MC) {
        const float2* p = ws + (index_t)slab * kParts * kInner + col;
        const int lo = min(kParts, j * pc), hi = min(kParts, lo + pc);
        float2 acc = make_float2(neg_inf(), 0.f);
        for (int i0 = lo; i0 < hi; i0 += 8) {  // eight loads in flight, folded in part order
          float2 b[8];
#pragma unroll
          for (int i = 0; i < 8; ++i)
            b[i] = i0 + i < hi ? __ldcg(p + (index_t)(i0 + i) * kInner) : make_float2(neg_inf(), 0.f);
          acc = fold_pairs<8>(acc, [&](int i) { return b[i]; });
        }
        red[j * kInner + col] = acc;
      }
      __syncthreads();
      if (tid < kInner) {
        float2 f = fold_pairs<MC>(make_float2(neg_inf(), 0.f), [&](int i) { return red[i * kInner + tid]; });
        if (f.x == neg_inf()) f.y = qnan();  // every element -Inf or NaN: as the two-pass tiles
        f.y = kLog ? logf(f.y) : 1.f / f.y;  // the epilogue's constant, made once here (as the tiles' prep)
        finals[slab * kInner + tid] = f;
      }
      __syncthreads();  // the block's stores, then thread 0's release (cumulative: no fence.sc, as CUTLASS's barriers)
      if (tid == 0) st_release(flags + slab, 1u);
    }
    return;
  }
  const int GD = gridDim.x - kMerge, bd = blockIdx.x - kMerge, items = kOuter * kParts;
  const int my = bd < items ? (items - bd + GD - 1) / GD : 0;
  const int slot_vecs = kPartRows * kLanesPerRow;
  uint4* const slots = reinterpret_cast<uint4*>(smem);
  float2* const red = reinterpret_cast<float2*>(smem + (size_t)kSlots * slot_vecs * 16);  // [2][kStats][kInner]
  if (tid == 0) {
    for (int i = 0; i < kSlots; ++i) mbar_init(&full[i], 1), mbar_init(&written[i], kHold > 0 ? kOut + kStats : kOut);
    for (int i = 0; i < 2; ++i) mbar_init(&statted[i], kStats), mbar_init(&taken[i], 1);
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  auto rows_of = [&](int t, int& slab, int& r0, int& rows) {
    const int k = bd + t * GD;
    slab = k / kParts;
    r0 = (k % kParts) * kPartRows;
    rows = min(kPartRows, kN - r0);
  };
  // A warp is done reading item t's slot (no proxy fence: reads before a bulk copy's write, as CUTLASS's); the slot
  // is refilled once all its readers have arrived (kOut warps, and with kHold > 0 the kStats statistics warps too).
  auto free_slot = [&](int t) {
    __syncwarp();
    if (lane == 0) mbar_arrive(&written[t % kSlots]);
  };
  if (w == kStats + kOut + 2) {  // the producer warp (lane 0): bulk loads into the slots, kPrefetch items ahead in L2
    if (lane == 0) {
      auto at = [&](int t, unsigned& bytes) {
        int slab, r0, rows;
        rows_of(t, slab, r0, rows);
        bytes = (unsigned)rows * kLanesPerRow * 16;
        return in + ((index_t)slab * kN + r0) * kLanesPerRow;
      };
      auto issue = [&](int t) {
        unsigned bytes;
        const uint4* src = at(t, bytes);
        bulk_load(slots + (size_t)(t % kSlots) * slot_vecs, src, bytes, &full[t % kSlots]);
        if (kPrefetch > 0 && t + kPrefetch >= kSlots && t + kPrefetch < my) {
          const uint4* ahead = at(t + kPrefetch, bytes);
          prefetch_l2(ahead, bytes);
        }
      };
      for (int t = kSlots; t < min(kPrefetch, my); ++t) {  // what the first kSlots issues do not reach
        unsigned bytes;
        const uint4* src = at(t, bytes);
        prefetch_l2(src, bytes);
      }
      for (int t = 0; t < min(kSlots, my); ++t) issue(t);
      for (int u = 0; u + kSlots < my; ++u) {
        mbar_wait(&written[u % kSlots], (unsigned)((u / kSlots) & 1));
        issue(u + kSlots);
      }
    }
    return;
  }
  if (w < kStats) {  // statistics warps: a warp's (max, sum) of each column over its rows of item t into red[t % 2]
    const int g = tid % kLanesPerRow;
    constexpr int RPS = kStats * 32 / kLanesPerRow, NV = (kPartRows + RPS - 1) / RPS;  // rows a pass, passes
    for (int t = 0; t < my; ++t) {
      int slab, r0, rows;
      rows_of(t, slab, r0, rows);
      mbar_wait(&full[t % kSlots], (unsigned)((t / kSlots) & 1));
      const uint4* s = slots + (size_t)(t % kSlots) * slot_vecs;
      const uint4 ninf = make_uint4(kPackedNegInf, kPackedNegInf, kPackedNegInf, kPackedNegInf);
      uint4 v[NV], bm = ninf;
#pragma unroll
      for (int i = 0; i < NV; ++i) {  // the thread's rows in registers; the maximum on packed pairs (NaN skipped)
        const int r = tid / kLanesPerRow + i * RPS;
        v[i] = r < rows ? s[r * kLanesPerRow + g] : ninf;
        bm.x = max2(bm.x, v[i].x);
        bm.y = max2(bm.y, v[i].y);
        bm.z = max2(bm.z, v[i].z);
        bm.w = max2(bm.w, v[i].w);
      }
      if constexpr (kHold > 0) free_slot(t);  // the output warps copy the item too before the slot is refilled
#pragma unroll
      for (int o = kLanesPerRow; o < 32; o <<= 1) {
        bm.x = max2(bm.x, __shfl_xor_sync(0xffffffffu, bm.x, o));
        bm.y = max2(bm.y, __shfl_xor_sync(0xffffffffu, bm.y, o));
        bm.z = max2(bm.z, __shfl_xor_sync(0xffffffffu, bm.z, o));
        bm.w = max2(bm.w, __shfl_xor_sync(0xffffffffu, bm.w, o));
      }
      const unsigned bw[4] = {bm.x, bm.y, bm.z, bm.w};
      float m[8], mr[8], sm[8];
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        m[2 * q] = lo_f(bw[q]);
        m[2 * q + 1] = hi_f(bw[q]);
      }
#pragma unroll
      for (int e = 0; e < 8; ++e) {
        mr[e] = m[e] == neg_inf() ? 0.f : m[e];  // -Inf adds 0, NaN poisons, as the two-pass tiles
        sm[e] = 0.f;
      }
#pragma unroll
      for (int i = 0; i < NV; ++i) {  // rows past the item hold -Inf: they add 0
        const unsigned q4[4] = {v[i].x, v[i].y, v[i].z, v[i].w};
#pragma unroll
        for (int q = 0; q < 4; ++q) {
          sm[2 * q] += exp_sub(lo_f(q4[q]), mr[2 * q]);
          sm[2 * q + 1] += exp_sub(hi_f(q4[q]), mr[2 * q + 1]);
        }
      }
#pragma unroll
      for (int o = kLanesPerRow; o < 32; o <<= 1)
#pragma unroll
        for (int e = 0; e < 8; ++e) sm[e] += __shfl_xor_sync(0xffffffffu, sm[e], o);
      if (t >= 2) mbar_wait(&taken[t % 2], (unsigned)((t / 2 - 1) & 1));
      if (lane < kLanesPerRow)
#pragma unroll
        for (int e = 0; e < 8; ++e) red[((t % 2) * kStats + w) * kInner + lane * 8 + e] = make_float2(m[e], sm[e]);
      __syncwarp();
      if (lane == 0) mbar_arrive(&statted[t % 2]);
    }
    return;
  }
  if (w >= kStats + kOut) {  // two publisher warps (items alternate): the kStats warps' pairs folded, stored, counted
    for (int t = w - (kStats + kOut); t < my; t += 2) {
      int slab, r0, rows;
      rows_of(t, slab, r0, rows);
      mbar_wait(&statted[t % 2], (unsigned)((t / 2) & 1));
      float2 a[kInner / 32];
#pragma unroll
      for (int h = 0; h < kInner / 32; ++h)
        a[h] = fold_pairs<kStats>(make_float2(neg_inf(), 0.f),
                             [&](int i) { return red[((t % 2) * kStats + i) * kInner + lane + 32 * h]; });
      __syncwarp();
      if (lane == 0) mbar_arrive(&taken[t % 2]);
      float2* const dst = ws + ((index_t)slab * kParts + (bd + t * GD) % kParts) * kInner;
#pragma unroll
      for (int h = 0; h < kInner / 32; ++h) dst[lane + 32 * h] = a[h];
      __syncwarp();  // the warp's stores, then lane 0's release (cumulative)
      if (lane == 0) red_release_add(counters + slab, 1u);
    }
    return;
  }
  // Output warps: fetch waits for item u to land and, with kHold > 0, copies the thread's vectors of it into
  // registers and frees its slot (kHold items held: the next one is copied before this one is written); emit writes
  // the epilogue of each once the slab's flag is up, from the registers or (kHold 0) from the slot, freed after.
  const int ot = tid - kStats * 32, g = lane % kLanesPerRow;
  constexpr int ORPS = kOut * 32 / kLanesPerRow, ONV = (kPartRows + ORPS - 1) / ORPS;
  auto fetch = [&](int u, uint4 (&va)[ONV]) {
    int slab, r0, rows;
    rows_of(u, slab, r0, rows);
    mbar_wait(&full[u % kSlots], (unsigned)((u / kSlots) & 1));
    if constexpr (kHold > 0) {
      const uint4* sl = slots + (size_t)(u % kSlots) * slot_vecs;
#pragma unroll
      for (int i = 0; i < ONV; ++i) {
        const int r = ot / kLanesPerRow + i * ORPS;
        va[i] = r < rows ? sl[r * kLanesPerRow + g] : make_uint4(0u, 0u, 0u, 0u);
      }
      free_slot(u);
    }
  };
  auto emit = [&](int u, const uint4 (&va)[ONV]) {
    int slab, r0, rows;
    rows_of(u, slab, r0, rows);
    if (ot == 0)  // one poller a block: every poll of every block loads the flags' one L2 line
      while (ld_acquire(flags + slab) == 0u) __nanosleep(32);
    asm volatile("bar.sync 1, %0;" ::"r"(kOut * 32) : "memory");  // its acquire orders the output warps' finals loads
    // Every output warp of every block reads the slab's finals as soon as its flag rises: one 16-byte load a lane
    // (float4 k < 4 of group g by lane g + kLanesPerRow (k % LG)), then shuffles: eight 8-byte loads a lane (four
    // lines a load) make the finals' L2 lines a hot spot (Note [Softmax held slabs]).
    constexpr int LG = 32 / kLanesPerRow, NQ = LG >= 4 ? 1 : 4 / LG;
    const float4* const fs = reinterpret_cast<const float4*>(finals + slab * kInner) + g * 4;
    float4 fq[NQ];
#pragma unroll
    for (int q = 0; q < NQ; ++q) {
      const int k = lane / kLanesPerRow + q * LG;
      fq[q] = k < 4 ? __ldcg(fs + k) : make_float4(0.f, 0.f, 0.f, 0.f);
    }
    float m[8], c[8];  // the maximum and the epilogue's constant: log(sum) or 1 / sum
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const float4 f = fq[k / LG];
      const int src = g + kLanesPerRow * (k % LG);
      m[2 * k] = __shfl_sync(0xffffffffu, f.x, src);
      c[2 * k] = __shfl_sync(0xffffffffu, f.y, src);
      m[2 * k + 1] = __shfl_sync(0xffffffffu, f.z, src);
      c[2 * k + 1] = __shfl_sync(0xffffffffu, f.w, src);
    }
    const uint4* sl = slots + (size_t)(u % kSlots) * slot_vecs;
    uint4* y = out + ((index_t)slab * kN + r0) * kLanesPerRow;
#pragma unroll
    for (int i = 0; i < ONV; ++i) {
      const int r = ot / kLanesPerRow + i * ORPS;
      if (r < rows) {
        const uint4 v = kHold > 0 ? va[i] : sl[r * kLanesPerRow + g];
        const unsigned q4[4] = {v.x, v.y, v.z, v.w};
        unsigned o4[4];
#pragma unroll
        for (int q = 0; q < 4; ++q)
          o4[q] = pack2(held_epilogue(lo_f(q4[q]), m[2 * q], c[2 * q]),
                        held_epilogue(hi_f(q4[q]), m[2 * q + 1], c[2 * q + 1]));
        y[r * kLanesPerRow + g] = make_uint4(o4[0], o4[1], o4[2], o4[3]);
      }
    }
  };
  // The two items kHold 2 holds in turn, at the kernel's scope (not the branch's: Note [Softmax column walks]).
  uint4 va[ONV], vb[ONV];
  if constexpr (kHold == 2) {
    if (my > 0) fetch(0, va);
    for (int u = 0; u < my; u += 2) {
      if (u + 1 < my) fetch(u + 1, vb);
      emit(u, va);
      if (u + 1 < my) {
        if (u + 2 < my) fetch(u + 2, va);
        emit(u + 1, vb);
      }
    }
  } else {
    for (int u = 0; u < my; ++u) {
      uint4 vu[ONV];
      fetch(u, vu);
      emit(u, vu);
      if constexpr (kHold == 0) free_slot(u);
    }
  }
}
