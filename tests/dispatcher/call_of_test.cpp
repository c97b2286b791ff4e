/// @brief Rebuilding calls from their signature text: every argument kind the families' ops take round-trips
/// to the same text and the same key; malformed or foreign texts give clear errors.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>

#include "cudal1/dispatcher/call_of.h"
#include "cudal1/dispatcher/signature_of.h"

namespace cudal1::dispatcher {
namespace {

c10::OperatorHandle op(const char* name, const char* overload) {
  return c10::Dispatcher::singleton().findSchemaOrThrow(name, overload);
}

std::vector<int64_t> words(const c10::OperatorHandle& o, const torch::jit::Stack& s) {
  SigKey k;
  EXPECT_TRUE(encode_call(o, s, s.size(), &k));
  return std::vector<int64_t>(k.words.begin(), k.words.end());
}

/// The text of a CPU call as a CUDA call would read (no `@cpu` marks).
std::string cuda_text(const c10::OperatorHandle& o, const torch::jit::Stack& s) {
  std::string t = describe_call(o, s, s.size());
  for (size_t p; (p = t.find("@cpu")) != std::string::npos;) t.erase(p, 4);
  return t;
}

struct Case {
  c10::OperatorHandle op;
  torch::jit::Stack stack;
};

std::vector<Case> family_calls() {
  const at::Tensor x = at::randn({4, 6});
  const at::Tensor h = at::randn({2, 3, 8, 8}).to(at::kHalf);
  const at::Tensor strided = at::randn({6, 10}).t().slice(0, 1, 9, 2);  // non-contiguous, offset
  const at::Tensor expanded = at::randn({6}).expand({4, 6});            // stride 0
  std::vector<Case> c;
  c.push_back({op("aten::gelu", ""), {x, std::string("tanh")}});
  c.push_back({op("aten::relu", ""), {strided}});
  c.push_back({op("aten::add", "Tensor"), {x, expanded, 0.1}});
  c.push_back({op("aten::add", "Scalar"), {x, 2.5, 3}});
  c.push_back({op("aten::add", "Scalar"), {x, 2.0, 1.0}});  // integral doubles: "2.0", not the int 2
  c.push_back({op("aten::add", "Scalar"), {x, 2, 1}});
  c.push_back({op("aten::mul", "Tensor"), {x, at::scalar_tensor(2.0, at::kDouble)}});  // 0-dim
  c.push_back({op("aten::where", "self"), {x.gt(0), x, expanded}});
  c.push_back({op("aten::_log_softmax", ""), {h, 1, false}});
  c.push_back({op("aten::native_layer_norm", ""),
               {x, std::vector<int64_t>{6}, at::randn({6}), c10::IValue(), 1e-5}});
  c.push_back(
      {op("aten::native_group_norm", ""), {h.to(at::kFloat), at::randn({3}), at::randn({3}), 2, 3, 64, 3, 1e-6}});
  c.push_back({op("aten::sum", "dim_IntList"), {x, std::vector<int64_t>{1}, true, c10::IValue()}});
  c.push_back({op("aten::sum", "dim_IntList"), {x, std::vector<int64_t>{0}, false, static_cast<int64_t>(at::kDouble)}});
  c.push_back({op("aten::max_pool2d_with_indices", ""),
               {h, std::vector<int64_t>{3, 3}, std::vector<int64_t>{2, 2}, std::vector<int64_t>{1, 1},
                std::vector<int64_t>{1, 1}, false}});
  c.push_back({op("aten::cumsum", ""), {at::empty({0, 3}), 1, c10::IValue()}});  // size 0
  c.push_back({op("aten::linalg_vector_norm", ""), {x, 1.5, std::vector<int64_t>{0}, false, c10::IValue()}});
  return c;
}

TEST(RebuildCall, EveryFamilyArgumentKindRoundTrips) {
  for (const Case& k : family_calls()) {
    const std::string text = cuda_text(k.op, k.stack);
    SCOPED_TRACE(text);
    if (std::getenv("CUDAL1_TEST_PRINT")) std::printf("%s\n", text.c_str());
    auto cpu = rebuild_call(text, c10::Device(c10::DeviceType::CPU), /*fill=*/true);
    ASSERT_TRUE(cpu.ok()) << cpu.status().to_string();
    EXPECT_EQ(words(cpu->op, cpu->stack), words(k.op, k.stack));  // the same in-process key
    for (const auto& v : cpu->stack) {
      if (v.isTensor() && v.toTensor().defined()) {
        EXPECT_EQ(v.toTensor().storage_offset(), 0);
      }
    }
    auto meta = rebuild_call(text, c10::Device(c10::DeviceType::Meta), /*fill=*/true);
    ASSERT_TRUE(meta.ok()) << meta.status().to_string();
    EXPECT_TRUE(meta->stack[0].toTensor().is_meta());
  }
}

TEST(RebuildCall, RebuiltTensorsHoldFreshValues) {
  auto r = rebuild_call("aten::relu(f32[64,64]{64,1})", c10::Device(c10::DeviceType::CPU), true);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const at::Tensor t = r->stack[0].toTensor();
  EXPECT_GT(t.std().item<double>(), 0.5);  // normal values, not a constant
  EXPECT_TRUE(at::isfinite(t).all().item<bool>());
}

TEST(RebuildCall, BadTextsGiveClearErrors) {
  const c10::Device cpu(c10::DeviceType::CPU);
  struct Bad {
    const char* text;
    Code code;
    const char* says;
  };
  const Bad bad[] = {
      {"relu", Code::kInvalidArgument, "not a signature"},
      {"aten::no_such_op(f32[2]{1})", Code::kNotFound, "no operator aten::no_such_op"},
      {"aten::relu(f32[2]{1}, f32[2]{1})", Code::kInvalidArgument, "takes 1 arguments"},
      {"aten::relu(f33[2]{1})", Code::kInvalidArgument, "unknown dtype 'f33'"},
      {"aten::relu(f32[2,3]{1})", Code::kInvalidArgument, "do not match"},
      {"aten::relu(f32[-2]{1})", Code::kInvalidArgument, "negative"},
      {"aten::relu(f32[2]{1}junk)", Code::kInvalidArgument, "trailing"},
      {"aten::relu(f32[2]{1}@cpu)", Code::kUnsupported, "only CUDA signatures"},
      {"aten::relu(f32[4611686018427387904,4]{4,1})", Code::kInvalidArgument, "too large"},
      {"aten::gelu(f32[2]{1}, 'tanh')", Code::kInvalidArgument, "approximate is not named"},
      {"aten::_softmax(f32[2]{1}, x, False)", Code::kInvalidArgument, "not an int"},
      {"aten::_softmax(f32[2]{1}, 0, maybe)", Code::kInvalidArgument, "not a bool"},
      {"aten::add.Tensor(f32[2]{1}, f32[2]{1}, alpha=1.50)", Code::kInvalidArgument, "rebuilt call reads"},
  };
  for (const Bad& b : bad) {
    SCOPED_TRACE(b.text);
    auto r = rebuild_call(b.text, cpu, true);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), b.code) << r.status().to_string();
    EXPECT_NE(r.status().message().find(b.says), std::string::npos) << r.status().to_string();
  }
}

}  // namespace
}  // namespace cudal1::dispatcher
