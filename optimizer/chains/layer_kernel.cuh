// @brief Device code of a skinny linear layer (Note [Skinny layers] in chain_program.h): an optional layer norm
// of the input rows, the product with a [N, K] weight, bias, activation and residual add, one kernel.
//
// Compiled by NVRTC after a generated head (chain_layers.cpp) that defines, with no CUDA headers:
//   storage_t, to_float(storage_t), to_storage(float)  the dtype (dtype_prelude: fp32, fp16 or bf16)
//   constexpr int kWarps      warps a block; each warp computes whole output columns n, one at a time
//   constexpr int kUnroll     16-byte weight loads a lane keeps in flight
//   constexpr int kRows       the most input rows M a launch may have (M <= kRows)
//   constexpr bool kOverlap   programmatic dependent launch (sm_90+): the launch lets this grid start while the
//                             previous one in the stream finishes; it reads only the weight before waiting for it
//   float activation(int kind, float x)   ATen's formula of each activation (kind 0: none)
// Rounding follows ATen's eager ops exactly where they store a tensor: the normalised input is rounded to the
// dtype (the GEMM reads layer_norm's stored result), the product plus bias once (cuBLAS's fp32 epilogue), the
// activation once, the residual sum once. Only the order of the fp32 sums differs from ATen's.

__device__ __forceinline__ float layer_warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// The block's sum of `v`, the same in every thread. `red` holds kWarps floats.
__device__ __forceinline__ float layer_block_sum(float v, float* red) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  v = layer_warp_sum(v);
  __syncthreads();  // red may still be read by the previous call
  if (lane == 0) red[warp] = v;
  __syncthreads();
  float s = 0.f;
#pragma unroll
  for (int i = 0; i < kWarps; ++i) s += red[i];
  return s;
}

// 16 bytes of the weight, read once: no L1 allocation, the non-coherent path.
__device__ __forceinline__ uint4 layer_stream_load(const uint4* p) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}

// y[m, n] = res[m, n] + act(round(sum_k xn[m, k] w[n, k] + bias[n])), every value rounded to the dtype as ATen
// stores it; xn = layer_norm(x) (ln != 0) or x. x rows and res/y rows are `*_rs` elements apart; w is [N, K]
// contiguous and 16-byte aligned; K is a multiple of 16 / sizeof(storage_t). ln_w, ln_b, bias, res may be null.
// Dynamic shared memory: M * K storage_t values.
extern "C" __global__ void __launch_bounds__(kWarps * 32)
layer_kernel(const storage_t* __restrict__ x, long long x_rs, int ln, const storage_t* __restrict__ ln_w,
             const storage_t* __restrict__ ln_b, float eps, const storage_t* __restrict__ w,
             const storage_t* __restrict__ bias, int act, const storage_t* __restrict__ res, long long res_rs,
             storage_t* __restrict__ y, long long y_rs, int M, int K, int N) {
  extern __shared__ __align__(16) unsigned char layer_smem[];
  storage_t* xs = reinterpret_cast<storage_t*>(layer_smem);
  __shared__ float red[kWarps];
  constexpr int kVec = 16 / sizeof(storage_t);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int kv = K / kVec;
  const int first = blockIdx.x * kWarps + warp, stride = gridDim.x * kWarps;

  // The first weight loads go out before the prologue, so that HBM works while the block normalises x.
  uint4 wv[kUnroll];
  if (first < N) {
    const uint4* wr = reinterpret_cast<const uint4*>(w + static_cast<long long>(first) * K);
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
      if (lane + u * 32 < kv) wv[u] = layer_stream_load(wr + lane + u * 32);
  }

#if __CUDA_ARCH__ >= 900
  if (kOverlap) {
    // Everything the previous grid writes (x, the residual, memory y may reuse) is touched only after it ended.
    asm volatile("griddepcontrol.wait;" ::: "memory");
    asm volatile("griddepcontrol.launch_dependents;" :::);
  }
#endif
  for (int m = 0; m < M; ++m) {
    const storage_t* xr = x + m * x_rs;
    storage_t* out = xs + m * K;
    if (!ln) {
      for (int k = threadIdx.x; k < K; k += kWarps * 32) out[k] = xr[k];
      continue;
    }
    float s = 0.f;
    for (int k = threadIdx.x; k < K; k += kWarps * 32) s += to_float(xr[k]);
    const float mean = layer_block_sum(s, red) / K;
    float q = 0.f;
    for (int k = threadIdx.x; k < K; k += kWarps * 32) {
      const float d = to_float(xr[k]) - mean;
      q += d * d;
    }
    const float rstd = rsqrtf(layer_block_sum(q, red) / K + eps);
    for (int k = threadIdx.x; k < K; k += kWarps * 32) {
      float v = (to_float(xr[k]) - mean) * rstd;
      if (ln_w) v = v * to_float(ln_w[k]);
      if (ln_b) v = v + to_float(ln_b[k]);
      out[k] = to_storage(v);
    }
  }
  __syncthreads();

  for (int n = first; n < N; n += stride) {
    const uint4* wr = reinterpret_cast<const uint4*>(w + static_cast<long long>(n) * K);
    float acc[kRows];
#pragma unroll
    for (int m = 0; m < kRows; ++m) acc[m] = 0.f;
    for (int i = lane; i < kv; i += 32 * kUnroll) {
      if (n != first || i != lane) {  // the first chunk of the first column was loaded before the prologue
#pragma unroll
        for (int u = 0; u < kUnroll; ++u)
          if (i + u * 32 < kv) wv[u] = layer_stream_load(wr + i + u * 32);
      }
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int j = i + u * 32;
        if (j >= kv) break;
        const storage_t* we = reinterpret_cast<const storage_t*>(&wv[u]);
#pragma unroll
        for (int m = 0; m < kRows; ++m) {
          if (m >= M) break;
          const uint4 xv = reinterpret_cast<const uint4*>(xs + m * K)[j];
          const storage_t* xe = reinterpret_cast<const storage_t*>(&xv);
#pragma unroll
          for (int e = 0; e < kVec; ++e) acc[m] = fmaf(to_float(xe[e]), to_float(we[e]), acc[m]);
        }
      }
    }
#pragma unroll
    for (int m = 0; m < kRows; ++m) acc[m] = layer_warp_sum(acc[m]);
#pragma unroll
    for (int m = 0; m < kRows; ++m) {
      if (m >= M || lane != m) continue;
      float v = acc[m];
      if (bias) v = v + to_float(bias[n]);
      storage_t h = to_storage(v);
      if (act) h = to_storage(activation(act, to_float(h)));
      if (res) h = to_storage(to_float(res[m * res_rs + n]) + to_float(h));
      y[m * y_rs + n] = h;
    }
  }
}
