// @brief The binary kernel (Note [Binary elementwise] in binary_family.h): the dense output written in memory
// order, kVec outputs a vector and kUnroll vectors a thread, over tiles of kBlock * kUnroll vectors: a grid-stride
// loop (kGridStride) or one tile a block. Each vector's inputs are read first (a tensor's at its offset, a scalar
// once a thread), then the op computed in fp32 and rounded once to the output.
//
// Compiled by NVRTC after binary_common.cuh and the generated constants (binary_codegen.cpp), which define, with no
// CUDA headers:
//   index_t N                       the element count (a constexpr variable: Note [Binary constants])
//   out_t, to_common(float), store_out(float)   the output's storage type, a value rounded to the common dtype,
//                                   a value stored
//   int kVec, kBlock, kUnroll       outputs a vector, threads a block, vectors a thread
//   int kDims, kTensors, kMath      dims of the coalesced space, tensor inputs, the op (Math)
//   bool kGridStride                a grid-stride loop over the tiles, else one tile a block
//   Dim, Stride and In specialised for the signature (binary_common.cuh)

// Adds dim d's part of each tensor input's offset, t on: c * Stride<t, d>.
template <int d, int t>
__device__ __forceinline__ void add_strides(index_t c, index_t* o) {
  if constexpr (t < kTensors) {
    if constexpr (Stride<t, d>::kValue != 0) o[t] += c * (index_t)Stride<t, d>::kValue;
    add_strides<d, t + 1>(c, o);
  }
}

// Adds dims d.. of each tensor input's offset of the element whose index over them is q.
template <int d>
__device__ __forceinline__ void add_dims(index_t& q, index_t* o) {
  index_t c;
  if constexpr (d + 1 < kDims) {
    c = q % (index_t)Dim<d>::kSize; q /= (index_t)Dim<d>::kSize;
  } else {
    c = q;
  }
  add_strides<d, 0>(c, o);
  if constexpr (d + 1 < kDims) add_dims<d + 1>(q, o);
}

// Offsets of output element j in every tensor input.
__device__ __forceinline__ void offsets(index_t j, index_t* o) {
  index_t q = j;
  if constexpr (kTensors > 0) o[0] = 0;
  if constexpr (kTensors > 1) o[1] = 0;
  if constexpr (kTensors > 2) o[2] = 0;
  add_dims<0>(q, o);
}

// Input i's value as a 0-dim tensor on the device, where p is not null.
template <int i>
__device__ __forceinline__ void read_scalar(float& s, const void* p) {
  if constexpr (In<i>::kKind == kZeroDim) {
    if (p) {
      if constexpr (In<i>::kToCommon) s = to_common(In<i>::value(*(const typename In<i>::storage*)p));
      else s = In<i>::value(*(const typename In<i>::storage*)p);
    }
  }
}

// Tensor input i's kVec values of the vector whose offsets are o.
template <int i>
__device__ __forceinline__ void load(float (&x)[kVec], const typename In<i>::storage* q, const index_t* o) {
  if constexpr (In<i>::kKind == kTensor) {
    if constexpr (In<i>::kRead == kVector) {
      const pack_t<typename In<i>::storage, kVec> r =
          *reinterpret_cast<const pack_t<typename In<i>::storage, kVec>*>(&q[o[In<i>::kSlot]]);
#pragma unroll
      for (int e = 0; e < kVec; ++e) x[e] = In<i>::value(r.v[e]);
    } else if constexpr (In<i>::kRead == kBroadcast) {
      const float t = In<i>::value(q[o[In<i>::kSlot]]);
#pragma unroll
      for (int e = 0; e < kVec; ++e) x[e] = t;
    } else {
#pragma unroll
      for (int e = 0; e < kVec; ++e)
        x[e] = In<i>::value(q[o[In<i>::kSlot] + (index_t)e * (index_t)In<i>::kInnerStride]);
    }
  }
}

// Input i's value for output e of the vector: a tensor's loaded value, else its scalar.
template <int i>
__device__ __forceinline__ float operand(const float (&x)[kVec], float s, int e) {
  if constexpr (In<i>::kKind == kTensor) return x[e];
  else return s;
}

// The op (Note [Binary elementwise]); c is where's condition; recip: div by a CPU scalar, b its reciprocal.
__device__ __forceinline__ float compute(float a, float b, float c, float alpha, bool recip) {
  if constexpr (kMath == kAdd) return a + alpha * b;
  else if constexpr (kMath == kMul) return a * b;
  else if constexpr (kMath == kDiv && In<1>::kKind == kTensor) return a / b;
  else if constexpr (kMath == kDiv) return (recip ? a * b : a / b);
  else if constexpr (kMath == kMaximum) return ((a != a) ? a : ((b != b) ? b : fmaxf(a, b)));
  else if constexpr (kMath == kMinimum) return ((a != a) ? a : ((b != b) ? b : fminf(a, b)));
  else if constexpr (kMath == kPow) return powf(a, b);
  else return (c != 0.f ? a : b);
}

extern "C" __global__ void __launch_bounds__(kBlock)
cudal1_binary(out_t* __restrict__ out, const void* p0, const void* p1, const void* p2, float v0, float v1,
              float v2, float alpha) {
  const In<0>::storage* __restrict__ q0 = (const In<0>::storage*)p0;
  const In<1>::storage* __restrict__ q1 = (const In<1>::storage*)p1;
  const In<2>::storage* __restrict__ q2 = (const In<2>::storage*)p2;
  // Scalar operands: read once. A CUDA 0-dim tensor converts to the common dtype first (TensorIterator's dynamic
  // cast); values passed by the host are exact in it already (a div reciprocal is passed as is).
  float s0 = v0, s1 = v1, s2 = v2;
  read_scalar<0>(s0, p0);
  read_scalar<1>(s1, p1);
  read_scalar<2>(s2, p2);
  const bool recip = p1 == 0;
  constexpr index_t NV = N / kVec;
  constexpr index_t TILE = (index_t)kBlock * kUnroll;
  for (index_t base = (index_t)blockIdx.x * TILE; !kGridStride || base < NV; base += (index_t)gridDim.x * TILE) {
    float x0[kUnroll][kVec], x1[kUnroll][kVec], x2[kUnroll][kVec];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const index_t i = base + (index_t)u * kBlock + threadIdx.x;
      if (i >= NV) continue;
      index_t o[kTensors > 0 ? kTensors : 1];
      offsets(i * kVec, o);
      load<0>(x0[u], q0, o);
      load<1>(x1[u], q1, o);
      load<2>(x2[u], q2, o);
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const index_t i = base + (index_t)u * kBlock + threadIdx.x;
      if (i >= NV) continue;
      pack_t<out_t, kVec> r;
#pragma unroll
      for (int e = 0; e < kVec; ++e) {
        if constexpr (kMath == kWhere)
          r.v[e] = store_out(compute(operand<1>(x1[u], s1, e), operand<2>(x2[u], s2, e), operand<0>(x0[u], s0, e),
                                     alpha, recip));
        else
          r.v[e] = store_out(compute(operand<0>(x0[u], s0, e), operand<1>(x1[u], s1, e), 0.f, alpha, recip));
      }
      *reinterpret_cast<pack_t<out_t, kVec>*>(out + i * kVec) = r;
    }
    if (!kGridStride) break;  // one tile a block
  }
}
