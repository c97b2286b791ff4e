// Probe (session 20): rows held on chip by a thread-block cluster, moved by the bulk copy engine.
// Mode 4 (a cluster holds a row in shared memory and registers, per-thread cp.async and stores) ran the 2-4 MB norm
// rows at 200-250 us against a 126-134 us copy, latency-bound (Nsight Compute: DRAM 42%, warps waiting on L1TEX),
// with nothing loading while a row was reduced. Here the copies are the bulk engine's (cp.async.bulk, global ->
// shared completing on an mbarrier; shared -> global in bulk groups), so no thread issues a load or a store of the
// data: each block of a cluster keeps a ring of NS chunks (CHF floats each) in shared memory; its slice of a row is
// K <= NS chunks; chunks are loaded in sequence order as slots free, so the next row's first NS - K chunks load
// while this row is reduced, and each later one as soon as this row's chunk in its slot has been stored (its shared
// memory read by the engine). Per row: the block's exact two-pass statistics from shared memory, one cluster
// barrier, the CL triples merged through distributed shared memory (Chan), the chunks normalised in place and
// stored. Outputs are checked against a host reference (three rows). Not part of the library.
// Build and run on the GPU machine:
//   nvcc -O3 -arch=sm_90 -o bulk_hold_probe bulk_hold_probe.cu && ./bulk_hold_probe
// hold_regs (below hold_rows) keeps the slices in registers instead; bulk_hybrid_probe.cu, rows twice as long.
#include "bulk_probe.cuh"

/// Rows c, c + clusters, ... go to cluster c; block `rank` holds floats [rank x slice, (rank + 1) x slice) of them.
/// PART 1: no cluster barrier (each block uses its own slice's statistics: where the barrier's time goes); PART 2:
/// no statistics and no normalisation (a bulk copy through the same ring). A slot is refilled once the store LAG
/// chunks back has been read by the engine. PART 3: the cluster barrier without release/acquire (timing only: the
/// published triples are then not ordered); PART 4: no barrier, each block sends its triple to every block of the
/// cluster by st.async, completing on the receiver's mbarrier (one per parity of the row).
template <int CL, int BLOCK, int CHF, int NS, int PART = 0, int LAG = 1>
__global__ void __launch_bounds__(BLOCK, 1) hold_rows(const float* __restrict__ x, float* __restrict__ y, int rows,
                                                      long long cols, float eps) {
  extern __shared__ __align__(128) float ring[];
  __shared__ __align__(8) uint64_t full[NS];
  __shared__ float red[32];
  __shared__ Stat pub[2];
  __shared__ float4 inbox[2][CL];
  __shared__ __align__(8) uint64_t xbar[2];
  cg::cluster_group cluster = cg::this_cluster();
  const unsigned rank = cluster.block_rank();
  const long long slice = cols / CL;
  const int K = static_cast<int>(slice / CHF);
  const int clusters = gridDim.x / CL, cid = blockIdx.x / CL;
  const int mine = cid < rows ? (rows - cid + clusters - 1) / clusters : 0;
  const long long total = static_cast<long long>(mine) * K;
  auto chunk = [&](long long q) { return (cid + (q / K) * clusters) * cols + rank * slice + (q % K) * CHF; };
  if (threadIdx.x == 0) {
    for (int s = 0; s < NS; ++s) mbar_init(&full[s]);
    mbar_init(&xbar[0]);
    mbar_init(&xbar[1]);
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    for (long long q = 0; q < total && q < NS; ++q) bulk_load(ring + q * CHF, x + chunk(q), CHF * 4, &full[q]);
  }
  cluster.sync();  // every block's mbarriers are initialised before any block sends
  long long q0 = 0;
  int slot = 0;
  for (int it = 0; it < mine; ++it, q0 += K, slot ^= 1) {
    const long long row = cid + static_cast<long long>(it) * clusters;
    float s1 = 0.f;
    for (int k = 0; k < K && PART == 2; ++k) {
      const long long q = q0 + k;
      mbar_wait(&full[q % NS], (q / NS) & 1);
      if (threadIdx.x == 0) {
        bulk_store(y + chunk(q), ring + (q % NS) * CHF, CHF * 4);
        if (k >= LAG) {
          bulk_wait_read<LAG>();
          const long long p = q - LAG + NS;
          if (p < total) bulk_load(ring + (p % NS) * CHF, x + chunk(p), CHF * 4, &full[p % NS]);
        }
      }
    }
    for (int k = 0; k < K && PART != 2; ++k) {
      const long long q = q0 + k;
      mbar_wait(&full[q % NS], (q / NS) & 1);
      const float4* c = reinterpret_cast<const float4*>(ring + (q % NS) * CHF);
#pragma unroll
      for (int i = threadIdx.x; i < CHF / 4; i += BLOCK) {
        const float4 v = c[i];
        s1 += (v.x + v.y) + (v.z + v.w);
      }
    }
    const float bm = block_sum<BLOCK>(s1, red) / static_cast<float>(slice);
    float s2 = 0.f;
    for (int k = 0; k < K; ++k) {
      const float4* c = reinterpret_cast<const float4*>(ring + ((q0 + k) % NS) * CHF);
#pragma unroll
      for (int i = threadIdx.x; i < CHF / 4; i += BLOCK) {
        const float4 v = c[i];
        const float a = v.x - bm, b = v.y - bm, d = v.z - bm, e = v.w - bm;
        s2 += (a * a + b * b) + (d * d + e * e);
      }
    }
    const float m2 = PART == 2 ? 0.f : block_sum<BLOCK>(s2, red);
    Stat r{static_cast<float>(slice), bm, m2};
    if (PART == 0) {
      if (threadIdx.x == 0) pub[slot] = r;
      cluster.sync();
      Stat t{0.f, 0.f, 0.f};
      if (threadIdx.x % 32 < CL) t = *cluster.map_shared_rank(&pub[slot], threadIdx.x % 32);
      r = warp_merge(t);
    } else if (PART == 3) {
      if (threadIdx.x == 0) pub[slot] = r;
      asm volatile("barrier.cluster.arrive.relaxed.aligned;\nbarrier.cluster.wait.aligned;" ::: "memory");
      Stat t{0.f, 0.f, 0.f};
      if (threadIdx.x % 32 < CL) t = *cluster.map_shared_rank(&pub[slot], threadIdx.x % 32);
      r = warp_merge(t);
    } else if (PART == 4) {
      if (threadIdx.x < CL) send(&inbox[slot][rank], make_float4(r.n, r.mean, r.m2, 0.f), &xbar[slot], threadIdx.x);
      if (threadIdx.x == 0)
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(sa(&xbar[slot])), "r"(CL * 16)
                     : "memory");
      mbar_wait(&xbar[slot], (it >> 1) & 1);
      Stat t{0.f, 0.f, 0.f};
      if (threadIdx.x % 32 < CL) {
        const float4 v = inbox[slot][threadIdx.x % 32];
        t = Stat{v.x, v.y, v.z};
      }
      r = warp_merge(t);
    }
    const float mean = r.mean, rstd = rsqrtf(r.m2 / r.n + eps);
    for (int k = 0; k < K && PART != 2; ++k) {
      const long long q = q0 + k;
      float4* c = reinterpret_cast<float4*>(ring + (q % NS) * CHF);
#pragma unroll
      for (int i = threadIdx.x; i < CHF / 4; i += BLOCK) {
        const float4 v = c[i];
        c[i] = make_float4((v.x - mean) * rstd, (v.y - mean) * rstd, (v.z - mean) * rstd, (v.w - mean) * rstd);
      }
      asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
      __syncthreads();
      if (threadIdx.x == 0) {
        bulk_store(y + chunk(q), c, CHF * 4);
        if (k >= LAG) {  // the slot LAG chunks back, once the engine has read it, takes the chunk NS later
          bulk_wait_read<LAG>();
          const long long p = q - LAG + NS;
          if (p < total) bulk_load(ring + (p % NS) * CHF, x + chunk(p), CHF * 4, &full[p % NS]);
        }
      }
    }
    if (threadIdx.x == 0) {
      bulk_wait_read<0>();
      for (int k = K - LAG; k < K; ++k) {
        const long long p = q0 + k + NS;
        if (p < total) bulk_load(ring + (p % NS) * CHF, x + chunk(p), CHF * 4, &full[p % NS]);
      }
    }
    (void)row;
  }
  if (threadIdx.x == 0) asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
  cluster.sync();  // no block leaves while another may still read its pub
}

/// The row held in registers: BLOCK consumer threads copy each landed chunk (K chunks a slice) into registers and
/// free its slot at once; one producer warp (thread BLOCK) keeps the NS-slot ring loading the chunks in sequence,
/// so the ring runs up to NS chunks ahead through the statistics, the exchange (st.async, as PART 4) and the
/// output, which the consumers store from registers (st.global.cs).
template <int CL, int BLOCK, int CHF, int NS, int K>
__global__ void __launch_bounds__(BLOCK + 32, 1) hold_regs(const float* __restrict__ x, float* __restrict__ y,
                                                           int rows, long long cols, float eps) {
  constexpr int VPT = CHF / 4 / BLOCK;
  extern __shared__ __align__(128) float ring[];
  __shared__ __align__(8) uint64_t full[NS], empty[NS];
  __shared__ float red[32];
  __shared__ float4 inbox[2][CL];
  __shared__ __align__(8) uint64_t xbar[2];
  cg::cluster_group cluster = cg::this_cluster();
  const unsigned rank = cluster.block_rank();
  const long long slice = cols / CL;
  const int clusters = gridDim.x / CL, cid = blockIdx.x / CL;
  const int mine = cid < rows ? (rows - cid + clusters - 1) / clusters : 0;
  const long long total = static_cast<long long>(mine) * K;
  auto chunk = [&](long long q) { return (cid + (q / K) * clusters) * cols + rank * slice + (q % K) * CHF; };
  if (threadIdx.x == 0) {
    for (int s = 0; s < NS; ++s) {
      mbar_init(&full[s]);
      mbar_init_n(&empty[s], BLOCK / 32);
    }
    mbar_init(&xbar[0]);
    mbar_init(&xbar[1]);
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  cluster.sync();
  if (threadIdx.x >= BLOCK) {  // the producer warp
    if (threadIdx.x == BLOCK)
      for (long long q = 0; q < total; ++q) {
        if (q >= NS) mbar_wait(&empty[q % NS], ((q / NS) - 1) & 1);
        bulk_load(ring + (q % NS) * CHF, x + chunk(q), CHF * 4, &full[q % NS]);
      }
  } else {
    float4 v[K * VPT];
    for (int it = 0; it < mine; ++it) {
      const long long q0 = static_cast<long long>(it) * K;
      const int slot = it & 1;
      float s1 = 0.f;
#pragma unroll
      for (int k = 0; k < K; ++k) {
        const long long q = q0 + k;
        mbar_wait(&full[q % NS], (q / NS) & 1);
        const float4* c = reinterpret_cast<const float4*>(ring + (q % NS) * CHF);
#pragma unroll
        for (int j = 0; j < VPT; ++j) {
          v[k * VPT + j] = c[threadIdx.x + j * BLOCK];
          s1 += (v[k * VPT + j].x + v[k * VPT + j].y) + (v[k * VPT + j].z + v[k * VPT + j].w);
        }
        __syncwarp();
        if (threadIdx.x % 32 == 0)
          asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(sa(&empty[q % NS])) : "memory");
      }
      const float bm = consumer_sum<BLOCK>(s1, red) / static_cast<float>(slice);
      float s2 = 0.f;
#pragma unroll
      for (int i = 0; i < K * VPT; ++i) {
        const float a = v[i].x - bm, b = v[i].y - bm, d = v[i].z - bm, e = v[i].w - bm;
        s2 += (a * a + b * b) + (d * d + e * e);
      }
      const float m2 = consumer_sum<BLOCK>(s2, red);
      if (threadIdx.x < CL)
        send(&inbox[slot][rank], make_float4(static_cast<float>(slice), bm, m2, 0.f), &xbar[slot], threadIdx.x);
      if (threadIdx.x == 0)
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(sa(&xbar[slot])), "r"(CL * 16)
                     : "memory");
      mbar_wait(&xbar[slot], (it >> 1) & 1);
      Stat t{0.f, 0.f, 0.f};
      if (threadIdx.x % 32 < CL) {
        const float4 w = inbox[slot][threadIdx.x % 32];
        t = Stat{w.x, w.y, w.z};
      }
      const Stat r = warp_merge(t);
      const float mean = r.mean, rstd = rsqrtf(r.m2 / r.n + eps);
#pragma unroll
      for (int k = 0; k < K; ++k) {
        float4* yc = reinterpret_cast<float4*>(y + chunk(q0 + k));
#pragma unroll
        for (int j = 0; j < VPT; ++j) {
          const float4 a = v[k * VPT + j];
          __stcs(yc + threadIdx.x + j * BLOCK, make_float4((a.x - mean) * rstd, (a.y - mean) * rstd,
                                                          (a.z - mean) * rstd, (a.w - mean) * rstd));
        }
      }
    }
  }
  __syncwarp();
  cluster.sync();  // no block leaves while another may still send to it
}

template <int CL, int BLOCK, int CHF, int NS, int PART = 0, int LAG = 1>
void run(const char* name, int rows, long long cols, Buffers& b) {
  if ((cols / CL) % CHF != 0 || (cols / CL) / CHF > NS) {
    std::printf("%s: slice does not fit\n", name);
    return;
  }
  int clusters = 0;
  const double us = time_clusters(hold_rows<CL, BLOCK, CHF, NS, PART, LAG>, CL, BLOCK, NS * CHF * 4, rows, cols, b,
                                  &clusters);
  const double worst = PART == 1 || PART == 2 ? 0.0 : check(b.out, rows, cols, b.host, 1e-5f);
  std::printf("%-46s %2d clusters of %2d x %4d, chunk %2d KB x %2d, lag %d: %7.1f us (max |error| %.2e)\n", name,
              clusters, CL, BLOCK, CHF / 256, NS, LAG, us, worst);
}

template <int CL, int BLOCK, int CHF, int NS, int K>
void run_regs(const char* name, int rows, long long cols, Buffers& b) {
  if ((cols / CL) != static_cast<long long>(K) * CHF) {
    std::printf("%s: slice is not K chunks\n", name);
    return;
  }
  int clusters = 0;
  const double us = time_clusters(hold_regs<CL, BLOCK, CHF, NS, K>, CL, BLOCK + 32, NS * CHF * 4, rows, cols, b,
                                  &clusters);
  std::printf("%-46s %2d clusters of %2d x %4d+32, chunk %2d KB x %2d: %7.1f us (max |error| %.2e)\n", name, clusters,
              CL, BLOCK, CHF / 256, NS, us, check(b.out, rows, cols, b.host, 1e-5f));
}

/// The configurations of docs/PERF.md "Session 20" (runs 1-4): group norm g8's shape, 128 rows of 2 MB.
int main() {
  Buffers b;
  b.print_copy();
  std::printf("group norm g8 shape: 128 rows of 2 MB\n");
  run<16, 512, 4096, 13, 2>("  bulk copy through the ring", 128, 1 << 19, b);
  run<16, 512, 8192, 6, 2, 2>("  bulk copy through the ring", 128, 1 << 19, b);
  run<4, 512, 4096, 13, 2, 4>("  bulk copy, cluster 4 (512 KB rows)", 512, 1 << 17, b);
  run<16, 512, 4096, 13>("  smem-held, cluster barrier", 128, 1 << 19, b);
  run<16, 512, 8192, 6, 0, 2>("  smem-held, cluster barrier", 128, 1 << 19, b);
  run<16, 256, 8192, 6, 0, 2>("  smem-held, cluster barrier", 128, 1 << 19, b);
  run<16, 256, 8192, 6, 3, 2>("  ... relaxed barrier (timing only)", 128, 1 << 19, b);
  run<16, 256, 8192, 6, 1, 2>("  ... no exchange", 128, 1 << 19, b);
  run<16, 256, 4096, 13, 4, 4>("  smem-held, st.async exchange", 128, 1 << 19, b);
  run<16, 256, 8192, 6, 4, 2>("  smem-held, st.async exchange", 128, 1 << 19, b);
  run_regs<16, 512, 4096, 13, 8>("  register-held", 128, 1 << 19, b);
  run_regs<16, 512, 8192, 6, 4>("  register-held", 128, 1 << 19, b);
  run_regs<16, 512, 2048, 27, 16>("  register-held", 128, 1 << 19, b);
  run_regs<16, 512, 4096, 9, 8>("  register-held", 128, 1 << 19, b);
  run_regs<8, 512, 4096, 13, 8>("  register-held, cluster 8, 1 MB rows (256)", 256, 1 << 18, b);
  run_regs<4, 512, 4096, 13, 8>("  register-held, cluster 4, 512 KB rows (512)", 512, 1 << 17, b);
  std::printf("done\n");
  return 0;
}
