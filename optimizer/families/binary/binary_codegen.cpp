/// @brief Source generation for the binary family: one kernel (binary_kernel.cuh, embedded at build time)
/// specialised per signature (the op; sizes, every input's kind, strides and dtype as typed constants) and per
/// technique (vector width, block, unroll, grid).
#include <algorithm>
#include <sstream>

#include "binary_cuda.h"
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

/// The op's enumerator of Math (binary_common.cuh).
const char* math_name(const std::string& math) {
  if (math == "add") return "kAdd";
  if (math == "mul") return "kMul";
  if (math == "div") return "kDiv";
  if (math == "maximum") return "kMaximum";
  if (math == "minimum") return "kMinimum";
  if (math == "pow") return "kPow";
  return "kWhere";
}

/// The input kind's enumerator of Kind (binary_common.cuh).
const char* kind_name(OperandKind k) {
  switch (k) {
    case OperandKind::kTensor: return "kTensor";
    case OperandKind::kZeroDim: return "kZeroDim";
    default: return "kScalar";
  }
}

}  // namespace

// Note [Binary constants]
// The head gives the kernel its knobs, layout and inputs as enumerators and specialisations of the templates of
// binary_common.cuh (Note [Device constants]), and the element count as `static constexpr index_t N`: NVRTC emits
// that variable as a global of the module (symbol N, .nv.global.init data), so every cubin of the family holds
// it, and an enumerator would change them all.
KernelSource generate_binary(const BinaryShape& s, int vec, int block, int unroll, bool grid_stride) {
  const std::string out_tag = dispatcher::dtype_short_name(s.out_dtype);
  std::ostringstream k;
  k << "// cudal1 binary_elementwise: " << s.math << " -> " << c10::toString(s.out_dtype) << " vec=" << vec
    << " block=" << block << " unroll=" << unroll << " grid_stride=" << grid_stride << "\n";
  k << "typedef " << (wide_indexing(s) ? "long long" : "int") << " index_t;\n" << mixed_dtype_prelude();
  k << device_sources::kBinaryCommon;
  k << "static constexpr index_t N = " << s.numel << ";\n";
  k << "typedef " << mixed_storage_type(s.out_dtype) << " out_t;\n";
  k << "__device__ __forceinline__ float to_common(float f) { return cvt_" << out_tag << "(st_" << out_tag
    << "(f)); }\n";
  k << "__device__ __forceinline__ out_t store_out(float f) { return st_" << out_tag << "(f); }\n";
  std::vector<size_t> tensors;  // the tensor inputs' indices: tensor t is input tensors[t]
  for (size_t i = 0; i < s.ins.size(); ++i)
    if (s.ins[i].kind == OperandKind::kTensor) tensors.push_back(i);
  const size_t nd = s.it_sizes.size();
  k << std::boolalpha << "enum : int { kVec = " << vec << ", kBlock = " << block << ", kUnroll = " << unroll
    << ", kDims = " << nd << ", kTensors = " << tensors.size() << ", kMath = " << math_name(s.math)
    << " };\nenum : bool { kGridStride = " << grid_stride << " };\n";
  for (size_t d = 0; d < nd; ++d)
    k << "template <> struct Dim<" << d << "> { enum : index_t { kSize = " << s.it_sizes[d] << " }; };\n";
  for (size_t t = 0; t < tensors.size(); ++t)
    for (size_t d = 0; d < nd; ++d)
      if (const int64_t st = s.ins[tensors[t]].it_strides[d]; st != 0)
        k << "template <> struct Stride<" << t << ", " << d << "> { enum : index_t { kValue = " << st << " }; };\n";
  for (size_t i = 0; i < 3; ++i) {
    k << "template <> struct In<" << i << "> {\n";
    if (i >= s.ins.size()) {
      k << "  typedef float storage;\n  static __device__ __forceinline__ float value(storage v) { return v; }\n"
        << "  enum : int { kKind = kAbsent, kSlot = 0, kRead = kGather };\n  enum : bool { kToCommon = false };\n"
        << "  enum : index_t { kInnerStride = 0 };\n};\n";
      continue;
    }
    const auto& o = s.ins[i];
    const bool tensor = o.kind == OperandKind::kTensor;
    const c10::ScalarType dt = o.kind == OperandKind::kScalar ? c10::ScalarType::Float : o.dtype;
    const auto slot = std::find(tensors.begin(), tensors.end(), i) - tensors.begin();
    const char* read = !tensor                                 ? "kGather"
                       : vec > 1 && vector_readable(s, i, vec) ? "kVector"
                       : vec > 1 && o.it_strides[0] == 0       ? "kBroadcast"
                                                               : "kGather";
    k << "  typedef " << mixed_storage_type(dt) << " storage;\n"
      << "  static __device__ __forceinline__ float value(storage v) { return cvt_"
      << dispatcher::dtype_short_name(dt) << "(v); }\n"
      << "  enum : int { kKind = " << kind_name(o.kind) << ", kSlot = " << (tensor ? slot : 0)
      << ", kRead = " << read << " };\n"
      << "  enum : bool { kToCommon = " << !(s.math == "where" && i == 0) << " };\n"
      << "  enum : index_t { kInnerStride = " << (tensor ? o.it_strides[0] : 0) << " };\n};\n";
  }
  k << device_sources::kBinaryKernel;
  return KernelSource{k.str(), "cudal1_binary"};
}

}  // namespace cudal1::optimizer::binary
