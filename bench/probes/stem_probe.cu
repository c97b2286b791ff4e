// Probe (session 16): thread mappings for the fp16 ResNet stem max_pool2d [64,64,112,112] k3 s2 p1 with int64
// indices, to see which one cuts the L2 sectors (docs/PERF.md session 15: the kept tile runs 1.82 L2 sectors per
// DRAM sector against 1.62 for a copy-like kernel) before the generator gets it. Not part of the library.
//   k0: the generator's register tile opw1 oph2 (flat map: tw fastest, then th, then plane), block 128;
//   k1: the same tile, blocks of 32 tiles wide x 4 tile rows (vertical neighbours in one block, so the shared
//       input row can hit L1);
//   k2: blocks of RP whole row pairs (RP x 56 threads), outputs staged in shared memory and stored as the block's
//       contiguous range (whole sectors);
//   k3, k4: k2 with RP = 4 and 7;
//   k5, k6: k0 with its loads carrying the L2 prefetch-size hint .L2::128B / .L2::256B;
//   k7-k9 (session 20): whole planes through the bulk copy engine: a persistent block's producer warp copies input
//       planes (25 KB) into a ring of NI shared-memory slots (cp.async.bulk, mbarriers), consumers take every
//       window from shared memory and stage the plane's outputs and indices in one of NO slots, which one thread
//       stores with two bulk copies (whole lines, no thread stores at all).
//   k10-k13 (session 23): the generator's patch loaded once; with evict-first stores; with pair + halo loads;
//   k14, k15: k0 with pair + halo loads; with restrict pointers.
//   k16, k17 (session 24): the stem's bytes as flat streams without windows (what HBM gives this traffic mix);
//   k18: packed fp16 pairs, two outputs a lane compared as one half2 (became Note [Pooling packed pairs]).
// Session 24's inputs hold NaN, +-Inf, a plane of -Inf, one of NaN and one constant; NaN outputs compare as equal.
// Build and run on the GPU machine: nvcc -O3 -arch=sm_90 -o stem_probe stem_probe.cu && ./stem_probe [kernel]
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <utility>
#include <vector>

constexpr int N = 64, C = 64, H = 112, W = 112, OH = 56, OW = 56;
constexpr long long PLANES = (long long)N * C;

#define CK(x)                                                                           \
  do {                                                                                  \
    cudaError_t e = (x);                                                                \
    if (e != cudaSuccess) { std::printf("%s: %s\n", #x, cudaGetErrorString(e)); std::exit(1); } \
  } while (0)

/// Loads one fp16 element; HINT 1/2: with the L2 prefetch-size hint .L2::128B / .L2::256B.
template <int HINT>
__device__ __forceinline__ float load_h(const __half* p) {
  unsigned short r;
  if (HINT == 1)
    asm volatile("ld.global.nc.L2::128B.b16 %0, [%1];" : "=h"(r) : "l"(p));
  else if (HINT == 2)
    asm volatile("ld.global.nc.L2::256B.b16 %0, [%1];" : "=h"(r) : "l"(p));
  else
    return __half2float(*p);
  return __half2float(__ushort_as_half(r));
}

/// The 3 x 3 window from (hs, ws): its maximum (a NaN wins, as in ATen) and that element's flat index in the
/// plane; get(i, j) gives window element (i, j), asked only for elements inside the plane.
template <class Get>
__device__ __forceinline__ void window_max(int hs, int ws, Get get, float& m, int& mi) {
  m = -INFINITY;
  mi = max(hs, 0) * W + max(ws, 0);
#pragma unroll
  for (int i = 0; i < 3; ++i)
#pragma unroll
    for (int j = 0; j < 3; ++j) {
      const int h = hs + i, w = ws + j;
      if ((unsigned)h < (unsigned)H && (unsigned)w < (unsigned)W) {
        const float v = get(i, j);
        if (v > m || v != v) m = v, mi = h * W + w;
      }
    }
}

template <int HINT = 0>
__device__ __forceinline__ void window(const __half* x, int oh, int ow, float& m, int& mi) {
  const int hs = oh * 2 - 1, ws = ow * 2 - 1;
  window_max(hs, ws, [&](int i, int j) { return load_h<HINT>(x + (hs + i) * W + ws + j); }, m, mi);
}

/// k14's window: each row read as a 4-byte pair (columns 2 ow, 2 ow + 1) and a 2-byte halo (2 ow - 1).
__device__ __forceinline__ void window_pair(const __half* x, int oh, int ow, float& m, int& mi) {
  const int hs = oh * 2 - 1, ws = ow * 2 - 1;
  float v[3][3] = {};
#pragma unroll
  for (int i = 0; i < 3; ++i) {
    const int h = hs + i;
    if ((unsigned)h >= (unsigned)H) continue;
    const __half2 pr = *reinterpret_cast<const __half2*>(x + h * W + ws + 1);
    v[i][0] = ws >= 0 ? __half2float(x[h * W + ws]) : 0.f;
    v[i][1] = __low2float(pr);
    v[i][2] = __high2float(pr);
  }
  window_max(hs, ws, [&](int i, int j) { return v[i][j]; }, m, mi);
}
// Tile (th, tw) of a plane: outputs (2 th, tw) and (2 th + 1, tw), stored directly.
template <int HINT = 0, bool PAIR = false>
__device__ __forceinline__ void tile_out(const __half* in, long long plane, int th, int tw, __half* out,
                                         long long* idx) {
  const __half* x = in + plane * H * W;
#pragma unroll
  for (int a = 0; a < 2; ++a) {
    float m;
    int mi;
    if (PAIR)
      window_pair(x, th * 2 + a, tw, m, mi);
    else
      window<HINT>(x, th * 2 + a, tw, m, mi);
    out[plane * OH * OW + (th * 2 + a) * OW + tw] = __float2half(m);
    idx[plane * OH * OW + (th * 2 + a) * OW + tw] = mi;
  }
}

/// Blocks of 128 threads the flat map launches (one thread a tile of two outputs).
constexpr unsigned kFlatBlocks = (unsigned)((PLANES * (OH / 2) * OW + 127) / 128);

/// The flat map (tw fastest, then th, then plane; blocks of 128): this thread's tile, false past the last one.
__device__ __forceinline__ bool flat_tile(int& th, int& tw, long long& plane) {
  const long long t = (long long)blockIdx.x * 128 + threadIdx.x;
  if (t >= PLANES * (OH / 2) * OW) return false;
  tw = (int)(t % OW);
  th = (int)((t / OW) % (OH / 2));
  plane = t / OW / (OH / 2);
  return true;
}

// k0: flat map, 2 outputs (rows 2th, 2th + 1) a thread; k5/k6: the same with the L2 prefetch-size hints.
template <int HINT = 0, bool PAIR = false>
__global__ void __launch_bounds__(128) k0(const __half* in, __half* out, long long* idx) {
  int th, tw;
  long long plane;
  if (!flat_tile(th, tw, plane)) return;
  tile_out<HINT, PAIR>(in, plane, th, tw, out, idx);
}

// k1: blocks of 32 x 4 tiles (BX = 32 columns of tiles, BY = 4 tile rows); TW = 56 -> 2 column blocks.
__global__ void __launch_bounds__(128) k1(const __half* in, __half* out, long long* idx) {
  constexpr int BTW = 2, BTH = (OH / 2 + 3) / 4;
  const long long plane = blockIdx.x / (BTH * BTW);
  const int bh = (blockIdx.x / BTW) % BTH, bw = blockIdx.x % BTW;
  const int tx = threadIdx.x % 32, ty = threadIdx.x / 32;
  const int tw = bw * 32 + tx, th = bh * 4 + ty;
  if (tw >= OW || th >= OH / 2) return;
  tile_out(in, plane, th, tw, out, idx);
}

// k2/k3: a block takes RP whole row pairs of a plane (RP x 56 tiles, threads past them idle), stages its 2 x RP x
// 56 outputs in shared memory in memory order, then stores them as one contiguous range: fp16 in 16-byte vectors,
// indices in 16-byte pairs.
template <int RP, int BLOCK>
__global__ void __launch_bounds__(BLOCK) k2(const __half* in, __half* out, long long* idx) {
  constexpr int PAIRS = OH / 2, BPP = PAIRS / RP;  // blocks a plane (RP divides 28)
  constexpr int NO = 2 * RP * OW;                   // outputs a block
  __shared__ __align__(16) __half so[NO];
  __shared__ __align__(16) long long si[NO];
  const long long plane = blockIdx.x / BPP;
  const int p0 = (blockIdx.x % BPP) * RP;
  const __half* x = in + plane * H * W;
  if (threadIdx.x < RP * OW) {
    const int tw = threadIdx.x % OW, th = p0 + threadIdx.x / OW;
#pragma unroll
    for (int a = 0; a < 2; ++a) {
      float m;
      int mi;
      window(x, th * 2 + a, tw, m, mi);
      const int o = (th - p0) * 2 * OW + a * OW + tw;
      so[o] = __float2half(m);
      si[o] = mi;
    }
  }
  __syncthreads();
  const long long base = plane * OH * OW + (long long)p0 * 2 * OW;  // 224-byte fp16 row pairs: 32-byte aligned
  for (int v = threadIdx.x; v < NO / 8; v += BLOCK)
    reinterpret_cast<uint4*>(out + base)[v] = reinterpret_cast<const uint4*>(so)[v];
  for (int v = threadIdx.x; v < NO / 2; v += BLOCK)
    reinterpret_cast<longlong2*>(idx + base)[v] = reinterpret_cast<const longlong2*>(si)[v];
}

__device__ __forceinline__ unsigned sa(const void* p) { return static_cast<unsigned>(__cvta_generic_to_shared(p)); }
__device__ __forceinline__ void mbar_init(unsigned long long* bar, unsigned n) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(sa(bar)), "r"(n) : "memory");
}
__device__ __forceinline__ void mbar_wait(unsigned long long* bar, unsigned parity) {
  asm volatile(
      "{\n .reg .pred p;\n W_%=:\n mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n @!p bra W_%=;\n}" ::"r"(
          sa(bar)),
      "r"(parity)
      : "memory");
}
__device__ __forceinline__ void mbar_arrive(unsigned long long* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(sa(bar)) : "memory");
}

// k7: persistent blocks of CONS consumer threads and a producer warp; NI input slots, NO output slots.
template <int CONS, int NI, int NO>
__global__ void __launch_bounds__(CONS + 32) k7(const __half* in, __half* out, long long* idx) {
  constexpr int IN_B = H * W * 2, OUT_B = OH * OW * 2, IDX_B = OH * OW * 8, NOUT = OH * OW;
  extern __shared__ __align__(128) unsigned char sm[];
  __half* const ring = reinterpret_cast<__half*>(sm);                     // NI x H x W
  long long* const sidx = reinterpret_cast<long long*>(sm + NI * IN_B);   // NO x OH x OW
  __half* const sout = reinterpret_cast<__half*>(sm + NI * IN_B + NO * IDX_B);
  __shared__ __align__(8) unsigned long long full[NI], empty[NI];
  const long long planes = PLANES, mine = blockIdx.x < planes ? (planes - blockIdx.x + gridDim.x - 1) / gridDim.x : 0;
  if (threadIdx.x == 0) {
    for (int i = 0; i < NI; ++i) mbar_init(&full[i], 1), mbar_init(&empty[i], CONS / 32);
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  if (threadIdx.x >= CONS) {
    if (threadIdx.x == CONS)
      for (long long q = 0; q < mine; ++q) {
        const int slot = (int)(q % NI);
        if (q >= NI) mbar_wait(&empty[slot], (unsigned)((q / NI - 1) & 1));
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(sa(&full[slot])), "r"(IN_B)
                     : "memory");
        asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                         sa(ring + slot * H * W)),
                     "l"(in + (blockIdx.x + q * gridDim.x) * H * W), "r"(IN_B), "r"(sa(&full[slot]))
                     : "memory");
      }
    __syncwarp();
    return;
  }
  for (long long q = 0; q < mine; ++q) {
    const long long plane = blockIdx.x + q * gridDim.x;
    const int slot = (int)(q % NI), os = (int)(q % NO);
    if (threadIdx.x == 0 && q >= NO) asm volatile("cp.async.bulk.wait_group.read %0;" ::"n"(NO - 1) : "memory");
    asm volatile("bar.sync 1, %0;" ::"n"(CONS) : "memory");  // the output slot is free
    mbar_wait(&full[slot], (unsigned)((q / NI) & 1));
    const __half* x = ring + slot * H * W;
    for (int o = threadIdx.x; o < NOUT; o += CONS) {
      const int oh = o / OW, ow = o % OW;
      const int hs = oh * 2 - 1, ws = ow * 2 - 1;
      float m;
      int mi;
      window_max(hs, ws, [&](int i, int j) { return __half2float(x[(hs + i) * W + ws + j]); }, m, mi);
      sout[os * NOUT + o] = __float2half(m);
      sidx[os * NOUT + o] = mi;
    }
    __syncwarp();
    if (threadIdx.x % 32 == 0) mbar_arrive(&empty[slot]);
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    asm volatile("bar.sync 1, %0;" ::"n"(CONS) : "memory");  // the plane's outputs are staged
    if (threadIdx.x == 0) {
      asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" ::"l"(out + plane * NOUT),
                   "r"(sa(sout + os * NOUT)), "r"(OUT_B)
                   : "memory");
      asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" ::"l"(idx + plane * NOUT),
                   "r"(sa(sidx + os * NOUT)), "r"(IDX_B)
                   : "memory");
      asm volatile("cp.async.bulk.commit_group;" ::: "memory");
    }
  }
  if (threadIdx.x == 0) asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
}

template <int CONS, int NI, int NO>
void launch_k7(int per_sm, const __half* in, __half* out, long long* idx) {
  const int smem = NI * H * W * 2 + NO * OH * OW * 10;
  static bool once = [&] {
    CK(cudaFuncSetAttribute(k7<CONS, NI, NO>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    return true;
  }();
  (void)once;
  k7<CONS, NI, NO><<<132 * per_sm, CONS + 32, smem>>>(in, out, idx);
}

// k10-k13 (session 23): the generator's patch (5 rows x 3 columns a thread, loaded once), flat map, block 128;
// PAIR: columns 2 ow and 2 ow + 1 of a row by one 4-byte load and column 2 ow - 1 by a 2-byte one (10 loads a
// thread, not 15; no shuffles); CS: outputs and indices stored with st.global.cs (evict first).
__device__ __forceinline__ void st_cs16(__half* p, __half v) {
  asm volatile("st.global.cs.b16 [%0], %1;" ::"l"(p), "h"(__half_as_ushort(v)) : "memory");
}
__device__ __forceinline__ void st_cs64(long long* p, long long v) {
  asm volatile("st.global.cs.s64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}
template <bool PAIR, bool CS>
__global__ void __launch_bounds__(128) k10(const __half* __restrict__ in, __half* __restrict__ out,
                                           long long* __restrict__ idx) {
  int th, tw;
  long long plane;
  if (!flat_tile(th, tw, plane)) return;
  const __half* x = in + plane * H * W;
  const int h0 = th * 4 - 1, w0 = tw * 2 - 1;
  float p[5][3];
#pragma unroll
  for (int r = 0; r < 5; ++r) {
    const int h = h0 + r;
    const bool rok = (unsigned)h < (unsigned)H;
    if (PAIR) {
      const __half2 v = rok ? *reinterpret_cast<const __half2*>(x + h * W + w0 + 1) : __half2{};
      p[r][1] = __low2float(v);
      p[r][2] = __high2float(v);
      p[r][0] = rok && w0 >= 0 ? __half2float(x[h * W + w0]) : 0.f;
    } else {
#pragma unroll
      for (int c = 0; c < 3; ++c) p[r][c] = rok && (unsigned)(w0 + c) < (unsigned)W ? __half2float(x[h * W + w0 + c]) : 0.f;
    }
  }
#pragma unroll
  for (int a = 0; a < 2; ++a) {
    float m;
    int mi;
    window_max((th * 2 + a) * 2 - 1, w0, [&](int i, int j) { return p[a * 2 + i][j]; }, m, mi);
    const long long o = plane * OH * OW + (th * 2 + a) * OW + tw;
    if (CS) {
      st_cs16(out + o, __float2half(m));
      st_cs64(idx + o, mi);
    } else {
      out[o] = __float2half(m);
      idx[o] = mi;
    }
  }
}

// k15: k0 with __restrict__ pointers (read-only loads).
__global__ void __launch_bounds__(128) k15(const __half* __restrict__ in, __half* __restrict__ out,
                                           long long* __restrict__ idx) {
  int th, tw;
  long long plane;
  if (flat_tile(th, tw, plane)) tile_out(in, plane, th, tw, out, idx);
}


// k16, k17 (session 24): the stem's bytes without windows, as flat streams (input read once, fp16 outputs and int64
// indices written once, every access coalesced): what HBM gives this mix of one read and two write streams.
// k16: a thread reads 8 bytes (4 inputs) and writes one fp16 and one int64; k17: 32 bytes in, 8 + 32 bytes out.
__global__ void __launch_bounds__(256) k16(const uint2* __restrict__ in, unsigned short* __restrict__ out,
                                           long long* __restrict__ idx, long long n) {
  const long long i = blockIdx.x * 256ll + threadIdx.x;
  if (i >= n) return;
  const uint2 v = in[i];
  out[i] = (unsigned short)max(v.x, v.y);
  idx[i] = (long long)(v.x ^ v.y);
}
__global__ void __launch_bounds__(256) k17(const uint4* __restrict__ in, uint2* __restrict__ out,
                                           longlong2* __restrict__ idx, long long n4) {
  const long long i = blockIdx.x * 256ll + threadIdx.x;
  if (i >= n4) return;
  const uint4 a = in[2 * i], b = in[2 * i + 1];
  out[i] = make_uint2(max(a.x, a.y) ^ b.z, max(a.z, a.w) ^ b.w);
  idx[2 * i] = make_longlong2(a.x ^ b.x, a.y);
  idx[2 * i + 1] = make_longlong2(a.z ^ b.y, a.w);
}

// k18 (session 24): packed fp16 pairs. A warp takes RS output rows of one plane; lane j < 28 owns output columns
// 2 j and 2 j + 1, i.e. input columns 4 j - 1 .. 4 j + 3: one 8-byte load a row (columns 4 j .. 4 j + 3, whole
// 224-byte rows a warp, each input row read once) and column 4 j - 1 from lane j - 1 by a shuffle. The window's
// candidate (kh, kw) for both outputs is one half2 (columns 4 j - 1 + kw and 4 j + 1 + kw, made by one PRMT), and
// ATen's `val > max || isnan(val)` is one mask for both: HSET2 gt | HSET2 neu(v, v), then the maximum and the
// window-relative index (kh x W + kw, 16 bits a half) are selected by that mask (LOP3). All RS x 2 + 1 rows are
// loaded before the first window. Padding (row -1, column -1) is -Inf, never chosen; the index starts at the first
// element inside the plane, as ATen's.
__device__ __forceinline__ unsigned prmt(unsigned a, unsigned b, unsigned s) {
  unsigned d;
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(s));
  return d;
}
__device__ __forceinline__ __half2 as_h2(unsigned u) { return *reinterpret_cast<__half2*>(&u); }
template <int RS, int BLOCK>
__global__ void __launch_bounds__(BLOCK) k18(const __half* __restrict__ in, __half* __restrict__ out,
                                             long long* __restrict__ idx) {
  static_assert(OH % RS == 0, "whole segments");
  constexpr int SEGS = OH / RS, NR = 2 * RS + 1;
  constexpr unsigned NEG = 0xFC00FC00u;  // -Inf, -Inf
  const int lane = threadIdx.x % 32;
  const long long wid = (blockIdx.x * (long long)BLOCK + threadIdx.x) / 32;
  if (wid >= PLANES * SEGS) return;
  const long long plane = wid / SEGS;
  const int seg = (int)(wid % SEGS), j = min(lane, 27), h0 = seg * RS * 2 - 1;
  const __half* x = in + plane * H * W + 4 * j;
  uint2 v[NR];
#pragma unroll
  for (int r = 0; r < NR; ++r)
    v[r] = h0 + r >= 0 ? __ldg(reinterpret_cast<const uint2*>(x + (h0 + r) * W)) : make_uint2(NEG, NEG);
  unsigned c[NR][3];
#pragma unroll
  for (int r = 0; r < NR; ++r) {
    unsigned nb = __shfl_up_sync(~0u, v[r].y, 1);
    if (lane == 0) nb = NEG;
    c[r][0] = prmt(nb, v[r].x, 0x7632);
    c[r][1] = prmt(v[r].x, v[r].y, 0x5410);
    c[r][2] = prmt(v[r].x, v[r].y, 0x7632);
  }
#pragma unroll
  for (int t = 0; t < RS; ++t) {
    const int oh = seg * RS + t;
    unsigned m = NEG, rel = (oh == 0 ? W * 0x10001u : 0u) + (lane == 0 ? 1u : 0u);
#pragma unroll
    for (int kh = 0; kh < 3; ++kh)
#pragma unroll
      for (int kw = 0; kw < 3; ++kw) {
        const unsigned cv = c[2 * t + kh][kw];
        const unsigned k = __hgt2_mask(as_h2(cv), as_h2(m)) | __hneu2_mask(as_h2(cv), as_h2(cv));
        m = (cv & k) | (m & ~k);
        rel = ((unsigned)(kh * W + kw) * 0x10001u & k) | (rel & ~k);
      }
    if (lane < 28) {
      const long long o = plane * OH * OW + oh * OW + 2 * j;
      *reinterpret_cast<unsigned*>(out + o) = m;
      const unsigned base = (unsigned)((2 * oh - 1) * W + 4 * j - 1);
      *reinterpret_cast<longlong2*>(idx + o) =
          make_longlong2((long long)(base + (rel & 0xffffu)), (long long)(base + 2 + (rel >> 16)));
    }
  }
}
template <int RS, int BLOCK>
void launch_k18(const __half* in, __half* out, long long* idx) {
  const long long warps = PLANES * (OH / RS);
  k18<RS, BLOCK><<<(unsigned)((warps * 32 + BLOCK - 1) / BLOCK), BLOCK>>>(in, out, idx);
}

__global__ void flush(const float4* p, long long n, float* sink) {
  float s = 0.f;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
    s += p[i].x;
  if (s == 12345.f) *sink = s;
}

int main(int argc, char** argv) {
  const int only = argc > 1 ? std::atoi(argv[1]) : -1;
  const size_t nin = PLANES * H * W, nout = PLANES * OH * OW;
  __half *in, *out;
  long long* idx;
  CK(cudaMalloc(&in, nin * 2));
  CK(cudaMalloc(&out, nout * 2));
  CK(cudaMalloc(&idx, nout * 8));
  std::vector<__half> h(nin);
  srand(1);
  for (auto& v : h) v = __float2half((rand() % 20001 - 10000) / 1000.f);
  // Special values (session 24): scattered NaN, -Inf, +Inf; plane 3 all -Inf, plane 9 all NaN, plane 11 all equal.
  for (size_t i = 0; i < nin; ++i) {
    if (i % 4999 == 0) h[i] = __float2half(NAN);
    if (i % 5003 == 1) h[i] = __float2half(-INFINITY);
    if (i % 7919 == 2) h[i] = __float2half(INFINITY);
  }
  for (size_t i = 0; i < (size_t)H * W; ++i) {
    h[3 * H * W + i] = __float2half(-INFINITY);
    h[9 * H * W + i] = __float2half(NAN);
    h[11 * H * W + i] = __float2half(1.5f);
  }
  CK(cudaMemcpy(in, h.data(), nin * 2, cudaMemcpyHostToDevice));
  const long long fl = 256ll << 20;
  float4* fb;
  float* sink;
  CK(cudaMalloc(&fb, fl));
  CK(cudaMemset(fb, 0, fl));
  CK(cudaMalloc(&sink, 4));
  void* cp;
  const size_t cpbytes = (nin * 2 + nout * 10) / 2;
  CK(cudaMalloc(&cp, 2 * cpbytes));
  auto launch = [&](int k) {
    switch (k) {
      case 0: k0<0><<<kFlatBlocks, 128>>>(in, out, idx); break;
      case 1: k1<<<PLANES * 2 * ((OH / 2 + 3) / 4), 128>>>(in, out, idx); break;
      case 2: (k2<2, 128>)<<<PLANES * (OH / 2 / 2), 128>>>(in, out, idx); break;  // RP 2: 112 of 128 threads
      case 3: (k2<4, 256>)<<<PLANES * (OH / 2 / 4), 256>>>(in, out, idx); break;  // RP 4: 224 of 256
      case 4: (k2<7, 416>)<<<PLANES * (OH / 2 / 7), 416>>>(in, out, idx); break;  // RP 7: 392 of 416
      case 5: k0<1><<<kFlatBlocks, 128>>>(in, out, idx); break;
      case 6: k0<2><<<kFlatBlocks, 128>>>(in, out, idx); break;
      case 7: launch_k7<256, 4, 2>(1, in, out, idx); break;
      case 8: launch_k7<256, 2, 1>(2, in, out, idx); break;
      case 9: launch_k7<512, 4, 2>(1, in, out, idx); break;
      case 10: k10<false, false><<<kFlatBlocks, 128>>>(in, out, idx); break;
      case 11: k10<false, true><<<kFlatBlocks, 128>>>(in, out, idx); break;
      case 12: k10<true, false><<<kFlatBlocks, 128>>>(in, out, idx); break;
      case 13: k10<true, true><<<kFlatBlocks, 128>>>(in, out, idx); break;
      case 14: k0<0, true><<<kFlatBlocks, 128>>>(in, out, idx); break;
      case 15: k15<<<kFlatBlocks, 128>>>(in, out, idx); break;
      case 16: k16<<<(unsigned)((nout + 255) / 256), 256>>>(reinterpret_cast<const uint2*>(in),
                                                             reinterpret_cast<unsigned short*>(out), idx, nout); break;
      case 17: k17<<<(unsigned)((nout / 4 + 255) / 256), 256>>>(reinterpret_cast<const uint4*>(in),
                                                                 reinterpret_cast<uint2*>(out),
                                                                 reinterpret_cast<longlong2*>(idx), nout / 4); break;
      case 18: launch_k18<7, 128>(in, out, idx); break;
      case 19: launch_k18<7, 256>(in, out, idx); break;
      case 20: launch_k18<4, 128>(in, out, idx); break;
      case 21: launch_k18<14, 128>(in, out, idx); break;
      case 22: launch_k18<8, 128>(in, out, idx); break;
      default: CK(cudaMemcpyAsync(cp, static_cast<char*>(cp) + cpbytes, cpbytes, cudaMemcpyDeviceToDevice));
    }
  };
  if (only >= 0) {  // one launch for a profiler
    launch(only);
    CK(cudaDeviceSynchronize());
    return 0;
  }
  std::vector<__half> ref(nout), got(nout);
  std::vector<long long> refi(nout), goti(nout);
  launch(0);
  CK(cudaDeviceSynchronize());
  CK(cudaMemcpy(ref.data(), out, nout * 2, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(refi.data(), idx, nout * 8, cudaMemcpyDeviceToHost));
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  const std::vector<std::pair<int, const char*>> kernels = {
      {0, "k0 flat opw1 oph2 block128 (generator's)"},
      {10, "k10 patch once (the generator's)"},
      {16, "k16 flat stream 8 B in, 2 + 8 B out (bytes only)"},
      {17, "k17 flat stream 32 B in, 8 + 32 B out (bytes only)"},
      {18, "k18 packed pairs RS 7 block 128"},
      {19, "k18 packed pairs RS 7 block 256"},
      {20, "k18 packed pairs RS 4 block 128"},
      {21, "k18 packed pairs RS 14 block 128"},
      {22, "k18 packed pairs RS 8 block 128"},
      {99, "device copy of the same bytes"}};
  for (int round = 0; round < 2; ++round)
    for (const auto& [k, name] : kernels) {
      const bool check = k != 16 && k != 17 && k != 99;
      if (check) {
        CK(cudaMemset(out, 0xff, nout * 2));
        CK(cudaMemset(idx, 0xff, nout * 8));
        launch(k);
        CK(cudaDeviceSynchronize());
        CK(cudaMemcpy(got.data(), out, nout * 2, cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(goti.data(), idx, nout * 8, cudaMemcpyDeviceToHost));
      }
      size_t bad = 0;
      for (size_t i = 0; check && i < nout; ++i) {
        const bool both_nan = __hisnan(ref[i]) && __hisnan(got[i]);
        bad += (!both_nan && memcmp(&ref[i], &got[i], 2) != 0) || refi[i] != goti[i];
      }
      std::vector<float> t;
      for (int r = 0; r < 60; ++r) {
        flush<<<1056, 512>>>(fb, fl / 16, sink);
        CK(cudaEventRecord(e0));
        launch(k);
        CK(cudaEventRecord(e1));
        CK(cudaEventSynchronize(e1));
        float ms;
        CK(cudaEventElapsedTime(&ms, e0, e1));
        t.push_back(ms * 1000.f);
      }
      std::sort(t.begin(), t.end());
      std::printf("round %d  %-52s median %7.2f us  p10 %7.2f  mismatches %zu\n", round, name, t[30], t[6], bad);
    }
  return 0;
}
