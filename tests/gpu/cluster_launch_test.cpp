/// @brief Thread-block clusters through LoadedModule (Note [Clusters]): a non-portable cluster of 16 blocks
/// with more than 48 KB of dynamic shared memory each launches, every block reads its neighbour's shared
/// memory through distributed shared memory (the inline PTX the families use), and a malformed grid is refused.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <vector>

#include "cudal1/core/cuda_driver.h"
#include "cudal1/dispatcher/cuda_glue.h"
#include "cudal1/optimizer/compiler.h"
#include "cudal1/optimizer/device_info.h"
#include "cudal1/optimizer/family.h"
#include "gpu/gpu_env.h"

namespace cudal1::optimizer {
namespace {

const char* kSource = R"(
extern "C" __global__ void probe(int* out, int smem_ints) {
  extern __shared__ __align__(16) unsigned char smem[];
  int* mine = reinterpret_cast<int*>(smem);
  unsigned rank, n;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
  asm volatile("mov.u32 %0, %%cluster_nctarank;" : "=r"(n));
  if (threadIdx.x == 0) { mine[0] = blockIdx.x * 1000 + 7; mine[smem_ints - 1] = blockIdx.x; }
  asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;" ::: "memory");
  if (threadIdx.x == 0) {
    const unsigned peer = (rank + 1) % n;
    int v[2];
    for (int j = 0; j < 2; ++j) {
      const unsigned a = (unsigned)__cvta_generic_to_shared(j == 0 ? mine : mine + smem_ints - 1);
      unsigned ra;
      asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(ra) : "r"(a), "r"(peer));
      asm volatile("ld.shared::cluster.s32 %0, [%1];" : "=r"(v[j]) : "r"(ra) : "memory");
    }
    out[3 * blockIdx.x] = v[0];
    out[3 * blockIdx.x + 1] = v[1];
    out[3 * blockIdx.x + 2] = (int)(rank * 100 + n);
  }
  asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;" ::: "memory");
}
)";

TEST(Clusters, SixteenBlocksShareSharedMemory) {
  CUDAL1_REQUIRE_GPU();
  auto info = device_info(0);
  ASSERT_TRUE(info.ok()) << info.status().to_string();
  if (info.value().sm < 90)
    GTEST_SKIP() << "thread-block clusters need compute capability 9.0 (device: sm_" << info.value().sm << ")";
  auto k = compile(KernelSource{kSource, "probe"}, info.value().sm);
  ASSERT_TRUE(k.ok()) << k.status().to_string();
  auto m = LoadedModule::load(0, k.value().cubin, "probe");
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  constexpr unsigned kCluster = 16, kBlock = 128, kSmem = 100 * 1024, kClusters = 20;
  ASSERT_TRUE(m.value()->configure_clusters(kSmem).ok());
  EXPECT_GT(m.value()->max_active_clusters(kBlock, kCluster, kSmem), 0);
  const unsigned grid = kCluster * kClusters;
  at::Tensor out = at::full({3 * grid}, -1, at::TensorOptions().dtype(at::kInt).device(at::kCUDA));
  void* ptr = out.data_ptr();
  int smem_ints = kSmem / 4;
  void* params[] = {&ptr, &smem_ints};
  dispatcher::ContextScope ctx(0);
  ASSERT_TRUE(ctx.status().ok());
  const Status st = m.value()->launch_clusters(grid, kBlock, kCluster, kSmem, nullptr, params);
  ASSERT_TRUE(st.ok()) << st.to_string();
  const auto host = out.cpu();
  const int* h = host.data_ptr<int>();
  for (unsigned b = 0; b < grid; ++b) {
    const unsigned rank = b % kCluster, peer = b - rank + (rank + 1) % kCluster;
    ASSERT_EQ(h[3 * b], static_cast<int>(peer * 1000 + 7)) << "block " << b;
    ASSERT_EQ(h[3 * b + 1], static_cast<int>(peer)) << "block " << b;
    ASSERT_EQ(h[3 * b + 2], static_cast<int>(rank * 100 + kCluster)) << "block " << b;
  }
  // A grid that is not a whole number of clusters is refused before the driver sees it.
  EXPECT_EQ(m.value()->launch_clusters(grid + 1, kBlock, kCluster, kSmem, nullptr, params).code(),
            Code::kInvalidArgument);
}

}  // namespace
}  // namespace cudal1::optimizer
