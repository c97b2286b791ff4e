/// @brief Source generation for the batch-norm family (Note [Batch norm inference]): one kernel, three ways of
/// walking the flat view of a dense input, every element computed as ((x - mean) * w) * invstd + b in fp32.
#include <cstring>
#include <sstream>

#include "batchnorm_family.h"
#include "codegen_common.h"
#include "cudal1/dispatcher/signature_of.h"

namespace cudal1::optimizer::batchnorm {

int64_t bn_grid(const BnShape& s, const BnKnobs& k) {
  if (k.mode == 1) return s.planes();
  if (k.mode == 2) {
    const int64_t slots = (s.rows() + k.rpt - 1) / k.rpt;
    return (slots * (s.channels / k.vec) + k.block - 1) / k.block;
  }
  const int64_t nv = s.numel / k.vec;
  return (nv + k.block - 1) / k.block;
}

namespace {

const char* kBody = R"(struct __align__(VEC * sizeof(storage_t)) vec_t { storage_t v[VEC]; };
/// Channel c's mean, weight, invstd and bias (Note [Batch norm inference]).
__device__ __forceinline__ void channel(index_t c, const param_t* __restrict__ w, const param_t* __restrict__ b,
                                        const param_t* __restrict__ rm, const param_t* __restrict__ rv, float* m,
                                        float* ww, float* inv, float* bb) {
  *m = PCVT(rm[c]);
  *inv = rsqrtf(PCVT(rv[c]) + EPS);
#if HAS_W
  *ww = PCVT(w[c]);
#else
  *ww = 1.f;
#endif
#if HAS_B
  *bb = PCVT(b[c]);
#else
  *bb = 0.f;
#endif
}
__device__ __forceinline__ storage_t bn(storage_t x, float m, float w, float inv, float b) {
  return to_storage((to_float(x) - m) * w * inv + b);
}
#define TID ((index_t)blockIdx.x * BLOCK + threadIdx.x)
#define NTHREADS ((index_t)gridDim.x * BLOCK)
extern "C" __global__ void __launch_bounds__(BLOCK)
cudal1_bn(const storage_t* __restrict__ x, const param_t* __restrict__ w, const param_t* __restrict__ b,
          const param_t* __restrict__ rm, const param_t* __restrict__ rv, storage_t* __restrict__ y,
          float* __restrict__ save_mean, float* __restrict__ save_invstd) {
#if STATS
  for (index_t c = TID; c < C; c += NTHREADS) {
    save_mean[c] = PCVT(rm[c]);
    save_invstd[c] = rsqrtf(PCVT(rv[c]) + EPS);
  }
#endif
  const vec_t* __restrict__ xv = reinterpret_cast<const vec_t*>(x);
  vec_t* __restrict__ yv = reinterpret_cast<vec_t*>(y);
#if MODE == 0
  for (index_t v = TID; v < NUMEL / VEC; v += NTHREADS) {
    const vec_t t = xv[v];
    vec_t o;
#if INNER_ONE  // VEC consecutive channels (C % VEC == 0)
    const index_t c0 = (v * VEC) % C;
#pragma unroll
    for (int e = 0; e < VEC; ++e) {
      float m, ww, inv, bb;
      channel(c0 + e, w, b, rm, rv, &m, &ww, &inv, &bb);
      o.v[e] = bn(t.v[e], m, ww, inv, bb);
    }
#else  // one channel per vector (INNER % VEC == 0)
    float m, ww, inv, bb;
    channel((v * VEC / INNER) % C, w, b, rm, rv, &m, &ww, &inv, &bb);
#pragma unroll
    for (int e = 0; e < VEC; ++e) o.v[e] = bn(t.v[e], m, ww, inv, bb);
#endif
    yv[v] = o;
  }
#elif MODE == 1
  for (index_t p = blockIdx.x; p < NUMEL / INNER; p += gridDim.x) {
    float m, ww, inv, bb;
    channel(p % C, w, b, rm, rv, &m, &ww, &inv, &bb);
    const vec_t* __restrict__ xp = xv + p * (INNER / VEC);
    vec_t* __restrict__ yp = yv + p * (INNER / VEC);
    for (index_t j = threadIdx.x; j < INNER / VEC; j += BLOCK) {
      const vec_t t = xp[j];
      vec_t o;
#pragma unroll
      for (int e = 0; e < VEC; ++e) o.v[e] = bn(t.v[e], m, ww, inv, bb);
      yp[j] = o;
    }
  }
#else  // MODE 2: thread = VEC consecutive channels, rows r0, r0 + SLOTS, ...
  const index_t cv = TID % (C / VEC), r0 = TID / (C / VEC);
  if (r0 >= SLOTS) return;
  float m[VEC], ww[VEC], inv[VEC], bb[VEC];
#pragma unroll
  for (int e = 0; e < VEC; ++e) channel(cv * VEC + e, w, b, rm, rv, &m[e], &ww[e], &inv[e], &bb[e]);
  for (index_t r = r0; r < NUMEL / C; r += SLOTS) {
    const index_t i = r * (C / VEC) + cv;
    const vec_t t = xv[i];
    vec_t o;
#pragma unroll
    for (int e = 0; e < VEC; ++e) o.v[e] = bn(t.v[e], m[e], ww[e], inv[e], bb[e]);
    yv[i] = o;
  }
#endif
}
)";

}  // namespace

KernelSource generate_batchnorm(const BnShape& s, const BnKnobs& k) {
  uint32_t eps_bits = 0;
  std::memcpy(&eps_bits, &s.eps, sizeof eps_bits);
  std::ostringstream o;
  o << "// cudal1 batchnorm: " << (s.cudnn ? "cudnn" : "native") << " " << c10::toString(s.dtype) << " params "
    << c10::toString(s.param_dtype) << " numel=" << s.numel << " C=" << s.channels << " inner=" << s.inner
    << " mode=" << k.mode << " vec=" << k.vec << " block=" << k.block << " rpt=" << k.rpt << "\n";
  o << "typedef long long index_t;\n" << dtype_prelude(s.dtype) << mixed_dtype_prelude();
  o << "typedef " << mixed_storage_type(s.param_dtype) << " param_t;\n#define PCVT cvt_"
    << dispatcher::dtype_short_name(s.param_dtype) << "\n";
  o << "#define VEC " << k.vec << "\n#define BLOCK " << k.block << "\n#define MODE " << k.mode
    << "\n#define HAS_W " << (s.has_weight ? 1 : 0) << "\n#define HAS_B " << (s.has_bias ? 1 : 0)
    << "\n#define STATS " << (s.cudnn ? 0 : 1) << "\n#define INNER_ONE " << (s.inner == 1 ? 1 : 0) << "\n";
  o << "#define EPS __int_as_float(0x" << std::hex << eps_bits << std::dec << "u)\n";
  const int64_t slots = (s.rows() + k.rpt - 1) / k.rpt;
  o << "#define NUMEL ((index_t)" << s.numel << "LL)\n#define C ((index_t)" << s.channels
    << "LL)\n#define INNER ((index_t)" << s.inner << "LL)\n#define SLOTS ((index_t)" << slots << "LL)\n";
  o << kBody;
  return KernelSource{o.str(), "cudal1_bn"};
}

}  // namespace cudal1::optimizer::batchnorm
