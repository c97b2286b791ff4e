/// @brief Shared source fragments (see codegen_common.h).
#include "codegen_common.h"

#include <cstdint>
#include <cstring>
#include <sstream>

#include "framework_cuda.h"

namespace cudal1::optimizer {

std::string float_bits_hex(float f) {
  uint32_t b = 0;
  std::memcpy(&b, &f, sizeof b);
  std::ostringstream o;
  o << "0x" << std::hex << b << "u";
  return o.str();
}

std::string_view dtype_prelude(c10::ScalarType t) {
  switch (t) {
    case c10::ScalarType::Float: return device_sources::kDtypeF32;
    case c10::ScalarType::Half: return device_sources::kDtypeF16;
    case c10::ScalarType::BFloat16: return device_sources::kDtypeBf16;
    default: return {};
  }
}

std::string_view mixed_dtype_prelude() { return device_sources::kMixedDtypes; }

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

std::string_view exact_divide_source() { return device_sources::kExactDivide; }

std::string_view cluster_primitives_source() { return device_sources::kClusterPrimitives; }

std::string_view async_copy_source() { return device_sources::kAsyncCopy; }

std::string_view vector_copy_source() { return device_sources::kVectorCopy; }

std::string_view welford_source() { return device_sources::kWelford; }

void row_reduce_source(std::ostream& o, int threads_per_row, int block, bool named_barrier) {
  constant(o, "int", "kRowReduceThreads", threads_per_row);
  constant(o, "int", "kRowReduceBlock", block);
  constant(o, "bool", "kRowReduceNamedBarrier", named_barrier);
  o << device_sources::kRowReduce;
}

}  // namespace cudal1::optimizer
