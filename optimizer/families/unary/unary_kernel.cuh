// @brief The unary kernel: out[j] = op(in[in_offset(j)]) for the dense output's elements j in memory order, kVec
// elements a vector and kUnroll vectors a thread, over tiles of kBlock * kUnroll vectors: a grid-stride loop
// (kGridStride) or one tile a block. Where kVec does not divide N (the linear layout only), block 0 finishes the
// tail one element at a time.
//
// Compiled by NVRTC after a generated head (unary_codegen.cpp) that defines, with no CUDA headers:
//   index_t, storage_t, to_float(storage_t), to_storage(float)   the index type and the dtype (dtype_prelude)
//   float op(float x)       the op in fp32 (the op table's formula, unary_math.cpp)
//   index_t N               the element count (a constexpr variable: Note [Unary constants] in unary_codegen.cpp)
//   int kVec, kBlock, kUnroll   elements a vector, threads a block, vectors a thread (enumerators)
//   bool kGridStride        a grid-stride loop over the tiles, else one tile a block
//   bool kPick              each vector picked from a load of 2 * kVec elements (Note [Unary picked vectors])
//   int kDims               0: the input is read in the output's order; else its coalesced dims, innermost
//                           first, each Dim<d>::kSize and Dim<d>::kStride (index_t)

struct __align__(kVec * sizeof(storage_t)) vec_t { storage_t v[kVec]; };
struct __align__(2 * kVec * sizeof(storage_t)) wide_t { storage_t v[2 * kVec]; };

// Adds dims d.. of the input's offset of the element whose index over them is q.
template <int d>
__device__ __forceinline__ void add_dims(index_t& off, index_t& q) {
  if constexpr (d + 1 < kDims) {
    off += (q % (index_t)Dim<d>::kSize) * (index_t)Dim<d>::kStride; q /= (index_t)Dim<d>::kSize;
    add_dims<d + 1>(off, q);
  } else if constexpr (d + 1 == kDims) {
    off += q * (index_t)Dim<d>::kStride;
  }
}

// Input offset of output element j (output is dense, written in memory order).
__device__ __forceinline__ index_t in_offset(index_t j) {
  if constexpr (kDims == 0) {
    return j;
  } else {
    index_t off = 0, q = j;
    add_dims<0>(off, q);
    return off;
  }
}

extern "C" __global__ void __launch_bounds__(kBlock)
cudal1_unary(const storage_t* __restrict__ in, storage_t* __restrict__ out) {
  constexpr index_t NV = N / kVec;
  constexpr index_t TILE = (index_t)kBlock * kUnroll;
  vec_t* __restrict__ vout = reinterpret_cast<vec_t*>(out);
  for (index_t base = (index_t)blockIdx.x * TILE; !kGridStride || base < NV; base += (index_t)gridDim.x * TILE) {
    vec_t r[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const index_t i = base + (index_t)u * kBlock + threadIdx.x;
      if (i < NV) {
        if constexpr (kPick) {
          const wide_t w = *reinterpret_cast<const wide_t*>(in + in_offset(i * kVec));
#pragma unroll
          for (int e = 0; e < kVec; ++e) r[u].v[e] = w.v[2 * e];
        } else {
          r[u] = *reinterpret_cast<const vec_t*>(in + in_offset(i * kVec));
        }
      }
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const index_t i = base + (index_t)u * kBlock + threadIdx.x;
      if (i < NV) {
        vec_t o;
#pragma unroll
        for (int e = 0; e < kVec; ++e) o.v[e] = to_storage(op(to_float(r[u].v[e])));
        vout[i] = o;
      }
    }
    if (!kGridStride) break;  // one tile a block
  }
  if (N % kVec != 0 && blockIdx.x == 0)
    for (index_t j = NV * kVec + threadIdx.x; j < N; j += kBlock)
      out[j] = to_storage(op(to_float(in[in_offset(j)])));
}
