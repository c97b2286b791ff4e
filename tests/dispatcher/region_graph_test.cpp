/// @brief Region graphs' trial arithmetic (Note [Region graphs]): periods per mode from region ends, and the
/// decision with its margin. The GPU side is tests/gpu/region_graph_gpu_test.cpp.
#include "cudal1/dispatcher/region_graph.h"

#include <gtest/gtest.h>

#include "cudal1/dispatcher/cuda_glue.h"

namespace cudal1::dispatcher {
namespace {

TEST(RegionGraphTrial, PeriodsAreTakenWithinOneModeOnly) {
  // graph ends at 0, 2, 4; eager ends at 10, 13, 16; graph again at 17, 19.
  const std::vector<TrialMark> marks = {{true, 0},   {true, 2},   {true, 4},   {false, 10}, {false, 13},
                                        {false, 16}, {true, 17},  {true, 19}};
  std::vector<double> g, e;
  trial_periods(marks, &g, &e);
  EXPECT_EQ(g, (std::vector<double>{2, 2, 2}));  // 4 -> 10 and 16 -> 17 span a mode change: dropped
  EXPECT_EQ(e, (std::vector<double>{3, 3}));
}

TEST(RegionGraphTrial, TheGraphMustWinByTheMargin) {
  EXPECT_TRUE(graph_wins({2.0, 2.1, 1.9}, {3.0, 3.1, 2.9}, 0.03));
  EXPECT_FALSE(graph_wins({2.95, 2.95, 2.95}, {3.0, 3.0, 3.0}, 0.03));  // 1.7% faster: within the margin
  EXPECT_FALSE(graph_wins({4.0}, {3.0}, 0.03));
  EXPECT_FALSE(graph_wins({}, {3.0}, 0.03));  // a mode without a period decides nothing
  EXPECT_FALSE(graph_wins({1.0}, {}, 0.03));
  // Medians, not means: one slow outlier period does not decide.
  EXPECT_TRUE(graph_wins({2.0, 2.0, 50.0}, {3.0, 3.0, 3.0}, 0.03));
}

class Nothing final : public ChainKernel {
 public:
  Status run(const std::vector<at::Tensor>&, const std::vector<std::vector<at::Tensor>>&) noexcept override {
    return Status();
  }
  std::string describe() const override { return "nothing"; }
};

TEST(RegionGraphTrial, WithoutTorchCudaTheKernelIsUnchanged) {
  if (has_torch_cuda()) GTEST_SKIP() << "this build has torch-CUDA: the kernel is wrapped (GPU tests cover it)";
  const ChainRecord chain(1, {}, {}, 0);
  auto inner = std::make_unique<Nothing>();
  ChainKernel* raw = inner.get();
  const auto k = graph_chain_kernel(chain, std::move(inner));
  EXPECT_EQ(k.get(), raw);
}

}  // namespace
}  // namespace cudal1::dispatcher
