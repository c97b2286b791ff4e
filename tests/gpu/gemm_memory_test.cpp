/// @brief On the GPU: GPT-2's vocabulary head (an mm whose fp16 rows are not 16-byte aligned) is tuned by the gemm
/// family, swapped in and served equal to ATen (Note [Padded GEMM]); and with a tuning-memory budget below what
/// such a signature needs, it is not tuned, says why, and the app's calls go on through ATen (Note [Tuning
/// memory]). Shares gpu_pipeline_test's process (hooks on every family op, mm included).
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cstdio>

#include "cudal1/core/config.h"
#include "cudal1/dispatcher/hook.h"
#include "cudal1/optimizer/measure.h"
#include "cudal1/optimizer/tuner.h"
#include "gpu/gpu_env.h"

namespace cudal1 {
namespace {

using dispatcher::SigRecord;
using dispatcher::SigState;

/// The queued record of mm(a, w.t()) after `calls` calls.
SigRecord* hot_mm(const at::Tensor& a, const at::Tensor& w, int calls) {
  for (int i = 0; i < calls; ++i) at::mm(a, w.t());
  SigRecord* rec = nullptr;
  dispatcher::for_each_record([&](SigRecord& r) {
    if (r.op.operator_name().name == "aten::mm" && r.args[0].tensor.sizes == a.sizes().vec() &&
        r.args[1].tensor.sizes == w.t().sizes().vec() && r.args[1].tensor.dtype == w.scalar_type())
      rec = &r;
  });
  return rec;
}

optimizer::TunerOptions options() {
  optimizer::TunerOptions o;
  o.trials = 3;
  o.verify_trials = 4;
  o.timing_reps = 5;
  o.seed = 5;
  o.require_faster = false;
  return o;
}

TEST(GemmPipeline, TheVocabularyHeadIsSwappedAndServedEqualToAten) {
  CUDAL1_REQUIRE_GPU();
  const auto opts = at::TensorOptions().device(at::kCUDA).dtype(at::kHalf);
  const at::Tensor a = at::randn({512, 768}, opts), w = at::randn({50257, 768}, opts) * 0.05;
  SigRecord* rec = hot_mm(a, w, 60);
  ASSERT_NE(rec, nullptr);
  optimizer::Tuner tuner(options(), nullptr);
  auto r = tuner.tune(*rec);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  ASSERT_EQ(rec->state.load(), SigState::kReplaced) << rec->outcome().note;
  const auto outcome = rec->outcome();
  std::printf("vocabulary head: %s at %.2fx over ATen\n", outcome.variant.c_str(), outcome.speedup);
  const at::Tensor x = at::randn({512, 768}, opts);
  const uint64_t served = rec->replaced_calls.load();
  const at::Tensor ours = at::mm(x, w.t());
  EXPECT_EQ(rec->replaced_calls.load(), served + 1);
  dispatcher::BypassScope aten_only;
  const at::Tensor ref = at::mm(x, w.t());
  EXPECT_TRUE(ours.is_contiguous());
  EXPECT_EQ(ours.sizes(), ref.sizes());
  const double scale = ref.abs().max().item<double>();
  EXPECT_TRUE(at::allclose(ours.to(at::kFloat), ref.to(at::kFloat), 1e-3, (768 + 16384) * 1.19e-7 * scale))
      << "max abs diff " << (ours.to(at::kFloat) - ref.to(at::kFloat)).abs().max().item<double>();
}

TEST(TuningMemory, ASignatureOverTheBudgetIsNotTunedAndTheAppGoesOn) {
  CUDAL1_REQUIRE_GPU();
  const Config before = config();
  Config tight = before;
  tight.tune_memory_bytes = int64_t{64} << 20;  // the head needs ~1 GiB to tune
  set_config(tight);
  const auto opts = at::TensorOptions().device(at::kCUDA).dtype(at::kHalf);
  const at::Tensor a = at::randn({640, 768}, opts), w = at::randn({50257, 768}, opts) * 0.05;
  SigRecord* rec = hot_mm(a, w, 60);
  ASSERT_NE(rec, nullptr);
  optimizer::Tuner tuner(options(), nullptr);
  auto r = tuner.tune(*rec);
  set_config(before);
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(rec->state.load(), SigState::kAten);
  EXPECT_NE(rec->outcome().note.find("not tuned: it needs"), std::string::npos) << rec->outcome().note;
  EXPECT_NE(rec->outcome().note.find("the budget allows 64 MiB"), std::string::npos) << rec->outcome().note;
  const at::Tensor ours = at::mm(a, w.t());
  dispatcher::BypassScope aten_only;
  EXPECT_TRUE(at::allclose(ours.to(at::kFloat), at::mm(a, w.t()).to(at::kFloat), 1e-3, 1e-3));  // ATen both times
}

}  // namespace
}  // namespace cudal1
