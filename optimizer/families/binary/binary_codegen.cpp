/// @brief Source generation for the binary family: one kernel template specialised per signature (sizes, every
/// input's strides and dtype are compile-time constants) and per technique (vector width, block, unroll, grid).
#include <sstream>

#include "codegen_common.h"
#include "cudal1/dispatcher/signature_of.h"
#include "binary_family.h"

namespace cudal1::optimizer::binary {
namespace {

bool wide_indexing(const BinaryShape& s) {
  constexpr int64_t kMax = (int64_t{1} << 31) - 1;
  if (s.numel > kMax) return true;
  for (const auto& o : s.ins) {
    if (o.kind != OperandKind::kTensor) continue;
    int64_t extent = o.storage_offset;
    for (size_t d = 0; d < s.it_sizes.size(); ++d) extent += (s.it_sizes[d] - 1) * o.it_strides[d];
    if (extent > kMax) return true;
  }
  return false;
}

/// The op on floats a, b (and the condition c for where); `recip`/`s1` name the div-by-CPU-scalar path.
std::string math_expr(const BinaryShape& s, const std::string& a, const std::string& b, const std::string& c) {
  if (s.math == "add") return a + " + alpha * " + b;
  if (s.math == "mul") return a + " * " + b;
  if (s.math == "div")
    return s.ins[1].kind == OperandKind::kTensor ? a + " / " + b
                                                 : "(recip ? " + a + " * " + b + " : " + a + " / " + b + ")";
  if (s.math == "maximum")
    return "((" + a + " != " + a + ") ? " + a + " : ((" + b + " != " + b + ") ? " + b + " : fmaxf(" + a + ", " + b +
           ")))";
  if (s.math == "minimum")
    return "((" + a + " != " + a + ") ? " + a + " : ((" + b + " != " + b + ") ? " + b + " : fminf(" + a + ", " + b +
           ")))";
  if (s.math == "pow") return "powf(" + a + ", " + b + ")";
  return "(" + c + " != 0.f ? " + a + " : " + b + ")";  // where
}

}  // namespace

KernelSource generate_binary(const BinaryShape& s, int vec, int block, int unroll, bool grid_stride) {
  const std::string out_tag = dispatcher::dtype_short_name(s.out_dtype);
  std::ostringstream k;
  k << "// cudal1 binary_elementwise: " << s.math << " -> " << c10::toString(s.out_dtype) << " vec=" << vec
    << " block=" << block << " unroll=" << unroll << " grid_stride=" << grid_stride << "\n";
  k << "typedef " << (wide_indexing(s) ? "long long" : "int") << " index_t;\n" << mixed_dtype_prelude();
  k << "template <typename T, int N> struct alignas(sizeof(T) * N) pack_t { T v[N]; };\n";
  k << "#define VEC " << vec << "\n#define BLOCK " << block << "\n#define UNROLL " << unroll << "\n";
  k << "static constexpr index_t N = " << s.numel << ";\n";
  k << "typedef " << mixed_storage_type(s.out_dtype) << " out_t;\n";
  k << "__device__ __forceinline__ float to_common(float f) { return cvt_" << out_tag << "(st_" << out_tag
    << "(f)); }\n";
  // Offsets of output element j in every tensor input.
  std::vector<size_t> tensors;
  for (size_t i = 0; i < s.ins.size(); ++i)
    if (s.ins[i].kind == OperandKind::kTensor) tensors.push_back(i);
  k << "__device__ __forceinline__ void offsets(index_t j, index_t* o) {\n  index_t q = j, d;\n";
  for (size_t t = 0; t < tensors.size(); ++t) k << "  o[" << t << "] = 0;\n";
  const size_t nd = s.it_sizes.size();
  for (size_t d = 0; d < nd; ++d) {
    if (d + 1 < nd)
      k << "  d = q % (index_t)" << s.it_sizes[d] << "; q /= (index_t)" << s.it_sizes[d] << ";\n";
    else
      k << "  d = q;\n";
    for (size_t t = 0; t < tensors.size(); ++t) {
      const int64_t st = s.ins[tensors[t]].it_strides[d];
      if (st != 0) k << "  o[" << t << "] += d * (index_t)" << st << ";\n";
    }
  }
  k << "  (void)d; (void)q;\n}\n";
  k << "extern \"C\" __global__ void __launch_bounds__(BLOCK)\n"
       "cudal1_binary(out_t* __restrict__ out, const void* p0, const void* p1, const void* p2, float v0, float v1,"
       " float v2, float alpha) {\n"
       "  (void)v0; (void)v1; (void)v2; (void)alpha; (void)p0; (void)p1; (void)p2;\n";
  // Scalar operands: read once. A CUDA 0-dim tensor converts to the common dtype first (TensorIterator's
  // dynamic cast); values passed by the host are exact in it already (a div reciprocal is passed as is).
  std::vector<std::string> name(s.ins.size());
  for (size_t i = 0; i < s.ins.size(); ++i) {
    const auto& o = s.ins[i];
    const std::string is = std::to_string(i);
    if (o.kind == OperandKind::kTensor) {
      k << "  const " << mixed_storage_type(o.dtype) << "* __restrict__ q" << is << " = (const "
        << mixed_storage_type(o.dtype) << "*)p" << is << ";\n";
      name[i] = "x" + is + "[u][e]";
      continue;
    }
    name[i] = "s" + is;
    const bool cond = s.math == "where" && i == 0;
    k << "  float s" << is << " = v" << is << ";\n";
    if (o.kind == OperandKind::kZeroDim)
      k << "  if (p" << is << ") s" << is << " = " << (cond ? "" : "to_common(") << "cvt_"
        << dispatcher::dtype_short_name(o.dtype) << "(*(const " << mixed_storage_type(o.dtype) << "*)p" << is << ")"
        << (cond ? "" : ")") << ";\n";
  }
  if (s.math == "div" && s.ins[1].kind != OperandKind::kTensor) k << "  const bool recip = p1 == 0;\n";
  const bool where = s.math == "where";
  const std::string expr = math_expr(s, name[where ? 1 : 0], name[where ? 2 : 1], where ? name[0] : "");
  k << "  constexpr index_t NV = N / VEC;\n  constexpr index_t TILE = (index_t)BLOCK * UNROLL;\n";
  if (grid_stride)
    k << "  for (index_t base = (index_t)blockIdx.x * TILE; base < NV; base += (index_t)gridDim.x * TILE) {\n";
  else
    k << "  { const index_t base = (index_t)blockIdx.x * TILE;\n";
  for (size_t t : tensors) k << "    float x" << t << "[UNROLL][VEC];\n";
  k << "#pragma unroll\n    for (int u = 0; u < UNROLL; ++u) {\n"
       "      const index_t i = base + (index_t)u * BLOCK + threadIdx.x;\n"
       "      if (i >= NV) continue;\n"
       "      index_t o[" << std::max<size_t>(tensors.size(), 1) << "];\n      offsets(i * VEC, o);\n";
  for (size_t t = 0; t < tensors.size(); ++t) {
    const size_t i = tensors[t];
    const auto& op = s.ins[i];
    const std::string is = std::to_string(i), tag = dispatcher::dtype_short_name(op.dtype),
                      st = mixed_storage_type(op.dtype);
    const std::string at = "q" + is + "[o[" + std::to_string(t) + "]";
    if (vec > 1 && vector_readable(s, i, vec)) {
      k << "      { const pack_t<" << st << ", VEC> r = *reinterpret_cast<const pack_t<" << st << ", VEC>*>(&" << at
        << "]);\n#pragma unroll\n        for (int e = 0; e < VEC; ++e) x" << is << "[u][e] = cvt_" << tag
        << "(r.v[e]); }\n";
    } else if (vec > 1 && op.it_strides[0] == 0) {
      k << "      { const float t = cvt_" << tag << "(" << at << "]);\n#pragma unroll\n"
        << "        for (int e = 0; e < VEC; ++e) x" << is << "[u][e] = t; }\n";
    } else {
      k << "#pragma unroll\n      for (int e = 0; e < VEC; ++e) x" << is << "[u][e] = cvt_" << tag << "(" << at
        << " + (index_t)e * (index_t)" << op.it_strides[0] << "]);\n";
    }
  }
  k << "    }\n#pragma unroll\n    for (int u = 0; u < UNROLL; ++u) {\n"
       "      const index_t i = base + (index_t)u * BLOCK + threadIdx.x;\n"
       "      if (i >= NV) continue;\n"
       "      pack_t<out_t, VEC> r;\n"
       "#pragma unroll\n      for (int e = 0; e < VEC; ++e) r.v[e] = st_" << out_tag << "(" << expr << ");\n"
       "      *reinterpret_cast<pack_t<out_t, VEC>*>(out + i * VEC) = r;\n"
       "    }\n  }\n}\n";
  return KernelSource{k.str(), "cudal1_binary"};
}

}  // namespace cudal1::optimizer::binary
