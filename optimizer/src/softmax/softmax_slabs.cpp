/// @brief The softmax family's grid slabs (Note [Softmax grid slabs]): sizing and device code of a column slab
/// held in the registers of GP blocks of a cooperative grid, fed through a shared-memory ring by bulk copies.
#include <algorithm>
#include <sstream>

#include "codegen_common.h"
#include "softmax_family.h"

namespace cudal1::optimizer::softmax {
namespace {

constexpr int64_t kSlabVectorsPerBlock = 8192;  ///< 128 KB of registers a block
constexpr int64_t kSlabMaxParts = 132;          ///< blocks of the reference grid (H100 SXM / H200: one an SM)
constexpr int64_t kSlabMaxSlots = 32;
constexpr int64_t kBlockSmem = 227 * 1024;      ///< dynamic + static shared memory of a block, sm_90

/// Vectors a consumer keeps in registers: what the 168 (BLOCK 256) or 96 (BLOCK 512) registers a thread of a
/// block of BLOCK + 64 threads leave without spilling (ptxas, CUDA 13.0, sm_90: 16 and 6; one more chunk of
/// vectors spilled 132-388 bytes a thread).
int64_t kept_vectors(int block) { return block == 256 ? 16 : 6; }

/// Static shared memory of the kernel: the mbarriers, two slots of column statistics and the warps' pairs.
int64_t static_smem(int64_t cols, int block) { return (2 * kSlabMaxSlots + 2) * 8 + (2 + block / 32) * cols * 8 + 256; }

}  // namespace

SlabLayout slab_layout(const ColumnShape& c, int block, int chunk_kb, bool deep) {
  SlabLayout l;
  const int64_t es = elem_size(c.dtype);
  if (c.sm < 90 || !c.aligned16 || (block != 256 && block != 512) || (chunk_kb != 16 && chunk_kb != 32)) return l;
  if ((c.inner * es) % 16 != 0 || c.n_stride != c.inner) return l;  // dense [n, inner] slabs of whole vectors
  const int64_t iv = c.inner * es / 16;
  if (iv != 1 && iv != 2 && iv != 4 && iv != 8) return l;
  const int64_t nv = c.n * iv, parts = (nv + kSlabVectorsPerBlock - 1) / kSlabVectorsPerBlock;
  if (parts < 2 || parts > kSlabMaxParts || c.outer * parts >= (int64_t{1} << 31)) return l;
  const int64_t sv = ((nv + parts - 1) / parts + iv - 1) / iv * iv;  // <= 8192, a multiple of iv
  const int64_t chv = int64_t{chunk_kb} * 1024 / 16, cpt = chv / block, ch = (sv + chv - 1) / chv;
  const int64_t keep = std::min(ch, kept_vectors(block) / cpt);
  const int64_t chunk_bytes = int64_t{chunk_kb} * 1024;
  const int64_t most = std::min(kSlabMaxSlots, (kBlockSmem - static_smem(c.inner, block)) / chunk_bytes);
  const int64_t tight = 2 * ch - keep + 1;  // this slice's unkept chunks, the next slice, and a chunk beyond
  if (keep < 1 || tight > most || (deep && most <= tight)) return l;
  l.iv = iv;
  l.nv = nv;
  l.parts = parts;
  l.sv = sv;
  l.chv = chv;
  l.cpt = cpt;
  l.ch = ch;
  l.keep = keep;
  l.slots = deep ? most : tight;
  l.smem = l.slots * chunk_bytes;
  l.ok = true;
  return l;
}

KernelSource generate_softmax_slabs(const ColumnShape& c, const SlabLayout& l, int block, int chunk_kb, bool deep) {
  const int64_t es = elem_size(c.dtype);
  std::ostringstream k;
  k << "// cudal1 softmax grid slabs: log=" << c.log << " " << c10::toString(c.dtype) << " outer=" << c.outer
    << " n=" << c.n << " inner=" << c.inner << " block=" << block << " chunk=" << chunk_kb << "KB deep=" << deep
    << " parts=" << l.parts << "\n";
  k << "typedef long long index_t;\n" << dtype_prelude(c.dtype) << exact_divide_source();
  k << "#define VEC " << 16 / es << "\n#define BLOCK " << block << "\n#define NW (BLOCK / 32)\n#define LOG "
    << (c.log ? 1 : 0) << "\n#define GP " << l.parts << "  // blocks a slab\n#define IV " << l.iv
    << "  // vectors an n-row\n#define COLS (IV * VEC)\n#define NSLOT " << l.slots << "\n#define CHV " << l.chv
    << "  // vectors a chunk\n#define CPT " << l.cpt << "  // a consumer's vectors a chunk\n#define CH " << l.ch
    << "  // chunks a slice\n#define KEEP " << l.keep << "  // chunks kept in registers\n#define HELD (KEEP * CPT)\n";
  k << "static constexpr index_t OUTER = " << c.outer << ", NV = " << l.nv << ", SV = " << l.sv
    << ", OSV = " << (c.outer > 1 ? c.outer_stride * es / 16 : 0) << ";  // slabs, a slab's and a slice's vectors\n";
  k << R"(#define NEG_INF __int_as_float(0xff800000u)
#define POS_INF __int_as_float(0x7f800000u)
#define QNAN __int_as_float(0x7fffffffu)
struct __align__(16) vec_t { storage_t v[VEC]; };
)" << fast_exp_source(c.dtype, true) << online_pair_source() << mbarrier_source();
  const bool packed = es == 2;  // the maximum on packed pairs (max.bf16x2 / max.f16x2: exact, NaN skipped)
  k << "#define PACKED " << packed << "\n";
  if (packed) k << packed_pair_source(c.dtype);
  k << R"(// Note [Softmax grid slabs] (softmax_family.h).
__device__ __forceinline__ void consumers_sync() { asm volatile("bar.sync 1, %0;" ::"n"(BLOCK) : "memory"); }
/// Vectors of chunk `a` (slice vector offset) that this block holds: the bytes its bulk copy moves.
__device__ __forceinline__ unsigned chunk_bytes(index_t a, index_t cnt) {
  const index_t n = a < cnt ? (cnt - a < CHV ? cnt - a : CHV) : 0;
  return (unsigned)(n * (index_t)sizeof(vec_t));
}
/// The block's (max, sum) pair of each column of the slab whose chunks are q0 .. q0 + CH - 1 in the ring (read
/// twice, slots not freed), merged over the lanes and warps that share the column, published to the workspace
/// [slab][rank][COLS]; then thread 0 arrives on the slab's counter (after the OUTER x GP x COLS pairs).
__device__ __forceinline__ void slab_publish(const vec_t* ring, unsigned long long* full, index_t q0, index_t cnt,
                                             float* __restrict__ ws, index_t slab, unsigned rank, float2* red) {
  float m[VEC], s[VEC];
#pragma unroll
  for (int e = 0; e < VEC; ++e) {
    m[e] = NEG_INF;
    s[e] = 0.f;
  }
#if PACKED
  unsigned mw[VEC / 2];
#pragma unroll
  for (int i = 0; i < VEC / 2; ++i) mw[i] = PACKED_NEG_INF;
#endif
#pragma unroll 1  // the held slice occupies most registers: a chunk's loads at a time
  for (int k = 0; k < CH; ++k) {
    const index_t q = q0 + k;
    const int slot = (int)(q % NSLOT);
    mbar_wait(&full[slot], (unsigned)((q / NSLOT) & 1));
    const vec_t* src = ring + (index_t)slot * CHV;
#pragma unroll
    for (int u = 0; u < CPT; ++u)
      if ((index_t)k * CHV + threadIdx.x + u * BLOCK < cnt) {
#if PACKED
        const uint4 w = *reinterpret_cast<const uint4*>(src + threadIdx.x + u * BLOCK);
        mw[0] = max2(mw[0], w.x);
        mw[1] = max2(mw[1], w.y);
        mw[2] = max2(mw[2], w.z);
        mw[3] = max2(mw[3], w.w);
#else
        const vec_t v = src[threadIdx.x + u * BLOCK];
#pragma unroll
        for (int e = 0; e < VEC; ++e) m[e] = fmaxf(m[e], to_float(v.v[e]));
#endif
      }
  }
#if PACKED
#pragma unroll
  for (int i = 0; i < VEC / 2; ++i) {
    m[2 * i] = lo_f(mw[i]);
    m[2 * i + 1] = hi_f(mw[i]);
  }
#endif
  // A maximum of -Inf (every element -Inf or NaN) subtracts 0 instead: -Inf then adds exp(-Inf) = 0 and NaN
  // adds NaN, with no test per element.
  unsigned none = 0;
#pragma unroll
  for (int e = 0; e < VEC; ++e)
    if (m[e] == NEG_INF) {
      none |= 1u << e;
      m[e] = 0.f;
    }
#pragma unroll 1
  for (int k = 0; k < CH; ++k) {
    const vec_t* src = ring + (index_t)((q0 + k) % NSLOT) * CHV;
#pragma unroll
    for (int u = 0; u < CPT; ++u)
      if ((index_t)k * CHV + threadIdx.x + u * BLOCK < cnt) {
        const vec_t v = src[threadIdx.x + u * BLOCK];
#pragma unroll
        for (int e = 0; e < VEC; ++e) s[e] += EXP_SUB(to_float(v.v[e]), m[e]);
      }
  }
#pragma unroll
  for (int e = 0; e < VEC; ++e)
    if (none >> e & 1u) m[e] = NEG_INF;
#pragma unroll
  for (int o = IV; o < 32; o <<= 1)  // lanes l, l ^ IV, ... hold the same columns
#pragma unroll
    for (int e = 0; e < VEC; ++e) {
      const float m2 = __shfl_xor_sync(0xffffffffu, m[e], o), s2 = __shfl_xor_sync(0xffffffffu, s[e], o);
      online_merge(m[e], s[e], m2, s2);
    }
  const int lane = threadIdx.x % 32, w = threadIdx.x / 32;
  if (lane < IV)  // the previous slab's readers of red passed the last barrier below
#pragma unroll
    for (int e = 0; e < VEC; ++e) red[w * COLS + lane * VEC + e] = make_float2(m[e], s[e]);
  consumers_sync();
  if (threadIdx.x < COLS) {
    float2 a = red[threadIdx.x];
    for (int i = 1; i < NW; ++i) {
      const float2 b = red[i * COLS + threadIdx.x];
      online_merge(a.x, a.y, b.x, b.y);
    }
    reinterpret_cast<float2*>(ws)[(slab * GP + rank) * COLS + threadIdx.x] = a;
    __threadfence();
  }
  consumers_sync();
  if (threadIdx.x == 0) atomicAdd(reinterpret_cast<unsigned*>(ws + OUTER * GP * COLS * 2) + slab, 1u);
}
/// The exchange warp (lane l): for each of the block's slabs in turn, waits until all GP blocks have arrived
/// (they are resident: the launch is cooperative), merges the GP pairs of columns l, l + 32, ... in rank order
/// (the same bits in every block) and hands them to the consumers in stats[slab parity], completing
/// ready[parity] (every lane arrives after its own stores). A parity's slot is rewritten two slabs later, once this block has published the slab between,
/// which its consumers do after they read the slot.
__device__ __forceinline__ void slab_exchange_warp(const float* __restrict__ ws, index_t cid, index_t groups,
                                                   index_t mine, float2* stats, unsigned long long* ready) {
  const unsigned l = threadIdx.x % 32;
  const unsigned* const arrived = reinterpret_cast<const unsigned*>(ws + OUTER * GP * COLS * 2);
  const float2* const pairs = reinterpret_cast<const float2*>(ws);
  for (index_t it = 0; it < mine; ++it) {
    const index_t slab = cid + it * groups;
    if (l == 0) {
      while (*reinterpret_cast<const volatile unsigned*>(arrived + slab) < (unsigned)GP) __nanosleep(32);
      __threadfence();
    }
    __syncwarp();
    for (int c = (int)l; c < COLS; c += 32) {
      const float2* p = pairs + slab * GP * COLS + c;
      float2 a = __ldcg(p);
#pragma unroll 8
      for (int r = 1; r < GP; ++r) {
        const float2 b = __ldcg(p + (index_t)r * COLS);
        online_merge(a.x, a.y, b.x, b.y);
      }
      stats[(it & 1) * COLS + c] = a;
    }
    mbar_arrive(&ready[it & 1]);
    __syncwarp();
  }
}
/// The first KEEP chunks of the slice whose chunks are q0 .. q0 + CH - 1 from the ring into registers, each
/// slot freed.
__device__ __forceinline__ void ring_take(const vec_t* ring, unsigned long long* full, unsigned long long* empty,
                                         index_t q0, index_t cnt, vec_t (&c)[HELD]) {
#pragma unroll
  for (int k = 0; k < KEEP; ++k) {
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
}
/// Slabs cid, cid + groups, ... go to the GP consecutive blocks cid of the grid; block `rank` holds vectors
/// [rank x SV, rank x SV + cnt) of each.
extern "C" __global__ void __launch_bounds__(BLOCK + 64, 1)
cudal1_softmax(const storage_t* __restrict__ in, storage_t* __restrict__ out, float* __restrict__ ws) {
  extern __shared__ __align__(128) unsigned char slab_smem[];
  vec_t* const ring = reinterpret_cast<vec_t*>(slab_smem);
  __shared__ __align__(8) unsigned long long full[NSLOT], empty[NSLOT], ready[2];
  __shared__ float2 stats[2 * COLS];  // each column's merged (max, sum), by slab parity
  __shared__ float2 red[NW * COLS];   // each warp's pairs
  const unsigned rank = blockIdx.x % GP;
  const index_t groups = gridDim.x / GP, cid = blockIdx.x / GP;
  const index_t j0 = (index_t)rank * SV;
  const index_t cnt = j0 < NV ? (NV - j0 < SV ? NV - j0 : SV) : 0;
  const index_t mine = cid < OUTER ? (OUTER - cid + groups - 1) / groups : 0;
  if (threadIdx.x == 0) {
    for (int i = 0; i < NSLOT; ++i) {
      mbar_init(&full[i], 1);
      mbar_init(&empty[i], BLOCK / 32);
    }
    mbar_init(&ready[0], 32);  // the exchange warp's lanes
    mbar_init(&ready[1], 32);
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  const vec_t* __restrict__ x = reinterpret_cast<const vec_t*>(in);
  if (threadIdx.x >= BLOCK) {
    if (threadIdx.x == BLOCK)  // producer: chunk q of this block's sequence into slot q % NSLOT
      for (index_t q = 0; q < mine * CH; ++q) {
        const int slot = (int)(q % NSLOT);
        if (q >= NSLOT) mbar_wait(&empty[slot], (unsigned)((q / NSLOT - 1) & 1));
        const index_t slab = cid + (q / CH) * groups, a = (q % CH) * CHV;
        bulk_in(ring + (index_t)slot * CHV, x + slab * OSV + j0 + a, chunk_bytes(a, cnt), &full[slot]);
      }
    if (threadIdx.x >= BLOCK + 32) slab_exchange_warp(ws, cid, groups, mine, stats, ready);
    __syncwarp();
  } else {
    vec_t c[HELD];
    if (mine > 0) {
      slab_publish(ring, full, 0, cnt, ws, cid, rank, red);
      ring_take(ring, full, empty, 0, cnt, c);
    }
    const int g = (int)(threadIdx.x % IV) * VEC;  // this thread's first column
    for (index_t it = 0; it < mine; ++it) {
      const index_t slab = cid + it * groups;
      if (it + 1 < mine) slab_publish(ring, full, (it + 1) * CH, cnt, ws, slab + groups, rank, red);
      mbar_wait(&ready[it & 1], (unsigned)((it >> 1) & 1));
      float m[VEC], s[VEC];
#pragma unroll
      for (int e = 0; e < VEC; ++e) {
        const float2 p = stats[(it & 1) * COLS + g + e];
        m[e] = p.x;
        s[e] = p.y;
      }
)" << epilogue_prep_source("VEC") << R"(      vec_t* __restrict__ yr = reinterpret_cast<vec_t*>(out) + slab * NV + j0;
#pragma unroll
      for (int k = 0; k < KEEP; ++k)
#pragma unroll
        for (int u = 0; u < CPT; ++u) {
          const index_t a = (index_t)k * CHV + threadIdx.x + u * BLOCK;
          if (a < cnt) {
            vec_t r;
#pragma unroll
            for (int e = 0; e < VEC; ++e) r.v[e] = to_storage(EPILOGUE(to_float(c[k * CPT + u].v[e]), e));
            yr[a] = r;
          }
        }
#pragma unroll 1
      for (int k = KEEP; k < CH; ++k) {  // the unkept chunks, still in the ring since slab_publish waited on them
        const int slot = (int)((it * CH + k) % NSLOT);
        const vec_t* src = ring + (index_t)slot * CHV;
#pragma unroll
        for (int u = 0; u < CPT; ++u) {
          const index_t a = (index_t)k * CHV + threadIdx.x + u * BLOCK;
          if (a < cnt) {
            const vec_t v = src[threadIdx.x + u * BLOCK];
            vec_t r;
#pragma unroll
            for (int e = 0; e < VEC; ++e) r.v[e] = to_storage(EPILOGUE(to_float(v.v[e]), e));
            yr[a] = r;
          }
        }
        __syncwarp();
        if (threadIdx.x % 32 == 0) mbar_arrive(&empty[slot]);
      }
      if (it + 1 < mine) ring_take(ring, full, empty, (it + 1) * CH, cnt, c);
    }
  }
}
)";
  return KernelSource{k.str(), "cudal1_softmax"};
}

}  // namespace cudal1::optimizer::softmax
