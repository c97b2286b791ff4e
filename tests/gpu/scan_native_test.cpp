/// @brief Native 16-bit scan combines (Note [Scans], "Native combines"): on the device, every one of the 2^32
/// operand pairs of fp16 and of bf16 gives the same bits from lv_op's single fma.rn in the dtype as from the fp32
/// sum rounded to the dtype (the combine ATen and the other scan variants make), NaN payloads aside. The kernel
/// is compiled from the very source the scan variants emit (combine_source).
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "cudal1/core/cuda_driver.h"
#include "cudal1/dispatcher/cuda_glue.h"
#include "cudal1/optimizer/compiler.h"
#include "cudal1/optimizer/device_info.h"
#include "cudal1/optimizer/family.h"
#include "gpu/gpu_env.h"
#include "scan/scan_family.h"

namespace cudal1::optimizer {
namespace {

const char* kProbe = R"(
/// out[0]: pairs whose bits differ (both NaN counts as equal); out[1]: the smallest such pair (a << 16 | b);
/// out[2]: pairs checked.
extern "C" __global__ void probe(unsigned long long* out) {
  unsigned long long bad = 0, seen = 0, first = ~0ull;
  const unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
  for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < (1ull << 32);
       i += stride) {
    const lv_t a = (lv_t)(i >> 16), b = (lv_t)(i & 0xffffu);
    const lv_t got = lv_op(a, b);
    const storage_t want = to_storage(OP(to_float(a), to_float(b)));
    const float g = to_float(got), w = to_float(want);
    if (got != want && !(g != g && w != w)) {
      ++bad;
      if (i < first) first = i;
    }
    ++seen;
  }
  atomicAdd(out, bad);
  atomicAdd(out + 2, seen);
  if (bad) atomicMin(out + 1, first);
}
)";

void check_every_pair(c10::ScalarType dtype) {
  auto info = device_info(0);
  ASSERT_TRUE(info.ok()) << info.status().to_string();
  if (dtype == c10::ScalarType::BFloat16 && info.value().sm < 80)
    GTEST_SKIP() << "bf16 scans are planned on sm_80+ only (device: sm_" << info.value().sm << ")";
  scan::ScanShape s;
  s.dtype = dtype;
  const std::string src = scan::combine_source(s, /*native=*/true) + kProbe;
  auto k = compile(KernelSource{src, "probe"}, info.value().sm);
  ASSERT_TRUE(k.ok()) << k.status().to_string();
  auto m = LoadedModule::load(0, k.value().cubin, "probe");
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  at::Tensor out = at::tensor({int64_t{0}, int64_t{-1}, int64_t{0}}, at::kLong).to(at::kCUDA);
  void* ptr = out.data_ptr();
  void* params[] = {&ptr};
  auto d = driver();
  ASSERT_TRUE(d.ok()) << d.status().to_string();
  dispatcher::ContextScope ctx(0);
  ASSERT_TRUE(ctx.status().ok());
  const unsigned grid = static_cast<unsigned>(m.value()->sm_count()) * 8;
  ASSERT_EQ(d.value()->cuLaunchKernel(m.value()->function(), grid, 1, 1, 256, 1, 1, 0, nullptr, params, nullptr),
            CUDA_SUCCESS);
  const auto host = out.cpu();
  const auto* h = reinterpret_cast<const uint64_t*>(host.data_ptr<int64_t>());
  EXPECT_EQ(h[2], uint64_t{1} << 32) << "every pair checked";
  EXPECT_EQ(h[0], 0u) << c10::toString(dtype) << ": first differing pair a=0x" << std::hex << (h[1] >> 16)
                      << " b=0x" << (h[1] & 0xffff);
}

TEST(ScanNative, EveryHalfPairAddsLikeFp32Rounded) {
  CUDAL1_REQUIRE_GPU();
  check_every_pair(c10::ScalarType::Half);
}

TEST(ScanNative, EveryBFloat16PairAddsLikeFp32Rounded) {
  CUDAL1_REQUIRE_GPU();
  check_every_pair(c10::ScalarType::BFloat16);
}

}  // namespace
}  // namespace cudal1::optimizer
