/// @brief TicketParts of the normalisation family: parts of rows dealt by ticket over a persistent cooperative grid,
/// each kept in registers between its statistics and its output (Note [Norm parts]): sizing and source.
#include <algorithm>
#include <ostream>

#include "codegen_common.h"
#include "norm_cuda.h"
#include "norm_family.h"

namespace cudal1::optimizer::norm {

int TicketParts::min_blocks() const { return ahead || block > 256 ? 2 : 4; }

int64_t TicketParts::parts_per_row(const NormShape& s) const {
  const int64_t nv = s.cols / vec, pv = int64_t{block} * per;
  return (nv + pv - 1) / pv;
}

bool TicketParts::fits(const NormShape& s) const {
  const int64_t reference = ring_reference_blocks(s.sm) * int64_t{min_blocks()};
  const int64_t parts = parts_per_row(s);
  // Two sets of registers with `ahead`: 8 vectors at 512 threads would not fit 64 registers a thread.
  const bool regs_ok = !ahead || block * per <= 2048;
  return reference > 0 && (block == 256 || block == 512) && (per == 4 || per == 8) && regs_ok && parts >= 2 &&
         parts <= reference && s.rows * parts < (int64_t{1} << 31);
}

void TicketParts::source(std::ostream& o, const NormShape& s) const {
  o << "namespace rownorm {\n";
  constant(o, "index_t", "kParts", parts_per_row(s));
  constant(o, "index_t", "kTickets", s.rows * parts_per_row(s));
  constant(o, "int", "kThreadVectors", per);
  constant(o, "bool", "kAhead", ahead);
  o << "}  // namespace rownorm\n"
    << device_sources::kNormGridExchange << ticket_source() << device_sources::kNormTicketParts;
}

}  // namespace cudal1::optimizer::norm

