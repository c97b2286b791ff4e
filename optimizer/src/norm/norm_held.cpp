/// @brief Mode 7 of the normalisation family: a row over a thread-block cluster, each block's slice held in
/// registers, fed by the bulk copy engine through a shared-memory ring (Note [Norm held]): sizing and device code.
#include <algorithm>

#include "codegen_common.h"
#include "norm_family.h"

namespace cudal1::optimizer::norm {
namespace {

// sm_90: at most 227 KB of shared memory per block; 1 KB covers the kernel's static arrays (red[96], the
// mbarriers and the inbox: < 900 bytes at 32 slots and clusters of 16).
constexpr int64_t kHeldSmem = 226 * 1024;
constexpr int kMaxSlots = 32;  ///< mbarrier pairs in static shared memory
constexpr int64_t kVectorBytes = 16;

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

int held_slots(const NormShape& s, const NormKnobs& k) {
  const int64_t most = std::min<int64_t>(kMaxSlots, kHeldSmem / (int64_t{k.chunk_kb} * 1024));
  const int64_t tight = held_chunks(s, k) + 1;
  return static_cast<int>(k.deep ? most : std::min(tight, most));
}

bool held_fits(const NormShape& s, const NormKnobs& k) {
  if (s.sm < 90 || int64_t{k.vec} * elem_size(s.dtype) != kVectorBytes) return false;
  if ((k.block != 256 && k.block != 512) || (k.chunk_kb != 16 && k.chunk_kb != 32)) return false;
  if (k.cluster < 1 || k.cluster > 16 || (k.cluster & (k.cluster - 1)) != 0) return false;
  const int cpt = held_vectors_per_chunk_thread(k);
  const int64_t held = held_chunks(s, k) * cpt;  // vectors a thread holds
  const int64_t most_held = 8192 / k.block;        // 64 registers a thread at 512, 128 at 256: 128 KB a block
  const int64_t tight = held_chunks(s, k) + 1;
  const int64_t most = std::min<int64_t>(kMaxSlots, kHeldSmem / (int64_t{k.chunk_kb} * 1024));
  return cpt >= 1 && held_slice_vectors(s, k) >= k.block && held <= most_held && tight <= most &&
         (!k.deep || most > tight) && s.rows < (int64_t{1} << 31);
}

unsigned held_smem_bytes(const NormShape& s, const NormKnobs& k) {
  return static_cast<unsigned>(int64_t{held_slots(s, k)} * k.chunk_kb * 1024);
}

const char* held_source() {
  return R"(// Note [Norm held] (norm_family.h): mbarriers, bulk copies and st.async (sm_90).
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
/// Sum over the BLOCK consumer threads (named barrier 1: the producer warp takes no part), in every thread.
__device__ __forceinline__ float held_sum(float v, float* red) {
  v = warp_sum(v);
  if (threadIdx.x % 32 == 0) red[threadIdx.x / 32] = v;
  asm volatile("bar.sync 1, %0;" ::"n"(BLOCK) : "memory");
  float t = 0.f;
#pragma unroll
  for (int i = 0; i < BLOCK / 32; ++i) t += red[i];
  asm volatile("bar.sync 1, %0;" ::"n"(BLOCK) : "memory");
  return t;
}
/// Rows cid, cid + clusters, ... go to cluster cid; block `rank` holds vectors [rank x SV, rank x SV + cnt) of
/// each, in CH chunks of CHV vectors (thread t's are t + u x BLOCK of a chunk, u < CPT: HELD registers).
__device__ __forceinline__ void held_rows(const storage_t* __restrict__ x, const storage_t* __restrict__ w,
                                          const storage_t* __restrict__ b, storage_t* __restrict__ y,
                                          stat_t* __restrict__ mean_out, stat_t* __restrict__ rstd_out, float* red) {
  extern __shared__ __align__(128) unsigned char held_smem[];
  vec_t* const ring = reinterpret_cast<vec_t*>(held_smem);
  __shared__ __align__(8) unsigned long long full[NSLOT], empty[NSLOT];
#if CL > 1
  __shared__ __align__(8) unsigned long long xbar[2];  // the triples of a row of each parity have landed
  __shared__ __align__(16) float4 inbox[2][CL];        // every block's triple of that row, by rank
  const unsigned rank = cluster_rank();
#else
  const unsigned rank = 0;
#endif
  const index_t j0 = (index_t)rank * SV;
  const index_t cnt = j0 < NV ? (NV - j0 < SV ? NV - j0 : SV) : 0;
  const index_t clusters = gridDim.x / CL, cid = blockIdx.x / CL;
  const index_t mine = cid < ROWS ? (ROWS - cid + clusters - 1) / clusters : 0;
  if (threadIdx.x == 0) {
    for (int i = 0; i < NSLOT; ++i) {
      mbar_init(&full[i], 1);
      mbar_init(&empty[i], BLOCK / 32);
    }
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
  if (threadIdx.x >= BLOCK) {  // the producer warp: chunk q of this block's sequence into slot q % NSLOT
    if (threadIdx.x == BLOCK)
      for (index_t q = 0; q < mine * CH; ++q) {
        const int slot = (int)(q % NSLOT);
        if (q >= NSLOT) mbar_wait(&empty[slot], (unsigned)((q / NSLOT - 1) & 1));
        const index_t row = cid + (q / CH) * clusters, a = (q % CH) * CHV;
        const index_t n = a < cnt ? (cnt - a < CHV ? cnt - a : CHV) : 0;
        bulk_in(ring + (index_t)slot * CHV, x + (row * NV + j0 + a) * VEC, (unsigned)(n * sizeof(vec_t)), &full[slot]);
      }
    __syncwarp();
  } else {
    vec_t c[HELD];
    float wv[VEC], bv[VEC];
    for (index_t it = 0; it < mine; ++it) {
      const index_t row = cid + it * clusters;
      float s = 0.f;
#pragma unroll
      for (int k = 0; k < CH; ++k) {
        const index_t q = it * CH + k;
        const int slot = (int)(q % NSLOT);
        mbar_wait(&full[slot], (unsigned)((q / NSLOT) & 1));
        const vec_t* src = ring + (index_t)slot * CHV;
#pragma unroll
        for (int u = 0; u < CPT; ++u)
          if ((index_t)k * CHV + threadIdx.x + u * BLOCK < cnt) {
            c[k * CPT + u] = src[threadIdx.x + u * BLOCK];
#pragma unroll
            for (int e = 0; e < VEC; ++e) s += to_float(c[k * CPT + u].v[e]);
          }
        __syncwarp();
        if (threadIdx.x % 32 == 0) mbar_arrive(&empty[slot]);  // this warp is done with the slot
      }
      // The block's exact two-pass statistics from registers, then the cluster's merged in rank order.
      const float n = (float)(cnt * VEC);
      const float total = held_sum(s, red);
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
      const float m2 = held_sum(q2, red);
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
#pragma unroll
      for (int k = 0; k < CH; ++k)
#pragma unroll
        for (int u = 0; u < CPT; ++u) {
          const index_t a = (index_t)k * CHV + threadIdx.x + u * BLOCK;
          if (a < cnt) {
            affine(w, b, row, j0 + a, wv, bv);
            yr[j0 + a] = normalise(c[k * CPT + u], mean_u, rstd_u, wv, bv);
          }
        }
    }
  }
#if CL > 1
  cluster_sync();  // no block leaves while another may still send to it
#endif
}
)";
}

}  // namespace cudal1::optimizer::norm
