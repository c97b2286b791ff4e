/// @brief RingSteps of the normalisation family: steps of whole rows dealt over a persistent cooperative grid, each
/// block's part kept in a shared-memory ring that loads steps ahead (Note [Norm ring]): sizing and source.
#include <algorithm>
#include <ostream>

#include "codegen_common.h"
#include "norm_cuda.h"
#include "norm_family.h"

namespace cudal1::optimizer::norm {
namespace {

// Dynamic shared memory a block of one block per SM may take, less 512 bytes for the kernel's static arrays
// (red[96]): sm_90 227 KB per block (228 KB per SM, 1 KB reserved), sm_80 163 KB (164 KB per SM).
int64_t ring_smem_budget(int sm) {
  if (sm >= 90) return 227 * 1024 - 512;
  if (sm == 80) return 163 * 1024 - 512;
  return 0;
}

}  // namespace

int64_t RingSteps::rows_per_step(const NormShape& s) const {
  const int64_t row_bytes = s.cols * elem_size(s.dtype);
  const int64_t fit = (int64_t{step_mb} << 20) / row_bytes;
  return std::max<int64_t>(1, std::min(fit, s.rows));
}

int64_t RingSteps::steps(const NormShape& s) const {
  const int64_t rps = rows_per_step(s);
  return (s.rows + rps - 1) / rps;
}

int ring_reference_blocks(int sm) {
  if (sm >= 90) return 132;  // H100 SXM / H200
  if (sm == 80) return 108;  // A100
  return 0;
}

int64_t RingSteps::part_vectors(const NormShape& s, int64_t blocks) const {
  const int64_t nv = s.cols / vec;
  return (nv + blocks - 1) / blocks;
}

int64_t RingSteps::smem_bytes(const NormShape& s, int64_t blocks) const {
  return int64_t{ring} * rows_per_step(s) * part_vectors(s, blocks) * vec * elem_size(s.dtype);
}

bool RingSteps::fits(const NormShape& s) const {
  const int64_t blocks = ring_reference_blocks(s.sm);
  if (blocks == 0 || vec * elem_size(s.dtype) < 4) return false;  // 2-byte vectors: no cp.async
  return part_vectors(s, blocks) >= block && smem_bytes(s, blocks) <= ring_smem_budget(s.sm);
}

void RingSteps::source(std::ostream& o, const NormShape& s) const {
  o << "namespace rownorm {\n";
  constant(o, "index_t", "kRowsPerStep", rows_per_step(s));
  constant(o, "index_t", "kSteps", steps(s));
  constant(o, "int", "kRing", ring);
  // codegen_common's vector copies read VEC_BYTES (sizeof(vec_t)).
  o << "}  // namespace rownorm\n#define VEC_BYTES " << vec * elem_size(s.dtype) << "\n"
    << device_sources::kNormGridExchange << async_copy_source() << device_sources::kNormRingSteps;
}

}  // namespace cudal1::optimizer::norm

