/// @brief Shared source fragments (see codegen_common.h).
#include "codegen_common.h"

namespace cudal1::optimizer {

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

}  // namespace cudal1::optimizer
