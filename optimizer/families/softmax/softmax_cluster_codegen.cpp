/// @brief Source generation for the softmax family's shared column tiles (Note [Softmax shared tiles]): column
/// tiles held in dynamic shared memory, split over the blocks of a thread-block cluster when one block cannot
/// hold them; and the shared memory and registers of those and of the cluster rows (ClusterRows, whose source
/// softmax_codegen.cpp writes). Cluster parts are inline PTX (NVRTC has no cooperative_groups here).
#include <algorithm>
#include <sstream>

#include "codegen_common.h"
#include "softmax_family.h"

namespace cudal1::optimizer::softmax {
namespace {

int regs_per_vec(c10::ScalarType dtype, int vec) { return std::max(1, vec * elem_size(dtype) / 4); }

/// RESIDENT: the kernel's __launch_bounds__ asks for the blocks an SM holds, so that the registers fit.
/// ASYNC: the shared rows (or the row's slice) are copied by cp.async (Note [Softmax async tiles]) with
/// codegen_common's async_copy_source (Note [Async copies]).
void common_defines(std::ostringstream& k, c10::ScalarType dtype, bool log, int vec, int block, int cluster,
                    int64_t smem, bool async_copy, int keep = 0, int kept_registers = 0) {
  const int resident = resident_blocks(smem, block);
  k << "typedef long long index_t;\n" << dtype_prelude(dtype) << exact_divide_source();
  k << "#define VEC " << vec << "\n#define BLOCK " << block << "\n#define W (BLOCK / 32)\n#define CLUSTER " << cluster
    << "\n#define LOG " << (log ? 1 : 0) << "\n#define RESIDENT " << resident << "  // blocks per SM\n#define UNROLL "
    << copy_unroll(dtype, vec, block, resident, kept_registers) << "\n#define KEEP " << keep << "\n";
  k << R"(#define NEG_INF __int_as_float(0xff800000u)
#define POS_INF __int_as_float(0x7f800000u)
#define QNAN __int_as_float(0x7fffffffu)
struct __align__(VEC * sizeof(storage_t)) vec_t { storage_t v[VEC]; };
)" << "#if CLUSTER > 1\n" << cluster_primitives_source() << "#endif\n";
  k << "#define ASYNC " << (async_copy ? 1 : 0)
    << "  // shared rows / the slice copied by cp.async (Note [Softmax async tiles])\n";
  if (async_copy) k << async_copy_source();
}

}  // namespace

int copy_unroll(c10::ScalarType dtype, int vec, int block, int resident, int kept) {
  const int regs = std::min(255, 65536 / (resident * block)) / 8 * 8;
  const int buffer = std::clamp(regs - 32 - kept, 4, 32);
  return std::clamp(buffer / regs_per_vec(dtype, vec), 2, 32);
}

std::string fast_exp_source(c10::ScalarType dtype, bool fast) {
  if (!fast || elem_size(dtype) != 2)
    return "#define EXP_SUB(v, mx) expf((v) - (mx))\n#define DIV_SUM(a, sum, r) div_rn(a, sum, r)\n";
  const bool half = dtype == c10::ScalarType::Half;  // fp16 cannot hold what .ftz flushes: 2^-126 < 2^-24
  return std::string(R"(// Note [Softmax fast exp]: FADD, FMUL, ex2.approx: within 2^-19 of exp(x - m) for x - m >= -10.
__device__ __forceinline__ float fast_exp_sub(float x, float mx) {
  const float t = (x - mx) * 1.4426950408889634f;
  float r;
  asm("ex2.approx)") + (half ? ".ftz" : "") + R"(.f32 %0, %1;" : "=f"(r) : "f"(t));
  return r;
}
#define EXP_SUB(v, mx) fast_exp_sub(v, mx)
#define DIV_SUM(a, sum, r) ((a) * (r))
)";
}

int resident_blocks(int64_t smem, int block) {
  return static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(2048 / block, 233472 / (smem + 1024))));
}

int keep_rows(const ColumnShape& c, int vec, bool pair) {
  return kKeptRegisters / regs_per_vec(c.dtype, pair ? 2 * vec : vec);
}

int64_t smem_tile_bytes(const ColumnShape& c, int vec, int block, int cluster, int keep, bool pair) {
  const int64_t kept = int64_t{keep} * (block / 32) * (pair ? 2 : 1);  // rows the block keeps in registers
  const int64_t rows = std::max<int64_t>(0, (c.n + cluster - 1) / cluster - kept);
  const int64_t data = rows * 32 * vec * elem_size(c.dtype);                 // a multiple of 16 bytes
  const int64_t stats = (2 * int64_t{block / 32} * vec * 32 + 2 * vec * 32) * 4;  // warp merge + published pairs
  return data + stats;
}

int64_t cluster_row_bytes(const SoftmaxShape& s, int vec, int cluster) {
  const int64_t nv = s.cols / vec, part = (nv + cluster - 1) / cluster;
  // The slice (rounded up to 16 bytes: the floats after it stay aligned), the block reduction, the published pair.
  return (part * vec * elem_size(s.dtype) + 15) / 16 * 16 + (32 + 2) * 4;
}

KernelSource generate_softmax_smem_tiles(const ColumnShape& c, int vec, int block, int cluster, int keep, bool two,
                                         bool async_copy, bool pair) {
  const int64_t iv = c.inner / vec, tiles = (iv + 31) / 32, nb = (c.n + cluster - 1) / cluster;
  std::ostringstream k;
  k << "// cudal1 softmax shared-memory column tiles: log=" << c.log << " " << c10::toString(c.dtype)
    << " outer=" << c.outer << " n=" << c.n << " inner=" << c.inner << " vec=" << vec << " block=" << block
    << " cluster=" << cluster << " keep=" << keep << " two=" << two << " async=" << async_copy << " pair=" << pair
    << "\n";
  common_defines(k, c.dtype, c.log, vec, block, cluster, smem_tile_bytes(c, vec, block, cluster, keep, pair),
                 async_copy, keep, keep * regs_per_vec(c.dtype, pair ? 2 * vec : vec));
  k << "#define TWO " << (two ? 1 : 0) << "  // two passes over the tile on chip: max, then sum\n"
    << "#define PAIR " << (pair ? 1 : 0) << "  // Note [Softmax pair tiles]\n"
    << fast_exp_source(c.dtype, two);
  if (pair) k << packed_pair_source(c.dtype);
  k << "static constexpr int N = " << c.n << ", NB = " << nb << ";  // rows, rows per block of a cluster\n"
    << "static constexpr int NK = KEEP * W * (PAIR ? 2 : 1);  // the block's first rows, kept in registers\n"
    << "static constexpr int NS = NB > NK ? NB - NK : 0;  // the rest, in shared memory\n"
    << "static constexpr index_t IV = " << iv << ", TILES = " << tiles << ";  // vectors along inner, tiles\n"
    << "static constexpr index_t OSV = " << c.outer_stride / vec << ", NSV = " << c.n_stride / vec
    << ";  // input strides in vectors\n";
  k << online_pair_source();
  // The pair kernel (Note [Softmax pair tiles]) has its own write phase and second pass.
  if (!pair) k << R"(// The write phase: this warp's rows of the tile, from registers (rows
// n0 + w + i W, i < KEEP) and from shared memory (the rest, row j at j - n0 - NK), through ATen's epilogue.
__device__ __forceinline__ void write_rows(const vec_t* kept, const vec_t* tile, vec_t* __restrict__ y,
                                           const float* m, const float* s, int n0, int n1, int w, int lane,
                                           bool live) {
#define FOR_EACH_PART(...) \
  _Pragma("unroll") for (int i = 0; i < KEEP; ++i) { \
    const int j = n0 + w + i * W; \
    if (live && j < n1) { const vec_t t = kept[i]; __VA_ARGS__ } \
  } \
  for (int j = n0 + NK + w; live && j < n1; j += W) { const vec_t t = tile[(j - n0 - NK) * 32 + lane]; __VA_ARGS__ }
)" << column_epilogue_source() << R"(#if TWO
// The second pass of Note [Softmax fast exp]'s two-pass tiles: this thread's sum of exp(x - m), rows in order.
__device__ __forceinline__ void sum_rows(const vec_t* kept, const vec_t* tile, const float* m, float* s, int n0,
                                         int n1, int w, int lane, bool live) {
  FOR_EACH_PART(_Pragma("unroll") for (int e = 0; e < VEC; ++e) s[e] += EXP_SUB(to_float(t.v[e]), m[e]);)
}
#endif
)";
  k << R"(#if TWO
// The two merges of the two passes, as combines for two_pass_merge: `combine(a, b)` folds the next warp's or
// rank's value into a; `first(own, r0)` is where the cluster fold starts from rank 0's value. The maximum folds
// rank 0 into the block's own (which is among the ranks': fmaxf(m, m) = m); the sum starts from rank 0 alone.
struct MaxCombine {
  static __device__ __forceinline__ float combine(float a, float b) { return fmaxf(a, b); }  // NaN skipped
  static __device__ __forceinline__ float first(float own, float r0) { return fmaxf(own, r0); }
};
struct SumCombine {
  static __device__ __forceinline__ float combine(float a, float b) { return a + b; }
  static __device__ __forceinline__ float first(float own, float r0) { return r0; }
};
// Each lane's VEC values v merged over the block's W warps in warp order through red ([W][VEC x 32] in shared
// memory), then (CLUSTER > 1) published by warp 0 in pub ([VEC x 32]) and merged over the cluster's blocks in
// rank order through distributed shared memory: every thread of the cluster ends with the same values.
// Note [Softmax cluster merge]: only warp 0 reads the ranks' values (every rank's load issued before the first
// combine) and hands the result to its block through `bc`; only warp 0's arrival releases (it wrote pub).
// `bc` is the other merge's pub: the maximum's result goes through pub of the sum, which warp 0 writes only
// after the sum's block barrier (every warp has read the maximum by then) and other blocks read only after the
// sum's cluster barrier; the sum's result goes through pub of the maximum, which no block reads after the
// sum's cluster barrier.
// A lane's values are NE slots of the block's VEC x 32: value e of lane `lane` in slot SLOT(e) (with PAIR, lanes
// l and l + 16 hold the same columns and values; WRITER lanes store them).
#if PAIR
#define NE (2 * VEC)
#define SLOT(e) (NE * (lane % 16) + (e))
#define WRITER (lane < 16)
#else
#define NE VEC
#define SLOT(e) ((e) * 32 + lane)
#define WRITER true
#endif
template <class Op>
__device__ __forceinline__ void two_pass_merge(float* v, float* red, float* pub, float* bc, int w, int lane) {
  if (WRITER)
#pragma unroll
    for (int e = 0; e < NE; ++e) red[w * VEC * 32 + SLOT(e)] = v[e];
  __syncthreads();
#pragma unroll
  for (int e = 0; e < NE; ++e) {
    v[e] = red[SLOT(e)];
    for (int i = 1; i < W; ++i) v[e] = Op::combine(v[e], red[i * VEC * 32 + SLOT(e)]);
  }
#if CLUSTER > 1
  if (w == 0) {
    if (WRITER)
#pragma unroll
      for (int e = 0; e < NE; ++e) pub[SLOT(e)] = v[e];
    cluster_arrive();
  } else {
    cluster_arrive_relaxed();
  }
  cluster_wait();
  if (w == 0) {
#pragma unroll
    for (int e = 0; e < NE; ++e) {
      float rv[CLUSTER];
#pragma unroll
      for (unsigned r = 0; r < CLUSTER; ++r) rv[r] = load_remote(pub + SLOT(e), r);
      v[e] = Op::first(v[e], rv[0]);
#pragma unroll
      for (unsigned r = 1; r < CLUSTER; ++r) v[e] = Op::combine(v[e], rv[r]);
      if (WRITER) bc[SLOT(e)] = v[e];
    }
  }
  __syncthreads();
#pragma unroll
  for (int e = 0; e < NE; ++e) v[e] = bc[SLOT(e)];
#else
  (void)bc;
#endif
}
#endif
#if ASYNC
// Note [Softmax async tiles]: the block's shared rows n0 + NK .. n1 - 1 of tile tile_i of outer index o (whole
// tiles, 16-byte aligned) copied to `dst` in 16-byte chunks with cp.async, every chunk in flight at once and no
// registers held; one commit group.
__device__ __forceinline__ void copy_shared_rows(const storage_t* __restrict__ in, index_t o, index_t tile_i,
                                                 int n0, int n1, void* dst) {
  constexpr int CPR = 32 * (int)sizeof(vec_t) / 16;  // chunks a row
  const char* src = reinterpret_cast<const char*>(reinterpret_cast<const vec_t*>(in) + o * OSV + tile_i * 32);
  const unsigned sdst = (unsigned)__cvta_generic_to_shared(dst);
  const int chunks = max(0, n1 - n0 - NK) * CPR;
  for (int q = threadIdx.x; q < chunks; q += BLOCK) {
    const int r = q / CPR, c = q % CPR;
    cp_async<16>(sdst + (unsigned)q * 16u, src + (index_t)(n0 + NK + r) * NSV * (index_t)sizeof(vec_t) + c * 16);
  }
  cp_async_commit();
}
#endif
)";
  if (pair) {
    k << pair_tile_kernel_source();
    return KernelSource{k.str(), "cudal1_softmax"};
  }
  k << R"(extern "C" __global__ void __launch_bounds__(BLOCK, RESIDENT)
cudal1_softmax(const storage_t* __restrict__ in, storage_t* __restrict__ out) {
  // Dynamic shared memory: the block's NS rows x 32 vectors, the warp merge, the block's published pairs.
  extern __shared__ __align__(16) unsigned char smem[];
  vec_t* tile = reinterpret_cast<vec_t*>(smem);
  float* red_m = reinterpret_cast<float*>(smem + (size_t)NS * 32 * sizeof(vec_t));
  float* red_s = red_m + W * VEC * 32;
#if CLUSTER > 1 || TWO  // the published pairs (two_pass_merge takes them; it reads them where CLUSTER > 1)
  float* pub_m = red_s + W * VEC * 32;
  float* pub_s = pub_m + VEC * 32;
#endif
  const int lane = threadIdx.x % 32, w = threadIdx.x / 32;
#if CLUSTER > 1
  const unsigned rank = cluster_rank();  // blockIdx.x % CLUSTER: the cluster is 1-d along x
#else
  const unsigned rank = 0;
#endif
  const index_t cl = (index_t)blockIdx.x / CLUSTER, tile_i = cl % TILES, o = cl / TILES;
  const index_t iv = tile_i * 32 + lane;
  const bool live = iv < IV;  // dead lanes still take part in the merges
  const int n0 = min(N, (int)rank * NB), n1 = min(N, n0 + NB);
  const vec_t* __restrict__ x = reinterpret_cast<const vec_t*>(in) + o * OSV + (live ? iv : 0);
  vec_t* __restrict__ y = reinterpret_cast<vec_t*>(out) + o * ((index_t)N * IV) + (live ? iv : 0);
  float m[VEC], s[VEC];
#pragma unroll
  for (int e = 0; e < VEC; ++e) { m[e] = NEG_INF; s[e] = 0.f; }
  // Read once: the kept rows first (all in flight), then UNROLL rows at a time into shared memory; each row is
  // folded into the online pairs in order along n.
  vec_t kept[KEEP > 0 ? KEEP : 1];
#pragma unroll
  for (int i = 0; i < KEEP; ++i) {
    const int j = n0 + w + i * W;
    if (live && j < n1) kept[i] = x[j * NSV];
  }
#if ASYNC
  copy_shared_rows(in, o, tile_i, n0, n1, tile);  // folded below
#endif
#if TWO
#define FOLD(e, v) m[e] = fmaxf(m[e], v)  // the maximum only (NaN skipped); the sum comes in a second pass
#else
#define FOLD(e, v) online_add(m[e], s[e], v)
#endif
#pragma unroll
  for (int i = 0; i < KEEP; ++i) {
    const int j = n0 + w + i * W;
    if (live && j < n1)
#pragma unroll
      for (int e = 0; e < VEC; ++e) FOLD(e, to_float(kept[i].v[e]));
  }
#if ASYNC
  cp_async_wait_all();
  __syncthreads();  // every thread's chunks have landed
  for (int j = n0 + NK + w; live && j < n1; j += W) {
    const vec_t t = tile[(j - n0 - NK) * 32 + lane];
#pragma unroll
    for (int e = 0; e < VEC; ++e) FOLD(e, to_float(t.v[e]));
  }
#else
  for (int j0 = n0 + NK + w; j0 < n1; j0 += UNROLL * W) {
    vec_t tu[UNROLL];
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) {
      const int j = j0 + u * W;
      if (live && j < n1) tu[u] = x[j * NSV];
    }
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) {
      const int j = j0 + u * W;
      if (live && j < n1) {
        tile[(j - n0 - NK) * 32 + lane] = tu[u];
#pragma unroll
        for (int e = 0; e < VEC; ++e) FOLD(e, to_float(tu[u].v[e]));
      }
    }
  }
#endif
#if TWO
  // The maximum over the W warps and then over the cluster (fmaxf: any order gives the same value), then the
  // sum of exp(x - m) over this thread's rows, the warps in warp order, the cluster in rank order.
  two_pass_merge<MaxCombine>(m, red_m, pub_m, pub_s, w, lane);
  sum_rows(kept, tile, m, s, n0, n1, w, lane, live);
  two_pass_merge<SumCombine>(s, red_s, pub_s, pub_m, w, lane);
#if CLUSTER > 1
  cluster_arrive_relaxed();  // this block's remote reads are done (used); it waits for the others' before it exits
#endif
#else
  // Merged over the W warps in warp order: every warp holds the same pairs afterwards.
#pragma unroll
  for (int e = 0; e < VEC; ++e) {
    red_m[(w * VEC + e) * 32 + lane] = m[e];
    red_s[(w * VEC + e) * 32 + lane] = s[e];
  }
  __syncthreads();
#pragma unroll
  for (int e = 0; e < VEC; ++e) {
    m[e] = red_m[e * 32 + lane];
    s[e] = red_s[e * 32 + lane];
    for (int i = 1; i < W; ++i)
      online_merge(m[e], s[e], red_m[(i * VEC + e) * 32 + lane], red_s[(i * VEC + e) * 32 + lane]);
  }
#if CLUSTER > 1
  // Every block publishes its pairs, then merges all CLUSTER of them in rank order (identical in every block).
  if (w == 0)
#pragma unroll
    for (int e = 0; e < VEC; ++e) {
      pub_m[e * 32 + lane] = m[e];
      pub_s[e * 32 + lane] = s[e];
    }
  cluster_sync();
#pragma unroll
  for (int e = 0; e < VEC; ++e) {
    float rm[CLUSTER], rs[CLUSTER];  // every rank's load issued before the first merge
#pragma unroll
    for (unsigned r = 0; r < CLUSTER; ++r) {
      rm[r] = load_remote(pub_m + e * 32 + lane, r);
      rs[r] = load_remote(pub_s + e * 32 + lane, r);
    }
    m[e] = rm[0];
    s[e] = rs[0];
#pragma unroll
    for (unsigned r = 1; r < CLUSTER; ++r) online_merge(m[e], s[e], rm[r], rs[r]);
  }
  cluster_arrive();  // this block's remote reads are done; it waits for the others' before it exits
#endif
#endif
#pragma unroll
  for (int e = 0; e < VEC; ++e)
    if (m[e] == NEG_INF) s[e] = QNAN;  // every element -Inf or NaN: the two-pass sum is NaN too
  write_rows(kept, tile, y, m, s, n0, n1, w, lane, live);
#if CLUSTER > 1
  cluster_wait();  // no block leaves while another may still read its pairs
#endif
}
)";
  return KernelSource{k.str(), "cudal1_softmax"};
}

}  // namespace cudal1::optimizer::softmax
