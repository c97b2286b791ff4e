// @brief What the binary kernel's generated constants are made of (Note [Binary elementwise] in binary_family.h):
// the op, how each input is given and read, and the templates the generator specialises.
//
// Compiled by NVRTC after the index type and the dtype conversions (index_t; mixed_dtype_prelude's cvt_* and st_*),
// and before the generated constants (binary_codegen.cpp) and binary_kernel.cuh.

template <typename T, int N> struct alignas(sizeof(T) * N) pack_t { T v[N]; };

// The op on the common dtype's values, in fp32.
enum Math : int { kAdd, kMul, kDiv, kMaximum, kMinimum, kPow, kWhere };
// How an input is given: a tensor (rank >= 1), a 0-dim tensor (read on the device where p is not null, else its
// value passed), a Scalar (its value passed), or no input (where.self has three, the others two).
enum Kind : int { kTensor, kZeroDim, kScalar, kAbsent };
// How a tensor input's kVec values of one vector of outputs are read: one aligned vector, one broadcast element,
// or kVec elements kInnerStride apart.
enum Read : int { kVector, kBroadcast, kGather };

// Dim<d>::kSize (index_t): the coalesced iteration space's size d, innermost first.
template <int d> struct Dim;
// Stride<t, d>::kValue (index_t): tensor input t's stride along dim d (t counts the tensor inputs only).
template <int t, int d> struct Stride { enum : index_t { kValue = 0 }; };
// In<i>, input i of 3, each with
//   storage                         its element type (a 0-dim tensor's or a tensor's; else float)
//   static float value(storage)     the element's value in fp32
//   int kKind, kSlot, kRead         its Kind; its t among the tensor inputs; its Read
//   bool kToCommon                  a 0-dim value converted to the common dtype first (not where's condition)
//   index_t kInnerStride            its stride along the innermost dim
template <int i> struct In;
