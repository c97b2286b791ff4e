// @brief ColumnTile, PipelinedTile and ClusterTile (Note [Reductions]): block `tile` owns kTile = 32 x kColumns x
// kVec neighbouring outputs, lane l the vectors c = tile * 32 * kColumns + j * 32 + l (j < kColumns), so each warp
// load covers 32 neighbouring vectors; warp w reduces rows r0 + w, r0 + w + kWarps, ... of chunk `chunk`, kUnr rows
// of loads in flight before they are pushed; the kWarps partials meet in shared memory (acc_combine); with
// kSplits > 1 the chunks meet in phase 1 (ws[kSplits][kOutputs], column_second_pass), or, kOneLaunch, in the tile's
// last block (Note [Column tiles in flight]), or, kCluster, over the cluster's blocks (Note [Column tiles in
// clusters]). A column past kOutputs re-reads column 0 (no branch in the loop) and is not stored.
// Follows reduce_combine.cuh, codegen_common's cluster primitives and cp.async copies (Note [Async copies], of
// vec_t vectors; every tile's source carries both, as the kCluster and kRing branches name them) and its
// constants:
//   int kColumns           vectors of columns a thread (1 for ClusterTile)
//   int kWarps, kTile      warps a block; outputs a tile
//   int kUnr               rows a batch of loads
//   index_t kChunk         reduced rows a chunk (the last may be shorter)
//   bool kPipe             PipelinedTile and ClusterTile: batch b + 1 is loaded before batch b is pushed
//   bool kOneLaunch        PipelinedTile with kSplits > 1: the tile's last block merges the partials
//   int kCounterBytes      with kOneLaunch, bytes of arrival counters ahead of the partials in ws, else 0
//   bool kCluster          ClusterTile: the kSplits blocks of a tile are one thread-block cluster
//   bool kRing             ClusterTile through a cp.async ring (Note [Column tiles in rings])
//   int kRingStages        the ring's stages (1 without a ring: unused)

namespace reduce {

/// Rows r, r + kWarps, ..., r + (kUnr - 1) * kWarps of the thread's kColumns vectors of columns, loaded ...
__device__ __forceinline__ void tile_load(vec_t (&t)[kUnr][kColumns], const storage_t* __restrict__ x,
                                          const index_t (&base)[kColumns], index_t r) {
#pragma unroll
  for (int u = 0; u < kUnr; ++u) {
    const index_t off = red_off(r + u * kWarps);
#pragma unroll
    for (int j = 0; j < kColumns; ++j) t[u][j] = *reinterpret_cast<const vec_t*>(x + base[j] + off);
  }
}

/// Note [Column tiles in rings]: starts copying the batch tile_load would load into this thread's slots of one
/// ring stage ([kUnr][kColumns][kBlock] vectors; copy_in, Note [Async copies]), then closes a commit group (empty
/// when `live` is false).
__device__ __forceinline__ void ring_issue(vec_t* stage, const storage_t* __restrict__ x,
                                           const index_t (&base)[kColumns], index_t r, bool live) {
  if (live) {
#pragma unroll
    for (int u = 0; u < kUnr; ++u) {
      const index_t off = red_off(r + u * kWarps);
#pragma unroll
      for (int j = 0; j < kColumns; ++j)
        copy_in(stage + (u * kColumns + j) * kBlock + threadIdx.x, reinterpret_cast<const vec_t*>(x + base[j] + off));
    }
  }
  copy_commit();
}

/// ... and pushed in increasing r into each column's run; or, Welford cluster tiles (Note [Column tiles in
/// clusters]), folded into it: the batch's kUnr rows as one Welford partial (its mean as the sum of x / kUnr, exact
/// scalings that cannot overflow; m2 by a second pass over the registers), merged by Chan's formula. Every column
/// of the thread has seen the same rows, so n and the factors f = kUnr / (n + kUnr), g = n f are shared; the cross
/// term is d (d g), finite whenever it is. A template on run_t, whose fields only Welford has.
template <class Run>
__device__ __forceinline__ void tile_push(Run (&run)[kColumns * kVec], const vec_t (&t)[kUnr][kColumns], index_t r) {
  if constexpr (kKind == kWelfordKind && kCluster) {
    const float n = run[0].n, nn = n + (float)kUnr, f = (float)kUnr / nn, g = n * f;
#pragma unroll
    for (int j = 0; j < kColumns; ++j)
#pragma unroll
      for (int e = 0; e < kVec; ++e) {
        float mb = 0.f, m2 = 0.f;
#pragma unroll
        for (int u = 0; u < kUnr; ++u) mb += to_float(t[u][j].v[e]) * (1.f / (float)kUnr);
#pragma unroll
        for (int u = 0; u < kUnr; ++u) {
          const float d = to_float(t[u][j].v[e]) - mb;
          m2 = fmaf(d, d, m2);
        }
        Run& a = run[j * kVec + e];
        const float d = mb - a.mean;
        a = n == 0.f ? Run{nn, mb, m2} : Run{nn, a.mean + d * f, a.m2 + m2 + d * (d * g)};
      }
  } else {
#pragma unroll
    for (int u = 0; u < kUnr; ++u)
#pragma unroll
      for (int j = 0; j < kColumns; ++j)
#pragma unroll
        for (int e = 0; e < kVec; ++e) run_push(run[j * kVec + e], to_float(t[u][j].v[e]), r + u * kWarps);
  }
}

/// g[c] = the merge of g[i * COLS + c] over i < N for every c < COLS, in a fixed tree (pairs i, i + s with i a
/// multiple of 2s and i + s < N, for s = 1, 2, 4, ...: the bits do not depend on timing); every thread of the
/// block calls it after the barrier that published g, and it ends with one.
template <int N, int COLS>
__device__ __forceinline__ void tree_combine(acc_t* g) {
#pragma unroll
  for (int s = 1; s < N; s *= 2) {
    for (int t = threadIdx.x; t < (N + s - 1) / (2 * s) * COLS; t += kBlock) {
      const int i = t / COLS * 2 * s, c = t % COLS;
      g[i * COLS + c] = acc_combine(g[i * COLS + c], g[(i + s) * COLS + c]);
    }
    __syncthreads();
  }
}

/// The partial at `p` in the shared memory of the cluster's block `rank` (distributed shared memory). A template
/// on acc_t, whose fields depend on the accumulator.
template <class Acc>
__device__ __forceinline__ Acc acc_remote(const Acc* p, unsigned rank) {
  const float* w = reinterpret_cast<const float*>(p);
  if constexpr (kKind == kArgKind) {
    const unsigned lo = __float_as_uint(load_remote(reinterpret_cast<const float*>(&p->i), rank));
    const unsigned hi = __float_as_uint(load_remote(reinterpret_cast<const float*>(&p->i) + 1, rank));
    return Acc{load_remote(w, rank), (long long)(((unsigned long long)hi << 32) | lo)};
  } else if constexpr (kKind == kWelfordKind) {
    return Acc{load_remote(w, rank), load_remote(w + 1, rank), load_remote(w + 2, rank)};
  } else {
    return Acc{load_remote(w, rank)};
  }
}

/// The block's share of its tile (the file's first lines): its chunk of rows pushed into runs, the runs merged and
/// stored, or written as partials.
__device__ __forceinline__ void column_tile(const storage_t* __restrict__ x, out_t* __restrict__ y,
                                            long long* __restrict__ yi, acc_t* __restrict__ ws) {
  // With kCluster, a 1-d grid of clusters of kSplits blocks: the cluster is the tile, the block's rank its chunk of
  // rows.
  const unsigned rank = kCluster ? cluster_rank() : 0u;
  const index_t tile = kCluster ? (index_t)blockIdx.x / kSplits : (index_t)blockIdx.x;
  const index_t chunk = kCluster ? (index_t)rank : (index_t)blockIdx.y;
  // The partials (ws itself, or with kOneLaunch behind the tiles' arrival counters; none with kCluster).
  acc_t* const wsp = reinterpret_cast<acc_t*>(reinterpret_cast<char*>(ws) + kCounterBytes);
  const int lane = threadIdx.x % 32, w = threadIdx.x / 32;
  const index_t r0 = chunk * kChunk, r1 = r0 + kChunk < kLength ? r0 + kChunk : kLength;
  index_t base[kColumns];
  bool live[kColumns];
#pragma unroll
  for (int j = 0; j < kColumns; ++j) {
    const index_t c = (tile * kColumns + j) * 32 + lane;
    live[j] = c < kOutputs / kVec;
    base[j] = kept_off(live[j] ? c * kVec : 0);
  }
  run_t run[kColumns * kVec];
#pragma unroll
  for (int q = 0; q < kColumns * kVec; ++q) run[q] = run_init(r0 + w);
  index_t r = r0 + w;
  if constexpr (kRing) {
    // Note [Column tiles in rings]: nb whole batches (rows r + b kUnr kWarps .. + (kUnr - 1) kWarps < r1),
    // kRingStages - 1 in flight.
    extern __shared__ __align__(16) unsigned char ring_smem[];
    vec_t* const ring = reinterpret_cast<vec_t*>(ring_smem);
    const index_t nb =
        r + (kUnr - 1) * kWarps < r1 ? (r1 - r - (kUnr - 1) * kWarps + kUnr * kWarps - 1) / (kUnr * kWarps) : 0;
#pragma unroll
    for (int b = 0; b < kRingStages - 1; ++b)
      ring_issue(ring + b * (kUnr * kColumns * kBlock), x, base, r + b * kUnr * kWarps, b < nb);
    for (index_t b = 0; b < nb; ++b) {
      const index_t bn = b + kRingStages - 1;
      ring_issue(ring + (int)(bn % kRingStages) * (kUnr * kColumns * kBlock), x, base, r + bn * kUnr * kWarps,
                 bn < nb);
      copy_wait<kRingStages - 1>();
      const vec_t* st = ring + (int)(b % kRingStages) * (kUnr * kColumns * kBlock) + threadIdx.x;
      vec_t t[kUnr][kColumns];
#pragma unroll
      for (int u = 0; u < kUnr; ++u)
#pragma unroll
        for (int j = 0; j < kColumns; ++j) t[u][j] = st[(u * kColumns + j) * kBlock];
      tile_push(run, t, r + b * kUnr * kWarps);
    }
    r += nb * kUnr * kWarps;
  } else if constexpr (kPipe) {
    // Note [Column tiles in flight]: batch b + 1 is loaded before batch b is pushed (the same pushes, in the same
    // order, as without kPipe).
    if (r + (kUnr - 1) * kWarps < r1) {
      vec_t t[kUnr][kColumns];
      tile_load(t, x, base, r);
      for (;;) {
        const index_t rn = r + kUnr * kWarps;
        const bool more = rn + (kUnr - 1) * kWarps < r1;
        vec_t tn[kUnr][kColumns];
        if (more) tile_load(tn, x, base, rn);
        tile_push(run, t, r);
        r = rn;
        if (!more) break;
#pragma unroll
        for (int u = 0; u < kUnr; ++u)
#pragma unroll
          for (int j = 0; j < kColumns; ++j) t[u][j] = tn[u][j];
      }
    }
  } else {
    for (; r + (kUnr - 1) * kWarps < r1; r += kUnr * kWarps) {
      vec_t t[kUnr][kColumns];
      tile_load(t, x, base, r);
      tile_push(run, t, r);
    }
  }
  for (; r < r1; r += kWarps) {
    const index_t off = red_off(r);
#pragma unroll
    for (int j = 0; j < kColumns; ++j) {
      const vec_t t = *reinterpret_cast<const vec_t*>(x + base[j] + off);
#pragma unroll
      for (int e = 0; e < kVec; ++e) run_push(run[j * kVec + e], to_float(t.v[e]), r);
    }
  }
  __shared__ acc_t part[kBlock * kColumns * kVec];
  const bool any = r0 + w < r1;
#pragma unroll
  for (int q = 0; q < kColumns * kVec; ++q) part[threadIdx.x * kColumns * kVec + q] = run_acc(run[q], any);
  __syncthreads();
  if constexpr (kCluster) {
    // part is [kWarps][kTile] (kColumns 1: thread w * 32 + l holds columns l * kVec + e): the warps' partials meet
    // in a tree into part[0][m]; after the cluster barrier block `rank` gathers columns rank * kTile / kSplits ...
    // of the kSplits blocks (one remote read a thread, all in flight at once), merges them in a tree and stores
    // them; every block waits at a second barrier before leaving, as the others may still be reading its part.
    constexpr int cols = kTile / kSplits;  // columns a block gathers
    static_assert(!kCluster || (kColumns == 1 && kTile <= kBlock && kTile % kSplits == 0),
                  "a thread per tile column, kTile / kSplits columns a block");
    tree_combine<kWarps, kTile>(part);
    cluster_sync();
    __shared__ acc_t g[kTile];
    if (threadIdx.x < kTile) {
      const int m = (int)rank * cols + (int)threadIdx.x % cols;
      g[threadIdx.x] = acc_remote(&part[m], threadIdx.x / cols);
    }
    __syncthreads();
    cluster_arrive();  // this block's remote reads are done
    tree_combine<kSplits, cols>(g);
    if (threadIdx.x < cols) {
      const index_t o = tile * kTile + (int)rank * cols + (int)threadIdx.x;
      if (o / kVec < kOutputs / kVec) acc_store(g[threadIdx.x], y, yi, o);
    }
    cluster_wait();
  } else {
    if (w != 0) return;
#pragma unroll
    for (int j = 0; j < kColumns; ++j) {
      if (!live[j]) continue;
#pragma unroll
      for (int e = 0; e < kVec; ++e) {
        const int q = j * kVec + e;
        acc_t a = part[lane * kColumns * kVec + q];
        for (int k = 1; k < kWarps; ++k) a = acc_combine(a, part[(k * 32 + lane) * kColumns * kVec + q]);
        const index_t o = ((tile * kColumns + j) * 32 + lane) * kVec + e;
        if (kSplits == 1) acc_store(a, y, yi, o);
        else wsp[chunk * kOutputs + o] = a;
      }
    }
  }
  if constexpr (kOneLaunch) {
    // The last of the tile's kSplits blocks to arrive merges its columns' partials (threadFenceReduction: every
    // writer fences before lane 0 counts the block in; the last block fences before reading).
    unsigned* const arrived = reinterpret_cast<unsigned*>(ws);
    __threadfence();
    __syncwarp();
    unsigned prev = 0;
    if (lane == 0) prev = atomicAdd(arrived + tile, 1u);
    prev = __shfl_sync(0xffffffffu, prev, 0);
    if (prev != (unsigned)kSplits - 1u) return;
    __threadfence();
#pragma unroll
    for (int j = 0; j < kColumns; ++j) {
      if (!live[j]) continue;
#pragma unroll
      for (int e = 0; e < kVec; ++e) {
        const index_t o = ((tile * kColumns + j) * 32 + lane) * kVec + e;
        acc_store(merge_partials(wsp, o), y, yi, o);
      }
    }
  }
}

}  // namespace reduce

extern "C" __global__ void __launch_bounds__(reduce::kBlock, reduce::kMinBlocks)
cudal1_reduce(const storage_t* __restrict__ x, out_t* __restrict__ y, long long* __restrict__ yi,
              reduce::acc_t* __restrict__ ws, int phase) {
  using namespace reduce;
  if (phase == 1) return column_second_pass(ws, y, yi);
  column_tile(x, y, yi, ws);
}
