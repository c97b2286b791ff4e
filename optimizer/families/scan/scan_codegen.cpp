/// @brief Source generation for the scan family (Note [Scans]). Every variant is one entry point
/// cudal1_scan(in, out, ws, phase); the input is read through in_base(outer, inner) + k * SD with the
/// signature's sizes and strides as constants, the output is written contiguously as [OUTER, N, INNER].
#include <sstream>
#include <string>

#include "codegen_common.h"
#include "scan_family.h"

namespace cudal1::optimizer::scan {
namespace {

/// `in_base(o, i)`: the input offset of outer index `o`, inner index `i`, scan index 0.
std::string in_base_source(const ScanShape& s) {
  std::ostringstream k;
  k << "__device__ __forceinline__ index_t in_base(index_t o, index_t i) {\n  index_t off = 0;\n";
  const int64_t nd = static_cast<int64_t>(s.sizes.size());
  for (int64_t d = nd - 1; d > s.dim; --d)
    if (s.sizes[d] > 1)
      k << "  off += (i % " << s.sizes[d] << ") * " << s.in_strides[d] << "; i /= " << s.sizes[d] << ";\n";
  for (int64_t d = s.dim - 1; d >= 0; --d)
    if (s.sizes[d] > 1)
      k << "  off += (o % " << s.sizes[d] << ") * " << s.in_strides[d] << "; o /= " << s.sizes[d] << ";\n";
  k << "  return off;\n}\n";
  return k.str();
}

/// Loads, stores and scans shared by the row techniques (VEC elements per thread, fp32 combine).
const char* row_helpers() {
  return R"(__device__ __forceinline__ void load_row(const storage_t* x, index_t j, index_t lim, float* v) {
#if VEC > 1
  if (j < lim) {
    const vec_t t = *reinterpret_cast<const vec_t*>(x + j);
#pragma unroll
    for (int e = 0; e < VEC; ++e) v[e] = to_float(t.v[e]);
  } else {
#pragma unroll
    for (int e = 0; e < VEC; ++e) v[e] = IDENT;
  }
#else
  v[0] = j < lim ? to_float(x[j * SD]) : IDENT;
#endif
}
__device__ __forceinline__ void store_row(storage_t* y, index_t j, index_t lim, const float* v) {
  if (j >= lim) return;
#if VEC > 1
  vec_t t;
#pragma unroll
  for (int e = 0; e < VEC; ++e) t.v[e] = to_storage(v[e]);
  *reinterpret_cast<vec_t*>(y + j) = t;
#else
  y[j] = to_storage(v[0]);
#endif
}
/// Inclusive scan of the thread's VEC elements in place; returns their total.
__device__ __forceinline__ float thread_scan(float* v) {
#pragma unroll
  for (int e = 1; e < VEC; ++e) v[e] = OP(v[e - 1], v[e]);
  return v[VEC - 1];
}
/// Inclusive scan over the warp's lanes.
__device__ __forceinline__ float warp_scan(float t, int lane) {
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const float u = __shfl_up_sync(FULL, t, o);
    if (lane >= o) t = OP(u, t);
  }
  return t;
}
/// Block-wide step: the prefix of everything before this thread's elements (carry included); carry advances
/// by the block's total. Every thread of the block must call it.
__device__ __forceinline__ float block_step(float t, float& carry, float* wtot) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const float incl = warp_scan(t, lane);
  if (lane == 31) wtot[warp] = incl;
  __syncthreads();
  if (warp == 0) {
    float w = lane < NW ? wtot[lane] : IDENT;
    w = warp_scan(w, lane);
    if (lane < NW) wtot[lane] = w;
  }
  __syncthreads();
  float excl = __shfl_up_sync(FULL, incl, 1);
  if (lane == 0) excl = IDENT;
  const float pre = OP(carry, OP(warp == 0 ? IDENT : wtot[warp - 1], excl));
  carry = OP(carry, wtot[NW - 1]);
  __syncthreads();
  return pre;
}
)";
}

const char* row_warp_body() {
  return R"(  const int lane = threadIdx.x & 31;
  const index_t row = (index_t)blockIdx.x * (BLOCK / 32) + threadIdx.x / 32;
  if (row >= OUTER) return;  // whole warps leave together
  const storage_t* x = in + in_base(row, 0);
  storage_t* y = out + row * N;
  float carry = IDENT;
  for (index_t base = 0; base < N; base += 32 * VEC) {
    const index_t j = base + (index_t)lane * VEC;
    float v[VEC];
    load_row(x, j, N, v);
    const float incl = warp_scan(thread_scan(v), lane);
    float excl = __shfl_up_sync(FULL, incl, 1);
    if (lane == 0) excl = IDENT;
    const float pre = OP(carry, excl);
#pragma unroll
    for (int e = 0; e < VEC; ++e) v[e] = OP(pre, v[e]);
    store_row(y, j, N, v);
    carry = OP(carry, __shfl_sync(FULL, incl, 31));
  }
)";
}

const char* row_block_body() {
  return R"(  __shared__ float wtot[32];
#if MODE == 2
  const index_t row = blockIdx.x / SPLITS;
  const index_t c = blockIdx.x % SPLITS;
  const index_t lo = c * CH, hi = lo + CH < N ? lo + CH : N;
#else
  const index_t row = blockIdx.x;
  const index_t lo = 0, hi = N;
#endif
  const storage_t* x = in + in_base(row, 0);
  storage_t* y = out + row * N;
  float carry = IDENT;
#if MODE == 2
  if (phase == 1)
    for (index_t p = 0; p < c; ++p) carry = OP(carry, ws[row * SPLITS + p]);
#endif
  for (index_t base = lo; base < hi; base += BLOCK * VEC) {
    const index_t j = base + (index_t)threadIdx.x * VEC;
    float v[VEC];
    load_row(x, j, hi, v);
    const float pre = block_step(thread_scan(v), carry, wtot);
    if (MODE == 2 && phase == 0) continue;  // totals only
#pragma unroll
    for (int e = 0; e < VEC; ++e) v[e] = OP(pre, v[e]);
    store_row(y, j, hi, v);
  }
#if MODE == 2
  if (phase == 0 && threadIdx.x == 0) ws[row * SPLITS + c] = carry;
#endif
)";
}

const char* row_exact_body() {
  return R"(  // ATen's innermost scan with Tx = 16: tiles of 32, the carry combined into the tile's first element, then a
  // Sklansky scan; every combine rounded to the dtype as at::Half / at::BFloat16 arithmetic does.
  const int lane = threadIdx.x & 31;
  const index_t row = (index_t)blockIdx.x * (BLOCK / 32) + threadIdx.x / 32;
  if (row >= OUTER) return;
  const storage_t* x = in + in_base(row, 0);
  storage_t* y = out + row * N;
  // Four tiles are loaded ahead of their (serial) scans so that the loads overlap the carry chain; tiles past
  // the row only carry the carry along and write nothing.
  float carry = IDENT;
  for (index_t base = 0; base < N; base += 32 * 4) {
    float t[4];
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      const index_t j = base + q * 32 + lane;
      t[q] = j < N ? to_float(x[j * SD]) : IDENT;
    }
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      float v = t[q];
      if (lane == 0) v = RND(OP(v, carry));
#pragma unroll
      for (int s = 1; s < 32; s <<= 1) {
        const float u = __shfl_sync(FULL, v, (lane & ~(2 * s - 1)) | (s - 1));
        if (lane & s) v = RND(OP(v, u));
      }
      const index_t j = base + q * 32 + lane;
      if (j < N) y[j] = to_storage(v);
      carry = __shfl_sync(FULL, v, 31);
    }
  }
)";
}

const char* column_body() {
  return R"(  const index_t col = ((index_t)blockIdx.x * BLOCK + threadIdx.x) * VEC;
  if (col >= LINES) return;
  const index_t o = col / INNER, i = col % INNER;
  const storage_t* x = in + in_base(o, i);
  storage_t* y = out + o * N * INNER + i;
  float acc[VEC];
#pragma unroll
  for (int e = 0; e < VEC; ++e) acc[e] = IDENT;
#if MODE == 5
  const index_t c = blockIdx.y;
  const index_t lo = c * CH, hi = lo + CH < N ? lo + CH : N;
  if (phase == 1) {
    for (index_t p = 0; p < c; ++p) {
#pragma unroll
      for (int e = 0; e < VEC; ++e) acc[e] = OP(acc[e], ws[p * LINES + col + e]);
    }
  }
#else
  const index_t lo = 0, hi = N;
#endif
#pragma unroll 4
  for (index_t k = lo; k < hi; ++k) {
    float v[VEC];
#if VEC > 1
    const vec_t t = *reinterpret_cast<const vec_t*>(x + k * SD);
#pragma unroll
    for (int e = 0; e < VEC; ++e) v[e] = to_float(t.v[e]);
#else
    v[0] = to_float(x[k * SD]);
#endif
#pragma unroll
    for (int e = 0; e < VEC; ++e) acc[e] = RND(OP(acc[e], v[e]));  // ATen: acc = op(acc, x) in the dtype
    if (MODE == 5 && phase == 0) continue;  // totals only
#if VEC > 1
    vec_t r;
#pragma unroll
    for (int e = 0; e < VEC; ++e) r.v[e] = to_storage(acc[e]);
    *reinterpret_cast<vec_t*>(y + k * INNER) = r;
#else
    y[k * INNER] = to_storage(acc[0]);
#endif
  }
#if MODE == 5
  if (phase == 0) {
#pragma unroll
    for (int e = 0; e < VEC; ++e) ws[c * LINES + col + e] = acc[e];
  }
#endif
)";
}

}  // namespace

std::string combine_source(const ScanShape& s, bool native) {
  std::ostringstream c;
  c << dtype_prelude(s.dtype) << "#define FULL 0xffffffffu\n";
  c << (s.prod ? "#define OP(a, b) ((a) * (b))\n#define IDENT 1.f\n"
               : "#define OP(a, b) ((a) + (b))\n#define IDENT 0.f\n");
  c << "#define RND(v) to_float(to_storage(v))\n";
  if (!native) {
    c << "typedef float lv_t;\n#define LV_IDENT IDENT\n"
         "__device__ __forceinline__ lv_t lv_from(storage_t v) { return to_float(v); }\n"
         "__device__ __forceinline__ storage_t lv_to(lv_t v) { return to_storage(v); }\n"
         "__device__ __forceinline__ lv_t lv_op(lv_t a, lv_t b) { return RND(OP(a, b)); }\n"
         "__device__ __forceinline__ lv_t lv_shfl(lv_t v, int src) { return __shfl_sync(FULL, v, src); }\n";
    return c.str();
  }
  // Note [Scans], native combines: RN(a + b) in the dtype is fma(a, 1, b), one rounding.
  const bool bf16 = s.dtype == c10::ScalarType::BFloat16;
  c << "typedef unsigned short lv_t;\n#define LV_IDENT ((lv_t)0)\n"
       "__device__ __forceinline__ lv_t lv_from(storage_t v) { return v; }\n"
       "__device__ __forceinline__ storage_t lv_to(lv_t v) { return v; }\n"
       "__device__ __forceinline__ lv_t lv_op(lv_t a, lv_t b) {\n"
       "  lv_t d; asm(\"fma.rn."
    << (bf16 ? "bf16" : "f16") << " %0, %1, %2, %3;\" : \"=h\"(d) : \"h\"(a), \"h\"((lv_t)"
    << (bf16 ? "0x3F80" : "0x3C00") << "), \"h\"(b)); return d; }\n"
       "__device__ __forceinline__ lv_t lv_shfl(lv_t v, int src) {\n"
       "  return (lv_t)__shfl_sync(FULL, (unsigned)v, src); }\n";
  return c.str();
}

KernelSource generate_scan(const ScanShape& s, const ScanKnobs& k) {
  std::ostringstream c;
  c << "// cudal1 scan: " << (s.prod ? "cumprod " : "cumsum ") << c10::toString(s.dtype) << " outer=" << s.outer
    << " n=" << s.n << " inner=" << s.inner << " mode=" << k.mode << " vec=" << k.vec << " block=" << k.block
    << " splits=" << k.splits << (k.native ? " native" : "")
    << (k.ahead > 1 ? " ahead=" + std::to_string(k.ahead) : "") << (k.staged_stores ? " staged-stores" : "")
    << "\n";
  c << "typedef long long index_t;\n" << combine_source(s, k.native);
  c << "#define MODE " << k.mode << "\n#define VEC " << k.vec << "\n#define BLOCK " << k.block
    << "\n#define NW (BLOCK / 32)\n#define SPLITS " << k.splits << "\n";
  // Macros rather than constants: each technique uses a different subset (no unused-variable warnings).
  c << "#define OUTER ((index_t)" << s.outer << ")\n#define N ((index_t)" << s.n << ")\n#define INNER ((index_t)"
    << s.inner << ")\n#define LINES (OUTER * INNER)\n#define SD ((index_t)" << s.sd << ")\n#define CH ((index_t)"
    << scan_chunk(s, k) << ")\n";
  if (k.mode == kColumnLookback)
    c << "#define GROUPS ((index_t)" << scan_groups(s, k) << ")\n#define CHUNKS ((index_t)" << scan_chunks(s, k)
      << ")\n";
  c << "struct __align__(VEC * sizeof(storage_t)) vec_t { storage_t v[VEC]; };\n" << in_base_source(s);
  const bool row = k.mode == kRowWarp || k.mode == kRowBlock || k.mode == kRowSplit;
  if (row) c << row_helpers();
  if (k.mode == kRowLanes)
    c << "#define STAGED " << (k.vec == 1 && s.sd == 1 ? 1 : 0) << "\n#define AHEAD " << k.ahead
      << "\n#define STAGED_STORES " << (k.staged_stores && k.vec > 1 ? 1 : 0) << "\n"
      << row_lanes_source();
  c << "extern \"C\" __global__ void __launch_bounds__(BLOCK)\n"
       "cudal1_scan(const storage_t* __restrict__ in, storage_t* __restrict__ out, float* __restrict__ ws, "
       "int phase) {\n";
  switch (k.mode) {
    case kRowWarp: c << row_warp_body(); break;
    case kRowBlock:
    case kRowSplit: c << row_block_body(); break;
    case kRowExact: c << row_exact_body(); break;
    case kRowLanes: c << row_lanes_body(); break;
    case kColumnLookback: c << column_lookback_body(); break;
    default: c << column_body(); break;
  }
  c << "}\n";
  return KernelSource{c.str(), "cudal1_scan"};
}

}  // namespace cudal1::optimizer::scan
