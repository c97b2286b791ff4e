/// @brief compile_concurrently (Note [Concurrent NVRTC]): on real generated unary sources, a source that NVRTC
/// rejects and a source maker that fails or throws, every thread count gives the builds a serial make +
/// compile() gives, in index order. Host-only: needs NVRTC, not a GPU.
#include <gtest/gtest.h>

#include <stdexcept>

#include "cudal1/core/nvrtc.h"
#include "cudal1/optimizer/compiler.h"
#include "cudal1/optimizer/family.h"
#include "optimizer/problems.h"

namespace cudal1::optimizer {
namespace {

class ParallelCompile : public ::testing::Test {
 protected:
  void SetUp() override {
    if (auto n = nvrtc(); !n.ok()) GTEST_SKIP() << "NVRTC not installed here: " << n.status().message();
  }
};

TEST_F(ParallelCompile, SameBuildsAsSerialCompileForEveryThreadCount) {
  auto plan = family_for("silu", "")->plan(testing::unary_problem("silu", at::kHalf, {512, 256}, {256, 1}, 90));
  ASSERT_TRUE(plan.ok()) << plan.status().to_string();
  const std::vector<Variant> space = plan.value()->space();
  ASSERT_GE(space.size(), 4u);
  // Jobs: four real variants, then a source NVRTC rejects, then a maker that fails and one that throws.
  const size_t real = 4, n = real + 3;
  const SourceMaker make = [&](size_t i) -> Result<KernelSource> {
    if (i < real) return plan.value()->source(space[i]);
    if (i == real) return KernelSource{"extern \"C\" __global__ void broken() { undeclared_name(); }", "broken"};
    if (i == real + 1) return Status(Code::kUnsupported, "no source for this one");
    throw std::runtime_error("maker threw");
  };
  std::vector<Result<CompiledKernel>> serial;
  for (size_t i = 0; i < real + 1; ++i) serial.push_back(compile(make(i).value(), 90));
  for (size_t threads : {size_t{1}, size_t{3}, size_t{8}}) {
    const std::vector<VariantBuild> builds = compile_concurrently(n, make, 90, threads);
    ASSERT_EQ(builds.size(), n);
    for (size_t i = 0; i < real + 1; ++i) {
      SCOPED_TRACE("job " + std::to_string(i) + ", " + std::to_string(threads) + " threads");
      EXPECT_TRUE(builds[i].has_source);
      ASSERT_EQ(builds[i].kernel.ok(), serial[i].ok()) << builds[i].kernel.status().to_string();
      if (!serial[i].ok()) {
        EXPECT_EQ(builds[i].kernel.status().code(), Code::kCompileError);
        continue;
      }
      EXPECT_EQ(builds[i].kernel->cubin.size(), serial[i]->cubin.size());
      EXPECT_GT(builds[i].kernel->cubin.size(), 1000u);
      EXPECT_EQ(builds[i].kernel->kernel_name, serial[i]->kernel_name);
    }
    EXPECT_FALSE(serial[real].ok());
    EXPECT_FALSE(builds[real + 1].has_source);
    EXPECT_EQ(builds[real + 1].kernel.status().code(), Code::kUnsupported);
    EXPECT_FALSE(builds[real + 2].has_source);
    EXPECT_EQ(builds[real + 2].kernel.status().code(), Code::kInternal);
    EXPECT_NE(builds[real + 2].kernel.status().message().find("maker threw"), std::string::npos);
  }
  EXPECT_TRUE(compile_concurrently(0, make, 90, 4).empty());
}

}  // namespace
}  // namespace cudal1::optimizer
