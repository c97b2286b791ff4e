/// @brief On the GPU, end to end inside one process: a hot unary signature is tuned (NVRTC -> Driver API ->
/// verification -> timing), a verified kernel is swapped in, and later calls through the dispatcher return what
/// ATen returns, for every op, dtype and layout class, and under autograd. Speed is not asserted here (the
/// tuner is told to swap any verified kernel); benchmarks measure speed.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <random>

#include "cudal1/dispatcher/hook.h"
#include "cudal1/optimizer/family.h"
#include "cudal1/optimizer/measure.h"
#include "cudal1/optimizer/tuner.h"
#include "gpu/gpu_env.h"

namespace cudal1 {
namespace {

using dispatcher::SigRecord;
using dispatcher::SigState;

constexpr int kHot = 3;

class PipelineEnv : public ::testing::Environment {
 public:
  void SetUp() override {
    std::string why;
    if (!testing::gpu_available(&why)) return;
    dispatcher::HookOptions o;
    o.mode = Mode::kTune;
    o.ops = optimizer::all_family_ops();
    o.hot_calls = kHot;
    o.sample_every = 1;
    ASSERT_TRUE(dispatcher::install_hooks(o, {}).ok());
  }
};
const auto* const g_env = ::testing::AddGlobalTestEnvironment(new PipelineEnv);

optimizer::Tuner& tuner() {
  static optimizer::Tuner* t = [] {
    optimizer::TunerOptions o;
    o.trials = 2;
    o.verify_trials = 4;
    o.timing_reps = 5;
    o.seed = 7;
    o.require_faster = false;
    return new optimizer::Tuner(o, nullptr);
  }();
  return *t;
}

struct Case {
  std::string name;
  std::string op_name;  ///< the ATen operator the case calls
  std::function<at::Tensor(const at::Tensor&)> op;
};

std::vector<Case> cases() {
  return {{"relu", "aten::relu", [](const at::Tensor& x) { return at::relu(x); }},
          {"gelu_none", "aten::gelu", [](const at::Tensor& x) { return at::gelu(x); }},
          {"gelu_tanh", "aten::gelu", [](const at::Tensor& x) { return at::gelu(x, "tanh"); }},
          {"sigmoid", "aten::sigmoid", [](const at::Tensor& x) { return at::sigmoid(x); }},
          {"tanh", "aten::tanh", [](const at::Tensor& x) { return at::tanh(x); }},
          {"silu", "aten::silu", [](const at::Tensor& x) { return at::silu(x); }},
          {"exp", "aten::exp", [](const at::Tensor& x) { return at::exp(x); }},
          {"neg", "aten::neg", [](const at::Tensor& x) { return at::neg(x); }},
          {"abs", "aten::abs", [](const at::Tensor& x) { return at::abs(x); }}};
}

/// Tunes the signature of op(x) and checks the swapped kernel against ATen on fresh data of the same layout.
/// `row_atol`: extra absolute tolerance in fp32 eps x max|ATen output| (normalisations; Note [Verification]).
void check_swap(const Case& c, const at::Tensor& x, double row_atol = 0) {
  SCOPED_TRACE(c.name + " " + std::string(c10::toString(x.scalar_type())) + " sizes " +
               c10::str(x.sizes()) + " strides " + c10::str(x.strides()));
  for (int i = 0; i < kHot; ++i) c.op(x);
  // The record of exactly this call: same op, dtype, sizes and strides, just turned hot.
  SigRecord* rec = nullptr;
  dispatcher::for_each_record([&](SigRecord& r) {
    const auto& t = r.args[0].tensor;
    if (r.state.load() == SigState::kQueued && r.device_index == x.device().index() &&
        r.op.operator_name().name == c.op_name && t.dtype == x.scalar_type() && t.sizes == x.sizes().vec() &&
        t.strides == x.strides().vec())
      rec = &r;
  });
  ASSERT_NE(rec, nullptr);
  auto result = tuner().tune(*rec);
  ASSERT_TRUE(result.ok()) << rec->sig.text << ": " << result.status().to_string();
  ASSERT_EQ(rec->state.load(), SigState::kReplaced) << rec->sig.text << ": " << rec->outcome().note;
  // Fresh values in the same layout: the swapped kernel must match ATen.
  const int64_t storage = static_cast<int64_t>(x.storage().nbytes() / x.element_size());
  const at::Tensor y = (at::randn({storage}, x.options()) * 3).as_strided(x.sizes(), x.strides(), x.storage_offset());
  const uint64_t served = rec->replaced_calls.load();
  const at::Tensor ours = c.op(y);
  EXPECT_EQ(rec->replaced_calls.load(), served + 1);
  dispatcher::BypassScope aten_only;  // the reference and the comparison run on ATen, unprofiled
  const at::Tensor ref = c.op(y);
  EXPECT_EQ(ours.strides(), ref.strides());
  EXPECT_EQ(ours.scalar_type(), ref.scalar_type());
  const auto [rtol, atol] = optimizer::tolerance(ref.scalar_type());
  const at::Tensor r64 = ref.to(at::kDouble);
  const double extra = row_atol > 0
                           ? row_atol * 1.1920928955078125e-7 *
                                 at::where(at::isfinite(r64), r64.abs(), at::zeros_like(r64)).max().item<double>()
                           : 0.0;
  EXPECT_TRUE(at::allclose(ours.to(at::kDouble), ref.to(at::kDouble), rtol, atol + extra, /*equal_nan=*/true))
      << "max abs diff " << (ours.to(at::kDouble) - ref.to(at::kDouble)).abs().max().item<double>();
}

TEST(GpuPipeline, EveryOpAndDtypeContiguous) {
  CUDAL1_REQUIRE_GPU();
  const auto opts = at::TensorOptions().device(at::kCUDA);
  int shape = 0;
  for (const auto& c : cases())
    for (auto dt : {at::kFloat, at::kHalf, at::kBFloat16}) {
      // a distinct shape per case so that every case is a new signature
      const at::Tensor x = at::randn({257 + shape++, 129}, opts.dtype(dt));
      check_swap(c, x);
    }
}

TEST(GpuPipeline, StridedLayoutsAndOddSizes) {
  CUDAL1_REQUIRE_GPU();
  const auto opts = at::TensorOptions().device(at::kCUDA);
  const auto all = cases();
  std::mt19937 rng(11);
  std::vector<std::function<at::Tensor(at::ScalarType, int)>> layouts = {
      [&](at::ScalarType dt, int k) { return at::randn({64 + k, 96}, opts.dtype(dt)).narrow(1, 8, 64); },
      [&](at::ScalarType dt, int k) { return at::randn({96, 40 + k}, opts.dtype(dt)).t(); },
      [&](at::ScalarType dt, int k) { return at::randn({8, 16, 10 + k}, opts.dtype(dt)).permute({2, 0, 1}); },
      [&](at::ScalarType dt, int k) { return at::randn({1, 5 + k, 1}, opts.dtype(dt)); },
      [&](at::ScalarType dt, int k) { return at::randn({1000003 + k}, opts.dtype(dt)); },
      [&](at::ScalarType dt, int k) { return at::randn({31 + k, 7, 3}, opts.dtype(dt)).select(1, 2); },
      [&](at::ScalarType dt, int k) {
        return at::randn({2, 3, 8, 9 + k}, opts.dtype(dt)).contiguous(at::MemoryFormat::ChannelsLast);
      },
      [&](at::ScalarType dt, int k) { return at::randn({4096 + 2 * k}, opts.dtype(dt)).narrow(0, 1, 4095); },
  };
  int k = 0;
  for (size_t l = 0; l < layouts.size(); ++l)
    for (auto dt : {at::kFloat, at::kHalf, at::kBFloat16}) {
      const Case& c = all[rng() % all.size()];
      check_swap(c, layouts[l](dt, k++));
    }
}

TEST(GpuPipeline, SoftmaxAndLogSoftmaxRowsDtypesAndSlices) {
  CUDAL1_REQUIRE_GPU();
  const auto opts = at::TensorOptions().device(at::kCUDA);
  const Case softmax{"softmax", "aten::_softmax", [](const at::Tensor& x) { return at::softmax(x, -1); }};
  const Case log_softmax{"log_softmax", "aten::_log_softmax",
                         [](const at::Tensor& x) { return at::log_softmax(x, -1); }};
  std::vector<std::function<at::Tensor(at::ScalarType)>> shapes = {
      [&](at::ScalarType dt) { return at::randn({64, 32000}, opts.dtype(dt)); },
      [&](at::ScalarType dt) { return at::randn({16, 32768}, opts.dtype(dt)); },
      [&](at::ScalarType dt) { return at::randn({257, 1024}, opts.dtype(dt)); },
      [&](at::ScalarType dt) { return at::randn({33, 7}, opts.dtype(dt)); },
      [&](at::ScalarType dt) { return at::randn({1, 1}, opts.dtype(dt)); },
      [&](at::ScalarType dt) { return at::randn({2, 3, 1000}, opts.dtype(dt)); },
      [&](at::ScalarType dt) { return at::randn({64, 1024}, opts.dtype(dt)).narrow(1, 8, 1000); },
      [&](at::ScalarType dt) { return at::randn({4097, 130}, opts.dtype(dt)); },
  };
  int k = 0;
  for (const auto& make : shapes)
    for (auto dt : {at::kFloat, at::kHalf, at::kBFloat16}) check_swap(k++ % 2 ? log_softmax : softmax, make(dt));
}

TEST(GpuPipeline, LayerNormAndGroupNormThroughTheDispatcher) {
  CUDAL1_REQUIRE_GPU();
  const auto opts = at::TensorOptions().device(at::kCUDA);
  int k = 0;
  for (auto dt : {at::kFloat, at::kHalf, at::kBFloat16}) {
    const auto o = opts.dtype(dt);
    const at::Tensor w = at::randn({1024}, o), b = at::randn({1024}, o);
    const Case ln{"layer_norm", "aten::native_layer_norm",
                  [w, b](const at::Tensor& x) { return at::layer_norm(x, {1024}, w, b); }};
    const Case ln_plain{"layer_norm (no affine, 2 dims)", "aten::native_layer_norm",
                        [](const at::Tensor& x) { return at::layer_norm(x, {x.size(-2), x.size(-1)}); }};
    check_swap(ln, at::randn({77 + k, 1024}, o), 64);
    check_swap(ln, at::randn({3, 5 + k, 1024}, o), 64);
    check_swap(ln_plain, at::randn({4, 64 + k, 4099}, o), 64);  // long odd rows: streamed or split
    check_swap(ln_plain, at::randn({1, 1}, o), 64);
    const at::Tensor gw = at::randn({96}, o), gb = at::randn({96}, o);
    const Case gn{"group_norm", "aten::native_group_norm",
                  [gw, gb](const at::Tensor& x) { return at::group_norm(x, 12, gw, gb); }};
    // fp16/bf16 group norm normalises with statistics rounded to the dtype, as ATen does; where the two fp32 means
    // round to neighbouring values the output moves by up to 2 eps(dtype) x max|output|: the verifier's allowance
    // (NormKernel::output_tolerance, Note [Verification]), here in fp32 eps (eps(fp16) = 8192, eps(bf16) = 65536).
    const double gn_atol = 64 + 2.0 * (dt == at::kHalf ? 8192 : dt == at::kBFloat16 ? 65536 : 0);
    check_swap(gn, at::randn({2 + k, 96, 14, 14}, o), gn_atol);
    check_swap(gn, at::randn({3, 96, 7 + k}, o), gn_atol);
    ++k;
  }
}

TEST(GpuPipeline, ReplacedOpKeepsAutogradAndStreams) {
  CUDAL1_REQUIRE_GPU();
  const at::Tensor x = at::randn({333, 77}, at::TensorOptions().device(at::kCUDA));
  check_swap(cases()[3], x);  // sigmoid
  const at::Tensor xg = x.clone().requires_grad_(true);
  const at::Tensor s = at::sigmoid(xg);
  s.sum().backward();
  dispatcher::BypassScope aten_only;
  const at::Tensor sd = s.detach();
  EXPECT_TRUE(at::allclose(xg.grad(), sd * (1 - sd), 1e-5, 1e-6));
}

}  // namespace
}  // namespace cudal1
