/// @brief Every 16-bit input, every unary op: for fp16 and bf16, a tensor holding each of the 65536 bit patterns
/// once (zeros, subnormals, Infs, NaNs included) goes through a kernel of every vector width of every op's plan,
/// and each output is compared with ATen's on the same tensor: NaN where ATen has NaN, the same Inf, and every
/// finite value within the dtype's tolerance (the verification rule). The test prints how many outputs differ
/// from ATen's at all and by how many ulps at most, so the table's claims (Note [Unary math for 16-bit outputs]) are
/// checked by the hardware's own rcp and ex2 rather than a host emulation of them.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <functional>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include "cudal1/dispatcher/cuda_glue.h"
#include "cudal1/dispatcher/hook.h"
#include "cudal1/optimizer/family.h"
#include "cudal1/optimizer/measure.h"
#include "gpu/gpu_env.h"
#include "gpu/variant_sweep.h"
#include "optimizer/problems.h"

namespace cudal1::optimizer {
namespace {

/// The 16-bit patterns as integers ordered like the values they encode (-0 and +0 both 0), so that the
/// difference of two is their distance in ulps.
at::Tensor ordered(const at::Tensor& bits16) {
  const at::Tensor b = bits16.view(at::kShort).to(at::kInt);
  return at::where(b < 0, -(b + 32768), b);
}

struct Case {
  std::string op, approximate;
  std::function<at::Tensor(const at::Tensor&)> aten;
};

TEST(UnaryExhaustive, EverySixteenBitInputMatchesAten) {
  CUDAL1_REQUIRE_GPU();
  const int sm = testing::device_sm();
  ASSERT_GT(sm, 0);
  if (sm < 80) GTEST_SKIP() << "bf16 is planned on sm_80+ only (device: sm_" << sm << ")";
  dispatcher::BypassScope aten_only;  // the references run on ATen, unprofiled (other tests here install hooks)
  dispatcher::ContextScope context(0);
  ASSERT_TRUE(context.status().ok()) << context.status().to_string();
  auto stream = dispatcher::current_stream(0);
  ASSERT_TRUE(stream.ok()) << stream.status().to_string();
  const std::vector<Case> cases = {
      {"relu", "", [](const at::Tensor& x) { return at::relu(x); }},
      {"gelu", "none", [](const at::Tensor& x) { return at::gelu(x); }},
      {"gelu", "tanh", [](const at::Tensor& x) { return at::gelu(x, "tanh"); }},
      {"sigmoid", "", [](const at::Tensor& x) { return at::sigmoid(x); }},
      {"tanh", "", [](const at::Tensor& x) { return at::tanh(x); }},
      {"silu", "", [](const at::Tensor& x) { return at::silu(x); }},
      {"exp", "", [](const at::Tensor& x) { return at::exp(x); }},
      {"neg", "", [](const at::Tensor& x) { return at::neg(x); }},
      {"abs", "", [](const at::Tensor& x) { return at::abs(x); }}};
  const at::Tensor patterns =
      at::arange(-32768, 32768, at::TensorOptions().dtype(at::kInt).device(at::kCUDA)).to(at::kShort);
  int kernels = 0;
  for (const auto& c : cases)
    for (auto dt : {at::kHalf, at::kBFloat16}) {
      const std::string name = c.op + (c.approximate.empty() ? "" : "(" + c.approximate + ")") + " " +
                               c10::toString(dt);
      SCOPED_TRACE(name);
      const at::Tensor x = patterns.view(dt);
      Problem p = testing::unary_problem(c.op, dt, {65536}, {1}, sm, 0, c.approximate);
      p.signature = name;
      auto plan = family_for(p.op, p.overload)->plan(p);
      ASSERT_TRUE(plan.ok()) << plan.status().to_string();
      const at::Tensor ref = c.aten(x);
      const at::Tensor ref64 = ref.to(at::kDouble);
      const auto [rtol, atol] = tolerance(dt);
      std::set<int> vecs_done;
      for (const Variant& v : plan.value()->space()) {
        // The math is the same in every variant; each vector width has its own load and convert path.
        if (v.get("block") != 256 || v.get("unroll") != 1 || v.get("grid") != 0) continue;
        if (!vecs_done.insert(v.get("vec")).second) continue;
        SCOPED_TRACE(v.id());
        auto bound = testing::build_variant(*plan.value(), v, sm);
        ASSERT_TRUE(bound.ok()) << bound.status().to_string();
        at::Tensor out = at::full({65536}, std::numeric_limits<double>::quiet_NaN(), x.options());
        std::vector<c10::IValue> args = {x};
        if (c.op == "gelu") args.emplace_back(c.approximate);
        const Status st = bound.value()->launch(args.data(), args.size(), &out, stream.value());
        ASSERT_TRUE(st.ok()) << st.to_string();
        const at::Tensor out64 = out.to(at::kDouble);
        const at::Tensor nan_parity = at::isnan(out64) == at::isnan(ref64);
        const at::Tensor close = at::isclose(out64, ref64, rtol, atol, /*equal_nan=*/true);
        const at::Tensor both_finite = at::isfinite(out64) & at::isfinite(ref64);
        const int64_t bad = (~(nan_parity & close)).sum().item<int64_t>();
        const at::Tensor ulps = (ordered(out) - ordered(ref)).abs().masked_fill(~both_finite, 0);
        const int64_t differ = (ulps > 0).sum().item<int64_t>();
        const int64_t max_ulp = ulps.max().item<int64_t>();
        if (bad > 0) {
          const int64_t i = (~(nan_parity & close)).nonzero()[0][0].item<int64_t>();
          ADD_FAILURE() << bad << " outputs outside tolerance; first: x = " << x[i].item<double>() << ", ours "
                        << out[i].item<double>() << ", ATen " << ref[i].item<double>();
        }
        if (vecs_done.size() == 1)
          std::printf("[unary exhaustive] %-16s 65536 inputs: %5lld outputs differ from ATen's, at most %lld ulp\n",
                      name.c_str(), static_cast<long long>(differ), static_cast<long long>(max_ulp));
        ++kernels;
      }
      EXPECT_GE(vecs_done.size(), 4u) << "vector widths 1, 2, 4, 8 of a contiguous 65536-element tensor";
    }
  std::printf("[unary exhaustive] %d kernels checked on every 16-bit input\n", kernels);
  EXPECT_EQ(kernels, 9 * 2 * 4);
}

}  // namespace
}  // namespace cudal1::optimizer
