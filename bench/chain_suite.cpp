/// @brief The chain suite's rows (chain_suite.h). Scalars are passed as Scalars (`x.mul(0.5)`, mul.Scalar), as
/// TorchScript calls them; `x * 0.5` in C++ wraps 0.5 in a CPU tensor, which the hook cannot key.
#include "bench/chain_suite.h"

#include "cudal1/dispatcher/hook.h"

#include <algorithm>
#include <sstream>
#include <cmath>
#include <limits>
#include <set>

namespace cudal1::bench {

std::vector<ChainRow> chain_suite(bool small) {
  const int64_t T = small ? 256 : 4096;  // tokens
  using V = std::vector<at::Tensor>;
  std::vector<ChainRow> rows;
  rows.push_back({"rmsnorm_ops bf16", {{small ? 256 : 8192, small ? 512 : 4096}, {small ? 512 : 4096}}, at::kBFloat16,
                  [](const V& in) {
                    const at::Tensor x = in[0];
                    const at::Tensor var = x.pow(2).mean({-1}, true);
                    return x.mul(var.add(1e-6).rsqrt()).mul(in[1]);
                  }});
  rows.push_back({"swiglu bf16", {{T, small ? 512 : 11008}, {T, small ? 512 : 11008}}, at::kBFloat16,
                  [](const V& in) { return at::silu(in[0]).mul(in[1]); }});
  // HF's NewGELUActivation, in Python's evaluation order:
  // 0.5 * x * (1.0 + tanh(sqrt(2 / pi) * (x + 0.044715 * pow(x, 3.0))))
  auto gelu_new = [](const at::Tensor& x) {
    const at::Tensor half = x.mul(0.5);
    const at::Tensor inner = x.add(x.pow(3.0).mul(0.044715)).mul(std::sqrt(2.0 / M_PI));
    return half.mul(inner.tanh().add(1.0));
  };
  rows.push_back({"gelu_new f16", {{T, small ? 768 : 3072}}, at::kHalf,
                  [gelu_new](const V& in) { return gelu_new(in[0]); }});
  rows.push_back({"bias_gelu f16", {{T, small ? 768 : 3072}, {small ? 768 : 3072}}, at::kHalf,
                  [](const V& in) { return at::gelu(in[0].add(in[1])); }});
  rows.push_back({"residual_layernorm f16", {{T, small ? 768 : 768}, {T, small ? 768 : 768}, {small ? 768 : 768}},
                  at::kHalf, [](const V& in) {
                    const at::Tensor h = in[0].add(in[1]);
                    return at::layer_norm(h, {h.size(-1)}, in[2], in[2], 1e-5);
                  }});
  rows.push_back({"softmax_ops f32", {{small ? 256 : 4096, small ? 512 : 4096}}, at::kFloat, [](const V& in) {
                    const at::Tensor e = in[0].exp();
                    return e.div(e.sum({-1}, true));
                  }});
  rows.push_back({"x_sigmoid_x f16", {{small ? 512 : 8192, small ? 512 : 8192}}, at::kHalf,
                  [](const V& in) { return in[0].mul(in[0].sigmoid()); }});
  rows.push_back({"bn_relu_maxpool f32", {{small ? 8 : 32, 64, small ? 28 : 112, small ? 28 : 112}, {64}, {64}, {64}, {64}},
                  at::kFloat,
                  [](const V& in) {  // ResNet's stem after its convolution: eval-mode batch norm, ReLU, 3x3/2 max-pool
                    const at::Tensor y = at::batch_norm(in[0], in[1], in[2], in[3], in[4], false, 0.1, 1e-5, true);
                    return at::max_pool2d(y.relu(), {3, 3}, {2, 2}, {1, 1});
                  },
                  {4}});
  // ResNet's whole stem (the rewrites issue's row): 7x7/2 convolution without bias, eval-mode batch norm, ReLU,
  // 3x3/2 max-pool. A program chain (Note [Program chains]): the batch norm folded into the convolution, its ReLU
  // a cuDNN epilogue, channels-last inside. Compute-bound (the convolution), so no byte floor. Its weights are
  // the same tensors on every call, as a model's are: the fold and its verification need them.
  rows.push_back({"conv_bn_relu_maxpool f32",
                  {{small ? 4 : 32, 3, small ? 56 : 224, small ? 56 : 224}, {64, 3, 7, 7}, {64}, {64}, {64}, {64}},
                  at::kFloat,
                  [](const V& in) {
                    const at::Tensor c = at::conv2d(in[0], in[1], {}, {2, 2}, {3, 3});
                    const at::Tensor y = at::batch_norm(c, in[2], in[3], in[4], in[5], false, 0.1, 1e-5, true);
                    return at::max_pool2d(y.relu(), {3, 3}, {2, 2}, {1, 1});
                  },
                  {5}, /*gemm=*/true, -1, /*weights=*/{1, 2, 3, 4, 5}});
  // ResNet's block ends as torchvision writes them: eval-mode batch norm, then ReLU(inplace=True), and in a
  // bottleneck's last stage `out += identity` before it (Note [In-place nodes], Note [Batch norm in chains]).
  rows.push_back({"bn_relu_ f32", {{small ? 8 : 32, 128, small ? 14 : 56, small ? 14 : 56}, {128}, {128}, {128}, {128}},
                  at::kFloat,
                  [](const V& in) {
                    at::Tensor y = at::batch_norm(in[0], in[1], in[2], in[3], in[4], false, 0.1, 1e-5, true);
                    return y.relu_();
                  },
                  {4}});
  rows.push_back({"bn_add_relu_ f32",
                  {{small ? 8 : 32, 256, small ? 14 : 56, small ? 14 : 56}, {256}, {256}, {256}, {256},
                   {small ? 8 : 32, 256, small ? 14 : 56, small ? 14 : 56}},
                  at::kFloat,
                  [](const V& in) {
                    at::Tensor y = at::batch_norm(in[0], in[1], in[2], in[3], in[4], false, 0.1, 1e-5, true);
                    y.add_(in[5]);
                    return y.relu_();
                  },
                  {4}});
  rows.push_back({"residual_relu f32", {{small ? 8 : 32, 256, small ? 14 : 56, small ? 14 : 56},
                                        {small ? 8 : 32, 256, small ? 14 : 56, small ? 14 : 56}},
                  at::kFloat, [](const V& in) { return in[0].add(in[1]).relu(); }});
  // Library chains (Note [Library chains]). GPT-2's Conv1D (c_fc) as a traced model runs it: TorchScript's
  // DecomposeOps splits addmm(b, x, w) into b + x.mm(w).
  rows.push_back({"conv1d_bias f16", {{T, 768}, {768, small ? 256 : 3072}, {small ? 256 : 3072}}, at::kHalf,
                  [](const V& in) { return in[2].add(in[0].mm(in[1])); }, {}, /*gemm=*/true});
  // GPT-2's c_fc and gelu_new as a traced model runs them: one cuBLASLt call with a GELU epilogue.
  rows.push_back({"conv1d_gelu_new f16", {{T, 768}, {768, small ? 256 : 3072}, {small ? 256 : 3072}}, at::kHalf,
                  [gelu_new](const V& in) { return gelu_new(in[2].add(in[0].mm(in[1]))); }, {}, /*gemm=*/true});
  // Linear + GELU (tanh form) + linear at 4096^2: the first two are one cuBLASLt call with a GELU epilogue.
  rows.push_back({"linear_gelu_tanh_linear f16",
                  {{small ? 64 : 4096, small ? 256 : 4096}, {small ? 256 : 4096, small ? 256 : 4096}, {small ? 256 : 4096},
                   {small ? 256 : 4096, small ? 256 : 4096}, {small ? 256 : 4096}},
                  at::kHalf,
                  [](const V& in) {
                    return at::linear(at::gelu(at::linear(in[0], in[1], in[2]), "tanh"), in[3], in[4]);
                  },
                  {}, /*gemm=*/true});
  // Naive attention as eager code writes it (the rewrites issue's rows): softmax(q k^T * scale [+ causal mask]) v.
  // The two batched matmuls are no chain ops, so what the hook can fuse is the scale (and mask) with the softmax;
  // torch.compile rewrites the whole to fused attention.
  const int64_t B = small ? 1 : 8, H = small ? 2 : 32, L = small ? 64 : 1024, D = small ? 32 : 128;
  auto attention = [](const V& in, bool causal) {
    at::Tensor s = at::matmul(in[0], in[1].transpose(-2, -1)).mul(1.0 / std::sqrt(static_cast<double>(in[0].size(-1))));
    if (causal) s = s.add(in[3]);
    return at::matmul(at::softmax(s, -1), in[2]);
  };
  rows.push_back({"attention f16", {{B, H, L, D}, {B, H, L, D}, {B, H, L, D}}, at::kHalf,
                  [attention](const V& in) { return attention(in, false); }, {}, /*gemm=*/true});
  rows.push_back({"attention_causal f16", {{B, H, L, D}, {B, H, L, D}, {B, H, L, D}, {L, L}}, at::kHalf,
                  [attention](const V& in) { return attention(in, true); }, {}, /*gemm=*/true, /*causal_mask=*/3});
  return rows;
}

std::vector<std::vector<at::Tensor>> last_output_only(const dispatcher::ChainRecord& c) {
  std::vector<std::vector<at::Tensor>> outs(c.nodes.size());
  for (size_t k = 0; k < c.nodes.size(); ++k)
    for (const auto& s : c.nodes[k].outputs)
      outs[k].push_back(k + 1 == c.nodes.size() && outs[k].empty() ? at::full(s.sizes, NAN) : at::Tensor());
  return outs;
}

dispatcher::ChainRecord* record_chain(const std::function<void()>& f, int times) {
  dispatcher::close_chain_on_this_thread();  // what ran before is not part of this chain
  std::set<dispatcher::ChainRecord*> before;
  dispatcher::for_each_chain([&](dispatcher::ChainRecord& c) { before.insert(&c); });
  for (int i = 0; i < times; ++i) f();
  dispatcher::close_chain_on_this_thread();
  dispatcher::ChainRecord* best = nullptr;
  dispatcher::for_each_chain([&](dispatcher::ChainRecord& c) {
    if (!before.count(&c) && (!best || c.nodes.size() > best->nodes.size())) best = &c;
  });
  return best;
}

std::vector<at::Tensor> chain_inputs(const ChainRow& row, int device) {
  dispatcher::BypassScope not_recorded;
  std::vector<at::Tensor> in;
  const auto opts = at::TensorOptions().dtype(row.dtype).device(at::Device(at::kCUDA, static_cast<int8_t>(device)));
  for (size_t i = 0; i < row.input_sizes.size(); ++i) {
    const bool pos = std::find(row.positive.begin(), row.positive.end(), i) != row.positive.end();
    if (row.causal_mask >= 0 && i == static_cast<size_t>(row.causal_mask)) {  // 0 on and below the diagonal, -inf above
      const int64_t n = row.input_sizes[i][0];
      in.push_back(at::full({n, n}, -std::numeric_limits<double>::infinity(), opts).triu(1));
      continue;
    }
    in.push_back(pos ? at::rand(row.input_sizes[i], opts).add_(0.5) : at::randn(row.input_sizes[i], opts));
  }
  return in;
}

std::vector<at::Tensor> next_call_inputs(const ChainRow& row, const std::vector<at::Tensor>& model, int device) {
  std::vector<at::Tensor> in = chain_inputs(row, device);
  for (size_t i : row.weights)
    if (i < in.size() && i < model.size()) in[i] = model[i];
  return in;
}

bool row_selected(const std::string& name, const std::string& words) {
  std::stringstream ss(words);
  for (std::string w; std::getline(ss, w, '|');)
    if (!w.empty() && name.find(w) != std::string::npos) return true;
  return false;
}

}  // namespace cudal1::bench
