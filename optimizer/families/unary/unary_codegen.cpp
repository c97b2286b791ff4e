/// @brief Source generation for the unary family: one kernel template, specialised per signature (sizes and
/// strides are compile-time constants) and per technique (vector width, block size, unroll, grid shape).
#include <sstream>

#include "codegen_common.h"
#include "unary_family.h"

namespace cudal1::optimizer::unary {

KernelSource generate_unary(const UnaryShape& s, int vec, int block, int unroll, bool grid_stride) {
  const bool wide = s.space.numel > (int64_t{1} << 31) - 1 ||
                    [&] {
                      int64_t extent = 0;
                      for (size_t d = 0; d < s.space.sizes.size(); ++d)
                        extent += (s.space.sizes[d] - 1) * s.space.in_strides[d];
                      return extent > (int64_t{1} << 31) - 1;
                    }();
  std::ostringstream k;
  k << "// cudal1 unary_elementwise: " << s.math << " " << c10::toString(s.dtype) << " vec=" << vec
    << " block=" << block << " unroll=" << unroll << " grid_stride=" << grid_stride << "\n";
  k << "typedef " << (wide ? "long long" : "int") << " index_t;\n";
  k << dtype_prelude(s.dtype);
  k << "__device__ __forceinline__ float rcp_approx(float a) {\n"
       "  float r; asm(\"rcp.approx.ftz.f32 %0, %1;\" : \"=f\"(r) : \"f\"(a)); return r;\n}\n"
       "__device__ __forceinline__ float ex2_approx(float a) {\n"
       "  float r; asm(\"ex2.approx.ftz.f32 %0, %1;\" : \"=f\"(r) : \"f\"(a)); return r;\n}\n";
  k << "__device__ __forceinline__ float op(float x) {\n" << unary_math(s.math, s.dtype) << "}\n";
  k << "#define VEC " << vec << "\n#define BLOCK " << block << "\n#define UNROLL " << unroll << "\n";
  k << "static constexpr index_t N = " << s.space.numel << ";\n";
  k << "struct __align__(VEC * sizeof(storage_t)) vec_t { storage_t v[VEC]; };\n";
  const bool pick = s.pick == 2 && vec > 1;  // Note [Unary picked vectors]
  if (pick) k << "struct __align__(2 * VEC * sizeof(storage_t)) wide_t { storage_t v[2 * VEC]; };\n";
  // Input offset of output element j (output is dense, written in memory order).
  k << "__device__ __forceinline__ index_t in_offset(index_t j) {\n";
  if (s.space.linear()) {
    k << "  return j;\n";
  } else {
    k << "  index_t off = 0, q = j;\n";
    const size_t nd = s.space.sizes.size();
    for (size_t d = 0; d < nd; ++d) {
      const int64_t size = s.space.sizes[d], stride = s.space.in_strides[d];
      if (d + 1 < nd) {
        k << "  off += (q % (index_t)" << size << ") * (index_t)" << stride << "; q /= (index_t)" << size << ";\n";
      } else {
        k << "  off += q * (index_t)" << stride << ";\n";
      }
    }
    k << "  return off;\n";
  }
  k << "}\n";
  k << "extern \"C\" __global__ void __launch_bounds__(BLOCK)\n"
       "cudal1_unary(const storage_t* __restrict__ in, storage_t* __restrict__ out) {\n"
       "  constexpr index_t NV = N / VEC;\n"
       "  constexpr index_t TILE = (index_t)BLOCK * UNROLL;\n"
       "  vec_t* __restrict__ vout = reinterpret_cast<vec_t*>(out);\n";
  if (grid_stride) {
    k << "  for (index_t base = (index_t)blockIdx.x * TILE; base < NV; base += (index_t)gridDim.x * TILE) {\n";
  } else {
    k << "  { const index_t base = (index_t)blockIdx.x * TILE;\n";
  }
  k << "    vec_t r[UNROLL];\n"
       "#pragma unroll\n"
       "    for (int u = 0; u < UNROLL; ++u) {\n"
       "      const index_t i = base + (index_t)u * BLOCK + threadIdx.x;\n"
       << (pick ? "      if (i < NV) {\n"
                  "        const wide_t w = *reinterpret_cast<const wide_t*>(in + in_offset(i * VEC));\n"
                  "#pragma unroll\n"
                  "        for (int e = 0; e < VEC; ++e) r[u].v[e] = w.v[2 * e];\n"
                  "      }\n"
                : "      if (i < NV) r[u] = *reinterpret_cast<const vec_t*>(in + in_offset(i * VEC));\n")
       << "    }\n"
       "#pragma unroll\n"
       "    for (int u = 0; u < UNROLL; ++u) {\n"
       "      const index_t i = base + (index_t)u * BLOCK + threadIdx.x;\n"
       "      if (i < NV) {\n"
       "        vec_t o;\n"
       "#pragma unroll\n"
       "        for (int e = 0; e < VEC; ++e) o.v[e] = to_storage(op(to_float(r[u].v[e])));\n"
       "        vout[i] = o;\n"
       "      }\n"
       "    }\n"
       "  }\n";
  // Tail (only possible when VEC does not divide N, i.e. the linear layout): block 0 finishes it.
  k << "  if (N % VEC != 0 && blockIdx.x == 0)\n"
       "    for (index_t j = NV * VEC + threadIdx.x; j < N; j += BLOCK)"
       " out[j] = to_storage(op(to_float(in[in_offset(j)])));\n"
       "}\n";
  return KernelSource{k.str(), "cudal1_unary"};
}

}  // namespace cudal1::optimizer::unary
