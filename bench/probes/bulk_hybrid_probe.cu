// Probe (session 20): layer norm rows of 4 MB (f32 [64, 1048576]) held by a cluster of 16 (256 KB a block: twice
// what the registers of bulk_hold_probe.cu's hold_regs keep). Half of each slice stays in registers, the other half
// is summed on the way in and reread after the statistics through a second ring (docs/PERF.md "Session 20", runs 6
// and 8). Outputs are checked against a host reference. Not part of the library.
// Build and run on the GPU machine:
//   nvcc -O3 -arch=sm_90 -o bulk_hybrid_probe bulk_hybrid_probe.cu && ./bulk_hybrid_probe [profile]
// With an argument it runs one configuration only (for Nsight Compute).
#include "bulk_probe.cuh"

/// Rows too long for a cluster's registers (layer norm [64, 1048576] f32: 256 KB a block at 16): the first R of a
/// slice's K chunks stay in registers, the other K - R are only summed on the way in (loaded with an L2
/// evict_last policy) and reread after the exchange, last-read first, through a second ring of NB slots that a
/// second producer warp fills once the row's first pass is done. Statistics: per-thread sums shifted by the
/// thread's first element, merged (Chan) over the block and the cluster. HINT 0: no L2 policies.
template <int CL, int BLOCK, int CHF, int K, int R, int NA, int NB, int HINT>
__global__ void __launch_bounds__(BLOCK + 64, 1) hold_hybrid(const float* __restrict__ x, float* __restrict__ y,
                                                             int rows, long long cols, float eps) {
  constexpr int CPT = CHF / 4 / BLOCK, D = K - R;
  extern __shared__ __align__(128) float ring[];  // NA slots, then NB
  float* const ringb = ring + NA * CHF;
  __shared__ __align__(8) uint64_t fulla[NA], emptya[NA], fullb[NB], emptyb[NB], gate, xbar[2];
  __shared__ float4 inbox[2][CL];
  __shared__ Stat wred[32];
  cg::cluster_group cluster = cg::this_cluster();
  const unsigned rank = cluster.block_rank();
  const long long slice = cols / CL;
  const int clusters = gridDim.x / CL, cid = blockIdx.x / CL;
  const int mine = cid < rows ? (rows - cid + clusters - 1) / clusters : 0;
  auto chunk = [&](long long it, int k) { return (cid + it * clusters) * cols + rank * slice + (long long)k * CHF; };
  if (threadIdx.x == 0) {
    for (int s = 0; s < NA; ++s) mbar_init(&fulla[s]), mbar_init_n(&emptya[s], BLOCK / 32);
    for (int s = 0; s < NB; ++s) mbar_init(&fullb[s]), mbar_init_n(&emptyb[s], BLOCK / 32);
    mbar_init(&gate);
    mbar_init(&xbar[0]);
    mbar_init(&xbar[1]);
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  cluster.sync();
  if (threadIdx.x >= BLOCK + 32) {  // producer B: the rereads, once the row's first pass is done
    if (threadIdx.x == BLOCK + 32) {
      const unsigned long long pol = l2_policy(false);
      long long q = 0;
      for (int it = 0; it < mine; ++it) {
        mbar_wait(&gate, it & 1);
        for (int d = 0; d < D; ++d, ++q) {
          if (q >= NB) mbar_wait(&emptyb[q % NB], ((q / NB) - 1) & 1);
          if (HINT)
            bulk_load_hint(ringb + (q % NB) * CHF, x + chunk(it, K - 1 - d), CHF * 4, &fullb[q % NB], pol);
          else
            bulk_load(ringb + (q % NB) * CHF, x + chunk(it, K - 1 - d), CHF * 4, &fullb[q % NB]);
        }
      }
    }
  } else if (threadIdx.x >= BLOCK) {  // producer A: every chunk once, in order
    if (threadIdx.x == BLOCK) {
      const unsigned long long keep = l2_policy(true);
      for (long long q = 0; q < (long long)mine * K; ++q) {
        if (q >= NA) mbar_wait(&emptya[q % NA], ((q / NA) - 1) & 1);
        const int k = (int)(q % K);
        if (HINT && k >= R)
          bulk_load_hint(ring + (q % NA) * CHF, x + chunk(q / K, k), CHF * 4, &fulla[q % NA], keep);
        else
          bulk_load(ring + (q % NA) * CHF, x + chunk(q / K, k), CHF * 4, &fulla[q % NA]);
      }
    }
  } else {
    float4 c[R * CPT];
    long long qb = 0;
    for (int it = 0; it < mine; ++it) {
      float shift = 0.f, s1 = 0.f, s2 = 0.f;
#pragma unroll
      for (int k = 0; k < K; ++k) {
        const long long q = (long long)it * K + k;
        mbar_wait(&fulla[q % NA], (q / NA) & 1);
        const float4* src = reinterpret_cast<const float4*>(ring + (q % NA) * CHF);
#pragma unroll
        for (int u = 0; u < CPT; ++u) {
          const float4 v = src[threadIdx.x + u * BLOCK];
          if (k < R) c[k * CPT + u] = v;
          if (k == 0 && u == 0) shift = v.x;
          const float a = v.x - shift, b = v.y - shift, d = v.z - shift, e = v.w - shift;
          s1 += (a + b) + (d + e);
          s2 += (a * a + b * b) + (d * d + e * e);
        }
        __syncwarp();
        if (threadIdx.x % 32 == 0)
          asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(sa(&emptya[q % NA])) : "memory");
      }
      if (threadIdx.x == 0) asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(sa(&gate)) : "memory");
      const float n = 4.f * K * CPT;
      Stat t{n, shift + s1 / n, fmaxf(s2 - s1 * s1 / n, 0.f)};
      t = warp_merge(t);
      if (threadIdx.x % 32 == 0) wred[threadIdx.x / 32] = t;
      asm volatile("bar.sync 1, %0;" ::"n"(BLOCK) : "memory");
      t = threadIdx.x % 32 < BLOCK / 32 ? wred[threadIdx.x % 32] : Stat{0.f, 0.f, 0.f};
      t = warp_merge(t);
      asm volatile("bar.sync 1, %0;" ::"n"(BLOCK) : "memory");
      const int slot = it & 1;
      if (threadIdx.x < CL) send(&inbox[slot][rank], make_float4(t.n, t.mean, t.m2, 0.f), &xbar[slot], threadIdx.x);
      if (threadIdx.x == 0)
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(sa(&xbar[slot])), "r"(CL * 16)
                     : "memory");
      mbar_wait(&xbar[slot], (it >> 1) & 1);
      Stat m{0.f, 0.f, 0.f};
      if (threadIdx.x % 32 < CL) {
        const float4 w = inbox[slot][threadIdx.x % 32];
        m = Stat{w.x, w.y, w.z};
      }
      m = warp_merge(m);
      const float mean = m.mean, rstd = rsqrtf(m.m2 / m.n + eps);
      // Rereads first (the engine is fetching them), then the registers.
      for (int d = 0; d < D; ++d, ++qb) {
        mbar_wait(&fullb[qb % NB], (qb / NB) & 1);
        const float4* src = reinterpret_cast<const float4*>(ringb + (qb % NB) * CHF);
        float4* yc = reinterpret_cast<float4*>(y + chunk(it, K - 1 - d));
#pragma unroll
        for (int u = 0; u < CPT; ++u) {
          const float4 a = src[threadIdx.x + u * BLOCK];
          __stcs(yc + threadIdx.x + u * BLOCK, make_float4((a.x - mean) * rstd, (a.y - mean) * rstd,
                                                          (a.z - mean) * rstd, (a.w - mean) * rstd));
        }
        __syncwarp();
        if (threadIdx.x % 32 == 0)
          asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(sa(&emptyb[qb % NB])) : "memory");
      }
#pragma unroll
      for (int k = 0; k < R; ++k) {
        float4* yc = reinterpret_cast<float4*>(y + chunk(it, k));
#pragma unroll
        for (int u = 0; u < CPT; ++u) {
          const float4 a = c[k * CPT + u];
          __stcs(yc + threadIdx.x + u * BLOCK, make_float4((a.x - mean) * rstd, (a.y - mean) * rstd,
                                                          (a.z - mean) * rstd, (a.w - mean) * rstd));
        }
      }
    }
  }
  __syncwarp();
  cluster.sync();
}

template <int CL, int BLOCK, int CHF, int K, int R, int NA, int NB, int HINT>
void run_hybrid(const char* name, int rows, long long cols, Buffers& b) {
  if ((cols / CL) != static_cast<long long>(K) * CHF) {
    std::printf("%s: slice is not K chunks\n", name);
    return;
  }
  int clusters = 0;
  const double us = time_clusters(hold_hybrid<CL, BLOCK, CHF, K, R, NA, NB, HINT>, CL, BLOCK + 64,
                                  (NA + NB) * CHF * 4, rows, cols, b, &clusters);
  std::printf("%-46s %2d clusters of %2d x %4d+64, chunk %2d KB, ring %2d + %d, hint %d: %7.1f us (max |error| %.2e)\n",
              name, clusters, CL, BLOCK, CHF / 256, NA, NB, HINT, us, check(b.out, rows, cols, b.host, 1e-5f));
}

int main(int argc, char** argv) {
  Buffers b;
  if (argc > 1) {
    run_hybrid<16, 512, 4096, 16, 8, 10, 4, 0>("  hybrid", 64, 1 << 20, b);
    return 0;
  }
  b.print_copy();
  std::printf("layer norm long rows: 64 rows of 4 MB\n");
  run_hybrid<16, 512, 4096, 16, 8, 10, 4, 1>("  hybrid", 64, 1 << 20, b);
  run_hybrid<16, 512, 4096, 16, 8, 10, 4, 0>("  hybrid", 64, 1 << 20, b);
  run_hybrid<16, 512, 4096, 16, 10, 10, 4, 0>("  hybrid, 10 chunks kept", 64, 1 << 20, b);
  run_hybrid<16, 512, 4096, 16, 8, 12, 2, 1>("  hybrid", 64, 1 << 20, b);
  run_hybrid<16, 512, 4096, 16, 8, 8, 6, 1>("  hybrid", 64, 1 << 20, b);
  run_hybrid<16, 512, 4096, 16, 8, 6, 4, 0>("  hybrid", 64, 1 << 20, b);
  run_hybrid<16, 512, 8192, 8, 4, 5, 2, 1>("  hybrid", 64, 1 << 20, b);
  run_hybrid<16, 512, 8192, 8, 4, 4, 3, 0>("  hybrid", 64, 1 << 20, b);
  run_hybrid<16, 256, 4096, 16, 8, 10, 4, 1>("  hybrid", 64, 1 << 20, b);
  std::printf("done\n");
  return 0;
}
