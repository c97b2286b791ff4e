/// @brief NVRTC compilation of generated source into a cubin for one architecture.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "cudal1/core/status.h"
#include "cudal1/optimizer/family.h"

namespace cudal1::optimizer {

struct CompiledKernel {
  std::string cubin;        ///< SASS for exactly `sm`
  std::string kernel_name;
  std::string log;          ///< compiler log (warnings), may be empty
  int sm = 0;
};

/// Compiles `src` with NVRTC for `-arch=sm_<sm>` (no fast-math: results must match ATen), with `extra_options`
/// after the library's own (e.g. "--ptxas-options=-v", whose report lands in the log). Thread-safe.
/// Returns Unavailable without NVRTC and CompileError with the full log when NVRTC rejects the source.
Result<CompiledKernel> compile(const KernelSource& src, int sm, const std::vector<std::string>& extra_options = {});

/// One job of compile_concurrently: its source, or why it has none (then nothing is compiled).
struct VariantBuild {
  bool has_source = false;  ///< false: the source maker failed and `kernel` holds its error
  Result<CompiledKernel> kernel = Status(Code::kInternal, "not built");
};

/// Makes source `i` of a batch (e.g. Plan::source of the i-th pick). Called on worker threads, each index
/// exactly once: it must be safe to call concurrently for distinct indices (Plan::source is const).
using SourceMaker = std::function<Result<KernelSource>(size_t i)>;

/// Makes and compiles `n` sources for `sm` on up to `max_threads` threads (the calling thread is one of them;
/// if no thread can be started it does all the work) and returns their builds in index order, each the same as
/// a serial make + compile() would give. An exception from `make` or compile becomes that build's Internal
/// error; none escapes. Blocks until every job is done. Note [Concurrent NVRTC] in parallel_compile.cpp.
std::vector<VariantBuild> compile_concurrently(size_t n, const SourceMaker& make, int sm, size_t max_threads);

/// NVRTC compilations started in this process (every compile() call that reached NVRTC). Serve mode's guarantee
/// that nothing is compiled on the app's GPU after start-up is checked against it (Stats::compiled).
uint64_t compiles_started() noexcept;

/// NVRTC's version as "13.0", or "" when NVRTC is unavailable.
std::string nvrtc_version();

}  // namespace cudal1::optimizer
