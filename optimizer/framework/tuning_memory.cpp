/// @brief How much GPU memory one signature's tuning may hold, and how much it would (Note [Tuning memory]).
#include <algorithm>

#include "cudal1/core/config.h"
#include "cudal1/core/cuda_driver.h"
#include "cudal1/dispatcher/cuda_glue.h"
#include "cudal1/optimizer/measure.h"

namespace cudal1::optimizer {
namespace {

constexpr int64_t kL2FlushBytes = int64_t{256} << 20;  // the timing's flush buffer (measure.cpp, L2Flush)

int64_t tensor_bytes(c10::ScalarType dtype, const std::vector<int64_t>& sizes, const std::vector<int64_t>& strides,
                     int64_t offset) {
  int64_t extent = offset + 1;
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (sizes[d] == 0) return 0;
    extent += (sizes[d] - 1) * (d < strides.size() ? strides[d] : 1);
  }
  return extent * static_cast<int64_t>(c10::elementSize(dtype));
}

}  // namespace

int64_t tuning_bytes(const Problem& problem, const BoundKernel& kernel) {
  int64_t inputs = 0, outputs = 0, largest_output = 0;
  for (const auto& a : problem.args)
    if (a.is_tensor && a.tensor.defined)
      inputs += tensor_bytes(a.tensor.dtype, a.tensor.sizes, a.tensor.strides, a.tensor.storage_offset);
  for (const auto& o : kernel.outputs()) {
    const int64_t b = tensor_bytes(o.dtype, o.sizes, o.strides, 0);
    outputs += b;
    int64_t numel = 1;
    for (int64_t s : o.sizes) numel *= s;
    largest_output = std::max(largest_output, numel);
  }
  // Inputs once (a trial's are freed before the next), ATen's outputs, the guarded and the timing outputs; the
  // comparison's float64 copies of one output pair, their difference and its mask; the flush; the scratch.
  return inputs + 3 * outputs + 4 * 8 * largest_output + kL2FlushBytes + kernel.scratch_bytes();
}

Result<int64_t> tuning_budget(int device) {
  const Config& cfg = config();
  dispatcher::ContextScope ctx(device);
  CUDAL1_RETURN_IF_ERROR(ctx.status());
  CUDAL1_ASSIGN_OR_RETURN(const DriverApi* d, driver());
  size_t free = 0, total = 0;
  CUDAL1_CU_TRY(d->cuMemGetInfo(&free, &total));
  const auto free_bytes = static_cast<int64_t>(free);
  if (cfg.tune_memory_bytes > 0) return std::min(cfg.tune_memory_bytes, free_bytes);
  return static_cast<int64_t>(cfg.tune_memory_fraction * static_cast<double>(free_bytes));
}

}  // namespace cudal1::optimizer
