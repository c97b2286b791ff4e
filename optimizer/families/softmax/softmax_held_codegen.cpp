/// @brief Device code of the softmax family's held slabs (Note [Softmax held slabs]): a cooperative grid whose data
/// blocks hold parts of whole [n, inner] slabs in shared-memory slots, with statistics, publishing, output and bulk
/// loads on warps of their own, and GM blocks that only merge each slab's parts.
#include <sstream>

#include "codegen_common.h"
#include "softmax_family.h"

namespace cudal1::optimizer::softmax {
namespace {

/// Inline PTX of the kernel: mbarriers, bulk copies into shared memory, the L2 prefetch, ex2, and the global
/// counter's and flags' release and acquire.
const char* held_primitives_source() {
  return R"(__device__ __forceinline__ unsigned sa(const void* p) {
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
)";
}

/// The (max, sum of exp(x - max)) pairs' merge, and the kernel.
const char* held_kernel_source() {
  return R"(/// Folds acc and NN pairs b(i) in two passes: the maximum of all, then each sum rescaled to it. A pair
/// whose maximum is -Inf saw only -Inf and NaN: its sum (0 or NaN) is kept as sum x 0, so a NaN is never lost.
template <int NN, class Get>
__device__ __forceinline__ float2 fold_pairs(float2 acc, Get b) {
  float mm = acc.x;
#pragma unroll
  for (int i = 0; i < NN; ++i) mm = fmaxf(mm, b(i).x);
  float t = acc.x == NEG_INF ? acc.y * 0.f : acc.y * ex2((acc.x - mm) * L2E);
#pragma unroll
  for (int i = 0; i < NN; ++i) {
    const float2 p = b(i);
    t += p.x == NEG_INF ? p.y * 0.f : p.y * ex2((p.x - mm) * L2E);
  }
  return make_float2(mm, t);
}

/// Items: (slab, part) k = bd + t x GD for the data block bd = blockIdx.x - GM and t = 0, 1, ...; part p of a slab
/// is rows [p R, min(N, p R + R)). Workspace: OUTER x P x INNER pairs, OUTER x INNER final pairs, then OUTER
/// counters and OUTER flags (zeroed by the launch).
extern "C" __global__ void __launch_bounds__(THREADS, 1)
cudal1_softmax(const uint4* __restrict__ in, uint4* __restrict__ out, float2* __restrict__ ws) {
  extern __shared__ __align__(128) unsigned char smem[];
  __shared__ __align__(8) unsigned long long full[MAX_SLOTS], written[MAX_SLOTS], statted[2], taken[2];
  float2* const finals = ws + (index_t)OUTER * P * INNER;
  unsigned* const counters = reinterpret_cast<unsigned*>(finals + OUTER * INNER);
  unsigned* const flags = counters + OUTER;
  const int tid = threadIdx.x, lane = tid % 32, w = tid / 32;
  if ((int)blockIdx.x < GM) {  // a merging block: slabs blockIdx.x, + GM, ...; MC chunks of INNER threads
    constexpr int MC = THREADS / INNER;
    float2* const red = reinterpret_cast<float2*>(smem);
    const int col = tid % INNER, j = tid / INNER, pc = (P + MC - 1) / MC;
    for (int slab = blockIdx.x; slab < OUTER; slab += GM) {
      if (tid == 0)
        while (ld_acquire(counters + slab) != (unsigned)P) __nanosleep(32);
      __syncthreads();  // thread 0's acquire orders the pairs' loads (L2, __ldcg) of every thread after it
      if (j < MC) {
        const float2* p = ws + (index_t)slab * P * INNER + col;
        const int lo = min(P, j * pc), hi = min(P, lo + pc);
        float2 acc = make_float2(NEG_INF, 0.f);
        for (int i0 = lo; i0 < hi; i0 += 8) {  // eight loads in flight, folded in part order
          float2 b[8];
#pragma unroll
          for (int i = 0; i < 8; ++i)
            b[i] = i0 + i < hi ? __ldcg(p + (index_t)(i0 + i) * INNER) : make_float2(NEG_INF, 0.f);
          acc = fold_pairs<8>(acc, [&](int i) { return b[i]; });
        }
        red[j * INNER + col] = acc;
      }
      __syncthreads();
      if (tid < INNER) {
        float2 f = fold_pairs<MC>(make_float2(NEG_INF, 0.f), [&](int i) { return red[i * INNER + tid]; });
        if (f.x == NEG_INF) f.y = QNAN;  // every element -Inf or NaN: as the two-pass tiles
        f.y = LOG ? logf(f.y) : 1.f / f.y;  // the epilogue's constant, made once here (as the tiles' prep)
        finals[slab * INNER + tid] = f;
      }
      __syncthreads();  // the block's stores, then thread 0's release (cumulative: no fence.sc, as CUTLASS's barriers)
      if (tid == 0) st_release(flags + slab, 1u);
    }
    return;
  }
  const int GD = gridDim.x - GM, bd = blockIdx.x - GM, items = OUTER * P;
  const int my = bd < items ? (items - bd + GD - 1) / GD : 0;
  const int slot_vecs = R * LPR;
  uint4* const slots = reinterpret_cast<uint4*>(smem);
  float2* const red = reinterpret_cast<float2*>(smem + (size_t)NB * slot_vecs * 16);  // [2][S][INNER]
  if (tid == 0) {
    for (int i = 0; i < NB; ++i) mbar_init(&full[i], 1), mbar_init(&written[i], HOLD > 0 ? O + S : O);
    for (int i = 0; i < 2; ++i) mbar_init(&statted[i], S), mbar_init(&taken[i], 1);
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  auto rows_of = [&](int t, int& slab, int& r0, int& rows) {
    const int k = bd + t * GD;
    slab = k / P;
    r0 = (k % P) * R;
    rows = min(R, N - r0);
  };
  // A warp is done reading item t's slot (no proxy fence: reads before a bulk copy's write, as CUTLASS's); the slot
  // is refilled once all its readers have arrived (O warps, and with HOLD > 0 the S statistics warps too).
  auto free_slot = [&](int t) {
    __syncwarp();
    if (lane == 0) mbar_arrive(&written[t % NB]);
  };
  if (w == S + O + 2) {  // the producer warp (lane 0): bulk loads into the slots, PF items prefetched into L2 first
    if (lane == 0) {
      auto at = [&](int t, unsigned& bytes) {
        int slab, r0, rows;
        rows_of(t, slab, r0, rows);
        bytes = (unsigned)rows * LPR * 16;
        return in + ((index_t)slab * N + r0) * LPR;
      };
      auto issue = [&](int t) {
        unsigned bytes;
        const uint4* src = at(t, bytes);
        bulk_load(slots + (size_t)(t % NB) * slot_vecs, src, bytes, &full[t % NB]);
        if (PF > 0 && t + PF >= NB && t + PF < my) {
          const uint4* ahead = at(t + PF, bytes);
          prefetch_l2(ahead, bytes);
        }
      };
      for (int t = NB; t < min(PF, my); ++t) {  // what the first NB issues do not reach
        unsigned bytes;
        const uint4* src = at(t, bytes);
        prefetch_l2(src, bytes);
      }
      for (int t = 0; t < min(NB, my); ++t) issue(t);
      for (int u = 0; u + NB < my; ++u) {
        mbar_wait(&written[u % NB], (unsigned)((u / NB) & 1));
        issue(u + NB);
      }
    }
    return;
  }
  if (w < S) {  // statistics warps: a warp's (max, sum) of each column over its rows of item t into red[t % 2]
    const int g = tid % LPR;
    constexpr int RPS = S * 32 / LPR, NV = (R + RPS - 1) / RPS;  // rows a pass of the S warps, passes
    for (int t = 0; t < my; ++t) {
      int slab, r0, rows;
      rows_of(t, slab, r0, rows);
      mbar_wait(&full[t % NB], (unsigned)((t / NB) & 1));
      const uint4* s = slots + (size_t)(t % NB) * slot_vecs;
      const uint4 ninf = make_uint4(PACKED_NEG_INF, PACKED_NEG_INF, PACKED_NEG_INF, PACKED_NEG_INF);
      uint4 v[NV], bm = ninf;
#pragma unroll
      for (int i = 0; i < NV; ++i) {  // the thread's rows in registers; the maximum on packed pairs (NaN skipped)
        const int r = tid / LPR + i * RPS;
        v[i] = r < rows ? s[r * LPR + g] : ninf;
        bm.x = max2(bm.x, v[i].x);
        bm.y = max2(bm.y, v[i].y);
        bm.z = max2(bm.z, v[i].z);
        bm.w = max2(bm.w, v[i].w);
      }
#if HOLD > 0
      free_slot(t);  // the output warps copy the item too before the slot is refilled
#endif
#pragma unroll
      for (int o = LPR; o < 32; o <<= 1) {
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
        mr[e] = m[e] == NEG_INF ? 0.f : m[e];  // -Inf adds 0, NaN poisons, as the two-pass tiles
        sm[e] = 0.f;
      }
#pragma unroll
      for (int i = 0; i < NV; ++i) {  // rows past the item hold -Inf: they add 0
        const unsigned q4[4] = {v[i].x, v[i].y, v[i].z, v[i].w};
#pragma unroll
        for (int q = 0; q < 4; ++q) {
          sm[2 * q] += EXP_SUB(lo_f(q4[q]), mr[2 * q]);
          sm[2 * q + 1] += EXP_SUB(hi_f(q4[q]), mr[2 * q + 1]);
        }
      }
#pragma unroll
      for (int o = LPR; o < 32; o <<= 1)
#pragma unroll
        for (int e = 0; e < 8; ++e) sm[e] += __shfl_xor_sync(0xffffffffu, sm[e], o);
      if (t >= 2) mbar_wait(&taken[t % 2], (unsigned)((t / 2 - 1) & 1));
      if (lane < LPR)
#pragma unroll
        for (int e = 0; e < 8; ++e) red[((t % 2) * S + w) * INNER + lane * 8 + e] = make_float2(m[e], sm[e]);
      __syncwarp();
      if (lane == 0) mbar_arrive(&statted[t % 2]);
    }
    return;
  }
  if (w >= S + O) {  // two publisher warps (items alternate): the S warps' pairs folded, stored, counted
    for (int t = w - (S + O); t < my; t += 2) {
      int slab, r0, rows;
      rows_of(t, slab, r0, rows);
      mbar_wait(&statted[t % 2], (unsigned)((t / 2) & 1));
      float2 a[INNER / 32];
#pragma unroll
      for (int h = 0; h < INNER / 32; ++h)
        a[h] = fold_pairs<S>(make_float2(NEG_INF, 0.f),
                             [&](int i) { return red[((t % 2) * S + i) * INNER + lane + 32 * h]; });
      __syncwarp();
      if (lane == 0) mbar_arrive(&taken[t % 2]);
      float2* const dst = ws + ((index_t)slab * P + (bd + t * GD) % P) * INNER;
#pragma unroll
      for (int h = 0; h < INNER / 32; ++h) dst[lane + 32 * h] = a[h];
      __syncwarp();  // the warp's stores, then lane 0's release (cumulative)
      if (lane == 0) red_release_add(counters + slab, 1u);
    }
    return;
  }
  // Output warps: fetch waits for item u to land and, with HOLD > 0, copies the thread's vectors of it into
  // registers and frees its slot (HOLD items held: the next one is copied before this one is written); emit writes
  // EPILOGUE of each once the slab's flag is up, from the registers or (HOLD 0) from the slot, freed after.
  const int ot = tid - S * 32, g = lane % LPR;
  constexpr int ORPS = O * 32 / LPR, ONV = (R + ORPS - 1) / ORPS;
  auto fetch = [&](int u, uint4 (&va)[ONV]) {
    int slab, r0, rows;
    rows_of(u, slab, r0, rows);
    mbar_wait(&full[u % NB], (unsigned)((u / NB) & 1));
#if HOLD > 0
    const uint4* sl = slots + (size_t)(u % NB) * slot_vecs;
#pragma unroll
    for (int i = 0; i < ONV; ++i) {
      const int r = ot / LPR + i * ORPS;
      va[i] = r < rows ? sl[r * LPR + g] : make_uint4(0u, 0u, 0u, 0u);
    }
    free_slot(u);
#endif
  };
  auto emit = [&](int u, const uint4 (&va)[ONV]) {
    int slab, r0, rows;
    rows_of(u, slab, r0, rows);
    if (ot == 0)  // one poller a block: every poll of every block loads the flags' one L2 line
      while (ld_acquire(flags + slab) == 0u) __nanosleep(32);
    asm volatile("bar.sync 1, %0;" ::"r"(O * 32) : "memory");  // its acquire orders the output warps' finals loads
    // Every output warp of every block reads the slab's finals as soon as its flag rises: one 16-byte load a lane
    // (float4 k < 4 of group g by lane g + LPR (k % LG)), then shuffles. Eight 8-byte loads a lane (four lines a
    // load) made the finals' L2 lines a hot spot: 152 us against 77 (Note [Softmax held slabs]).
    constexpr int LG = 32 / LPR, NQ = LG >= 4 ? 1 : 4 / LG;
    const float4* const fs = reinterpret_cast<const float4*>(finals + slab * INNER) + g * 4;
    float4 fq[NQ];
#pragma unroll
    for (int q = 0; q < NQ; ++q) {
      const int k = lane / LPR + q * LG;
      fq[q] = k < 4 ? __ldcg(fs + k) : make_float4(0.f, 0.f, 0.f, 0.f);
    }
    float m[8], c[8];  // the maximum and the epilogue's constant: log(sum) or 1 / sum
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const float4 f = fq[k / LG];
      const int src = g + LPR * (k % LG);
      m[2 * k] = __shfl_sync(0xffffffffu, f.x, src);
      c[2 * k] = __shfl_sync(0xffffffffu, f.y, src);
      m[2 * k + 1] = __shfl_sync(0xffffffffu, f.z, src);
      c[2 * k + 1] = __shfl_sync(0xffffffffu, f.w, src);
    }
)" R"(#if LOG
#define EPILOGUE(v, e) (((v) - m[e]) - c[e])  // LogSoftMaxForwardEpilogue
#else
#define EPILOGUE(v, e) (EXP_SUB(v, m[e]) * c[e])  // SoftMaxForwardEpilogue: 16-bit, so DIV_SUM's fast form
#endif
)";
}

const char* held_output_source() {
  return R"(    const uint4* sl = slots + (size_t)(u % NB) * slot_vecs;
    uint4* y = out + ((index_t)slab * N + r0) * LPR;
#pragma unroll
    for (int i = 0; i < ONV; ++i) {
      const int r = ot / LPR + i * ORPS;
      if (r < rows) {
        const uint4 v = HOLD > 0 ? va[i] : sl[r * LPR + g];
        const unsigned q4[4] = {v.x, v.y, v.z, v.w};
        unsigned o4[4];
#pragma unroll
        for (int q = 0; q < 4; ++q) o4[q] = pack2(EPILOGUE(lo_f(q4[q]), 2 * q), EPILOGUE(hi_f(q4[q]), 2 * q + 1));
        y[r * LPR + g] = make_uint4(o4[0], o4[1], o4[2], o4[3]);
      }
    }
  };
#if HOLD == 2
  uint4 va[ONV], vb[ONV];
  if (my > 0) fetch(0, va);
  for (int u = 0; u < my; u += 2) {
    if (u + 1 < my) fetch(u + 1, vb);
    emit(u, va);
    if (u + 1 < my) {
      if (u + 2 < my) fetch(u + 2, va);
      emit(u + 1, vb);
    }
  }
#else
  for (int u = 0; u < my; ++u) {
    uint4 va[ONV];
    fetch(u, va);
    emit(u, va);
#if HOLD == 0
    free_slot(u);
#endif
  }
#endif
}
)";
}

}  // namespace

int held_threads(const HeldKnobs& k) { return (k.stats + k.out + 3) * 32; }

int64_t held_red_bytes(const ColumnShape& c, const HeldKnobs& k) { return 2 * int64_t{k.stats} * c.inner * 8; }

KernelSource generate_softmax_held(const ColumnShape& c, const HeldKnobs& k) {
  std::ostringstream s;
  s << "// cudal1 softmax held slabs: log=" << c.log << " " << c10::toString(c.dtype) << " outer=" << c.outer
    << " n=" << c.n << " inner=" << c.inner << " stats=" << k.stats << " out=" << k.out << " gm=" << k.merge
    << " pf=" << k.prefetch << " hold=" << k.hold << "\n";
  s << "typedef long long index_t;\n#define VEC 4\n" << packed_pair_source(c.dtype) << fast_exp_source(c.dtype, true);
  s << "#define NEG_INF __int_as_float(0xff800000u)\n#define QNAN __int_as_float(0x7fffffffu)\n"
    << "#define L2E 1.4426950408889634f\n#define LOG " << (c.log ? 1 : 0) << "\n";
  s << "#define S " << k.stats << "  // statistics warps\n#define O " << k.out << "  // output warps\n#define GM "
    << k.merge << "  // merging blocks\n#define PF " << k.prefetch << "  // items prefetched into L2 ahead\n"
    << "#define HOLD " << k.hold << "  // items the output warps hold in registers\n"
    << "#define THREADS " << held_threads(k) << "\n#define MAX_SLOTS " << kHeldMaxSlots << "\n";
  const HeldGrid g = held_grid(c, k, c.sm_count);
  s << "static constexpr int N = " << c.n << ", INNER = " << c.inner << ", LPR = " << c.inner / 8
    << ";  // lanes a row: 16 bytes each\nstatic constexpr int OUTER = " << c.outer << ", P = " << g.parts
    << ", R = " << g.rows << ", NB = " << g.slots << ";  // parts a slab, rows a part, slots: held_grid for "
    << c.sm_count << " SMs\n";
  s << held_primitives_source() << held_kernel_source() << held_output_source();
  return KernelSource{s.str(), "cudal1_softmax"};
}

}  // namespace cudal1::optimizer::softmax
