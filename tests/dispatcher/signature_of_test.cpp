/// @brief Signature encoding and text from boxed stacks.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <limits>

#include "cudal1/dispatcher/signature_of.h"

namespace cudal1::dispatcher {
namespace {

c10::OperatorHandle op(const char* name, const char* overload) {
  return c10::Dispatcher::singleton().findSchemaOrThrow(name, overload);
}

TEST(SignatureOf, TextNamesKwargsAndKeepsDoublesExact) {
  const auto gelu = op("aten::gelu", "");
  torch::jit::Stack s{at::empty({2, 3}), std::string("tanh")};
  EXPECT_EQ(describe_call(gelu, s, 2), "aten::gelu(f32[2,3]{3,1}@cpu, approximate='tanh')");
  const auto add = op("aten::add", "Tensor");
  torch::jit::Stack s2{at::empty({2}, at::kHalf), at::empty({2}, at::kHalf), 0.1};
  EXPECT_EQ(describe_call(add, s2, 3), "aten::add.Tensor(f16[2]{1}@cpu, f16[2]{1}@cpu, alpha=0.10000000000000001)");
  // An integral double keeps its ".0": the text (a cache key) tells it from the int of the same value, as the
  // in-process words do.
  const at::Tensor h = at::empty({2}, at::kHalf);
  EXPECT_EQ(describe_call(add, torch::jit::Stack{h, h, 1}, 3),
            "aten::add.Tensor(f16[2]{1}@cpu, f16[2]{1}@cpu, alpha=1)");
  EXPECT_EQ(describe_call(add, torch::jit::Stack{h, h, 1.0}, 3),
            "aten::add.Tensor(f16[2]{1}@cpu, f16[2]{1}@cpu, alpha=1.0)");
  EXPECT_EQ(describe_call(add, torch::jit::Stack{h, h, -3e20}, 3),
            "aten::add.Tensor(f16[2]{1}@cpu, f16[2]{1}@cpu, alpha=-3e+20)");
  EXPECT_EQ(describe_call(add, torch::jit::Stack{h, h, std::numeric_limits<double>::infinity()}, 3),
            "aten::add.Tensor(f16[2]{1}@cpu, f16[2]{1}@cpu, alpha=inf)");
}

TEST(SignatureOf, WordsSeparateLayoutsAndScalars) {
  const auto add = op("aten::add", "Tensor");
  auto key = [&](const torch::jit::Stack& s) {
    SigKey k;
    EXPECT_TRUE(encode_call(add, s, 3, &k));
    return std::vector<int64_t>(k.words.begin(), k.words.end());
  };
  const at::Tensor a = at::empty({4, 4});
  EXPECT_EQ(key({a, a, 1}), key({a, a, 1}));
  EXPECT_NE(key({a, a, 1}), key({a, a, 2}));
  EXPECT_NE(key({a, a, 1}), key({a, a, 1.0}));
  EXPECT_NE(key({a, a, 1}), key({a, a.t(), 1}));
  EXPECT_NE(key({a, a, 1}), key({a, a.to(at::kDouble), 1}));
}

// The typed carrier's allocation-free key_add overloads write what key_add of the boxed IValue writes.
TEST(SignatureOf, DirectKeysEqualBoxedKeys) {
  auto words = [](auto&& add) {
    SigKey k;
    EXPECT_TRUE(add(&k));
    return std::vector<int64_t>(k.words.begin(), k.words.end());
  };
  const std::vector<int64_t> list{3, 1, 4};
  const c10::IntArrayRef ints(list);
  EXPECT_EQ(words([&](SigKey* k) { return key_add(ints, k); }),
            words([&](SigKey* k) { return key_add(c10::IValue(ints), k); }));
  const std::vector<c10::SymInt> syms{c10::SymInt(3), c10::SymInt(1), c10::SymInt(4)};
  const c10::SymIntArrayRef sym_ref(syms);
  EXPECT_EQ(words([&](SigKey* k) { return key_add(sym_ref, k); }),
            words([&](SigKey* k) { return key_add(c10::IValue(sym_ref), k); }));
  for (const c10::OptionalIntArrayRef& dims : {c10::OptionalIntArrayRef(), c10::OptionalIntArrayRef(ints)})
    EXPECT_EQ(words([&](SigKey* k) { return key_add(dims, k); }),
              words([&](SigKey* k) { return key_add(c10::IValue(dims), k); }));
  for (const c10::optional<at::Tensor>& t :
       {c10::optional<at::Tensor>(), c10::optional<at::Tensor>(at::empty({2, 3})),
        c10::optional<at::Tensor>(at::Tensor())})
    EXPECT_EQ(words([&](SigKey* k) { return key_add(t, k); }),
              words([&](SigKey* k) { return key_add(c10::IValue(t), k); }));
}

TEST(SignatureOf, UnkeyableCallsAreRefused) {
  const auto add = op("aten::add", "Tensor");
  SigKey k;
  const at::Tensor sparse = at::eye(3).to_sparse();
  EXPECT_FALSE(encode_call(add, {sparse, sparse, 1}, 3, &k));
  const auto bern = op("aten::bernoulli", "");
  EXPECT_FALSE(encode_call(bern, {at::rand({3}), at::detail::createCPUGenerator()}, 2, &k));
}

TEST(SignatureOf, ArgSpecsKeepNoTensors) {
  const at::Tensor t = at::empty({5, 2}).t();
  const auto specs = arg_specs({t, 3.5}, 2);
  ASSERT_TRUE(specs[0].is_tensor);
  EXPECT_EQ(specs[0].tensor.sizes, (std::vector<int64_t>{2, 5}));
  EXPECT_EQ(specs[0].tensor.strides, (std::vector<int64_t>{1, 2}));
  EXPECT_DOUBLE_EQ(specs[1].value.toDouble(), 3.5);
}

}  // namespace
}  // namespace cudal1::dispatcher
