/// @brief Mode 4 of the reduction family, the column tile (Note [Reductions]): its loads and pushes, the
/// pipelined batches (Note [Column tiles in flight]) and the split merged over a thread-block cluster (Note
/// [Column tiles in clusters]), as a device-code fragment that generate_reduce appends after its macros.
#include "reduce_family.h"

namespace cudal1::optimizer::reduce {
namespace {

const char* kTile = R"(#if MODE == 4
/// Rows r, r + NW, ..., r + (UNR - 1) * NW of the thread's CPT vectors of columns, loaded ...
__device__ __forceinline__ void tile_load(vec_t (&t)[UNR][CPT], const storage_t* __restrict__ x,
                                          const index_t (&base)[CPT], index_t r) {
#pragma unroll
  for (int u = 0; u < UNR; ++u) {
    const index_t off = red_off(r + u * NW);
#pragma unroll
    for (int j = 0; j < CPT; ++j) t[u][j] = *reinterpret_cast<const vec_t*>(x + base[j] + off);
  }
}
#if RING
/// Note [Column tiles in rings]: starts copying the batch tile_load would load into this thread's slots of one
/// ring stage ([UNR][CPT][BLOCK] vectors; copy_in, Note [Async copies]), then closes a commit group (empty when
/// `live` is false).
__device__ __forceinline__ void ring_issue(vec_t* stage, const storage_t* __restrict__ x,
                                           const index_t (&base)[CPT], index_t r, bool live) {
  if (live) {
#pragma unroll
    for (int u = 0; u < UNR; ++u) {
      const index_t off = red_off(r + u * NW);
#pragma unroll
      for (int j = 0; j < CPT; ++j)
        copy_in(stage + (u * CPT + j) * BLOCK + threadIdx.x, reinterpret_cast<const vec_t*>(x + base[j] + off));
    }
  }
  copy_commit();
}
#endif
#if KIND == 3 && CLUSTER
/// ... and folded into each column's run (Note [Column tiles in clusters]): the batch's UNR rows as one Welford
/// partial (its mean as the sum of x / UNR, exact scalings that cannot overflow; m2 by a second pass over the
/// registers), merged by Chan's formula. Every column of the thread has seen the same rows, so n and the
/// factors f = UNR / (n + UNR), g = n f are shared; the cross term is d (d g), finite whenever it is.
__device__ __forceinline__ void tile_push(run_t (&run)[CPT * VEC], const vec_t (&t)[UNR][CPT], index_t) {
  const float n = run[0].n, nn = n + (float)UNR, f = (float)UNR / nn, g = n * f;
#pragma unroll
  for (int j = 0; j < CPT; ++j)
#pragma unroll
    for (int e = 0; e < VEC; ++e) {
      float mb = 0.f, m2 = 0.f;
#pragma unroll
      for (int u = 0; u < UNR; ++u) mb += to_float(t[u][j].v[e]) * (1.f / (float)UNR);
#pragma unroll
      for (int u = 0; u < UNR; ++u) {
        const float d = to_float(t[u][j].v[e]) - mb;
        m2 = fmaf(d, d, m2);
      }
      run_t& a = run[j * VEC + e];
      const float d = mb - a.mean;
      a = n == 0.f ? run_t{nn, mb, m2} : run_t{nn, a.mean + d * f, a.m2 + m2 + d * (d * g)};
    }
}
#else
/// ... and pushed in increasing r into each column's run.
__device__ __forceinline__ void tile_push(run_t (&run)[CPT * VEC], const vec_t (&t)[UNR][CPT], index_t r) {
#pragma unroll
  for (int u = 0; u < UNR; ++u)
#pragma unroll
    for (int j = 0; j < CPT; ++j)
#pragma unroll
      for (int e = 0; e < VEC; ++e) run_push(run[j * VEC + e], to_float(t[u][j].v[e]), r + u * NW);
}
#endif
#if CLUSTER
/// g[c] = the merge of g[i * COLS + c] over i < N for every c < COLS, in a fixed tree (pairs i, i + s with i a
/// multiple of 2s and i + s < N, for s = 1, 2, 4, ...: the bits do not depend on timing); every thread of the
/// block calls it after the barrier that published g, and it ends with one.
template <int N, int COLS>
__device__ __forceinline__ void tree_combine(acc_t* g) {
#pragma unroll
  for (int s = 1; s < N; s *= 2) {
    for (int t = threadIdx.x; t < (N + s - 1) / (2 * s) * COLS; t += BLOCK) {
      const int i = t / COLS * 2 * s, c = t % COLS;
      g[i * COLS + c] = acc_combine(g[i * COLS + c], g[(i + s) * COLS + c]);
    }
    __syncthreads();
  }
}
/// The partial at `p` in the shared memory of the cluster's block `rank` (distributed shared memory).
__device__ __forceinline__ acc_t acc_remote(const acc_t* p, unsigned rank) {
  const float* w = reinterpret_cast<const float*>(p);
#if KIND == 2
  const unsigned lo = __float_as_uint(load_remote(reinterpret_cast<const float*>(&p->i), rank));
  const unsigned hi = __float_as_uint(load_remote(reinterpret_cast<const float*>(&p->i) + 1, rank));
  return acc_t{load_remote(w, rank), (long long)(((unsigned long long)hi << 32) | lo)};
#elif KIND == 3
  return acc_t{load_remote(w, rank), load_remote(w + 1, rank), load_remote(w + 2, rank)};
#else
  return acc_t{load_remote(w, rank)};
#endif
}
#endif
/// Column tile: block `tile` owns TILE = 32 * CPT * VEC neighbouring outputs, lane l the vectors c = tile * 32 *
/// CPT + j * 32 + l (j < CPT), so each warp load covers 32 neighbouring vectors; warp w reduces rows r0 + w,
/// r0 + w + NW, ... of chunk `chunk`, UNR rows of loads in flight before they are pushed; the NW partials meet in
/// shared memory (acc_combine); with S > 1 chunks meet in phase 1 (ws[S][O]), or, ONE_LAUNCH, in the tile's last
/// block (Note [Column tiles in flight]), or, CLUSTER, over the cluster's blocks (Note [Column tiles in
/// clusters]). A column past O re-reads column 0 (no branch in the loop) and is not stored.
__device__ __forceinline__ void column_tile(const storage_t* __restrict__ x, out_t* __restrict__ y,
                                            long long* __restrict__ yi, acc_t* __restrict__ ws) {
#if CLUSTER
  // A 1-d grid of clusters of S blocks: the cluster is the tile, the block's rank its chunk of rows.
  const unsigned rank = cluster_rank();
  const index_t tile = (index_t)blockIdx.x / S, chunk = (index_t)rank;
#else
  const index_t tile = blockIdx.x, chunk = blockIdx.y;
#endif
#if ONE_LAUNCH
  // Workspace: the tiles' arrival counters (zeroed on the stream before the launch), then the partials.
  unsigned* const arrived = reinterpret_cast<unsigned*>(ws);
  acc_t* const wsp = reinterpret_cast<acc_t*>(reinterpret_cast<char*>(ws) + CNT_BYTES);
#elif !CLUSTER
  acc_t* const wsp = ws;
#endif
  const int lane = threadIdx.x % 32, w = threadIdx.x / 32;
  const index_t r0 = chunk * CH, r1 = r0 + CH < K ? r0 + CH : K;
  index_t base[CPT];
  bool live[CPT];
#pragma unroll
  for (int j = 0; j < CPT; ++j) {
    const index_t c = (tile * CPT + j) * 32 + lane;
    live[j] = c < O / VEC;
    base[j] = kept_off(live[j] ? c * VEC : 0);
  }
  run_t run[CPT * VEC];
#pragma unroll
  for (int q = 0; q < CPT * VEC; ++q) run[q] = run_init(r0 + w);
  index_t r = r0 + w;
#if RING
  // Note [Column tiles in rings]: nb whole batches (rows r + b UNR NW .. + (UNR - 1) NW < r1), RING - 1 in flight.
  extern __shared__ __align__(16) unsigned char ring_smem[];
  vec_t* const ring = reinterpret_cast<vec_t*>(ring_smem);
  const index_t nb = r + (UNR - 1) * NW < r1 ? (r1 - r - (UNR - 1) * NW + UNR * NW - 1) / (UNR * NW) : 0;
#pragma unroll
  for (int b = 0; b < RING - 1; ++b) ring_issue(ring + b * (UNR * CPT * BLOCK), x, base, r + b * UNR * NW, b < nb);
  for (index_t b = 0; b < nb; ++b) {
    const index_t bn = b + RING - 1;
    ring_issue(ring + (int)(bn % RING) * (UNR * CPT * BLOCK), x, base, r + bn * UNR * NW, bn < nb);
    copy_wait<RING - 1>();
    const vec_t* st = ring + (int)(b % RING) * (UNR * CPT * BLOCK) + threadIdx.x;
    vec_t t[UNR][CPT];
#pragma unroll
    for (int u = 0; u < UNR; ++u)
#pragma unroll
      for (int j = 0; j < CPT; ++j) t[u][j] = st[(u * CPT + j) * BLOCK];
    tile_push(run, t, r + b * UNR * NW);
  }
  r += nb * UNR * NW;
#elif PIPE
  // Note [Column tiles in flight]: batch b + 1 is loaded before batch b is pushed (the same pushes, in the same
  // order, as without PIPE).
  if (r + (UNR - 1) * NW < r1) {
    vec_t t[UNR][CPT];
    tile_load(t, x, base, r);
    for (;;) {
      const index_t rn = r + UNR * NW;
      const bool more = rn + (UNR - 1) * NW < r1;
      vec_t tn[UNR][CPT];
      if (more) tile_load(tn, x, base, rn);
      tile_push(run, t, r);
      r = rn;
      if (!more) break;
#pragma unroll
      for (int u = 0; u < UNR; ++u)
#pragma unroll
        for (int j = 0; j < CPT; ++j) t[u][j] = tn[u][j];
    }
  }
#else
  for (; r + (UNR - 1) * NW < r1; r += UNR * NW) {
    vec_t t[UNR][CPT];
    tile_load(t, x, base, r);
    tile_push(run, t, r);
  }
#endif
  for (; r < r1; r += NW) {
    const index_t off = red_off(r);
#pragma unroll
    for (int j = 0; j < CPT; ++j) {
      const vec_t t = *reinterpret_cast<const vec_t*>(x + base[j] + off);
#pragma unroll
      for (int e = 0; e < VEC; ++e) run_push(run[j * VEC + e], to_float(t.v[e]), r);
    }
  }
  __shared__ acc_t part[BLOCK * CPT * VEC];
  const bool any = r0 + w < r1;
#pragma unroll
  for (int q = 0; q < CPT * VEC; ++q) part[threadIdx.x * CPT * VEC + q] = run_acc(run[q], any);
  __syncthreads();
#if CLUSTER
  // part is [NW][TILE] (CPT 1: thread w * 32 + l holds columns l * VEC + e): the warps' partials meet in a tree
  // into part[0][m]; after the cluster barrier block `rank` gathers columns rank * TILE / S ... of the S blocks
  // (one remote read a thread, all in flight at once), merges them in a tree and stores them; every block waits
  // at a second barrier before leaving, as the others may still be reading its part.
  static_assert(CPT == 1 && TILE <= BLOCK && TILE % S == 0, "a thread per tile column, TILE / S columns a block");
  tree_combine<NW, TILE>(part);
  cluster_sync();
  __shared__ acc_t g[TILE];
  if (threadIdx.x < TILE) {
    const int m = (int)rank * (TILE / S) + (int)threadIdx.x % (TILE / S);
    g[threadIdx.x] = acc_remote(&part[m], threadIdx.x / (TILE / S));
  }
  __syncthreads();
  cluster_arrive();  // this block's remote reads are done
  tree_combine<S, TILE / S>(g);
  if (threadIdx.x < TILE / S) {
    const index_t o = tile * TILE + (int)rank * (TILE / S) + (int)threadIdx.x;
    if (o / VEC < O / VEC) acc_store(g[threadIdx.x], y, yi, o);
  }
  cluster_wait();
#else
  if (w != 0) return;
#pragma unroll
  for (int j = 0; j < CPT; ++j) {
    if (!live[j]) continue;
#pragma unroll
    for (int e = 0; e < VEC; ++e) {
      const int q = j * VEC + e;
      acc_t a = part[lane * CPT * VEC + q];
      for (int k = 1; k < NW; ++k) a = acc_combine(a, part[(k * 32 + lane) * CPT * VEC + q]);
      const index_t o = ((tile * CPT + j) * 32 + lane) * VEC + e;
      if (S == 1) acc_store(a, y, yi, o);
      else wsp[chunk * O + o] = a;
    }
  }
#endif
#if ONE_LAUNCH
  // The last of the tile's S blocks to arrive merges its columns' partials (threadFenceReduction: every writer
  // fences before lane 0 counts the block in; the last block fences before reading).
  __threadfence();
  __syncwarp();
  unsigned prev = 0;
  if (lane == 0) prev = atomicAdd(arrived + tile, 1u);
  prev = __shfl_sync(0xffffffffu, prev, 0);
  if (prev != (unsigned)S - 1u) return;
  __threadfence();
#pragma unroll
  for (int j = 0; j < CPT; ++j) {
    if (!live[j]) continue;
#pragma unroll
    for (int e = 0; e < VEC; ++e) {
      const index_t o = ((tile * CPT + j) * 32 + lane) * VEC + e;
      acc_store(merge_partials(wsp, o), y, yi, o);
    }
  }
#endif
}
#endif
)";

}  // namespace

const char* column_tile_source() { return kTile; }

}  // namespace cudal1::optimizer::reduce
