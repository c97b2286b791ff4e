/// @brief Mode 7 of the normalisation family: a row over a thread-block cluster, each block's slice held in
/// registers, fed by the bulk copy engine through a shared-memory ring (Note [Norm held]): sizing and device code.
#include <algorithm>

#include "codegen_common.h"
#include "norm_family.h"
#include "norm_held.h"

namespace cudal1::optimizer::norm {
namespace {

// sm_90: at most 227 KB of shared memory per block; 1 KB covers the kernel's static arrays (red[96], the
// mbarriers and the inbox: < 1 KB at 32 + 4 slots and clusters of 16).
constexpr int64_t kHeldSmem = 226 * 1024;
constexpr int kMaxSlots = 32;  ///< mbarrier pairs in static shared memory
constexpr int64_t kVectorBytes = 16;
constexpr int64_t kHeldVectorsPerBlock = 8192;  ///< 128 KB of registers: 16 vectors a thread at 512, 32 at 256
constexpr int64_t kRereadRing = 64 * 1024;      ///< the reread ring's bytes

/// Ring slots of k.chunk_kb that fit a block's shared memory (at most kMaxSlots).
int64_t most_slots(const NormKnobs& k) {
  return std::min<int64_t>(kMaxSlots, kHeldSmem / (int64_t{k.chunk_kb} * 1024));
}

/// What modes 7 and 8 both ask of the knobs: sm_90+, 16-byte vectors, 256 or 512 consumers, 16 or 32 KB chunks,
/// at least a vector a consumer per chunk and a slice of at least one vector a consumer.
bool held_knobs_fit(const NormShape& s, const NormKnobs& k) {
  if (s.sm < 90 || int64_t{k.vec} * elem_size(s.dtype) != kVectorBytes) return false;
  if ((k.block != 256 && k.block != 512) || (k.chunk_kb != 16 && k.chunk_kb != 32)) return false;
  return held_vectors_per_chunk_thread(k) >= 1 && held_slice_vectors(s, k) >= k.block;
}

/// A slice of `chunks` wholly in registers: its tight ring (a slice and a chunk) fits, and a deep one holds more.
bool whole_slice_ring_fits(int64_t chunks, const NormKnobs& k) {
  const int64_t tight = chunks + 1, most = most_slots(k);
  return tight <= most && (!k.deep || most > tight);
}

}  // namespace

int64_t held_slice_vectors(const NormShape& s, const NormKnobs& k) {
  const int64_t nv = s.cols / k.vec;
  return (nv + k.cluster - 1) / k.cluster;
}

int held_vectors_per_chunk_thread(const NormKnobs& k) {
  return static_cast<int>(int64_t{k.chunk_kb} * 1024 / (int64_t{k.block} * kVectorBytes));
}

int64_t held_chunks(const NormShape& s, const NormKnobs& k) {
  const int64_t chv = int64_t{k.block} * held_vectors_per_chunk_thread(k);
  return (held_slice_vectors(s, k) + chv - 1) / chv;
}

int64_t held_kept_chunks(const NormShape& s, const NormKnobs& k) {
  const int cpt = std::max(1, held_vectors_per_chunk_thread(k));
  return std::min<int64_t>(held_chunks(s, k), kHeldVectorsPerBlock / k.block / cpt);
}

int held_reread_slots(const NormShape& s, const NormKnobs& k) {
  return held_chunks(s, k) > held_kept_chunks(s, k) ? static_cast<int>(kRereadRing / (int64_t{k.chunk_kb} * 1024))
                                                    : 0;
}

int held_slots(const NormShape& s, const NormKnobs& k) {
  const int64_t most = most_slots(k);
  if (held_reread_slots(s, k) > 0) return static_cast<int>(most - held_reread_slots(s, k));
  const int64_t tight = held_chunks(s, k) + 1;
  return static_cast<int>(k.deep ? most : std::min(tight, most));
}

int held_threads(const NormShape& s, const NormKnobs& k) {
  return k.block + (held_reread_slots(s, k) > 0 || k.mode == 8 ? 64 : 32);
}

bool held_fits(const NormShape& s, const NormKnobs& k) {
  if (!held_knobs_fit(s, k) || s.rows >= (int64_t{1} << 31)) return false;
  if (k.cluster < 1 || k.cluster > 16 || (k.cluster & (k.cluster - 1)) != 0) return false;
  const int64_t chunks = held_chunks(s, k), kept = held_kept_chunks(s, k);
  if (kept < chunks)  // rereads: 512 consumers (two producer warps leave 113 registers a thread), at most as
                      // many chunks reread as kept, one (deep) ring
    return k.block == 512 && k.deep && chunks - kept <= kept && most_slots(k) - held_reread_slots(s, k) >= 2;
  return whole_slice_ring_fits(chunks, k);
}

int64_t grid_held_parts(const NormShape& s, const NormKnobs& k) {
  const int64_t nv = s.cols / k.vec;
  return (nv + kHeldVectorsPerBlock - 1) / kHeldVectorsPerBlock;
}

bool grid_held_fits(const NormShape& s, const NormKnobs& k) {
  if (k.cluster < 2 || k.cluster > ring_reference_blocks(s.sm) || s.rows * k.cluster >= (int64_t{1} << 31))
    return false;
  if (!held_knobs_fit(s, k)) return false;
  const int64_t chunks = held_chunks(s, k);
  return held_kept_chunks(s, k) == chunks && whole_slice_ring_fits(chunks, k);  // no rereads
}

unsigned held_smem_bytes(const NormShape& s, const NormKnobs& k) {
  return static_cast<unsigned>(int64_t{held_slots(s, k) + held_reread_slots(s, k)} * k.chunk_kb * 1024);
}

const char* held_source() {
  return R"(// Note [Norm held] (norm_family.h): mbarriers, bulk copies, st.async (mode 7) or the workspace (8); sm_90.
__device__ __forceinline__ unsigned smem_u32(const void* p) { return (unsigned)__cvta_generic_to_shared(p); }
__device__ __forceinline__ void mbar_init(unsigned long long* bar, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_u32(bar)), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_wait(unsigned long long* bar, unsigned parity) {
  asm volatile("{\n .reg .pred p;\n W_%=:\n mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n @!p bra W_%=;\n}"
               ::"r"(smem_u32(bar)), "r"(parity) : "memory");
}
__device__ __forceinline__ void mbar_arrive(unsigned long long* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(smem_u32(bar)) : "memory");
}
__device__ __forceinline__ void mbar_expect(unsigned long long* bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_u32(bar)), "r"(bytes) : "memory");
}
/// Arrives on `bar` expecting `bytes`, and copies them from global `src` into shared `dst` (none when 0).
__device__ __forceinline__ void bulk_in(void* dst, const void* src, unsigned bytes, unsigned long long* bar) {
  mbar_expect(bar, bytes);
  if (bytes > 0)
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
                 ::"r"(smem_u32(dst)), "l"(src), "r"(bytes), "r"(smem_u32(bar)) : "memory");
}
#if CL > 1
/// Stores v at `dst` in block `rank`'s shared memory, completing 16 bytes on that block's mbarrier `bar`.
__device__ __forceinline__ void send16(float4* dst, float4 v, unsigned long long* bar, unsigned rank) {
  unsigned rd, rb;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(rd) : "r"(smem_u32(dst)), "r"(rank));
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(rb) : "r"(smem_u32(bar)), "r"(rank));
  asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.f32 [%0], {%1, %2, %3, %4}, [%5];"
               ::"r"(rd), "f"(v.x), "f"(v.y), "f"(v.z), "f"(v.w), "r"(rb) : "memory");
}
#endif
/// Vectors of chunk `a` (slice vector offset) that this block holds: the bytes its bulk copy moves.
__device__ __forceinline__ unsigned chunk_bytes(index_t a, index_t cnt) {
  const index_t n = a < cnt ? (cnt - a < CHV ? cnt - a : CHV) : 0;
  return (unsigned)(n * (index_t)sizeof(vec_t));
}
#ifdef GP
/// Mode 8: publishes this block's triple of `row` and arrives on the row's counter (thread 0; the triple is the
/// same in every thread). Counters follow the ROWS x GP triples in the workspace, zeroed per call.
__device__ __forceinline__ void grid_publish(float* __restrict__ ws, index_t row, unsigned rank, const Welford& t) {
  publish(ws, row * GP + rank, t);
  if (threadIdx.x == 0) {
    __threadfence();
    atomicAdd(reinterpret_cast<unsigned*>(ws + ROWS * GP * 3) + row, 1u);
  }
}
/// Mode 8, the exchange warp (lane l): for each of the block's rows in turn, waits until all GP blocks have
/// arrived (they are resident: the launch is cooperative), merges the GP triples (lane l takes l, l + 32, ... in
/// order, then the warp's tree: the same bits in every block), writes mean and rstd (rank 0) and hands the
/// statistics the output uses to the consumers in stats[row parity], completing ready[parity]. A parity's slot
/// is rewritten two rows later, once the row between has arrived everywhere, so after the consumers took it.
__device__ __forceinline__ void grid_exchange_warp(const float* __restrict__ ws, index_t cid, index_t clusters,
                                                   index_t mine, unsigned rank, stat_t* __restrict__ mean_out,
                                                   stat_t* __restrict__ rstd_out, float2* stats,
                                                   unsigned long long* ready) {
  const unsigned l = threadIdx.x % 32;
  const unsigned* const arrived = reinterpret_cast<const unsigned*>(ws + ROWS * GP * 3);
  for (index_t it = 0; it < mine; ++it) {
    const index_t row = cid + it * clusters;
    if (l == 0) {
      while (*reinterpret_cast<const volatile unsigned*>(arrived + row) < (unsigned)GP) __nanosleep(32);
      __threadfence();
    }
    __syncwarp();
    Welford acc{0.f, 0.f, 0.f};
    for (int t = (int)l; t < GP; t += 32) {
      const float* p = ws + (row * GP + t) * 3;
      acc = wf_combine(acc, Welford{__ldcg(p), __ldcg(p + 1), __ldcg(p + 2)});
    }
    acc = warp_welford(acc);
    if (l == 0) {
      const float mean = acc.mean, rstd = rsqrtf(acc.m2 / (float)COLS + EPS);
      if (rank == 0) {
        mean_out[row] = to_stat(mean);
        rstd_out[row] = to_stat(rstd);
      }
      stats[it & 1] = make_float2(used_stat(mean), used_stat(rstd));
      mbar_arrive(&ready[it & 1]);
    }
    __syncwarp();
  }
}
/// Mode 8: the block's triple of the row whose chunks are q0 .. q0 + CH - 1 in the ring, read from shared
/// memory without freeing the slots (per-thread sums shifted by the thread's first element, merged with Chan's
/// formula, as mode 7's rereads).
__device__ __forceinline__ Welford ring_triple(const vec_t* ring, unsigned long long* full, index_t q0,
                                               index_t cnt, float* red) {
  float shift = 0.f, s1 = 0.f, s2 = 0.f;
  int n = 0;
#pragma unroll
  for (int k = 0; k < CH; ++k) {
    const index_t q = q0 + k;
    const int slot = (int)(q % NSLOT);
    mbar_wait(&full[slot], (unsigned)((q / NSLOT) & 1));
    const vec_t* src = ring + (index_t)slot * CHV;
#pragma unroll
    for (int u = 0; u < CPT; ++u)
      if ((index_t)k * CHV + threadIdx.x + u * BLOCK < cnt) {
        const vec_t v = src[threadIdx.x + u * BLOCK];
        if (n == 0) shift = to_float(v.v[0]);
        n += VEC;
#pragma unroll
        for (int e = 0; e < VEC; ++e) {
          const float d = to_float(v.v[e]) - shift;
          s1 += d;
          s2 += d * d;
        }
      }
  }
  const float tn = (float)n;
  return row_welford(n > 0 ? Welford{tn, shift + s1 / tn, fmaxf(s2 - s1 * s1 / tn, 0.f)} : Welford{0.f, 0.f, 0.f},
                     red);
}
/// Mode 8: chunk k of the row whose chunks are q0 .. q0 + CH - 1 from the ring into registers, its slot freed.
__device__ __forceinline__ void ring_take_chunk(const vec_t* ring, unsigned long long* full,
                                               unsigned long long* empty, index_t q0, int k, index_t cnt,
                                               vec_t (&c)[HELD]) {
  const index_t q = q0 + k;
  const int slot = (int)(q % NSLOT);
  mbar_wait(&full[slot], (unsigned)((q / NSLOT) & 1));
  const vec_t* src = ring + (index_t)slot * CHV;
#pragma unroll
  for (int u = 0; u < CPT; ++u)
    if ((index_t)k * CHV + threadIdx.x + u * BLOCK < cnt) c[k * CPT + u] = src[threadIdx.x + u * BLOCK];
  __syncwarp();
  if (threadIdx.x % 32 == 0) mbar_arrive(&empty[slot]);
}
#endif
/// Rows cid, cid + clusters, ... go to cluster cid (mode 8: the GP consecutive blocks cid of the grid); block
/// `rank` holds vectors [rank x SV, rank x SV + cnt) of each, in CH chunks of CHV vectors (thread t's are t + u x
/// BLOCK of a chunk, u < CPT); the first KEEP chunks stay in registers (HELD vectors a thread), the last DROP are
/// reread after the exchange (Note [Norm held]).
__device__ __forceinline__ void held_rows(const storage_t* __restrict__ x, const storage_t* __restrict__ w,
                                          const storage_t* __restrict__ b, storage_t* __restrict__ y,
                                          stat_t* __restrict__ mean_out, stat_t* __restrict__ rstd_out,
                                          float* __restrict__ ws, float* red) {
  extern __shared__ __align__(128) unsigned char held_smem[];
  vec_t* const ring = reinterpret_cast<vec_t*>(held_smem);
  __shared__ __align__(8) unsigned long long full[NSLOT], empty[NSLOT];
#if DROP > 0
  vec_t* const ringb = ring + (index_t)NSLOT * CHV;  // the rereads' ring
  __shared__ __align__(8) unsigned long long fullb[NSLOTB], emptyb[NSLOTB], gate;
#endif
#ifdef GP
  __shared__ __align__(8) unsigned long long ready[2];  // a row of each parity has its statistics in stats[]
  __shared__ float2 stats[2];                          // (mean, rstd) the output uses
  const unsigned rank = blockIdx.x % GP;
  const index_t clusters = gridDim.x / GP, cid = blockIdx.x / GP;
#else
#if CL > 1
  __shared__ __align__(8) unsigned long long xbar[2];  // the triples of a row of each parity have landed
  __shared__ __align__(16) float4 inbox[2][CL];        // every block's triple of that row, by rank
  const unsigned rank = cluster_rank();
#else
  const unsigned rank = 0;
#endif
  const index_t clusters = gridDim.x / CL, cid = blockIdx.x / CL;
#endif
  const index_t j0 = (index_t)rank * SV;
  const index_t cnt = j0 < NV ? (NV - j0 < SV ? NV - j0 : SV) : 0;
  const index_t mine = cid < ROWS ? (ROWS - cid + clusters - 1) / clusters : 0;
  if (threadIdx.x == 0) {
    for (int i = 0; i < NSLOT; ++i) {
      mbar_init(&full[i], 1);
      mbar_init(&empty[i], BLOCK / 32);
    }
#if DROP > 0
    for (int i = 0; i < NSLOTB; ++i) {
      mbar_init(&fullb[i], 1);
      mbar_init(&emptyb[i], BLOCK / 32);
    }
    mbar_init(&gate, 1);
#endif
#ifdef GP
    mbar_init(&ready[0], 1);
    mbar_init(&ready[1], 1);
#endif
#if CL > 1
    mbar_init(&xbar[0], 1);
    mbar_init(&xbar[1], 1);
#endif
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
#if CL > 1
  cluster_sync();  // every block's mbarriers exist before any block sends to them
#else
  __syncthreads();
#endif
  if (threadIdx.x >= BLOCK) {
    if (threadIdx.x == BLOCK)  // producer: chunk q of this block's sequence into slot q % NSLOT
      for (index_t q = 0; q < mine * CH; ++q) {
        const int slot = (int)(q % NSLOT);
        if (q >= NSLOT) mbar_wait(&empty[slot], (unsigned)((q / NSLOT - 1) & 1));
        const index_t row = cid + (q / CH) * clusters, a = (q % CH) * CHV;
        bulk_in(ring + (index_t)slot * CHV, x + (row * NV + j0 + a) * VEC, chunk_bytes(a, cnt), &full[slot]);
      }
#if DROP > 0
    if (threadIdx.x == BLOCK + 32)  // reread producer: a row's last DROP chunks, last first, once it was read
      for (index_t it = 0, q = 0; it < mine; ++it) {
        mbar_wait(&gate, (unsigned)(it & 1));
        const index_t row = cid + it * clusters;
        for (int d = 0; d < DROP; ++d, ++q) {
          const int slot = (int)(q % NSLOTB);
          if (q >= NSLOTB) mbar_wait(&emptyb[slot], (unsigned)((q / NSLOTB - 1) & 1));
          const index_t a = (index_t)(CH - 1 - d) * CHV;
          bulk_in(ringb + (index_t)slot * CHV, x + (row * NV + j0 + a) * VEC, chunk_bytes(a, cnt), &fullb[slot]);
        }
      }
#endif
#ifdef GP
    if (threadIdx.x >= BLOCK + 32) grid_exchange_warp(ws, cid, clusters, mine, rank, mean_out, rstd_out, stats, ready);
#endif
    __syncwarp();
  } else {
    vec_t c[HELD];
    float wv[VEC], bv[VEC];
#ifdef GP
    // Mode 8: row it + 1's triple is read from the ring and published before row it's statistics are needed, and
    // the exchange warp waits and merges, so the consumers find them ready.
    // Row it's chunk k is written and row it + 1's chunk k taken into the freed registers at once, so the
    // producer loads row it + 2 while row it is written (Note [Norm held], mode 8, "interleaved").
    if (mine > 0) {
      grid_publish(ws, cid, rank, ring_triple(ring, full, 0, cnt, red));
#pragma unroll
      for (int k = 0; k < CH; ++k) ring_take_chunk(ring, full, empty, 0, k, cnt, c);
    }
    for (index_t it = 0; it < mine; ++it) {
      const index_t row = cid + it * clusters;
      const bool next = it + 1 < mine;
      if (next) grid_publish(ws, row + clusters, rank, ring_triple(ring, full, (it + 1) * CH, cnt, red));
      mbar_wait(&ready[it & 1], (unsigned)((it >> 1) & 1));
      const float mean_u = stats[it & 1].x, rstd_u = stats[it & 1].y;
      vec_t* __restrict__ yr = reinterpret_cast<vec_t*>(y + row * COLS);
#pragma unroll
      for (int k = 0; k < CH; ++k) {
#pragma unroll
        for (int u = 0; u < CPT; ++u) {
          const index_t a = (index_t)k * CHV + threadIdx.x + u * BLOCK;
          if (a < cnt) {
            affine(w, b, row, j0 + a, wv, bv);
            yr[j0 + a] = normalise(c[k * CPT + u], mean_u, rstd_u, wv, bv);
          }
        }
        if (next) ring_take_chunk(ring, full, empty, (it + 1) * CH, k, cnt, c);
      }
    }
#else
    for (index_t it = 0; it < mine; ++it) {
      const index_t row = cid + it * clusters;
#if DROP > 0
      float shift = 0.f, s1 = 0.f, s2 = 0.f;  // sums of x - shift, shift = the thread's first element
      int held_n = 0;
#else
      float s = 0.f;
#endif
#pragma unroll
      for (int k = 0; k < CH; ++k) {
        const index_t q = it * CH + k;
        const int slot = (int)(q % NSLOT);
        mbar_wait(&full[slot], (unsigned)((q / NSLOT) & 1));
        const vec_t* src = ring + (index_t)slot * CHV;
#pragma unroll
        for (int u = 0; u < CPT; ++u)
          if ((index_t)k * CHV + threadIdx.x + u * BLOCK < cnt) {
            const vec_t v = src[threadIdx.x + u * BLOCK];
            if (k < KEEP) c[(k < KEEP ? k : 0) * CPT + u] = v;
#if DROP > 0
            if (k == 0 && u == 0) shift = to_float(v.v[0]);
            held_n += VEC;
#pragma unroll
            for (int e = 0; e < VEC; ++e) {
              const float d = to_float(v.v[e]) - shift;
              s1 += d;
              s2 += d * d;
            }
#else
#pragma unroll
            for (int e = 0; e < VEC; ++e) s += to_float(v.v[e]);
#endif
          }
        __syncwarp();
        if (threadIdx.x % 32 == 0) mbar_arrive(&empty[slot]);  // this warp is done with the slot
      }
#if DROP > 0
      if (threadIdx.x == 0) mbar_arrive(&gate);  // the row has been read once: its rereads may start
      const float tn = (float)held_n;
      const Welford bt = row_welford(
          held_n > 0 ? Welford{tn, shift + s1 / tn, fmaxf(s2 - s1 * s1 / tn, 0.f)} : Welford{0.f, 0.f, 0.f}, red);
      const float n = bt.n, bm = bt.mean, m2 = bt.m2;
#else
      // The block's exact two-pass statistics from registers.
      const float n = (float)(cnt * VEC);
      const float total = row_sum(s, red);
      const float bm = cnt > 0 ? total / n : 0.f;
      float q2 = 0.f;
#pragma unroll
      for (int k = 0; k < CH; ++k)
#pragma unroll
        for (int u = 0; u < CPT; ++u)
          if ((index_t)k * CHV + threadIdx.x + u * BLOCK < cnt) {
#pragma unroll
            for (int e = 0; e < VEC; ++e) {
              const float d = to_float(c[k * CPT + u].v[e]) - bm;
              q2 += d * d;
            }
          }
      const float m2 = row_sum(q2, red);
#endif
      // The cluster's triples merged in rank order.
#if CL > 1
      const int ib = (int)(it & 1);
      if (threadIdx.x < CL) send16(&inbox[ib][rank], make_float4(n, bm, m2, 0.f), &xbar[ib], threadIdx.x);
      if (threadIdx.x == 0) mbar_expect(&xbar[ib], CL * 16);
      mbar_wait(&xbar[ib], (unsigned)((it >> 1) & 1));
      const unsigned l = threadIdx.x % 32;
      Welford t{0.f, 0.f, 0.f};
      if (l < CL) {
        const float4 v = inbox[ib][l];
        t = Welford{v.x, v.y, v.z};
      }
      t = warp_welford(t);  // every warp of every block: the same triples, the same tree
#else
      const Welford t{n, bm, m2};
#endif
      const float mean = t.mean, rstd = rsqrtf(t.m2 / (float)COLS + EPS);
      if (rank == 0 && threadIdx.x == 0) {
        mean_out[row] = to_stat(mean);
        rstd_out[row] = to_stat(rstd);
      }
      const float mean_u = used_stat(mean), rstd_u = used_stat(rstd);
      vec_t* __restrict__ yr = reinterpret_cast<vec_t*>(y + row * COLS);
#if DROP > 0
      for (int d = 0; d < DROP; ++d) {  // the rereads first: their copies are under way
        const index_t q = it * DROP + d;
        const int slot = (int)(q % NSLOTB);
        mbar_wait(&fullb[slot], (unsigned)((q / NSLOTB) & 1));
        const vec_t* src = ringb + (index_t)slot * CHV;
#pragma unroll
        for (int u = 0; u < CPT; ++u) {
          const index_t a = (index_t)(CH - 1 - d) * CHV + threadIdx.x + u * BLOCK;
          if (a < cnt) {
            affine(w, b, row, j0 + a, wv, bv);
            yr[j0 + a] = normalise(src[threadIdx.x + u * BLOCK], mean_u, rstd_u, wv, bv);
          }
        }
        __syncwarp();
        if (threadIdx.x % 32 == 0) mbar_arrive(&emptyb[slot]);
      }
#endif
#pragma unroll
      for (int k = 0; k < KEEP; ++k)
#pragma unroll
        for (int u = 0; u < CPT; ++u) {
          const index_t a = (index_t)k * CHV + threadIdx.x + u * BLOCK;
          if (a < cnt) {
            affine(w, b, row, j0 + a, wv, bv);
            yr[j0 + a] = normalise(c[k * CPT + u], mean_u, rstd_u, wv, bv);
          }
        }
    }
#endif
  }
#if CL > 1
  cluster_sync();  // no block leaves while another may still send to it
#endif
}
)";
}

}  // namespace cudal1::optimizer::norm
