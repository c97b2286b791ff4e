/// @brief Held slabs of the softmax family (Note [Softmax held slabs]) on the device: every held variant of a few
/// column signatures is compiled, bound and verified against ATen (fresh inputs, some with NaN and +-Inf, poisoned
/// and guarded outputs; Note [Verification]). The shapes reach what the fuzz test's random sizes almost never give
/// (slabs of 512 KB or more): the benchmark row, a last part shorter than the others, rows of 64 and 512 bytes, an
/// odd n, four dims, both ops and both 16-bit dtypes. Large column maxima have a test of their own: the verifier's
/// random inputs reach |max| ~ 5000, where an exponent argument rounded at the maximum's scale stays in tolerance.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "cudal1/dispatcher/cuda_glue.h"
#include "cudal1/optimizer/device_info.h"
#include "gpu/gpu_env.h"
#include "gpu/variant_sweep.h"
#include "optimizer/problems.h"

namespace cudal1::optimizer {
namespace {

TEST(SoftmaxHeld, EveryHeldVariantMatchesAten) {
  CUDAL1_REQUIRE_GPU();
  const int sm = testing::device_sm();
  ASSERT_GT(sm, 0);
  if (sm < 90) GTEST_SKIP() << "held slabs use bulk copies, offered from sm_90 (this device is sm_" << sm << ")";
  using testing::contiguous;
  using testing::softmax_problem;
  const std::vector<Problem> problems = {
      // The benchmark row: 32 slabs of 4 MB.
      softmax_problem("_log_softmax", at::kBFloat16, {32, 32000, 64}, contiguous({32, 32000, 64}), 1, false, sm),
      // 40000 rows: the last part is shorter than the others on a 132-SM part.
      softmax_problem("_softmax", at::kHalf, {3, 40000, 64}, contiguous({3, 40000, 64}), 1, false, sm),
      // Rows of 512 and of 64 bytes.
      softmax_problem("_log_softmax", at::kBFloat16, {4, 4096, 256}, contiguous({4, 4096, 256}), 1, false, sm),
      softmax_problem("_softmax", at::kHalf, {2, 16384, 32}, contiguous({2, 16384, 32}), 1, false, sm),
      // An odd n, and four dims (outer 6 = 2 x 3).
      softmax_problem("_softmax", at::kBFloat16, {5, 8191, 64}, contiguous({5, 8191, 64}), 1, false, sm),
      softmax_problem("_log_softmax", at::kHalf, {2, 3, 5000, 64}, contiguous({2, 3, 5000, 64}), 2, false, sm),
  };
  const auto is_held = [](const Variant& v) { return v.get("tile", 0) == 3; };
  const int offered = testing::count_variants(problems, is_held);
  const int verified = testing::verify_variants(problems, is_held);
  std::printf("[softmax held] %d of %d held-slab variants verified\n", verified, offered);
  EXPECT_EQ(verified, offered);
  EXPECT_EQ(offered, 28);  // five variants of each of five signatures, three of the 40000-row one (held_ok)
}

TEST(SoftmaxHeld, KernelSizedForAnotherSmCountDeclines) {
  CUDAL1_REQUIRE_GPU();
  auto info = device_info(0);
  ASSERT_TRUE(info.ok()) << info.status().to_string();
  if (info->sm < 90) GTEST_SKIP() << "held slabs are offered from sm_90 (this device is sm_" << info->sm << ")";
  // Its grid (parts, rows, slots) is compiled in for a device of one SM more: it must not run here.
  Problem p = testing::softmax_problem("_log_softmax", at::kBFloat16, {32, 32000, 64},
                                       testing::contiguous({32, 32000, 64}), 1, false, info->sm);
  p.sm_count = info->sm_count + 1;
  auto plan = family_for(p.op, "")->plan(p);
  ASSERT_TRUE(plan.ok()) << plan.status().to_string();
  const Variant v{{{"tile", 3}, {"stats", 8}, {"out", 8}, {"merge", 4}, {"pf", 0}, {"hold", 0}}};
  auto bound = testing::build_variant(*plan.value(), v, info->sm);
  ASSERT_TRUE(bound.ok()) << bound.status().to_string();
  auto stream = dispatcher::current_stream(0);
  ASSERT_TRUE(stream.ok()) << stream.status().to_string();
  const at::Tensor x = at::randn({32, 32000, 64}, at::TensorOptions().dtype(at::kBFloat16).device(at::kCUDA));
  at::Tensor out = at::full_like(x, 7.0);
  const std::vector<c10::IValue> args = {x, int64_t{1}, false};
  const Status st = bound.value()->launch(args.data(), args.size(), &out, stream.value());
  EXPECT_EQ(st.code(), Code::kUnsupported) << st.to_string();
  EXPECT_NE(st.message().find("compiled for " + std::to_string(info->sm_count + 1) + " SMs"), std::string::npos)
      << st.to_string();
  EXPECT_TRUE(out.eq(7.0).all().item<bool>());  // nothing was written
}

/// |m log2 e - fl(m log2 e)| in fp32 arithmetic: every term of a column with maximum m would be off by the factor
/// 2^d if exp(x - m) were computed as ex2(fma(x, log2 e, -fl(m log2 e))), the split probe's form (docs/PERF.md
/// sessions 29-30), which the held kernel does not use: it subtracts the maximum exactly first.
double fma_exp_offset(double m) {
  const float mf = static_cast<float>(m), l2e = 1.4426950408889634f;
  const float ml = mf * l2e;  // rounded as the kernel rounds it
  return std::fabs(static_cast<double>(mf) * static_cast<double>(l2e) - static_cast<double>(ml));  // exact
}

/// Of lo, lo + ulp, ..., lo + (count - 1) ulp, the value whose fp32 m log2 e is rounded worst.
double worst_rounded_max(double lo, double ulp, int count) {
  double best = lo;
  for (int j = 1; j < count; ++j)
    if (fma_exp_offset(lo + j * ulp) > fma_exp_offset(best)) best = lo + j * ulp;
  return best;
}

/// Every held variant of `p` compiled for this device and bound to it (gtest failures on the way: none).
std::vector<std::pair<std::string, std::unique_ptr<BoundKernel>>> bind_held(Problem p, const DeviceInfo& info) {
  p.sm_count = info.sm_count;
  auto plan = family_for(p.op, "")->plan(p);
  EXPECT_TRUE(plan.ok()) << plan.status().to_string();
  std::vector<std::pair<std::string, std::unique_ptr<BoundKernel>>> out;
  if (!plan.ok()) return out;
  for (const Variant& v : plan.value()->space()) {
    if (v.get("tile", 0) != 3) continue;
    auto bound = testing::build_variant(*plan.value(), v, info.sm);
    EXPECT_TRUE(bound.ok()) << v.id() << ": " << bound.status().to_string();
    if (bound.ok()) out.emplace_back(v.id(), std::move(bound.value()));
  }
  return out;
}

TEST(SoftmaxHeld, LargeColumnMaximaMatchAten) {
  CUDAL1_REQUIRE_GPU();
  auto info = device_info(0);
  ASSERT_TRUE(info.ok()) << info.status().to_string();
  if (info->sm < 90) GTEST_SKIP() << "held slabs are offered from sm_90 (this device is sm_" << info->sm << ")";
  // Slab s holds m_s - k ulp_s with k uniform in 1..63, and k = 0 at four rows of each column: exp(x - m) is 1 at
  // the maximum and (from |m| ~ 2^12) 0 elsewhere, so softmax's outputs there are 1/4 and a factor on the sum shows
  // in full. The maxima: where fp32 rounds m log2 e worst (|d| up to 1/8 in bf16 near 2^21: a 9% error in that
  // form; 1/256 in fp16 near 2^16, 0.27% against an rtol of 0.2%), beyond 2^22, at bf16's largest (m log2 e
  // overflows fp32), and ordinary ones. Below 64 ulps from the binade's start, -m - k ulp stays in m's binade.
  struct Case {
    at::ScalarType dtype;
    std::vector<double> maxima, ulps;
    double rtol;
  };
  const double big_bf16 = worst_rounded_max(2097152.0, 16384.0, 64), big_fp16 = worst_rounded_max(32768.0, 32.0, 960);
  ASSERT_GT(fma_exp_offset(big_bf16), 0.1);  // else the inputs would not tell that form from the exact one
  ASSERT_GT(fma_exp_offset(big_fp16), 0.0035);
  const std::vector<Case> cases = {
      {at::kBFloat16,
       {big_bf16, -big_bf16, worst_rounded_max(1024.0, 8.0, 64), 8388608.0, 255 * std::ldexp(1.0, 120),
        -std::ldexp(1.0, 127), 2.0},
       {16384.0, 16384.0, 8.0, 65536.0, std::ldexp(1.0, 120), std::ldexp(1.0, 120), 1.0 / 64},
       1.6e-2},
      {at::kHalf, {big_fp16, -big_fp16, worst_rounded_max(1024.0, 1.0, 1024), 2.0}, {32.0, 32.0, 1.0, 1.0 / 512},
       2e-3},
  };
  auto stream = dispatcher::current_stream(0);
  ASSERT_TRUE(stream.ok()) << stream.status().to_string();
  const auto cuda_f64 = at::TensorOptions().dtype(at::kDouble).device(at::kCUDA);
  for (const Case& c : cases) {
    const int64_t slabs = static_cast<int64_t>(c.maxima.size());
    const std::vector<int64_t> sizes = {slabs, 16384, 64};
    const at::Tensor m = at::tensor(c.maxima, cuda_f64.device(at::kCPU)).to(at::kCUDA).view({slabs, 1, 1});
    const at::Tensor u = at::tensor(c.ulps, cuda_f64.device(at::kCPU)).to(at::kCUDA).view({slabs, 1, 1});
    const at::Tensor rows = at::arange(16384, cuda_f64).view({1, 16384, 1}), cols = at::arange(64, cuda_f64);
    const at::Tensor at_max = at::fmod(rows, 4096).eq(at::fmod(cols.view({1, 1, 64}) * 37 +
                                                               at::arange(slabs, cuda_f64).view({slabs, 1, 1}), 4096));
    const at::Tensor exact = m - at::randint(1, 64, sizes, cuda_f64).masked_fill_(at_max, 0.0) * u;
    const at::Tensor x = exact.to(c.dtype);
    ASSERT_TRUE(x.to(at::kDouble).eq(exact).all().item<bool>()) << "inputs not representable in " << c.dtype;
    for (const std::string op : {"_softmax", "_log_softmax"}) {
      SCOPED_TRACE(op + " " + c10::toString(c.dtype));
      const auto bound = bind_held(testing::softmax_problem(op, c.dtype, sizes, testing::contiguous(sizes), 1,
                                                            false, info->sm),
                                   info.value());
      EXPECT_EQ(bound.size(), 5u);  // every held variant of the shape
      const at::Tensor ref = op == "_softmax" ? at::_softmax(x, 1, false) : at::_log_softmax(x, 1, false);
      const at::Tensor r = ref.to(at::kDouble);
      for (const auto& [id, kernel] : bound) {
        SCOPED_TRACE(id);
        at::Tensor out = at::full_like(x, 7.0);
        const std::vector<c10::IValue> args = {x, int64_t{1}, false};
        const Status st = kernel->launch(args.data(), args.size(), &out, stream.value());
        ASSERT_TRUE(st.ok()) << st.to_string();  // the comparison below runs after it on the same stream
        const at::Tensor o = out.to(at::kDouble);
        const at::Tensor close = at::isclose(o, r, c.rtol, 1e-5, /*equal_nan=*/true);
        for (int64_t s = 0; s < slabs; ++s)
          EXPECT_TRUE(close[s].all().item<bool>())
              << "slab " << s << " (max " << c.maxima[s] << "): " << (~close[s]).sum().item<int64_t>()
              << " outputs differ, largest |diff| " << (o[s] - r[s]).abs().max().item<double>();
      }
    }
  }
}

}  // namespace
}  // namespace cudal1::optimizer
