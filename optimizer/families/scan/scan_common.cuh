// @brief Device code every scan technique shares (Note [Scans] in scan_family.h): the vector type and the split
// techniques' chunk.
//
// Compiled by NVRTC after a generated head (scan_codegen.cpp) that defines, with no CUDA headers:
//   index_t, storage_t, to_float(storage_t), to_storage(float)   the dtype (dtype_prelude)
//   the combine (combine_source(): scan_combine.cuh and the lane values)
//   in namespace scan, typed constants (enumerators: Note [Device constants] in codegen_common.h):
//     int kVec, kBlock, kWarps          elements per vector load/store, threads per block, warps per block
//     index_t kOuter, kN, kInner        the output as [kOuter, kN, kInner], contiguous; kN is scanned
//     index_t kLines, kSd               kOuter * kInner independent scans; the input's stride along the scan
//   and scan::in_base(o, i): the input offset of outer index o, inner index i, scan index 0
// and followed by the technique's own constants (its file names them) and its file, which defines the kernel
//   extern "C" __global__ void cudal1_scan(const storage_t* in, storage_t* out, float* ws, int phase)
// (pointers __restrict__; ws: the technique's workspace, fp32 chunk totals or 64-bit status words; phase: 0 for a
// split technique's first launch, chunk totals only, else 1).
//
// The technique's loops and index arithmetic are written in the kernel itself, not in a function it calls: NVVM
// simplifies each function on its own before inlining it into its caller, so code moved into a callee can compile
// to other instructions (RowExact's body and RowLanes' stores do). Helpers hold the code that compiles the same
// either way: loads, the row techniques' stores, combines and register scans.

namespace scan {

struct __align__(kVec * sizeof(storage_t)) vec_t { storage_t v[kVec]; };

/// Elements of each of `splits` chunks of the scanned dimension (the split techniques), a multiple of kVec.
__device__ __forceinline__ constexpr index_t chunk_of(int splits) {
  return ((kN + splits - 1) / splits + kVec - 1) / kVec * kVec;
}

}  // namespace scan
