/// @brief Source generation for the softmax family's tiled column kernels (Note [Softmax column tiles]): a warp
/// reads 32 x VEC adjacent inner elements of one n-row (whole 128-byte lines), the warps of a block split n, and
/// per-column online (max, sum) pairs are merged across warps in shared memory and, with CHUNKS > 1, across the
/// blocks of a column through an fp32 workspace between two launches.
#include <sstream>

#include "codegen_common.h"
#include "softmax_family.h"

namespace cudal1::optimizer::softmax {

const char* online_pair_source() {
  return R"(// Online (max, sum of exp(x - max)) with the two-pass kernels' special values (Note [Softmax column tiles]):
// m is never NaN; -Inf adds 0 (a column whose max stays -Inf is made NaN at the end); NaN and +Inf poison s.
__device__ __forceinline__ void online_add(float& m, float& s, float x) {
  if (x > m) {
    s = s * expf(m - x) + (x == POS_INF ? QNAN : 1.f);
    m = x;
  } else {
    s += x == NEG_INF ? 0.f : expf(x - m);
  }
}
__device__ __forceinline__ void online_merge(float& m, float& s, float m2, float s2) {
  const float mm = fmaxf(m, m2);
  s = (m == mm ? s : s * expf(m - mm)) + (m2 == mm ? s2 : s2 * expf(m2 - mm));
  m = mm;
}
#ifdef W
/// Each lane's VEC pairs merged over the block's W warps in warp order through red_m and red_s ([W][32 x VEC]
/// shared arrays): every warp ends with the same values.
__device__ __forceinline__ void merge_warps(float* m, float* s, float (*red_m)[32 * VEC], float (*red_s)[32 * VEC]) {
  const int lane = threadIdx.x % 32, w = threadIdx.x / 32;
#pragma unroll
  for (int e = 0; e < VEC; ++e) {
    red_m[w][e * 32 + lane] = m[e];
    red_s[w][e * 32 + lane] = s[e];
  }
  __syncthreads();
#pragma unroll
  for (int e = 0; e < VEC; ++e) {
    m[e] = red_m[0][e * 32 + lane];
    s[e] = red_s[0][e * 32 + lane];
    for (int i = 1; i < W; ++i) online_merge(m[e], s[e], red_m[i][e * 32 + lane], red_s[i][e * 32 + lane]);
  }
}
#endif
)";
}

const char* cached_rows_source() {
  return R"(  vec_t cached[PER];
#pragma unroll
  for (int i = 0; i < PER; ++i) {
    const int j = n0 + w + i * W;
    if (live && j < n1) cached[i] = x[j * NSV];
  }
#define FOR_EACH_PART(...) \
  _Pragma("unroll") for (int i = 0; i < PER; ++i) { \
    const int j = n0 + w + i * W; \
    if (live && j < n1) { const vec_t t = cached[i]; __VA_ARGS__ } \
  }
)";
}

KernelSource generate_softmax_tiles(const ColumnShape& c, int vec, int block, int chunks, bool cache, bool fast) {
  const int64_t iv = c.inner / vec, tiles = (iv + 31) / 32, nc = (c.n + chunks - 1) / chunks;
  std::ostringstream k;
  k << "// cudal1 softmax column tiles: log=" << c.log << " " << c10::toString(c.dtype) << " outer=" << c.outer
    << " n=" << c.n << " inner=" << c.inner << " vec=" << vec << " block=" << block << " chunks=" << chunks
    << " cache=" << cache << " fast=" << fast << "\n";
  k << "typedef long long index_t;\n" << dtype_prelude(c.dtype) << exact_divide_source();
  k << "#define VEC " << vec << "\n#define BLOCK " << block << "\n#define W (BLOCK / 32)\n#define CHUNKS " << chunks
    << "\n#define CACHE " << (cache ? 1 : 0) << "\n#define LOG " << (c.log ? 1 : 0) << "\n#define FAST "
    << (fast ? 1 : 0) << "  // Note [Softmax fast tiles]\n#define UNROLL " << (fast ? 8 : 4) << "\n";
  if (fast) k << fast_exp_source(c.dtype, true);
  k << "static constexpr int N = " << c.n << ", NC = " << nc << ";  // rows, rows per chunk\n"
    << "static constexpr index_t IV = " << iv << ", TILES = " << tiles << ";  // vectors along inner, tiles\n"
    << "static constexpr index_t BLOCKS = " << c.outer * tiles * chunks << ";\n"
    << "static constexpr index_t OSV = " << c.outer_stride / vec << ", NSV = " << c.n_stride / vec
    << ";  // input strides in vectors\n";
  if (cache) k << "static constexpr int PER = (NC + W - 1) / W;  // vectors each thread keeps\n";
  if (chunks > 1) k << "static constexpr index_t COLS = " << c.outer * c.inner << ";  // workspace stride\n";
  k << R"(#if CHUNKS > 1 && CACHE
#error "a column split over blocks cannot stay in registers between the two launches"
#endif
#if FAST && CACHE
#error "fast tiles fold the rows they load: Note [Softmax fast tiles]"
#endif
#define NEG_INF __int_as_float(0xff800000u)
#define POS_INF __int_as_float(0x7f800000u)
#define QNAN __int_as_float(0x7fffffffu)
struct __align__(VEC * sizeof(storage_t)) vec_t { storage_t v[VEC]; };
)" << online_pair_source() << R"(extern "C" __global__ void __launch_bounds__(BLOCK)
cudal1_softmax(const storage_t* __restrict__ in, storage_t* __restrict__ out, float* __restrict__ ws, int phase) {
  const int lane = threadIdx.x % 32, w = threadIdx.x / 32;
  // Phase 1 walks the blocks backwards: its first blocks re-read what phase 0 read last (still in L2).
  const index_t b = (CHUNKS > 1 && phase == 1) ? BLOCKS - 1 - (index_t)blockIdx.x : (index_t)blockIdx.x;
  const int chunk = (int)(b % CHUNKS);
  const index_t tile = (b / CHUNKS) % TILES, o = b / (CHUNKS * TILES);
  const index_t iv = tile * 32 + lane;
  const bool live = iv < IV;  // dead lanes still take part in the merges
  const int n0 = chunk * NC, n1 = min(N, n0 + NC);
  const vec_t* __restrict__ x = reinterpret_cast<const vec_t*>(in) + o * OSV + (live ? iv : 0);
  vec_t* __restrict__ y = reinterpret_cast<vec_t*>(out) + o * ((index_t)N * IV) + (live ? iv : 0);
  float m[VEC], s[VEC];
#pragma unroll
  for (int e = 0; e < VEC; ++e) { m[e] = NEG_INF; s[e] = 0.f; }
  // FOR_EACH_PART(body): runs `body` with `j` (index along n) and `t` (the vector there) over this warp's rows of
  // the chunk: from registers, or loaded UNROLL rows at a time (loads first, for memory-level parallelism).
#if CACHE
)" << cached_rows_source() << R"(#else
#define FOR_EACH_PART(...) \
  for (int j0 = n0 + w; j0 < n1; j0 += UNROLL * W) { \
    vec_t tu[UNROLL]; \
    _Pragma("unroll") for (int u = 0; u < UNROLL; ++u) { \
      const int j = j0 + u * W; \
      if (live && j < n1) tu[u] = x[j * NSV]; \
    } \
    _Pragma("unroll") for (int u = 0; u < UNROLL; ++u) { \
      const int j = j0 + u * W; \
      if (live && j < n1) { const vec_t t = tu[u]; __VA_ARGS__ } \
    } \
  }
#endif
  if (CHUNKS == 1 || phase == 0) {
    // This block's rows of its columns: online pairs per lane, then merged over the W warps in warp order.
    __shared__ float red_m[W][VEC * 32], red_s[W][VEC * 32];
#if FAST
    // Note [Softmax fast tiles]: UNROLL rows at a time (rows past the chunk as -Inf): their maximum, one rescale
    // where it grew, then the fast exp of each.
    vec_t neg;
#pragma unroll
    for (int e = 0; e < VEC; ++e) neg.v[e] = to_storage(NEG_INF);
    for (int j0 = n0 + w; j0 < n1; j0 += UNROLL * W) {
      vec_t tu[UNROLL];
#pragma unroll
      for (int u = 0; u < UNROLL; ++u) {
        const int j = j0 + u * W;
        tu[u] = live && j < n1 ? x[j * NSV] : neg;
      }
#pragma unroll
      for (int e = 0; e < VEC; ++e) {
        float xs[UNROLL], bm = m[e];
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {
          xs[u] = to_float(tu[u].v[e]);
          bm = fmaxf(bm, xs[u]);  // NaN skipped
        }
        if (bm > m[e]) {
          s[e] *= expf(m[e] - bm);  // 0 from m = -Inf (NaN stays NaN)
          m[e] = bm;
        }
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) s[e] += xs[u] == NEG_INF ? 0.f : EXP_SUB(xs[u], m[e]);
      }
    }
#else
    FOR_EACH_PART(_Pragma("unroll") for (int e = 0; e < VEC; ++e) online_add(m[e], s[e], to_float(t.v[e]));)
#endif
    merge_warps(m, s, red_m, red_s);
#if CHUNKS > 1
    if (w == 0 && live)
#pragma unroll
      for (int e = 0; e < VEC; ++e) {
        const index_t col = o * (IV * VEC) + iv * VEC + e;
        ws[chunk * COLS + col] = m[e];
        ws[(CHUNKS + chunk) * COLS + col] = s[e];
      }
    return;
#endif
  }
#if CHUNKS > 1
  // Phase 1: the column's pairs of every chunk, merged in chunk order (the same in every block of the column).
  if (live)
#pragma unroll
    for (int e = 0; e < VEC; ++e) {
      const index_t col = o * (IV * VEC) + iv * VEC + e;
      m[e] = ws[col];
      s[e] = ws[CHUNKS * COLS + col];
      for (int i = 1; i < CHUNKS; ++i) online_merge(m[e], s[e], ws[i * COLS + col], ws[(CHUNKS + i) * COLS + col]);
    }
#endif
#pragma unroll
  for (int e = 0; e < VEC; ++e)
    if (m[e] == NEG_INF) s[e] = QNAN;  // every element -Inf or NaN: the two-pass sum is NaN too
)" << column_epilogue_source();
  return KernelSource{k.str(), "cudal1_softmax"};
}

}  // namespace cudal1::optimizer::softmax
