// @brief Device code every pooling kernel may call (Note [Pooling]): ATen's window scans and divisor, the exact
// division of Note [Pooling exact division], 16-bit pairs, vector loads and stores.
//
// Compiled by NVRTC after the generated head of pool_codegen.cpp: index_t, storage_t, to_float, to_storage
// (dtype_prelude), div_rn (exact_divide_source) and the signature's typed constants in namespace pool
// (pool_constants, Note [Device constants]). The technique's constants and kernel follow (Note [Pooling
// techniques]); its kernel calls these functions from within namespace pool.

// Unroll small windows completely. A namespace-scope variable, as the kernels' `#pragma unroll WU` reads it: NVRTC
// emits it as a module global (a symbol every pooling cubin holds), so it stays one.
[[maybe_unused]] static constexpr int WU = pool::kKh * pool::kKw <= 256 ? pool::kKh * pool::kKw : 1;

namespace pool {

// -Inf, where a running maximum starts and out-of-image cells of a max window stand.
__device__ __forceinline__ float neg_inf() { return __int_as_float(0xff800000u); }
// NV int64 indices stored as one vector (16-byte aligned from two on).
template <int NV>
struct __align__(NV >= 2 ? 16 : 8) ivec_t { long long v[NV]; };
// ATen's first in-image position of a window starting at s (dilation steps from a negative start).
__device__ __forceinline__ int first_in(int s, int d) { return s >= 0 ? s : s + ((-s + d - 1) / d) * d; }
// Max in ATen's scan order: greater or NaN replaces, so the first maximum and the last NaN win.
// `mi` (null without indices) receives the flat in-plane index of the winner.
template <class Get, class Ok>
__device__ __forceinline__ void max_window(int hs, int ws, Get get, Ok ok, float& m, int* mi) {
  m = neg_inf();
  int i_best = kChannelsLast ? 0 : first_in(hs, kDlh) * kW + first_in(ws, kDlw);
#pragma unroll WU
  for (int ij = 0; ij < kKh * kKw; ++ij) {
    const int i = ij / kKw, j = ij % kKw;
    if (ok(i, j)) {
      const float v = get(i, j);
      if (v > m || v != v) { m = v; i_best = (hs + i * kDlh) * kW + ws + j * kDlw; }
    }
  }
  if (mi) *mi = i_best;
}
// ATen's divisor for the window at (hs, ws): divisor_override, else the padded or the in-image extent.
__device__ __forceinline__ int avg_divisor(int hs, int ws, bool* empty) {
  int he = min(hs + kKh, kH + kPh), we = min(ws + kKw, kW + kPw);
  const int pool_size = (he - hs) * (we - ws);
  hs = max(hs, 0); ws = max(ws, 0); he = min(he, kH); we = min(we, kW);
  *empty = hs >= he || ws >= we;
  return kDivisor ? kDivisor : (kCountPad ? pool_size : (he - hs) * (we - ws));
}
// q[e] = s[e] / d rounded to nearest (ATen's sum / divisor) from y = RN(1 / d), without the IEEE division
// sequence (Note [Pooling exact division]): codegen_common's div_rn, one Markstein correction each (a sum of +0
// gives +0 or -0 as s / d does); when a sum is too small or large (NaN and Inf included) all NV take the
// division itself (one rarely taken branch per NV outputs).
// q may be s (the sums are copied first).
template <int NV>
__device__ __forceinline__ void div_rn_n(float* q, const float* s, float d, float y) {
  float a[NV];
  bool fast = true;
#pragma unroll
  for (int e = 0; e < NV; ++e) {
    a[e] = s[e];
    fast &= (fabsf(a[e]) > 8.67361738e-19f /* 2^-60 */ || a[e] == 0.f) && fabsf(a[e]) < 1.26765060e+30f /* 2^100 */;
  }
#pragma unroll
  for (int e = 0; e < NV; ++e) q[e] = div_rn(a[e], d, y);
  if (!fast) {
#pragma unroll
    for (int e = 0; e < NV; ++e) q[e] = a[e] / d;
  }
}
// ATen's average of the window at (hs, ws) with in-image sum s: the signature's constant divisor (kConstDiv,
// 0 where it varies), else the interior windows' (kInnerDiv: every cell in the image), else per window.
__device__ __forceinline__ float avg_result(float s, int hs, int ws) {
  float q;
  if (kConstDiv) {
    div_rn_n<1>(&q, &s, (float)kConstDiv, 1.f / (float)kConstDiv);
  } else if (hs >= 0 && ws >= 0 && hs + kKh <= kH && ws + kKw <= kW) {
    div_rn_n<1>(&q, &s, (float)kInnerDiv, 1.f / (float)kInnerDiv);
  } else {
    bool empty;
    const int div = avg_divisor(hs, ws, &empty);
    q = empty ? 0.f : s / div;
  }
  return q;
}
// fp32 sum of the in-image part in scan order over ATen's divisor; 0 for a window wholly in the padding.
// ZERO_FILL: cells outside the image read +0, and adding +0 equals skipping the cell (the sum starts at +0
// and is never -0), so no test is needed.
template <bool ZERO_FILL, class Get, class Ok>
__device__ __forceinline__ float avg_window(int hs, int ws, Get get, Ok ok) {
  float s = 0.f;
#pragma unroll WU
  for (int ij = 0; ij < kKh * kKw; ++ij) {
    const int i = ij / kKw, j = ij % kKw;
    if (ZERO_FILL || ok(i, j)) s += get(i, j);
  }
  return avg_result(s, hs, ws);
}
// The two 16-bit elements of w (a at the lower address) as floats.
__device__ __forceinline__ void unpack2(unsigned w, float& a, float& b) {
  if constexpr (kStorageBf16) {
    a = __uint_as_float(w << 16);
    b = __uint_as_float(w & 0xffff0000u);
  } else {
    asm("{.reg .b16 lo, hi;\n mov.b32 {lo, hi}, %2;\n cvt.f32.f16 %0, lo;\n cvt.f32.f16 %1, hi;\n}" : "=f"(a), "=f"(b) : "r"(w));
  }
}
// Packs a and b (a at the lower address) into the storage of two 16-bit elements, rounded to nearest even.
__device__ __forceinline__ unsigned pack2(float a, float b) {
  if constexpr (kStorageBits == 16) {
#if __CUDA_ARCH__ >= 800
    unsigned r;
    if constexpr (kStorageBf16)
      asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(b), "f"(a));
    else
      asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(b), "f"(a));
    return r;
#else
    return (unsigned)to_storage(a) | ((unsigned)to_storage(b) << 16);
#endif
  } else {
    (void)a;
    (void)b;
    return 0u;  // fp32: store_vec never packs
  }
}
// Loads NV elements at p (aligned to NV elements) as one vector, as floats (16-bit pairs unpacked by word);
// where ok is false nothing is read and every value is +0.
template <int NV>
__device__ __forceinline__ void load_vec(const storage_t* __restrict__ p, float* v, bool ok = true) {
  if constexpr (kStorageBits == 16 && NV >= 2) {
    struct __align__(NV * 2) w_t { unsigned x[NV / 2]; } w = {};
    if (ok) w = *reinterpret_cast<const w_t*>(p);
#pragma unroll
    for (int e = 0; e < NV / 2; ++e) unpack2(w.x[e], v[2 * e], v[2 * e + 1]);
  } else {
    struct __align__(NV * sizeof(storage_t)) sv_t { storage_t x[NV]; } o = {};
    if (ok) o = *reinterpret_cast<const sv_t*>(p);
#pragma unroll
    for (int e = 0; e < NV; ++e) v[e] = to_float(o.x[e]);
  }
}
// Stores NV converted values at p (aligned to NV elements) as one vector: NVVM splits a struct of 16-bit
// elements built from conversions into scalar 2-byte stores, so 16-bit values are packed in pairs first.
template <int NV>
__device__ __forceinline__ void store_vec(storage_t* __restrict__ p, const float* v) {
  if constexpr (kStorageBits == 16 && NV >= 2) {
    unsigned w[NV / 2];
#pragma unroll
    for (int e = 0; e < NV / 2; ++e) w[e] = pack2(v[2 * e], v[2 * e + 1]);
    if constexpr (NV == 8)
      asm volatile("st.global.v4.b32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(w[0]), "r"(w[1]), "r"(w[2]), "r"(w[3]) : "memory");
    else if constexpr (NV == 4)
      asm volatile("st.global.v2.b32 [%0], {%1, %2};" ::"l"(p), "r"(w[0]), "r"(w[1]) : "memory");
    else
      *reinterpret_cast<unsigned*>(p) = w[0];
  } else {
    struct __align__(NV * sizeof(storage_t)) sv_t { storage_t x[NV]; } o;
#pragma unroll
    for (int e = 0; e < NV; ++e) o.x[e] = to_storage(v[e]);
    *reinterpret_cast<sv_t*>(p) = o;
  }
}

}  // namespace pool
