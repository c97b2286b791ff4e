// @brief PairTiles (softmax_family.h, Note [Softmax pair tiles]; sm_90+, fp16 / bf16): two-pass shared column tiles
// copied by cp.async in which a lane takes 2 x kVec adjacent elements (a pair_t of kVec words) of every second row:
// lanes 0-15 a row of the tile, lanes 16-31 the next. The maximum is folded on the packed values, the sum and the
// epilogue unpack each word into two floats.
// Follows softmax_packed_pairs.cuh and softmax_shared_common.cuh, whose constants it reads (kPair and kAsync set).

namespace softmax {

/// kLaneValues = 2 x kVec adjacent elements of a row in kVec 32-bit words (low half first).
struct __align__(4 * kVec) pair_t { unsigned u[kVec]; };

}  // namespace softmax

extern "C" __global__ void __launch_bounds__(softmax::kBlock, softmax::kResident)
cudal1_softmax(const storage_t* __restrict__ in, storage_t* __restrict__ out) {
  using namespace softmax;
  // Dynamic shared memory: the block's kSharedRows rows x 32 vectors, the warp merge, the block's published values.
  extern __shared__ __align__(16) unsigned char smem[];
  const pair_t* tile = reinterpret_cast<const pair_t*>(smem);
  float* red_m = reinterpret_cast<float*>(smem + (size_t)kSharedRows * 32 * sizeof(vec_t));
  float* red_s = red_m + kWarps * kVec * 32;
  float* pub_m = red_s + kWarps * kVec * 32;
  float* pub_s = pub_m + kVec * 32;
  const int lane = threadIdx.x % 32, w = threadIdx.x / 32, sub = lane % 16, half = lane / 16;
  unsigned rank = 0;
  if constexpr (kCluster > 1) rank = cluster_rank();  // blockIdx.x % kCluster: the cluster is 1-d along x
  const index_t cl = (index_t)blockIdx.x / kCluster, tile_i = cl % kTiles, o = cl / kTiles;
  const int n0 = min(kN, (int)rank * kBlockRows), n1 = min(kN, n0 + kBlockRows);
  // Whole tiles (every lane live); kNStride and kInnerVectors are even (16-byte rows), so rows step in whole pair_t.
  const pair_t* __restrict__ x =
      reinterpret_cast<const pair_t*>(reinterpret_cast<const vec_t*>(in) + o * kOuterStride + tile_i * 32) + sub;
  pair_t* __restrict__ y =
      reinterpret_cast<pair_t*>(reinterpret_cast<vec_t*>(out) + o * ((index_t)kN * kInnerVectors) + tile_i * 32) + sub;
  pair_t kept[kKeep > 0 ? kKeep : 1];
#pragma unroll
  for (int i = 0; i < kKeep; ++i) {
    const int j = n0 + 2 * (w + i * kWarps) + half;
    if (j < n1) kept[i] = x[(index_t)j * (kNStride / 2)];
  }
  copy_shared_rows(in, o, tile_i, n0, n1, smem);  // Note [Softmax async tiles]: all in flight
  // First pass: the maximum of the packed values (exact; NaN skipped), kept rows while the copy is in flight.
  unsigned pm[kVec];
#pragma unroll
  for (int q = 0; q < kVec; ++q) pm[q] = kPackedNegInf;
#pragma unroll
  for (int i = 0; i < kKeep; ++i)
    if (n0 + 2 * (w + i * kWarps) + half < n1)
#pragma unroll
      for (int q = 0; q < kVec; ++q) pm[q] = max2(pm[q], kept[i].u[q]);
  cp_async_wait_all();
  __syncthreads();  // every thread's chunks have landed
#pragma unroll 4
  for (int r = 2 * w + half; r < n1 - n0 - kKeptRows; r += 2 * kWarps) {
    const pair_t t = tile[r * 16 + sub];
#pragma unroll
    for (int q = 0; q < kVec; ++q) pm[q] = max2(pm[q], t.u[q]);
  }
  float m[kLaneValues], s[kLaneValues];
#pragma unroll
  for (int q = 0; q < kVec; ++q) {
    m[2 * q] = lo_f(pm[q]);
    m[2 * q + 1] = hi_f(pm[q]);
  }
#pragma unroll
  for (int e = 0; e < kLaneValues; ++e)
    m[e] = fmaxf(m[e], __shfl_xor_sync(0xffffffffu, m[e], 16));  // both row parities
  two_pass_merge<MaxCombine>(m, red_m, pub_m, pub_s, w, lane);
  // Second pass: this lane's sum of exp(x - m), rows in order, then the other parity's (the same bits in both).
#pragma unroll
  for (int e = 0; e < kLaneValues; ++e) s[e] = 0.f;
  // The second pass and the write walk this lane's rows of the block (Note [Softmax column walks]): kept word i is
  // row n0 + 2 (w + i kWarps) + half, the shared rows are rows n0 + kKeptRows + r for r = 2 w + half, then
  // + 2 kWarps (row r of the tile in shared memory: 16 pair_t of 32 x kVec elements).
#pragma unroll
  for (int i = 0; i < kKeep; ++i) {
    const int j = n0 + 2 * (w + i * kWarps) + half;
    if (j < n1) {
      const pair_t t = kept[i];
#pragma unroll
      for (int q = 0; q < kVec; ++q) {
        s[2 * q] += exp_sub(lo_f(t.u[q]), m[2 * q]);
        s[2 * q + 1] += exp_sub(hi_f(t.u[q]), m[2 * q + 1]);
      }
    }
  }
#pragma unroll 4
  for (int r = 2 * w + half; r < n1 - n0 - kKeptRows; r += 2 * kWarps) {
    const pair_t t = tile[r * 16 + sub];
#pragma unroll
    for (int q = 0; q < kVec; ++q) {
      s[2 * q] += exp_sub(lo_f(t.u[q]), m[2 * q]);
      s[2 * q + 1] += exp_sub(hi_f(t.u[q]), m[2 * q + 1]);
    }
  }
#pragma unroll
  for (int e = 0; e < kLaneValues; ++e) s[e] += __shfl_xor_sync(0xffffffffu, s[e], 16);
  two_pass_merge<SumCombine>(s, red_s, pub_s, pub_m, w, lane);
  if constexpr (kCluster > 1) cluster_arrive_relaxed();  // remote reads done (used); it waits before it exits
#pragma unroll
  for (int e = 0; e < kLaneValues; ++e)
    if (m[e] == neg_inf()) s[e] = qnan();  // every element -Inf or NaN: the two-pass sum is NaN too
  float c[kLaneValues];
#pragma unroll
  for (int e = 0; e < kLaneValues; ++e) c[e] = epilogue_constant(s[e]);
#pragma unroll
  for (int i = 0; i < kKeep; ++i) {
    const int j = n0 + 2 * (w + i * kWarps) + half;
    if (j < n1) {
      const pair_t t = kept[i];
      pair_t o2;
#pragma unroll
      for (int q = 0; q < kVec; ++q)
        o2.u[q] = pack2(column_epilogue(lo_f(t.u[q]), m[2 * q], s[2 * q], c[2 * q]),
                        column_epilogue(hi_f(t.u[q]), m[2 * q + 1], s[2 * q + 1], c[2 * q + 1]));
      y[(index_t)j * (kInnerVectors / 2)] = o2;
    }
  }
#pragma unroll 4
  for (int r = 2 * w + half; r < n1 - n0 - kKeptRows; r += 2 * kWarps) {
    const int j = n0 + kKeptRows + r;  // the row along n
    const pair_t t = tile[r * 16 + sub];
    pair_t o2;
#pragma unroll
    for (int q = 0; q < kVec; ++q)
      o2.u[q] = pack2(column_epilogue(lo_f(t.u[q]), m[2 * q], s[2 * q], c[2 * q]),
                      column_epilogue(hi_f(t.u[q]), m[2 * q + 1], s[2 * q + 1], c[2 * q + 1]));
    y[(index_t)j * (kInnerVectors / 2)] = o2;
  }
  if constexpr (kCluster > 1) cluster_wait();  // no block leaves while another may still read its values
}
