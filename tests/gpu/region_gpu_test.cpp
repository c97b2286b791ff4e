/// @brief Deferred regions on the GPU (Note [Deferred regions]): the CUPTI guard runs a pending region before
/// CUDA work that ATen does not see, from any thread: a kernel launched through the driver on a pending
/// tensor's raw pointer (whole region and a prefix), another thread's op on a pending tensor, a stream
/// synchronise. Pending outputs are poisoned with NaN, so a missed flush shows. Skips without a GPU, and says
/// why when CUPTI cannot be had.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <thread>

#include "cudal1/core/cuda_driver.h"
#include "cudal1/dispatcher/chains.h"
#include "cudal1/dispatcher/cuda_glue.h"
#include "cudal1/dispatcher/hook.h"
#include "cudal1/dispatcher/regions.h"
#include "cudal1/optimizer/compiler.h"
#include "cudal1/optimizer/device_info.h"
#include "cudal1/optimizer/family.h"
#include "gpu/gpu_env.h"

namespace cudal1::dispatcher {
namespace {

class RegionGpuEnv : public ::testing::Environment {
 public:
  void SetUp() override {
    const Status s = ::cudal1::testing::install_region_hooks({"mul.Tensor", "sigmoid", "tanh"});
    ASSERT_TRUE(s.ok()) << s.to_string();
  }
};
const auto* const g_env = ::testing::AddGlobalTestEnvironment(new RegionGpuEnv);

at::Tensor silu_w(const at::Tensor& x, const at::Tensor& w) {
  at::Tensor s = x.sigmoid();
  at::Tensor m = x * s;
  return m * w;
}

at::Tensor randn() { return at::randn({256, 1024}, at::TensorOptions().device(at::kCUDA)); }

/// Skips without a GPU or without the CUPTI guard; otherwise records and fuses silu_w once per process.
#define REQUIRE_FUSED()                                                                           \
  do {                                                                                            \
    CUDAL1_REQUIRE_GPU();                                                                         \
    if (deferral_status().find("CUDA: on") == std::string::npos) GTEST_SKIP() << deferral_status(); \
    ASSERT_TRUE(fuse_once());                                                                     \
  } while (0)

bool fuse_once() {
  static const bool ok = [] {
    const at::Tensor w = randn();
    for (int i = 0; i < 8; ++i) silu_w(randn(), w);
    close_chain_on_this_thread();
    ChainRecord* rec = nullptr;
    for_each_chain([&](ChainRecord& c) {
      if (c.nodes.size() == 3 && c.nodes[0].rec->sig.text.find("sigmoid") != std::string::npos) rec = &c;
    });
    return rec && fuse_chain(*rec, aten_chain_kernel(*rec)).ok();
  }();
  return ok;
}

at::Tensor eager(const std::function<at::Tensor()>& f) {
  BypassScope aten_only;
  return f();
}

/// out[i] = in[i], launched through the driver on the current stream: GPU work ATen never sees.
void raw_copy(const at::Tensor& in, const at::Tensor& out) {
  static const char* kSource = R"(
extern "C" __global__ void raw_copy(const float* in, float* out, long long n) {
  long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = in[i];
})";
  static std::shared_ptr<optimizer::LoadedModule> module = [] {
    auto info = optimizer::device_info(0);
    EXPECT_TRUE(info.ok());
    auto k = optimizer::compile(optimizer::KernelSource{kSource, "raw_copy"}, info.value().sm);
    EXPECT_TRUE(k.ok()) << k.status().to_string();
    auto m = optimizer::LoadedModule::load(0, k.value().cubin, "raw_copy");
    EXPECT_TRUE(m.ok()) << m.status().to_string();
    return m.value();
  }();
  const void* src = in.data_ptr();  // raw pointers: no dispatcher op between here and the launch
  void* dst = out.data_ptr();
  long long n = in.numel();
  void* params[] = {&src, &dst, &n};
  ContextScope ctx(0);
  ASSERT_TRUE(ctx.status().ok());
  const CUstream stream = current_stream(0).value();
  const unsigned grid = static_cast<unsigned>((n + 255) / 256);
  ASSERT_EQ(driver().value()->cuLaunchKernel(module->function(), grid, 1, 1, 256, 1, 1, 0, stream, params, nullptr),
            CUDA_SUCCESS);
}

TEST(RegionsGpu, AFusedChainEqualsEager) {
  REQUIRE_FUSED();
  const at::Tensor x = randn(), w = randn();
  const RegionCounters before = region_counters();
  at::Tensor y = silu_w(x, w);
  EXPECT_TRUE(region_open_on_this_thread());
  EXPECT_TRUE(at::equal(y, eager([&] { return silu_w(x, w); })));
  EXPECT_EQ(region_counters().completed, before.completed + 1);
  EXPECT_EQ(region_counters().lost, 0u);
}

TEST(RegionsGpu, AKernelOnAPendingTensorsRawPointerSeesItsValue) {
  REQUIRE_FUSED();
  const at::Tensor x = randn(), w = randn();
  const at::Tensor ref = eager([&] { return silu_w(x, w); });
  const at::Tensor ref_s = eager([&] { return x.sigmoid(); });
  const at::Tensor out = at::empty_like(ref), out_s = at::empty_like(ref);  // allocated before the regions
  const RegionCounters before = region_counters();
  at::Tensor y = silu_w(x, w);  // complete, pending
  ASSERT_TRUE(region_open_on_this_thread());
  raw_copy(y, out);
  EXPECT_FALSE(region_open_on_this_thread());
  at::Tensor s = x.sigmoid();  // a prefix, pending
  ASSERT_TRUE(region_open_on_this_thread());
  raw_copy(s, out_s);
  EXPECT_FALSE(region_open_on_this_thread());
  const RegionCounters after = region_counters();
  EXPECT_EQ(after.completed, before.completed + 1);
  EXPECT_EQ(after.by_cuda, before.by_cuda + 1);
  EXPECT_TRUE(at::equal(out, ref));
  EXPECT_TRUE(at::equal(out_s, ref_s));
}

TEST(RegionsGpu, AnotherThreadUsingAPendingTensorSeesItsValue) {
  REQUIRE_FUSED();
  const at::Tensor x = randn(), w = randn();
  const at::Tensor ref = eager([&] { return silu_w(x, w) * 2; });
  at::Tensor y = silu_w(x, w);
  ASSERT_TRUE(region_open_on_this_thread());
  at::Tensor z;
  std::thread t([&] { z = y * 2; });  // an unhooked op on the other thread: no TLS key there, CUPTI flushes
  t.join();
  EXPECT_FALSE(region_open_on_this_thread());
  EXPECT_TRUE(at::equal(z, ref));
}

// Note [Lean CUPTI guard]: on this driver the runtime's launches are watched through the driver's alone (checked
// when the guard was armed), and the test above (the other thread's `y * 2` is a runtime launch that only the
// guard sees) still saw its value.
TEST(RegionsGpu, TheGuardWatchesRuntimeLaunchesThroughTheDriver) {
  REQUIRE_FUSED();
  EXPECT_NE(deferral_status().find("CUPTI guard armed, lean"), std::string::npos) << deferral_status();
}

TEST(RegionsGpu, AStreamSynchroniseRunsTheRegion) {
  REQUIRE_FUSED();
  const at::Tensor x = randn(), w = randn();
  at::Tensor y = silu_w(x, w);
  ASSERT_TRUE(region_open_on_this_thread());
  const RegionCounters before = region_counters();
  ASSERT_EQ(driver().value()->cuStreamSynchronize(current_stream(0).value()), CUDA_SUCCESS);
  EXPECT_FALSE(region_open_on_this_thread());
  EXPECT_EQ(region_counters().completed, before.completed + 1);
  EXPECT_TRUE(at::equal(y, eager([&] { return silu_w(x, w); })));
}

}  // namespace
}  // namespace cudal1::dispatcher
