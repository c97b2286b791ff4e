/// @brief Source generation for the unary family: a head specialised per signature (the dtype, the op's formula
/// from the op table, sizes and strides as typed constants) and per technique (vector width, block size, unroll,
/// grid shape), then the kernel of unary_kernel.cuh (embedded at build time).
#include <sstream>

#include "codegen_common.h"
#include "unary_cuda.h"
#include "unary_family.h"

namespace cudal1::optimizer::unary {

// Note [Unary constants]
// The head gives the kernel its knobs and layout as enumerators (Note [Device constants]), and the element count
// as `static constexpr index_t N`: NVRTC emits that variable as a global of the module (symbol N, .nv.global.init
// data), so every cubin of the family holds it, and an enumerator would change them all.
KernelSource generate_unary(const UnaryShape& s, int vec, int block, int unroll, bool grid_stride) {
  const bool wide = s.space.numel > (int64_t{1} << 31) - 1 ||
                    [&] {
                      int64_t extent = 0;
                      for (size_t d = 0; d < s.space.sizes.size(); ++d)
                        extent += (s.space.sizes[d] - 1) * s.space.in_strides[d];
                      return extent > (int64_t{1} << 31) - 1;
                    }();
  const bool pick = s.pick == 2 && vec > 1;  // Note [Unary picked vectors]
  const size_t dims = s.space.linear() ? 0 : s.space.sizes.size();
  std::ostringstream k;
  k << "// cudal1 unary_elementwise: " << s.math << " " << c10::toString(s.dtype) << " vec=" << vec
    << " block=" << block << " unroll=" << unroll << " grid_stride=" << grid_stride << "\n";
  k << "typedef " << (wide ? "long long" : "int") << " index_t;\n";
  k << dtype_prelude(s.dtype) << device_sources::kUnaryApprox;
  k << "__device__ __forceinline__ float op(float x) {\n" << unary_math(s.math, s.dtype) << "}\n";
  k << "static constexpr index_t N = " << s.space.numel << ";\n";
  k << std::boolalpha << "enum : int { kVec = " << vec << ", kBlock = " << block << ", kUnroll = " << unroll
    << ", kDims = " << dims << " };\nenum : bool { kGridStride = " << grid_stride << ", kPick = " << pick << " };\n";
  k << "template <int d> struct Dim;\n";
  for (size_t d = 0; d < dims; ++d)
    k << "template <> struct Dim<" << d << "> { enum : index_t { kSize = " << s.space.sizes[d]
      << ", kStride = " << s.space.in_strides[d] << " }; };\n";
  k << device_sources::kUnaryKernel;
  return KernelSource{k.str(), "cudal1_unary"};
}

}  // namespace cudal1::optimizer::unary
