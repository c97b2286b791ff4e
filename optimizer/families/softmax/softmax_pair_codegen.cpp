/// @brief Device code of the softmax family's pair tiles (Note [Softmax pair tiles]): two-pass shared column
/// tiles of 16-bit dtypes in which a lane takes 2 x VEC adjacent elements of every second row.
#include <string>

#include "softmax_family.h"

namespace cudal1::optimizer::softmax {

std::string packed_pair_source(c10::ScalarType dtype) {
  const bool bf16 = dtype == c10::ScalarType::BFloat16;
  const std::string x2 = bf16 ? "bf16x2" : "f16x2";  // the packed type of max2 and pack2
  std::string s = R"(// Note [Softmax pair tiles]: NE = 2 x VEC adjacent elements of a row in VEC 32-bit words
// (low half first).
struct __align__(4 * VEC) pair_t { unsigned u[VEC]; };
)";
  s += bf16 ? R"(__device__ __forceinline__ float lo_f(unsigned u) { return __uint_as_float(u << 16); }
__device__ __forceinline__ float hi_f(unsigned u) { return __uint_as_float(u & 0xffff0000u); }
#define PACKED_NEG_INF 0xff80ff80u
)"
            : R"(__device__ __forceinline__ float lo_f(unsigned u) {
  float f; asm("{ .reg .b16 l, h; mov.b32 {l, h}, %1; cvt.f32.f16 %0, l; }" : "=f"(f) : "r"(u)); return f; }
__device__ __forceinline__ float hi_f(unsigned u) {
  float f; asm("{ .reg .b16 l, h; mov.b32 {l, h}, %1; cvt.f32.f16 %0, h; }" : "=f"(f) : "r"(u)); return f; }
#define PACKED_NEG_INF 0xfc00fc00u
)";
  return s + R"(__device__ __forceinline__ unsigned max2(unsigned a, unsigned b) {  // NaN skipped, as fmaxf
  unsigned d; asm("max.)" + x2 + R"( %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b)); return d; }
__device__ __forceinline__ unsigned pack2(float lo, float hi) {
  unsigned d; asm("cvt.rn.)" + x2 + R"(.f32 %0, %1, %2;" : "=r"(d) : "f"(hi), "f"(lo)); return d; }
)";
}

std::string pair_tile_kernel_source() {
  return R"(// This lane's rows of the block: kept word i is row n0 + 2 (w + i W) + half, the shared rows are rows
// n0 + NK + r for r = 2 w + half, then + 2 W (row r of the tile in shared memory: 16 pair_t of 32 x VEC elements).
#define FOR_EACH_PAIR(...) \
  _Pragma("unroll") for (int i = 0; i < KEEP; ++i) { \
    const int j = n0 + 2 * (w + i * W) + half; \
    if (j < n1) { const pair_t t = kept[i]; __VA_ARGS__ } \
  } \
  _Pragma("unroll 4") for (int r = 2 * w + half; r < n1 - n0 - NK; r += 2 * W) { \
    const int j = n0 + NK + r; /* the row along n (the write's) */ \
    (void)j; \
    const pair_t t = tile[r * 16 + sub]; \
    __VA_ARGS__ \
  }
extern "C" __global__ void __launch_bounds__(BLOCK, RESIDENT)
cudal1_softmax(const storage_t* __restrict__ in, storage_t* __restrict__ out) {
  // Dynamic shared memory: the block's NS rows x 32 vectors, the warp merge, the block's published values.
  extern __shared__ __align__(16) unsigned char smem[];
  const pair_t* tile = reinterpret_cast<const pair_t*>(smem);
  float* red_m = reinterpret_cast<float*>(smem + (size_t)NS * 32 * sizeof(vec_t));
  float* red_s = red_m + W * VEC * 32;
  float* pub_m = red_s + W * VEC * 32;
  float* pub_s = pub_m + VEC * 32;
  const int lane = threadIdx.x % 32, w = threadIdx.x / 32, sub = lane % 16, half = lane / 16;
#if CLUSTER > 1
  const unsigned rank = cluster_rank();  // blockIdx.x % CLUSTER: the cluster is 1-d along x
#else
  const unsigned rank = 0;
#endif
  const index_t cl = (index_t)blockIdx.x / CLUSTER, tile_i = cl % TILES, o = cl / TILES;
  const int n0 = min(N, (int)rank * NB), n1 = min(N, n0 + NB);
  // Whole tiles (every lane live); NSV and IV are even (16-byte rows), so rows step in whole pair_t.
  const pair_t* __restrict__ x =
      reinterpret_cast<const pair_t*>(reinterpret_cast<const vec_t*>(in) + o * OSV + tile_i * 32) + sub;
  pair_t* __restrict__ y =
      reinterpret_cast<pair_t*>(reinterpret_cast<vec_t*>(out) + o * ((index_t)N * IV) + tile_i * 32) + sub;
  pair_t kept[KEEP > 0 ? KEEP : 1];
#pragma unroll
  for (int i = 0; i < KEEP; ++i) {
    const int j = n0 + 2 * (w + i * W) + half;
    if (j < n1) kept[i] = x[(index_t)j * (NSV / 2)];
  }
  copy_shared_rows(in, o, tile_i, n0, n1, smem);  // Note [Softmax async tiles]: all in flight
  // First pass: the maximum of the packed values (exact; NaN skipped), kept rows while the copy is in flight.
  unsigned pm[VEC];
#pragma unroll
  for (int q = 0; q < VEC; ++q) pm[q] = PACKED_NEG_INF;
#pragma unroll
  for (int i = 0; i < KEEP; ++i)
    if (n0 + 2 * (w + i * W) + half < n1)
#pragma unroll
      for (int q = 0; q < VEC; ++q) pm[q] = max2(pm[q], kept[i].u[q]);
  cp_async_wait_all();
  __syncthreads();  // every thread's chunks have landed
#pragma unroll 4
  for (int r = 2 * w + half; r < n1 - n0 - NK; r += 2 * W) {
    const pair_t t = tile[r * 16 + sub];
#pragma unroll
    for (int q = 0; q < VEC; ++q) pm[q] = max2(pm[q], t.u[q]);
  }
  float m[NE], s[NE];
#pragma unroll
  for (int q = 0; q < VEC; ++q) {
    m[2 * q] = lo_f(pm[q]);
    m[2 * q + 1] = hi_f(pm[q]);
  }
#pragma unroll
  for (int e = 0; e < NE; ++e) m[e] = fmaxf(m[e], __shfl_xor_sync(0xffffffffu, m[e], 16));  // both row parities
  two_pass_merge<MaxCombine>(m, red_m, pub_m, pub_s, w, lane);
  // Second pass: this lane's sum of exp(x - m), rows in order, then the other parity's (the same bits in both).
#pragma unroll
  for (int e = 0; e < NE; ++e) s[e] = 0.f;
  FOR_EACH_PAIR(_Pragma("unroll") for (int q = 0; q < VEC; ++q) {
    s[2 * q] += EXP_SUB(lo_f(t.u[q]), m[2 * q]);
    s[2 * q + 1] += EXP_SUB(hi_f(t.u[q]), m[2 * q + 1]);
  })
#pragma unroll
  for (int e = 0; e < NE; ++e) s[e] += __shfl_xor_sync(0xffffffffu, s[e], 16);
  two_pass_merge<SumCombine>(s, red_s, pub_s, pub_m, w, lane);
#if CLUSTER > 1
  cluster_arrive_relaxed();  // this block's remote reads are done (used); it waits for the others' before it exits
#endif
#pragma unroll
  for (int e = 0; e < NE; ++e)
    if (m[e] == NEG_INF) s[e] = QNAN;  // every element -Inf or NaN: the two-pass sum is NaN too
)" + epilogue_prep_source("NE") +
       R"(  FOR_EACH_PAIR(pair_t o2; _Pragma("unroll") for (int q = 0; q < VEC; ++q) o2.u[q] =
                    pack2(EPILOGUE(lo_f(t.u[q]), 2 * q), EPILOGUE(hi_f(t.u[q]), 2 * q + 1));
                y[(index_t)j * (IV / 2)] = o2;)
#if CLUSTER > 1
  cluster_wait();  // no block leaves while another may still read its values
#endif
}
)";
}

}  // namespace cudal1::optimizer::softmax
