/// @brief NVRTC compile with one owner per nvrtcProgram.
#include "cudal1/optimizer/compiler.h"

#include <atomic>

#include <vector>

#include "cudal1/core/nvrtc.h"

namespace cudal1::optimizer {
namespace {

/// Owns an nvrtcProgram.
class Program {
 public:
  Program(const NvrtcApi* api, nvrtcProgram p) : api_(api), p_(p) {}
  ~Program() {
    if (p_) api_->nvrtcDestroyProgram(&p_);
  }
  Program(const Program&) = delete;
  Program& operator=(const Program&) = delete;
  nvrtcProgram get() const { return p_; }

 private:
  const NvrtcApi* api_;
  nvrtcProgram p_;
};

std::string program_log(const NvrtcApi* api, nvrtcProgram p) {
  size_t n = 0;
  if (api->nvrtcGetProgramLogSize(p, &n) != NVRTC_SUCCESS || n <= 1) return "";
  std::string log(n, '\0');
  if (api->nvrtcGetProgramLog(p, log.data()) != NVRTC_SUCCESS) return "";
  log.resize(n - 1);
  return log;
}

}  // namespace

namespace {
std::atomic<uint64_t> g_compiles{0};
}  // namespace

uint64_t compiles_started() noexcept { return g_compiles.load(std::memory_order_relaxed); }

Result<CompiledKernel> compile(const KernelSource& src, int sm, const std::vector<std::string>& extra_options) {
  CUDAL1_ASSIGN_OR_RETURN(const NvrtcApi* api, nvrtc());
  if (sm < 50 || sm > 200) return Status(Code::kInvalidArgument, "bad target sm " + std::to_string(sm));
  g_compiles.fetch_add(1, std::memory_order_relaxed);
  nvrtcProgram raw = nullptr;
  CUDAL1_NVRTC_TRY(api, api->nvrtcCreateProgram(&raw, src.code.c_str(), "cudal1_kernel.cu", 0, nullptr, nullptr));
  Program prog(api, raw);
  const std::string arch = "-arch=sm_" + std::to_string(sm);
  std::vector<const char*> opts = {arch.c_str(), "-std=c++17", "--fmad=true"};
  for (const std::string& o : extra_options) opts.push_back(o.c_str());
  const nvrtcResult r = api->nvrtcCompileProgram(prog.get(), static_cast<int>(opts.size()), opts.data());
  CompiledKernel out;
  out.log = program_log(api, prog.get());
  if (r != NVRTC_SUCCESS)
    return Status(Code::kCompileError, std::string(api->nvrtcGetErrorString(r)) + " (" + arch + "):\n" + out.log);
  size_t n = 0;
  CUDAL1_NVRTC_TRY(api, api->nvrtcGetCUBINSize(prog.get(), &n));
  out.cubin.resize(n);
  CUDAL1_NVRTC_TRY(api, api->nvrtcGetCUBIN(prog.get(), out.cubin.data()));
  out.kernel_name = src.kernel_name;
  out.sm = sm;
  return out;
}

std::string nvrtc_version() {
  auto api = nvrtc();
  if (!api.ok()) return "";
  return std::to_string(api.value()->major) + "." + std::to_string(api.value()->minor);
}

}  // namespace cudal1::optimizer
