/// @brief Shared source fragments (see codegen_common.h).
#include "codegen_common.h"

#include <cstdint>
#include <cstring>
#include <sstream>

namespace cudal1::optimizer {

std::string float_bits_hex(float f) {
  uint32_t b = 0;
  std::memcpy(&b, &f, sizeof b);
  std::ostringstream o;
  o << "0x" << std::hex << b << "u";
  return o.str();
}

const char* dtype_prelude(c10::ScalarType t) {
  switch (t) {
    case c10::ScalarType::Float:
      return "typedef float storage_t;\n"
             "__device__ __forceinline__ float to_float(storage_t v) { return v; }\n"
             "__device__ __forceinline__ storage_t to_storage(float f) { return f; }\n";
    case c10::ScalarType::Half:
      return "typedef unsigned short storage_t;\n"
             "__device__ __forceinline__ float to_float(storage_t h) {\n"
             "  float f; asm(\"cvt.f32.f16 %0, %1;\" : \"=f\"(f) : \"h\"(h)); return f; }\n"
             "__device__ __forceinline__ storage_t to_storage(float f) {\n"
             "  storage_t h; asm(\"cvt.rn.f16.f32 %0, %1;\" : \"=h\"(h) : \"f\"(f)); return h; }\n";
    case c10::ScalarType::BFloat16:
      return "typedef unsigned short storage_t;\n"
             "__device__ __forceinline__ float to_float(storage_t h) {\n"
             "  return __uint_as_float(static_cast<unsigned int>(h) << 16); }\n"
             "__device__ __forceinline__ storage_t to_storage(float f) {\n"
             "  storage_t h; asm(\"cvt.rn.bf16.f32 %0, %1;\" : \"=h\"(h) : \"f\"(f)); return h; }\n";
    default:
      return "";
  }
}

const char* mixed_dtype_prelude() {
  return R"(__device__ __forceinline__ float cvt_f32(float v) { return v; }
__device__ __forceinline__ float cvt_f16(unsigned short h) {
  float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h)); return f; }
__device__ __forceinline__ float cvt_bf16(unsigned short h) { return __uint_as_float(((unsigned int)h) << 16); }
__device__ __forceinline__ float cvt_f64(double v) { return (float)v; }
__device__ __forceinline__ float cvt_i64(long long v) { return (float)v; }
__device__ __forceinline__ float cvt_i32(int v) { return (float)v; }
__device__ __forceinline__ float cvt_b8(unsigned char v) { return v != 0 ? 1.f : 0.f; }
__device__ __forceinline__ float st_f32(float f) { return f; }
__device__ __forceinline__ unsigned short st_f16(float f) {
  unsigned short h; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h; }
__device__ __forceinline__ unsigned short st_bf16(float f) {
  unsigned short h; asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h; }
)";
}

const char* mixed_storage_type(c10::ScalarType t) {
  switch (t) {
    case c10::ScalarType::Float: return "float";
    case c10::ScalarType::Half:
    case c10::ScalarType::BFloat16: return "unsigned short";
    case c10::ScalarType::Double: return "double";
    case c10::ScalarType::Long: return "long long";
    case c10::ScalarType::Int: return "int";
    case c10::ScalarType::Bool: return "unsigned char";
    default: return "";
  }
}

std::vector<Variant> elementwise_space(const ElementwiseKnobs& k, int max_vec) {
  std::vector<Variant> out;
  for (int vec : k.vecs) {
    if (vec > max_vec) continue;
    for (int block : k.blocks)
      for (int unroll : k.unrolls)
        for (int grid : {0, 1})
          out.push_back(Variant{{{"vec", vec}, {"block", block}, {"unroll", unroll}, {"grid", grid}}});
  }
  return out;
}

std::vector<float> elementwise_knob_features(const ElementwiseKnobs& k, const Variant& v) {
  std::vector<float> f;
  for (int x : k.vecs) f.push_back(v.get("vec") == x);
  for (int x : k.blocks) f.push_back(v.get("block") == x);
  for (int x : k.unrolls) f.push_back(v.get("unroll") == x);
  f.push_back(v.get("grid") == 0);
  f.push_back(v.get("grid") == 1);
  return f;
}

std::vector<float> crossed_features(const std::vector<float>& ctx, const std::vector<float>& knobs) {
  std::vector<float> f;
  f.reserve(ctx.size() * knobs.size());
  for (float c : ctx)
    for (float k : knobs) f.push_back(c * k);
  return f;
}

const char* exact_divide_source() {
  return R"(__device__ __forceinline__ float div_rn(float a, float b, float rb) {
  const float q = __fmul_rn(a, rb);  // rounded on its own: never contracted into the correction
  return fmaf(fmaf(-q, b, a), rb, q);
}
)";
}

const char* cluster_primitives_source() {
  return R"(__device__ __forceinline__ unsigned cluster_rank() {
  unsigned r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return r;
}
__device__ __forceinline__ void cluster_arrive() {
  asm volatile("barrier.cluster.arrive.release.aligned;" ::: "memory");
}
__device__ __forceinline__ void cluster_wait() {
  asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory");
}
/// An arrival that orders no memory operation: for threads that published nothing the others read, or whose
/// remote reads have completed (their values already used).
__device__ __forceinline__ void cluster_arrive_relaxed() {
  asm volatile("barrier.cluster.arrive.relaxed.aligned;" ::: "memory");
}
__device__ __forceinline__ void cluster_sync() { cluster_arrive(); cluster_wait(); }
__device__ __forceinline__ float load_remote(const float* p, unsigned rank) {
  const unsigned a = (unsigned)__cvta_generic_to_shared(p);
  unsigned ra;
  float v;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(ra) : "r"(a), "r"(rank));
  asm volatile("ld.shared::cluster.f32 %0, [%1];" : "=f"(v) : "r"(ra) : "memory");
  return v;
}
)";
}

const char* async_copy_source() {
  return R"(// Note [Async copies] (codegen_common.h): cp.async from global into shared memory, and its groups.
template <int BYTES>
__device__ __forceinline__ void cp_async(unsigned sa, const void* g) {
  static_assert(BYTES == 16 || BYTES == 8 || BYTES == 4, "cp.async copies 4, 8 or 16 bytes");
  if (BYTES == 16)  // .cg (L2 only) takes 16 bytes only
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(sa), "l"(g) : "memory");
  else
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2;" ::"r"(sa), "l"(g), "n"(BYTES) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int N>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory"); }
__device__ __forceinline__ void cp_async_wait_all() { asm volatile("cp.async.wait_all;" ::: "memory"); }
#ifdef VEC_BYTES
/// Starts copying *g to *s: cp.async where the vector is 4, 8 or 16 bytes (complete after copy_wait), a plain
/// load and store for 2-byte vectors (copy_commit and copy_wait then do nothing).
__device__ __forceinline__ void copy_in(vec_t* s, const vec_t* g) {
#if VEC_BYTES >= 4
  const unsigned sa = (unsigned)__cvta_generic_to_shared(s);
  unsigned long long ga;
  asm("cvta.to.global.u64 %0, %1;" : "=l"(ga) : "l"((unsigned long long)g));
  cp_async<VEC_BYTES>(sa, (const void*)ga);
#else
  *s = *g;
#endif
}
__device__ __forceinline__ void copy_commit() {
#if VEC_BYTES >= 4
  cp_async_commit();
#endif
}
/// Waits until at most N of this thread's committed copy groups are pending.
template <int N>
__device__ __forceinline__ void copy_wait() {
#if VEC_BYTES >= 4
  cp_async_wait<N>();
#endif
}
#endif
)";
}

const char* welford_source() {
  return R"(struct Welford { float n, mean, m2; };
__device__ __forceinline__ Welford wf_combine(Welford a, Welford b) {
  if (b.n == 0.f) return a;
  if (a.n == 0.f) return b;
  const float n = a.n + b.n, f = b.n / n, d = b.mean - a.mean;
  return Welford{n, a.mean + d * f, a.m2 + b.m2 + d * d * a.n * f};
}
)";
}

const char* row_reduce_source() {
  return R"(#ifndef NEG_INF
#define NEG_INF __int_as_float(0xff800000u)
#endif
#ifndef ROW_BARRIER  // a kernel whose reducing threads are not the whole block names its own barrier
#define ROW_BARRIER() __syncthreads()
#endif
__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
#if TPR == 32
__device__ __forceinline__ float row_max(float v, float*) { return warp_max(v); }
__device__ __forceinline__ float row_sum(float v, float*) { return warp_sum(v); }
#else
__device__ __forceinline__ float row_max(float v, float* red) {
  v = warp_max(v);
  const int w = threadIdx.x / 32, l = threadIdx.x % 32;
  if (l == 0) red[w] = v;
  ROW_BARRIER();
  v = warp_max(l < BLOCK / 32 ? red[l] : NEG_INF);
  ROW_BARRIER();
  return v;
}
__device__ __forceinline__ float row_sum(float v, float* red) {
  v = warp_sum(v);
  const int w = threadIdx.x / 32, l = threadIdx.x % 32;
  if (l == 0) red[w] = v;
  ROW_BARRIER();
  v = warp_sum(l < BLOCK / 32 ? red[l] : 0.f);
  ROW_BARRIER();
  return v;
}
#endif
)";
}

}  // namespace cudal1::optimizer
