/// @brief GPU fuzz test, one per family: at least 1000 random signatures each (ranks 1-5; sizes including 0, 1,
/// odd and prime; permuted, sliced and stepped strides; every dtype; every dim), each planned as the tuner would.
/// For every signature the family accepts, a random variant of its space (any variant may be the one swapped in)
/// is compiled with NVRTC, loaded and verified against ATen (fresh inputs, specials, poisoned and guarded
/// outputs; Note [Verification]). 0 mismatches are allowed, and enough signatures must be accepted for the test
/// to mean something. The drawers and the favoured variants per family are in fuzz_draws.cpp.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <iterator>
#include <map>
#include <thread>

#include "cudal1/optimizer/compiler.h"
#include "cudal1/optimizer/device_info.h"
#include "cudal1/optimizer/family.h"
#include "cudal1/optimizer/measure.h"
#include "gpu/fuzz_draws.h"
#include "gpu/gpu_env.h"
#include "optimizer/problems.h"

namespace cudal1 {
namespace {

using namespace fuzz;

constexpr int kSignatures = 1000;

struct Job {
  Problem problem;
  std::unique_ptr<optimizer::Plan> plan;
  optimizer::Variant variant;
  Result<optimizer::CompiledKernel> compiled = Status(Code::kInternal, "not compiled");
};

/// Fills in the unary, softmax or scan problem's strides when the builder left them to us.
void layout_missing_strides(Rng& rng, Problem* p) {
  auto& t = p->args[0].tensor;
  if (t.strides.empty() && !t.sizes.empty()) {
    std::vector<int64_t> strides;
    int64_t offset = 0;
    draw_layout(rng, t.sizes, 4, &strides, &offset);
    t.strides = strides;
    t.storage_offset = offset;
  }
  if (t.sizes.empty()) t.strides.clear();
}

/// `prefer`: when set, two draws in three pick among the variants it selects (where the space has any).
void fuzz(const std::string& family_op, Problem (*draw)(Rng&, int), uint64_t seed,
          bool (*prefer)(const optimizer::Variant&) = nullptr) {
  CUDAL1_REQUIRE_GPU();
  auto info = optimizer::device_info(0);
  ASSERT_TRUE(info.ok()) << info.status().to_string();
  const optimizer::Family* family = optimizer::family_for(family_op, "");
  ASSERT_NE(family, nullptr);
  Rng rng(seed);
  std::vector<Job> jobs;
  std::map<std::string, int> declined;
  std::map<std::string, int> knobs_drawn;  // which technique knob values the planned draws reach
  for (int i = 0; i < kSignatures; ++i) {
    Job j;
    j.problem = draw(rng, info->sm);
    j.problem.sm_count = info->sm_count;
    layout_missing_strides(rng, &j.problem);
    j.problem.signature = family_op + " #" + std::to_string(i);
    auto plan = optimizer::family_for(j.problem.op, j.problem.overload)->plan(j.problem);
    if (!plan.ok()) {
      ASSERT_EQ(plan.status().code(), Code::kUnsupported) << plan.status().to_string();
      ++declined[plan.status().message()];
      continue;
    }
    auto space = plan.value()->space();
    ASSERT_FALSE(space.empty());
    if (prefer && rng() % 3 != 0) {
      std::vector<optimizer::Variant> preferred;
      std::copy_if(space.begin(), space.end(), std::back_inserter(preferred), prefer);
      if (!preferred.empty()) space = std::move(preferred);
    }
    j.variant = space[rng() % space.size()];
    for (const auto& [knob, value] : j.variant.knobs) ++knobs_drawn[knob + "=" + std::to_string(value)];
    j.plan = std::move(plan).value();
    jobs.push_back(std::move(j));
  }
  // NVRTC in parallel (thread-safe), then load and verify on this thread.
  std::atomic<size_t> next{0};
  std::vector<std::thread> threads;
  for (unsigned t = 0; t < std::max(2u, std::thread::hardware_concurrency()); ++t)
    threads.emplace_back([&] {
      for (size_t i; (i = next++) < jobs.size();) {
        auto src = jobs[i].plan->source(jobs[i].variant);
        jobs[i].compiled =
            src.ok() ? optimizer::compile(src.value(), info->sm) : Result<optimizer::CompiledKernel>(src.status());
      }
    });
  for (auto& t : threads) t.join();
  int verified = 0, call_declined = 0, mismatches = 0;
  std::map<std::string, int> call_reasons;
  for (auto& j : jobs) {
    const std::string what = j.problem.op + " " + j.variant.id() + " on " + [&] {
      std::string s;
      for (const auto& a : j.problem.args)
        if (a.is_tensor && a.tensor.defined)
          s += std::string(c10::toString(a.tensor.dtype)) + c10::str(c10::IntArrayRef(a.tensor.sizes)) +
               c10::str(c10::IntArrayRef(a.tensor.strides)) + "+" + std::to_string(a.tensor.storage_offset) + " ";
      return s;
    }();
    ASSERT_TRUE(j.compiled.ok()) << what << ": " << j.compiled.status().to_string();
    auto module = optimizer::LoadedModule::load(0, j.compiled->cubin, j.compiled->kernel_name);
    ASSERT_TRUE(module.ok()) << what << ": " << module.status().to_string();
    auto bound = j.plan->bind(j.variant, module.value());
    ASSERT_TRUE(bound.ok()) << what << ": " << bound.status().to_string();
    const auto& op = c10::Dispatcher::singleton().findSchemaOrThrow(("aten::" + j.problem.op).c_str(),
                                                                     j.problem.overload.c_str());
    const Status st =
        optimizer::verify(j.problem, op, *bound.value(), 0, testing::kEveryScaleTrials, seed ^ verified, nullptr);
    if (st.ok()) {
      ++verified;
    } else if (st.code() == Code::kUnsupported) {
      ++call_declined;  // the kernel declined this call (alignment): ATen serves it
      ++call_reasons[st.message()];
    } else {
      ++mismatches;
      ADD_FAILURE() << what << ": " << st.to_string();
    }
  }
  std::printf("[fuzz %s] %d signatures: %zu planned, %d verified against ATen, %d declined at the call, "
              "%d mismatches\n", family->name(), kSignatures, jobs.size(), verified, call_declined, mismatches);
  std::string reached;
  for (const auto& [kv, n] : knobs_drawn) reached += " " + kv + ":" + std::to_string(n);
  std::printf("[fuzz %s] knob values drawn:%s\n", family->name(), reached.c_str());
  for (const auto& [why, n] : declined)
    std::printf("[fuzz %s]   declined by the planner %4d x %s\n", family->name(), n, why.c_str());
  for (const auto& [why, n] : call_reasons)
    std::printf("[fuzz %s]   declined at the call %4d x %s\n", family->name(), n, why.c_str());
  EXPECT_EQ(mismatches, 0);
  EXPECT_GE(verified, kSignatures / 4) << "too few signatures accepted for the fuzz to mean anything";
}

TEST(FamilyFuzz, UnaryElementwise) { fuzz("relu", &unary, 101); }
TEST(FamilyFuzz, Softmax) { fuzz("_softmax", &softmax, 202, &softmax_cluster_variant); }
TEST(FamilyFuzz, Norm) { fuzz("native_layer_norm", &norm, 303, &norm_chip_variant); }
TEST(FamilyFuzz, Pool) { fuzz("max_pool2d", &pool, 404, &pool_slide_variant); }
TEST(FamilyFuzz, Scan) { fuzz("cumsum", &scan, 505, &scan_native_variant); }
TEST(FamilyFuzz, Reduce) { fuzz("amax", &reduction, 606, &reduce_pipelined_tile); }
TEST(FamilyFuzz, Binary) { fuzz("maximum", &binary, 707); }
TEST(FamilyFuzz, BatchNorm) { fuzz("native_batch_norm", &batch_norm, 808); }
TEST(FamilyFuzz, Gemm) { fuzz("mm", &gemm, 909, &gemm_residue_variant); }

}  // namespace
}  // namespace cudal1
