/// @brief Verification and timing reject the reward hacks CUDA-L1 met: unwritten outputs, writes outside the
/// output, precision downgrades, stale (cached) results, and work moved to a side stream. A correct kernel of
/// the same shape passes, so the checks are not simply failing everything.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "cudal1/core/cuda_driver.h"
#include "cudal1/dispatcher/cuda_glue.h"
#include "cudal1/optimizer/compiler.h"
#include "cudal1/optimizer/device_info.h"
#include "cudal1/optimizer/family.h"
#include "cudal1/optimizer/measure.h"
#include "gpu/gpu_env.h"

namespace cudal1::optimizer {
namespace {

constexpr int64_t kN = 1 << 20;

const char* kSource = R"(
__device__ float gelu(float x) { return x * 0.5f * (1.f + erff(x * 0.70710678118654752440f)); }
__device__ float to_half_and_back(float x) {
  unsigned short h; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(x));
  float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h)); return f; }
extern "C" __global__ void good(const float* in, float* out, long long n) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; if (i < n) out[i] = gelu(in[i]); }
extern "C" __global__ void lazy_half(const float* in, float* out, long long n) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; if (i < n / 2) out[i] = gelu(in[i]); }
extern "C" __global__ void out_of_bounds(const float* in, float* out, long long n) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; if (i < n) out[i] = gelu(in[i]);
  if (i == 0) out[n + 3] = 1.f; }
extern "C" __global__ void downgrade(const float* in, float* out, long long n) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < n) out[i] = to_half_and_back(gelu(to_half_and_back(in[i]))); }
extern "C" __global__ void copy(const float* in, float* out, long long n) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; if (i < n) out[i] = in[i]; }
// ~10 ms of work at 2 GHz: far above what time-slicing with other GPU processes adds to ATen's baseline.
extern "C" __global__ void slow_good(const float* in, float* out, long long n) {
  long long start = clock64(); while (clock64() - start < 20000000) {}
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; if (i < n) out[i] = gelu(in[i]); }
)";

enum class Hack { kNone, kLazy, kOutOfBounds, kDowngrade, kStale, kSideStream };

class HandKernel final : public BoundKernel {
 public:
  HandKernel(Hack hack, int device) : hack_(hack), device_(device) {
    spec_.push_back(OutputSpec{at::kFloat, {kN}, {1}});
  }
  Status init(int sm) {
    CUDAL1_ASSIGN_OR_RETURN(CompiledKernel k, compile(KernelSource{kSource, "good"}, sm));
    const char* name = hack_ == Hack::kLazy ? "lazy_half" : hack_ == Hack::kOutOfBounds ? "out_of_bounds"
                     : hack_ == Hack::kDowngrade ? "downgrade" : hack_ == Hack::kSideStream ? "slow_good" : "good";
    CUDAL1_ASSIGN_OR_RETURN(main_, LoadedModule::load(device_, k.cubin, name));
    CUDAL1_ASSIGN_OR_RETURN(copy_, LoadedModule::load(device_, k.cubin, "copy"));
    CUDAL1_ASSIGN_OR_RETURN(const DriverApi* api, driver());
    api_ = api;
    if (hack_ == Hack::kSideStream) {
      dispatcher::ContextScope ctx(device_);
      CUDAL1_RETURN_IF_ERROR(ctx.status());
      CUDAL1_CU_TRY(api->cuStreamCreate(&side_, CU_STREAM_NON_BLOCKING));
    }
    return Status();
  }
  const std::vector<OutputSpec>& outputs() const override { return spec_; }
  Status launch(const c10::IValue* args, size_t, at::Tensor* outs, CUstream stream) noexcept override try {
    const void* in = args[0].toTensor().data_ptr();
    void* out = outs[0].data_ptr();
    if (hack_ == Hack::kStale) {
      if (!saved_.defined()) {
        saved_ = at::empty({kN}, outs[0].options());
        void* keep = saved_.data_ptr();
        CUDAL1_RETURN_IF_ERROR(run(main_->function(), in, keep, stream));
      }
      return run(copy_->function(), saved_.data_ptr(), out, stream);  // the first result, forever
    }
    return run(main_->function(), in, out, hack_ == Hack::kSideStream ? side_ : stream);
  } catch (const std::exception& e) {
    return Status(Code::kInternal, e.what());
  }

 private:
  Status run(CUfunction f, const void* in, void* out, CUstream s) {
    long long n = kN;
    void* params[] = {&in, &out, &n};
    CUDAL1_CU_TRY(api_->cuLaunchKernel(f, (kN + 255) / 256, 1, 1, 256, 1, 1, 0, s, params, nullptr));
    return Status();
  }
  Hack hack_;
  int device_;
  std::vector<OutputSpec> spec_;
  std::shared_ptr<LoadedModule> main_, copy_;
  const DriverApi* api_ = nullptr;
  CUstream side_ = nullptr;
  at::Tensor saved_;
};

Problem gelu_problem(int sm) {
  Problem p;
  p.op = "gelu";
  p.sm = sm;
  dispatcher::ArgSpec a;
  a.is_tensor = true;
  a.tensor.defined = true;
  a.tensor.dtype = at::kFloat;
  a.tensor.sizes = {kN};
  a.tensor.strides = {1};
  p.args.push_back(a);
  dispatcher::ArgSpec s;
  s.value = std::string("none");
  p.args.push_back(s);
  return p;
}

Status verify_hack(Hack hack, int trials = 4) {
  const int sm = device_info(0).value().sm;
  HandKernel k(hack, 0);
  CUDAL1_RETURN_IF_ERROR(k.init(sm));
  const auto op = c10::Dispatcher::singleton().findSchemaOrThrow("aten::gelu", "");
  return verify(gelu_problem(sm), op, k, 0, trials, 1234, nullptr);
}

TEST(VerificationGuards, CorrectKernelPasses) {
  CUDAL1_REQUIRE_GPU();
  const Status s = verify_hack(Hack::kNone);
  EXPECT_TRUE(s.ok()) << s.to_string();
}

TEST(VerificationGuards, UnwrittenOutputIsCaughtByPoison) {
  CUDAL1_REQUIRE_GPU();
  EXPECT_EQ(verify_hack(Hack::kLazy).code(), Code::kVerifyFailed);
}

TEST(VerificationGuards, WritesOutsideTheOutputAreCaughtByGuards) {
  CUDAL1_REQUIRE_GPU();
  const Status s = verify_hack(Hack::kOutOfBounds);
  EXPECT_EQ(s.code(), Code::kVerifyFailed);
  EXPECT_NE(s.message().find("outside"), std::string::npos) << s.to_string();
}

TEST(VerificationGuards, PrecisionDowngradeIsCaughtByTolerance) {
  CUDAL1_REQUIRE_GPU();
  EXPECT_EQ(verify_hack(Hack::kDowngrade).code(), Code::kVerifyFailed);
}

TEST(VerificationGuards, StaleCachedResultsAreCaughtByFreshInputs) {
  CUDAL1_REQUIRE_GPU();
  EXPECT_EQ(verify_hack(Hack::kStale).code(), Code::kVerifyFailed);
}

TEST(VerificationGuards, SideStreamWorkIsCaughtByTiming) {
  CUDAL1_REQUIRE_GPU();
  const int sm = device_info(0).value().sm;
  HandKernel k(Hack::kSideStream, 0);
  const Status init = k.init(sm);
  ASSERT_TRUE(init.ok()) << init.to_string();
  const auto op = c10::Dispatcher::singleton().findSchemaOrThrow("aten::gelu", "");
  auto t = time_against_aten(gelu_problem(sm), op, k, 0, 5, 1);
  ASSERT_FALSE(t.ok()) << "side-stream kernel timed at " << t->kernel_us << " us vs ATen " << t->aten_us
                       << ", escaped " << t->escaped_us << " us";
  EXPECT_EQ(t.status().code(), Code::kVerifyFailed);
  EXPECT_NE(t.status().message().find("escaped"), std::string::npos) << t.status().to_string();
  // Note [Timing]: rejected only after a second round escaped as well.
  EXPECT_NE(t.status().message().find("in two rounds"), std::string::npos) << t.status().to_string();
}

}  // namespace
}  // namespace cudal1::optimizer
