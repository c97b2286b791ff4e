// @brief ClusterRows (softmax_family.h, Note [Softmax shared tiles]; sm_90+): kCluster blocks of a thread-block
// cluster (1: one block, no cluster) split each row's kVectors vectors into slices of kPart, each kept in the block's
// dynamic shared memory after one read: the row maximum, then the sum of exp(x - max), each reduced in the block
// and then over the cluster in rank order, then ATen's epilogue (Note [Softmax fast exp]'s forms for 16-bit
// outputs) from shared memory.
// Follows softmax_common.cuh, codegen_common's cluster_primitives_source (Note [Clusters]) and async_copy_source
// (Note [Async copies]), and its own constants (namespace softmax, Note [Device constants]):
//   int kCluster                         blocks a row
//   int kResident                        blocks an SM holds at this shared memory: __launch_bounds__' minimum
//   int kUnroll                          vectors a thread has in flight when the slice is copied through registers
//   bool kAsync                          the slice copied by cp.async (vectors of 4 bytes or more)
//   index_t kRowStride; int kCols, kVectors, kPart   the row stride, its length, its vectors, vectors a block
// (bound to the row's constexpr variables RS, D, NV, P: Note [Softmax row constants] in softmax_codegen.cpp).

namespace softmax {

/// Block-wide reduction (row_max / row_sum by `is_max`), then over the cluster's blocks in rank order; `pub`
/// is this block's published value.
__device__ __forceinline__ float cluster_reduce(float v, float* red, float* pub, bool is_max) {
  v = is_max ? row_max(v, red) : row_sum(v, red);
  if constexpr (kCluster > 1) {
    if (threadIdx.x == 0) *pub = v;
    cluster_sync();
    float rv[kCluster];  // every rank's load issued before the first combine (Note [Softmax cluster merge])
#pragma unroll
    for (unsigned r = 0; r < kCluster; ++r) rv[r] = load_remote(pub, r);
    float a = rv[0];
#pragma unroll
    for (unsigned r = 1; r < kCluster; ++r) a = is_max ? fmaxf(a, rv[r]) : a + rv[r];
    return a;
  } else {
    return v;  // one block holds the whole row
  }
}

}  // namespace softmax

extern "C" __global__ void __launch_bounds__(softmax::kBlock, softmax::kResident)
cudal1_softmax(const storage_t* __restrict__ in, storage_t* __restrict__ out) {
  using namespace softmax;
  // Dynamic shared memory: this block's kPart vectors of the row, then the block reduction and the published pair.
  extern __shared__ __align__(16) unsigned char smem[];
  vec_t* slice = reinterpret_cast<vec_t*>(smem);
  float* red = reinterpret_cast<float*>(smem + ((size_t)kPart * sizeof(vec_t) + 15) / 16 * 16);
  float* pub = red + 32;
  unsigned rank = 0;
  if constexpr (kCluster > 1) rank = cluster_rank();
  const index_t row = (index_t)blockIdx.x / kCluster;
  const int lo = min(kVectors, (int)rank * kPart), hi = min(kVectors, lo + kPart);
  const vec_t* __restrict__ x = reinterpret_cast<const vec_t*>(in + row * kRowStride);
  vec_t* __restrict__ y = reinterpret_cast<vec_t*>(out + row * (index_t)kCols);
  // Read once into shared memory, with the maximum: by cp.async, every vector in flight at once, or kUnroll
  // vectors at a time through registers. Each thread only reads back the vectors it copied itself.
  float m = neg_inf();
  if constexpr (kAsync) {
    const unsigned dst = (unsigned)__cvta_generic_to_shared(slice);
    for (int j = lo + (int)threadIdx.x; j < hi; j += kBlock)
      cp_async<(int)sizeof(vec_t)>(dst + (unsigned)(j - lo) * (unsigned)sizeof(vec_t), x + j);
    cp_async_commit();
    cp_async_wait_all();
    for (int j = lo + (int)threadIdx.x; j < hi; j += kBlock) {
      const vec_t t = slice[j - lo];
#pragma unroll
      for (int e = 0; e < kVec; ++e) m = fmaxf(m, to_float(t.v[e]));
    }
  } else {
    for (int j0 = lo + (int)threadIdx.x; j0 < hi; j0 += kUnroll * kBlock) {
      vec_t tu[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u)
        if (j0 + u * kBlock < hi) tu[u] = x[j0 + u * kBlock];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u)
        if (j0 + u * kBlock < hi) {
          slice[j0 + u * kBlock - lo] = tu[u];
#pragma unroll
          for (int e = 0; e < kVec; ++e) m = fmaxf(m, to_float(tu[u].v[e]));
        }
    }
  }
  m = cluster_reduce(m, red, pub, true);
  // Each thread reads back only the vectors it stored itself.
  float s = 0.f;
  for (int j = lo + (int)threadIdx.x; j < hi; j += kBlock) {
    const vec_t t = slice[j - lo];
#pragma unroll
    for (int e = 0; e < kVec; ++e) s += exp_sub(to_float(t.v[e]), m);
  }
  s = cluster_reduce(s, red, pub + 1, false);
  if constexpr (kCluster > 1) cluster_arrive();  // this block's remote reads are done; it waits for the others'
  const float logsum = m + logf(s), rs = 1.f / s;
  for (int j = lo + (int)threadIdx.x; j < hi; j += kBlock) {
    const vec_t t = slice[j - lo];
    vec_t r;
#pragma unroll
    for (int e = 0; e < kVec; ++e) r.v[e] = to_storage(epilogue(to_float(t.v[e]), m, logsum, s, rs));
    y[j] = r;
  }
  if constexpr (kCluster > 1) cluster_wait();  // no block leaves while another may still read its pair
}
