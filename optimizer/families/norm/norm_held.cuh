// @brief HeldCluster and HeldGrid (Note [Norm held], sm_90+): a row over kRowBlocks blocks (a thread-block
// cluster, or consecutive blocks of a cooperative grid), each holding its slice in registers, fed by bulk copies
// through a shared-memory ring that a producer warp fills while kBlock consumer threads reduce and write. The
// blocks exchange their triples by st.async (a cluster) or through the workspace (the grid). Follows
// norm_common.cuh, codegen_common's cluster primitives and its own constants (namespace rownorm, Note [Device
// constants]):
//   int kRowBlocks                   blocks a row
//   bool kGrid                       HeldGrid: the row's blocks are kRowBlocks consecutive blocks of the grid
//   bool kClusterExchange            HeldCluster with kRowBlocks > 1: triples go to every block of the cluster
//   index_t kSliceVectors            vectors of a row each block holds (the last blocks may hold fewer or none)
//   index_t kChunkVectors            vectors a chunk (a bulk copy): kBlock x kChunkThreadVectors
//   int kChunkThreadVectors          vectors of a chunk each consumer takes
//   int kChunks, kKeep, kDrop        chunks of a slice, the first kKeep kept in registers, the last kDrop reread
//   int kHeld                        vectors a consumer keeps in registers: kKeep x kChunkThreadVectors
//   int kSlots, kRereadSlots         slots of the ring and of the rereads' ring (0: no rereads)
// The consumers' reductions use row_barrier(), named barrier 1 over the kBlock consumers.

namespace rownorm {

/// Slots of the rereads' ring, 1 where there are no rereads (kDrop == 0: nothing uses it), so that its arrays and
/// slot arithmetic are well-formed in every variant.
enum : int { kRereadRing = kRereadSlots > 0 ? kRereadSlots : 1 };

// mbarriers, bulk copies and st.async (sm_90).
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

/// Stores v at `dst` in block `rank`'s shared memory, completing 16 bytes on that block's mbarrier `bar`.
__device__ __forceinline__ void send16(float4* dst, float4 v, unsigned long long* bar, unsigned rank) {
  unsigned rd, rb;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(rd) : "r"(smem_u32(dst)), "r"(rank));
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(rb) : "r"(smem_u32(bar)), "r"(rank));
  asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.f32 [%0], {%1, %2, %3, %4}, [%5];"
               ::"r"(rd), "f"(v.x), "f"(v.y), "f"(v.z), "f"(v.w), "r"(rb) : "memory");
}

/// Vectors of chunk `a` (slice vector offset) that this block holds: the bytes its bulk copy moves.
__device__ __forceinline__ unsigned chunk_bytes(index_t a, index_t cnt) {
  const index_t n = a < cnt ? (cnt - a < kChunkVectors ? cnt - a : kChunkVectors) : 0;
  return (unsigned)(n * (index_t)sizeof(vec_t));
}

/// Waits until chunk q of this block's sequence (chunk k of its row) has landed in the ring, then calls f(u, v)
/// for this thread's vectors v of it (u < kChunkThreadVectors) that the slice holds; returns the chunk's slot.
template <typename F>
__device__ __forceinline__ int take_chunk(const vec_t* ring, unsigned long long* full, index_t q, int k, index_t cnt,
                                          F&& f) {
  const int slot = (int)(q % kSlots);
  mbar_wait(&full[slot], (unsigned)((q / kSlots) & 1));
  const vec_t* src = ring + (index_t)slot * kChunkVectors;
#pragma unroll
  for (int u = 0; u < kChunkThreadVectors; ++u)
    if ((index_t)k * kChunkVectors + threadIdx.x + u * kBlock < cnt) f(u, src[threadIdx.x + u * kBlock]);
  return slot;
}

/// Frees ring slot `slot` (its `empty` mbarrier) once every thread of this warp is done with it.
__device__ __forceinline__ void free_slot(unsigned long long* empty, int slot) {
  __syncwarp();
  if (threadIdx.x % 32 == 0) mbar_arrive(&empty[slot]);
}

/// Adds v's elements to a thread's sums of x - shift and of its square (shift: the thread's first element).
__device__ __forceinline__ void shifted_sums(const vec_t& v, float shift, float& s1, float& s2) {
#pragma unroll
  for (int e = 0; e < kVec; ++e) {
    const float d = to_float(v.v[e]) - shift;
    s1 += d;
    s2 += d * d;
  }
}

/// The block's triple from each thread's `n` elements' sums of x - shift (Chan's formula over the threads; the
/// cancellation is bounded by the thread's own m2, since the shift is one of its elements).
__device__ __forceinline__ Welford shifted_triple(int n, float shift, float s1, float s2, float* red) {
  const float tn = (float)n;
  return row_welford(n > 0 ? Welford{tn, shift + s1 / tn, fmaxf(s2 - s1 * s1 / tn, 0.f)} : Welford{0.f, 0.f, 0.f},
                     red);
}

/// Normalises this thread's vectors of chunk k of its slice, held in c, into row `row` of y (yr: the row).
__device__ __forceinline__ void write_chunk(const storage_t* __restrict__ w, const storage_t* __restrict__ b,
                                            vec_t* __restrict__ yr, index_t row, index_t j0, int k, index_t cnt,
                                            const vec_t (&c)[kHeld], float mean_u, float rstd_u, float* wv,
                                            float* bv) {
#pragma unroll
  for (int u = 0; u < kChunkThreadVectors; ++u) {
    const index_t a = (index_t)k * kChunkVectors + threadIdx.x + u * kBlock;
    if (a < cnt) {
      affine(w, b, row, j0 + a, wv, bv);
      yr[j0 + a] = normalise(c[k * kChunkThreadVectors + u], mean_u, rstd_u, wv, bv);
    }
  }
}

/// Thread 0 writes the block's triple (the same in every thread) to the workspace at i x 3.
__device__ __forceinline__ void publish(float* ws, index_t i, const Welford& acc) {
  if (threadIdx.x == 0) {
    float* p = ws + i * 3;
    p[0] = acc.n;
    p[1] = acc.mean;
    p[2] = acc.m2;
  }
}

/// HeldGrid: publishes this block's triple of `row` and arrives on the row's counter (thread 0; the triple is
/// the same in every thread). Counters follow the kRows x kRowBlocks triples in the workspace, zeroed per call.
__device__ __forceinline__ void grid_publish(float* __restrict__ ws, index_t row, unsigned rank, const Welford& t) {
  publish(ws, row * kRowBlocks + rank, t);
  if (threadIdx.x == 0) {
    __threadfence();
    atomicAdd(reinterpret_cast<unsigned*>(ws + kRows * kRowBlocks * 3) + row, 1u);
  }
}

/// HeldGrid, the exchange warp (lane l): for each of the block's rows in turn, waits until all kRowBlocks blocks
/// have arrived (they are resident: the launch is cooperative), merges their triples (lane l takes l, l + 32, ...
/// in order, then the warp's tree: the same bits in every block), writes mean and rstd (rank 0) and hands the
/// statistics the output uses to the consumers in stats[row parity], completing ready[parity]. A parity's slot
/// is rewritten two rows later, once the row between has arrived everywhere, so after the consumers took it.
__device__ __forceinline__ void grid_exchange_warp(const float* __restrict__ ws, index_t cid, index_t clusters,
                                                   index_t mine, unsigned rank, stat_t* __restrict__ mean_out,
                                                   stat_t* __restrict__ rstd_out, float2* stats,
                                                   unsigned long long* ready) {
  const unsigned l = threadIdx.x % 32;
  const unsigned* const arrived = reinterpret_cast<const unsigned*>(ws + kRows * kRowBlocks * 3);
  for (index_t it = 0; it < mine; ++it) {
    const index_t row = cid + it * clusters;
    if (l == 0) {
      while (*reinterpret_cast<const volatile unsigned*>(arrived + row) < (unsigned)kRowBlocks) __nanosleep(32);
      __threadfence();
    }
    __syncwarp();
    Welford acc{0.f, 0.f, 0.f};
    for (int t = (int)l; t < kRowBlocks; t += 32) {
      const float* p = ws + (row * kRowBlocks + t) * 3;
      acc = wf_combine(acc, Welford{__ldcg(p), __ldcg(p + 1), __ldcg(p + 2)});
    }
    acc = warp_welford(acc);
    if (l == 0) {
      const float mean = acc.mean, rstd = rsqrtf(acc.m2 / (float)kCols + eps());
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

/// HeldGrid: the block's triple of the row whose chunks are q0 .. q0 + kChunks - 1 in the ring, read from shared
/// memory without freeing the slots (per-thread sums shifted by the thread's first element, merged with Chan's
/// formula, as HeldCluster's rereads).
__device__ __forceinline__ Welford ring_triple(const vec_t* ring, unsigned long long* full, index_t q0,
                                               index_t cnt, float* red) {
  float shift = 0.f, s1 = 0.f, s2 = 0.f;
  int n = 0;
#pragma unroll
  for (int k = 0; k < kChunks; ++k)
    take_chunk(ring, full, q0 + k, k, cnt, [&](int, const vec_t v) {
      if (n == 0) shift = to_float(v.v[0]);
      n += kVec;
      shifted_sums(v, shift, s1, s2);
    });
  return shifted_triple(n, shift, s1, s2, red);
}

/// HeldGrid: chunk k of the row whose chunks are q0 .. q0 + kChunks - 1 from the ring into registers, its slot
/// freed.
__device__ __forceinline__ void ring_take_chunk(const vec_t* ring, unsigned long long* full,
                                               unsigned long long* empty, index_t q0, int k, index_t cnt,
                                               vec_t (&c)[kHeld]) {
  free_slot(empty, take_chunk(ring, full, q0 + k, k, cnt,
                              [&](int u, const vec_t v) { c[k * kChunkThreadVectors + u] = v; }));
}

/// Rows cid, cid + clusters, ... go to the row's blocks cid (a cluster, or kRowBlocks consecutive blocks of the
/// grid); block `rank` holds vectors [rank x kSliceVectors, rank x kSliceVectors + cnt) of each, in kChunks
/// chunks of kChunkVectors vectors (thread t's are t + u x kBlock of a chunk, u < kChunkThreadVectors); the
/// first kKeep chunks stay in registers (kHeld vectors a thread), the last kDrop are reread after the exchange.
__device__ __forceinline__ void rows(const storage_t* __restrict__ x, const storage_t* __restrict__ w,
                                     const storage_t* __restrict__ b, storage_t* __restrict__ y,
                                     stat_t* __restrict__ mean_out, stat_t* __restrict__ rstd_out,
                                     float* __restrict__ ws, int phase, float* red) {
  extern __shared__ __align__(128) unsigned char held_smem[];
  vec_t* const ring = reinterpret_cast<vec_t*>(held_smem);
  __shared__ __align__(8) unsigned long long full[kSlots], empty[kSlots];
  // The rereads' ring (kDrop > 0).
  vec_t* const ringb = ring + (index_t)kSlots * kChunkVectors;
  __shared__ __align__(8) unsigned long long fullb[kRereadRing], emptyb[kRereadRing], gate;
  // HeldGrid: a row of each parity has its statistics, (mean, rstd) the output uses, in stats[].
  __shared__ __align__(8) unsigned long long ready[2];
  __shared__ float2 stats[2];
  // kClusterExchange: the triples of a row of each parity have landed; every block's triple of that row, by rank.
  __shared__ __align__(8) unsigned long long xbar[2];
  __shared__ __align__(16) float4 inbox[2][kRowBlocks];
  unsigned rank = 0;
  if constexpr (kGrid)
    rank = blockIdx.x % kRowBlocks;
  else if constexpr (kClusterExchange)
    rank = cluster_rank();
  const index_t clusters = gridDim.x / kRowBlocks, cid = blockIdx.x / kRowBlocks;
  const index_t j0 = (index_t)rank * kSliceVectors;
  const index_t cnt = j0 < kVectors ? (kVectors - j0 < kSliceVectors ? kVectors - j0 : kSliceVectors) : 0;
  const index_t mine = cid < kRows ? (kRows - cid + clusters - 1) / clusters : 0;
  if (threadIdx.x == 0) {
    for (int i = 0; i < kSlots; ++i) {
      mbar_init(&full[i], 1);
      mbar_init(&empty[i], kBlock / 32);
    }
    if constexpr (kDrop > 0) {
      for (int i = 0; i < kRereadRing; ++i) {
        mbar_init(&fullb[i], 1);
        mbar_init(&emptyb[i], kBlock / 32);
      }
      mbar_init(&gate, 1);
    }
    if constexpr (kGrid) {
      mbar_init(&ready[0], 1);
      mbar_init(&ready[1], 1);
    }
    if constexpr (kClusterExchange) {
      mbar_init(&xbar[0], 1);
      mbar_init(&xbar[1], 1);
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  if constexpr (kClusterExchange)
    cluster_sync();  // every block's mbarriers exist before any block sends to them
  else
    __syncthreads();
  if (threadIdx.x >= kBlock) {
    if (threadIdx.x == kBlock)  // producer: chunk q of this block's sequence into slot q % kSlots
      for (index_t q = 0; q < mine * kChunks; ++q) {
        const int slot = (int)(q % kSlots);
        if (q >= kSlots) mbar_wait(&empty[slot], (unsigned)((q / kSlots - 1) & 1));
        const index_t row = cid + (q / kChunks) * clusters, a = (q % kChunks) * kChunkVectors;
        bulk_in(ring + (index_t)slot * kChunkVectors, x + (row * kVectors + j0 + a) * kVec, chunk_bytes(a, cnt),
                &full[slot]);
      }
    if constexpr (kDrop > 0) {
      if (threadIdx.x == kBlock + 32)  // reread producer: a row's last kDrop chunks, last first, once it was read
        for (index_t it = 0, q = 0; it < mine; ++it) {
          mbar_wait(&gate, (unsigned)(it & 1));
          const index_t row = cid + it * clusters;
          for (int d = 0; d < kDrop; ++d, ++q) {
            const int slot = (int)(q % kRereadRing);
            if (q >= kRereadRing) mbar_wait(&emptyb[slot], (unsigned)((q / kRereadRing - 1) & 1));
            const index_t a = (index_t)(kChunks - 1 - d) * kChunkVectors;
            bulk_in(ringb + (index_t)slot * kChunkVectors, x + (row * kVectors + j0 + a) * kVec, chunk_bytes(a, cnt),
                    &fullb[slot]);
          }
        }
    }
    if constexpr (kGrid) {
      if (threadIdx.x >= kBlock + 32)
        grid_exchange_warp(ws, cid, clusters, mine, rank, mean_out, rstd_out, stats, ready);
    }
    __syncwarp();
  } else {
    vec_t c[kHeld];
    float wv[kVec], bv[kVec];
    if constexpr (kGrid) {
      // Row it + 1's triple is read from the ring and published before row it's statistics are needed, and the
      // exchange warp waits and merges, so the consumers find them ready. Row it's chunk k is written and row
      // it + 1's chunk k taken into the freed registers at once, so the producer loads row it + 2 while row it is
      // written (Note [Norm held], mode 8, "interleaved").
      if (mine > 0) {
        grid_publish(ws, cid, rank, ring_triple(ring, full, 0, cnt, red));
#pragma unroll
        for (int k = 0; k < kChunks; ++k) ring_take_chunk(ring, full, empty, 0, k, cnt, c);
      }
      for (index_t it = 0; it < mine; ++it) {
        const index_t row = cid + it * clusters;
        const bool next = it + 1 < mine;
        if (next) grid_publish(ws, row + clusters, rank, ring_triple(ring, full, (it + 1) * kChunks, cnt, red));
        mbar_wait(&ready[it & 1], (unsigned)((it >> 1) & 1));
        const float mean_u = stats[it & 1].x, rstd_u = stats[it & 1].y;
        vec_t* __restrict__ yr = reinterpret_cast<vec_t*>(y + row * kCols);
#pragma unroll
        for (int k = 0; k < kChunks; ++k) {
          write_chunk(w, b, yr, row, j0, k, cnt, c, mean_u, rstd_u, wv, bv);
          if (next) ring_take_chunk(ring, full, empty, (it + 1) * kChunks, k, cnt, c);
        }
      }
    } else {
      for (index_t it = 0; it < mine; ++it) {
        const index_t row = cid + it * clusters;
        // With rereads: sums of x - shift, shift = the thread's first element; else the plain sum.
        float shift = 0.f, s1 = 0.f, s2 = 0.f;
        int held_n = 0;
        float s = 0.f;
#pragma unroll
        for (int k = 0; k < kChunks; ++k) {
          const index_t q = it * kChunks + k;
          const int slot = (int)(q % kSlots);
          mbar_wait(&full[slot], (unsigned)((q / kSlots) & 1));
          const vec_t* src = ring + (index_t)slot * kChunkVectors;
#pragma unroll
          for (int u = 0; u < kChunkThreadVectors; ++u)
            if ((index_t)k * kChunkVectors + threadIdx.x + u * kBlock < cnt) {
              const vec_t v = src[threadIdx.x + u * kBlock];
              if (k < kKeep) c[(k < kKeep ? k : 0) * kChunkThreadVectors + u] = v;
              if constexpr (kDrop > 0) {
                if (k == 0 && u == 0) shift = to_float(v.v[0]);
                held_n += kVec;
#pragma unroll
                for (int e = 0; e < kVec; ++e) {
                  const float d = to_float(v.v[e]) - shift;
                  s1 += d;
                  s2 += d * d;
                }
              } else {
#pragma unroll
                for (int e = 0; e < kVec; ++e) s += to_float(v.v[e]);
              }
            }
          free_slot(empty, slot);  // this warp is done with the slot
        }
        float n, bm, m2;
        if constexpr (kDrop > 0) {
          if (threadIdx.x == 0) mbar_arrive(&gate);  // the row has been read once: its rereads may start
          const Welford bt = shifted_triple(held_n, shift, s1, s2, red);
          n = bt.n;
          bm = bt.mean;
          m2 = bt.m2;
        } else {
          // The block's exact two-pass statistics from registers.
          n = (float)(cnt * kVec);
          const float total = row_sum(s, red);
          bm = cnt > 0 ? total / n : 0.f;
          float q2 = 0.f;
#pragma unroll
          for (int k = 0; k < kChunks; ++k)
#pragma unroll
            for (int u = 0; u < kChunkThreadVectors; ++u)
              if ((index_t)k * kChunkVectors + threadIdx.x + u * kBlock < cnt) {
#pragma unroll
                for (int e = 0; e < kVec; ++e) {
                  const float d = to_float(c[k * kChunkThreadVectors + u].v[e]) - bm;
                  q2 += d * d;
                }
              }
          m2 = row_sum(q2, red);
        }
        // The cluster's triples merged in rank order.
        Welford t{n, bm, m2};
        if constexpr (kClusterExchange) {
          const int ib = (int)(it & 1);
          if (threadIdx.x < kRowBlocks) send16(&inbox[ib][rank], make_float4(n, bm, m2, 0.f), &xbar[ib], threadIdx.x);
          if (threadIdx.x == 0) mbar_expect(&xbar[ib], kRowBlocks * 16);
          mbar_wait(&xbar[ib], (unsigned)((it >> 1) & 1));
          const unsigned l = threadIdx.x % 32;
          t = Welford{0.f, 0.f, 0.f};
          if (l < kRowBlocks) {
            const float4 v = inbox[ib][l];
            t = Welford{v.x, v.y, v.z};
          }
          t = warp_welford(t);  // every warp of every block: the same triples, the same tree
        }
        const float mean = t.mean, rstd = rsqrtf(t.m2 / (float)kCols + eps());
        if (rank == 0 && threadIdx.x == 0) {
          mean_out[row] = to_stat(mean);
          rstd_out[row] = to_stat(rstd);
        }
        const float mean_u = used_stat(mean), rstd_u = used_stat(rstd);
        vec_t* __restrict__ yr = reinterpret_cast<vec_t*>(y + row * kCols);
        if constexpr (kDrop > 0) {
          for (int d = 0; d < kDrop; ++d) {  // the rereads first: their copies are under way
            const index_t q = it * kDrop + d;
            const int slot = (int)(q % kRereadRing);
            mbar_wait(&fullb[slot], (unsigned)((q / kRereadRing) & 1));
            const vec_t* src = ringb + (index_t)slot * kChunkVectors;
#pragma unroll
            for (int u = 0; u < kChunkThreadVectors; ++u) {
              const index_t a = (index_t)(kChunks - 1 - d) * kChunkVectors + threadIdx.x + u * kBlock;
              if (a < cnt) {
                affine(w, b, row, j0 + a, wv, bv);
                yr[j0 + a] = normalise(src[threadIdx.x + u * kBlock], mean_u, rstd_u, wv, bv);
              }
            }
            free_slot(emptyb, slot);
          }
        }
#pragma unroll
        for (int k = 0; k < kKeep; ++k) write_chunk(w, b, yr, row, j0, k, cnt, c, mean_u, rstd_u, wv, bv);
      }
    }
  }
  if constexpr (kClusterExchange) cluster_sync();  // no block leaves while another may still send to it
}

}  // namespace rownorm
