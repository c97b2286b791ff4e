// @brief Device code of attention's special values (Note [Causal attention] in chain_causal.h): which heads hold a
// NaN or an infinity, and those heads' rows recomputed as the attention chain's exact value.
//
// Compiled by NVRTC after a head (chain_causal.cpp) that defines, with no CUDA headers:
//   storage_t, to_float(storage_t), to_storage(float)  the dtype (dtype_prelude: fp32, fp16 or bf16)
//   constexpr unsigned kExponent   the dtype's exponent bits (all set: a NaN or an infinity)

// One operand of the chain, [heads, rows, cols] with element strides: q [BH, L, D], k^T [BH, D, S], v [BH, S, Dv].
struct Operand {
  const storage_t* p;
  long long head, row, col;  // strides
  long long rows, cols;
  int flat;  // each head's rows x cols elements fill one range from its start, read 16 bytes at a time
};

__device__ __forceinline__ bool special16(unsigned w) {
  return (w & kExponent) == kExponent || ((w >> 16) & kExponent) == kExponent;
}

__device__ __forceinline__ bool special_word(unsigned w) {
  if constexpr (sizeof(storage_t) == 2) return special16(w);
  else return (w & kExponent) == kExponent;
}

__device__ __forceinline__ bool special_value(storage_t x) {
  if constexpr (sizeof(storage_t) == 2) return (static_cast<unsigned>(x) & kExponent) == kExponent;
  else return (__float_as_uint(x) & kExponent) == kExponent;
}

// Marks bad[h] where head h of `o` holds a special value; thread `t` of `n` (along x) takes every n-th piece of
// the head.
__device__ void mark_specials(const Operand& o, long long h, int* bad, long long t, long long n) {
  const long long per = o.rows * o.cols;
  if (o.flat) {
    const long long words = per * static_cast<long long>(sizeof(storage_t)) / 16;
    const uint4* w = reinterpret_cast<const uint4*>(o.p + h * o.head);
    bool found = false;
    for (long long i = t; i < words; i += n) {
      const uint4 x = w[i];
      found |= special_word(x.x) || special_word(x.y) || special_word(x.z) || special_word(x.w);
    }
    if (found) bad[h] = 1;
    return;
  }
  for (long long i = t; i < per; i += n) {
    const long long r = i / o.cols, c = i - r * o.cols;
    if (special_value(o.p[h * o.head + r * o.row + c * o.col])) bad[h] = 1;
  }
}

// bad[h] = 1 for every head whose q, k or v holds a NaN or an infinity (bad starts zeroed). Blocks along y take
// heads, along x the pieces of one.
extern "C" __global__ void attention_specials(Operand q, Operand k, Operand v, long long heads, int* bad) {
  const long long t = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
  const long long n = static_cast<long long>(gridDim.x) * blockDim.x;
  for (long long h = blockIdx.y; h < heads; h += gridDim.y) {
    mark_specials(q, h, bad, t, n);
    mark_specials(k, h, bad, t, n);
    mark_specials(v, h, bad, t, n);
  }
}

__device__ __forceinline__ double warp_max_nan(double v) {  // NaN wins
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const double u = __shfl_xor_sync(0xffffffffu, v, o);
    v = (v != v || u != u) ? __longlong_as_double(0x7ff8000000000000LL) : fmax(v, u);
  }
  return v;
}

__device__ __forceinline__ double warp_sum(double v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// Every row of every bad head, as the chain's exact value: softmax(q k^T * scale + mask) v in double, so a special
// value spreads where the ATen chain spreads it (masked scores included). The mask is the chain's own [L, S] one
// (element strides mask_row, mask_col), or, where `mask` is null, the causal one. One warp a row; the warp keeps
// its row's S scores, then probabilities, in shared memory (S doubles a warp).
extern "C" __global__ void attention_exact_rows(Operand q, Operand k, Operand v, storage_t* y, const int* bad,
                                                long long heads, long long dv, double scale, const storage_t* mask,
                                                long long mask_row, long long mask_col) {
  extern __shared__ double scores[];
  const int lane = threadIdx.x & 31, warps = blockDim.x >> 5;
  const long long L = q.rows, D = q.cols, S = k.cols;
  double* p = scores + static_cast<long long>(threadIdx.x >> 5) * S;
  const double minus_inf = __longlong_as_double(0xfff0000000000000LL);
  for (long long r = blockIdx.x * static_cast<long long>(warps) + (threadIdx.x >> 5); r < heads * L;
       r += static_cast<long long>(gridDim.x) * warps) {
    const long long h = r / L, i = r - h * L;
    if (!bad[h]) continue;  // the same for the whole warp
    const storage_t* qi = q.p + h * q.head + i * q.row;
    double m = minus_inf;
    for (long long j = lane; j < S; j += 32) {
      double s = 0;
      for (long long c = 0; c < D; ++c)
        s += static_cast<double>(to_float(qi[c * q.col])) *
             static_cast<double>(to_float(k.p[h * k.head + c * k.row + j * k.col]));
      s *= scale;
      if (mask) s += static_cast<double>(to_float(mask[i * mask_row + j * mask_col]));
      else if (j > i) s += minus_inf;  // NaN and +inf stay NaN, as in the chain
      p[j] = s;
      m = (m != m || s != s) ? __longlong_as_double(0x7ff8000000000000LL) : fmax(m, s);
    }
    m = warp_max_nan(m);
    double sum = 0;
    for (long long j = lane; j < S; j += 32) {
      const double e = exp(p[j] - m);
      p[j] = e;
      sum += e;
    }
    sum = warp_sum(sum);
    __syncwarp();
    for (long long j = lane; j < S; j += 32) p[j] /= sum;
    __syncwarp();
    for (long long c = lane; c < dv; c += 32) {
      double acc = 0;
      for (long long j = 0; j < S; ++j) acc += p[j] * static_cast<double>(to_float(v.p[h * v.head + j * v.row + c * v.col]));
      y[r * dv + c] = to_storage(static_cast<float>(acc));
    }
    __syncwarp();
  }
}
