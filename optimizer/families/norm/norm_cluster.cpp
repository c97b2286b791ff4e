/// @brief ClusterSlices of the normalisation family: a row split over one thread-block cluster whose blocks keep
/// their slice on chip between the statistics and the output (Note [Norm clusters]): slice sizing and source.
#include <algorithm>
#include <ostream>

#include "codegen_common.h"
#include "norm_cuda.h"
#include "norm_family.h"

namespace cudal1::optimizer::norm {
namespace {

// H200 (sm_90) shared memory: 228 KB per SM, at most 227 KB per block, 1 KB per resident block reserved by the
// system; 512 bytes cover the kernel's static arrays (red[96] and the published triples, 408 bytes).
constexpr int64_t kSmemPerSm = 228 * 1024;
constexpr int64_t kSmemPerBlock = 227 * 1024;
constexpr int64_t kReservedPerBlock = 1024;
constexpr int64_t kStaticSmem = 512;

int64_t smem_budget(int occ) {
  return std::min(kSmemPerBlock, kSmemPerSm / occ - kReservedPerBlock) - kStaticSmem;
}

}  // namespace

int64_t ClusterSlices::slice_vectors(const NormShape& s) const {
  const int64_t nv = s.cols / vec;
  return (nv + cluster - 1) / cluster;
}

int64_t ClusterSlices::thread_vectors(const NormShape& s) const { return (slice_vectors(s) + block - 1) / block; }

int ClusterSlices::registers(const NormShape& s) const {
  if (occ * block > 1024) return -1;  // 2 x 1024 threads would leave 32 registers a thread
  const int64_t vbytes = int64_t{vec} * elem_size(s.dtype);
  const int64_t in_smem = smem_budget(occ) / (block * vbytes);
  const int64_t regs = std::max<int64_t>(0, thread_vectors(s) - in_smem);
  return regs * vbytes > kMaxClusterRegisterBytes ? -1 : static_cast<int>(regs);
}

unsigned ClusterSlices::smem_bytes(const NormShape& s) const {
  const int64_t vbytes = int64_t{vec} * elem_size(s.dtype);
  const int64_t regs = std::max(0, registers(s));
  return static_cast<unsigned>((thread_vectors(s) - regs) * block * vbytes);
}

void ClusterSlices::source(std::ostream& o, const NormShape& s) const {
  const int64_t spt = thread_vectors(s);
  const int regs = registers(s);
  o << "namespace rownorm {\n";
  constant(o, "int", "kCluster", cluster);
  constant(o, "index_t", "kSliceVectors", slice_vectors(s));
  constant(o, "int", "kThreadVectors", spt);
  constant(o, "int", "kRegisterVectors", regs);
  constant(o, "int", "kHalf", regs + (spt - regs) / 2);
  // codegen_common's vector copies read VEC_BYTES (sizeof(vec_t)).
  o << "}  // namespace rownorm\n#define VEC_BYTES " << vec * elem_size(s.dtype) << "\n"
    << async_copy_source() << cluster_primitives_source() << device_sources::kNormClusterSlices;
}

}  // namespace cudal1::optimizer::norm

