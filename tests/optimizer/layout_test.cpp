/// @brief The predicted output layout equals what ATen's TensorIterator allocates (checked against ATen on CPU,
/// which runs the same TensorIterator code as CUDA), and coalescing merges exactly the mergeable dims.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "cudal1/optimizer/layout.h"

namespace cudal1::optimizer {
namespace {

std::vector<at::Tensor> layouts() {
  const at::Tensor base = at::randn({6, 8, 10});
  return {base,
          base.transpose(0, 2),
          base.permute({1, 2, 0}),
          base.narrow(2, 1, 7),
          base.narrow(1, 0, 4).transpose(1, 2),
          base.select(1, 3),
          base.index({at::indexing::Slice(), at::indexing::Slice(at::indexing::None, at::indexing::None, 2)}),
          at::randn({1, 5, 1, 3}),
          at::randn({5, 1, 3}).expand({5, 4, 3}),
          at::randn({4, 1}).expand({4, 6}).t(),
          at::randn({3, 3, 3}).as_strided({3, 3}, {1, 3}, 2),
          at::randn({2, 3, 4, 5}).contiguous(at::MemoryFormat::ChannelsLast),
          at::randn({2, 3, 4, 5}).contiguous(at::MemoryFormat::ChannelsLast).narrow(3, 0, 3),
          at::randn({7}),
          // Size-1 dimensions whose strides differ from the format's (found by the GPU fuzz test):
          at::randn({2048}).as_strided({1, 1023}, {1, 1}),
          at::randn({97}).as_strided({97, 1}, {1, 97}),
          at::randn({2}).as_strided({1}, {2}),
          at::randn({128 * 128 * 128}).as_strided({128, 128, 1, 128}, {16384, 1, 128, 128}),
          at::randn({32 * 32 * 39 * 31}).as_strided({32, 1, 32, 39, 31}, {38688, 31, 1209, 31, 1}),
          at::randn({128 * 4096}).as_strided({128, 4096, 1}, {4096, 1, 524288})};
}

TEST(Layout, PredictsAtensOutputStrides) {
  for (const auto& t : layouts()) {
    const at::Tensor out = at::exp(t);
    EXPECT_EQ(elementwise_output_strides(t.sizes().vec(), t.strides().vec()), out.strides().vec())
        << "sizes " << t.sizes() << " strides " << t.strides();
  }
}

OperandLayout layout_of(const at::Tensor& t) { return {t.sizes().vec(), t.strides().vec()}; }

// Binary and ternary ops: same-dtype operands, so that CPU's TensorIterator (which casts mixed dtypes to
// temporaries first) sees exactly the layouts CUDA's does.
TEST(Layout, PredictsAtensBroadcastOutputStrides) {
  const auto ls = layouts();
  std::vector<std::pair<at::Tensor, at::Tensor>> pairs;
  for (size_t i = 0; i < ls.size(); ++i)
    for (size_t j = 0; j < ls.size(); ++j)
      if (ls[i].sizes() == ls[j].sizes()) pairs.emplace_back(ls[i], ls[j]);
  const at::Tensor m = at::randn({8, 16}), nchw = at::randn({4, 6, 5, 7});
  const at::Tensor cl = nchw.contiguous(at::MemoryFormat::ChannelsLast);
  pairs.insert(pairs.end(), {{m, at::randn({16})},
                             {at::randn({16}), m},
                             {m, at::randn({8, 1})},
                             {m.t(), at::randn({8})},
                             {m.t(), at::randn({16, 1})},
                             {m, at::scalar_tensor(2.0)},
                             {at::scalar_tensor(2.0), m.t()},
                             {cl, at::randn({4, 6, 1, 1})},
                             {cl, at::randn({6, 1, 1})},
                             {at::randn({1, 6, 1, 1}), cl},
                             {cl, nchw},
                             {nchw, cl},
                             {cl, at::randn({7})},
                             {cl.narrow(3, 0, 3), at::randn({1, 6, 5, 1})},
                             {at::randn({5, 1, 3}), at::randn({4, 1})},
                             {at::randn({3, 1, 5}).transpose(0, 2), at::randn({4, 1})},
                             {at::randn({6, 8, 10}).permute({2, 0, 1}), at::randn({6, 1})},
                             {at::randn({2, 3, 4}).transpose(1, 2), at::randn({4, 2, 3}).transpose(0, 1)}});
  for (const auto& [a, b] : pairs) {
    std::vector<int64_t> shape;
    ASSERT_TRUE(broadcast_shape({layout_of(a), layout_of(b)}, &shape)) << a.sizes() << " " << b.sizes();
    const at::Tensor out = at::add(a, b);
    ASSERT_EQ(shape, out.sizes().vec());
    EXPECT_EQ(broadcast_output_strides(shape, {layout_of(a), layout_of(b)}), out.strides().vec())
        << "a " << a.sizes() << a.strides() << " b " << b.sizes() << b.strides();
    const at::Tensor cond = at::randn({out.size(-1)}) > 0;
    const at::Tensor w = at::where(cond, a, b);
    EXPECT_EQ(broadcast_output_strides(shape, {layout_of(cond), layout_of(a), layout_of(b)}), w.strides().vec())
        << "where: a " << a.sizes() << a.strides() << " b " << b.sizes() << b.strides();
  }
  std::vector<int64_t> shape;
  EXPECT_FALSE(broadcast_shape({{{3, 4}, {4, 1}}, {{5}, {1}}}, &shape));
}

TEST(Layout, NonOverlappingAndDense) {
  EXPECT_TRUE(non_overlapping_and_dense({4, 5}, {5, 1}));
  EXPECT_TRUE(non_overlapping_and_dense({4, 5}, {1, 4}));
  EXPECT_TRUE(non_overlapping_and_dense({1, 5}, {99, 1}));
  EXPECT_FALSE(non_overlapping_and_dense({4, 5}, {10, 1}));
  EXPECT_FALSE(non_overlapping_and_dense({4, 5}, {0, 1}));
}

TEST(Layout, CoalesceMergesContiguousDimsOnly) {
  auto a = coalesce({4, 5, 6}, {30, 6, 1}, {30, 6, 1});
  EXPECT_EQ(a.sizes, (std::vector<int64_t>{120}));
  EXPECT_TRUE(a.linear());
  auto b = coalesce({4, 5, 6}, {30, 6, 1}, {60, 12, 1});  // sliced rows: inner 6 contiguous, rows strided
  EXPECT_EQ(b.sizes, (std::vector<int64_t>{6, 20}));
  EXPECT_EQ(b.in_strides, (std::vector<int64_t>{1, 12}));
  EXPECT_FALSE(b.linear());
  auto c = coalesce({4, 5}, {5, 1}, {1, 4});  // transposed input, contiguous output
  EXPECT_EQ(c.sizes, (std::vector<int64_t>{5, 4}));
  EXPECT_EQ(c.in_strides, (std::vector<int64_t>{4, 1}));
  EXPECT_EQ(coalesce({1, 1}, {1, 1}, {1, 1}).numel, 1);
}

TEST(Layout, ChannelsLastReadingMatchesAtenIncludingAmbiguousCases) {
  EXPECT_TRUE(channels_last_strides_2d({2, 3, 4, 5}, {60, 1, 15, 3}));
  EXPECT_FALSE(channels_last_strides_2d({2, 3, 4, 5}, {60, 20, 5, 1}));
  EXPECT_FALSE(channels_last_strides_2d({2, 3, 4}, {12, 4, 1}));          // not 4-d
  EXPECT_FALSE(channels_last_strides_2d({4, 1, 1, 1}, {1, 1, 1, 1}));     // N111: NCHW by default
  EXPECT_FALSE(channels_last_strides_2d({2, 3, 4, 5}, {60, 0, 15, 3}));   // trivial C stride
  EXPECT_FALSE(channels_last_strides_2d({0, 3, 4, 5}, {60, 1, 15, 3}));   // empty
  EXPECT_TRUE(channels_last_strides_2d({4, 1, 8, 8}, {64, 1, 8, 1}));     // C == 1 in channels-last strides
  EXPECT_EQ(channels_last_strides({2, 3, 4, 5}), (std::vector<int64_t>{60, 1, 15, 3}));
}

}  // namespace
}  // namespace cudal1::optimizer
