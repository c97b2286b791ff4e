/// @brief Library chains on the CPU (Note [Library chains]): a GEMM and its bias add (as TorchScript runs a traced
/// addmm), optionally relu or tanh-GELU, are planned as one ATen call; what is not that call exactly is declined;
/// the kernel writes the chain's value, replays through ATen when the app kept an intermediate, and a cached
/// description is checked against the plan. Shares the hook of chain_plan_test.cpp (one process).
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <functional>
#include <string>
#include <vector>

#include "bench/chain_suite.h"
#include "cudal1/dispatcher/chains.h"
#include "cudal1/dispatcher/hook.h"
#include "cudal1/dispatcher/regions.h"
#include "cudal1/optimizer/chain_tuner.h"
#include "optimizer/chains/chain_library.h"

namespace cudal1::optimizer {
namespace {

using chains::LibraryPlan;

/// The chain recorded from `f` (run twice on fresh inputs of its own shapes).
dispatcher::ChainRecord* record(const std::function<void()>& f) { return bench::record_chain(f, 2); }

// Note [Adopted results]: the pending result takes the library call's memory, views the app made included; any
// difference in layout or extent leaves both tensors as they were.
TEST(LibraryChains, AnAdoptedResultIsTheLibraryValueInEveryViewOfThePendingTensor) {
  at::Tensor y = at::full({4, 6}, -1.0);
  const at::Tensor view = y.view({24});  // made by the app before the region ran
  at::Tensor result = at::randn({4, 6});
  const at::Tensor want = result.clone();
  const void* memory = result.data_ptr();
  ASSERT_TRUE(chains::adopt_result(y, result));
  EXPECT_EQ(y.data_ptr(), memory);
  EXPECT_TRUE(at::equal(y, want));
  EXPECT_TRUE(at::equal(view, want.view({24})));
  EXPECT_EQ(result.storage().unsafeGetStorageImpl()->data_ptr().get(), nullptr);

  const at::Tensor base = at::randn({8, 6});
  const std::vector<at::Tensor> refused = {
      at::randn({4, 6}, at::kDouble),                 // another dtype
      at::randn({6, 4}).t(),                           // other strides
      base.narrow(0, 0, 4),                            // part of a larger storage
      base.narrow(0, 4, 4),                            // a storage offset
      at::randn({4, 6}).expand({4, 6}).contiguous().view({2, 12}),  // other sizes
      y,                                               // itself
  };
  for (const at::Tensor& r : refused) {
    at::Tensor z = at::full({4, 6}, -1.0);
    const void* own = z.data_ptr();
    const void* theirs = r.data_ptr();
    EXPECT_FALSE(chains::adopt_result(r.is_same(y) ? y : z, r)) << r.sizes() << " " << r.strides();
    EXPECT_EQ(z.data_ptr(), own);
    EXPECT_EQ(r.data_ptr(), theirs);
  }
  EXPECT_FALSE(chains::adopt_result(at::Tensor(), want));
}

TEST(LibraryChains, MmThenItsBiasAddAsTorchScriptRunsAddmmIsOneAddmm) {
  const at::Tensor w = at::randn({24, 40}), b = at::randn({40});
  dispatcher::ChainRecord* c = record([&] { b.add(at::randn({8, 24}).mm(w)); });  // DecomposeOps: self + mat1.mm(mat2)
  ASSERT_NE(c, nullptr);
  ASSERT_EQ(c->nodes.size(), 2u) << c->text();
  EXPECT_FALSE(chains::plan_chain(*c).ok()) << "mm is not pointwise";
  auto p = chains::plan_library_chain(*c);
  ASSERT_TRUE(p.ok()) << p.status().to_string() << "\n" << c->text();
  EXPECT_EQ(p->call(), "addmm");
  EXPECT_EQ(p->epilogue, LibraryPlan::Epilogue::kNone);
  EXPECT_EQ((std::vector<int64_t>{p->m, p->k, p->n}), (std::vector<int64_t>{8, 24, 40}));
  EXPECT_EQ(p->x, 0);
  EXPECT_EQ(p->w, 1);
  EXPECT_EQ(p->bias, 2);
  ASSERT_EQ(p->check.outputs.size(), 2u);
  for (const auto& s : p->check.steps) EXPECT_EQ(s.gemm_k, 24);
  EXPECT_EQ(p->check.externals.at(2).sizes, (std::vector<int64_t>{40}));
  EXPECT_EQ(fusable_prefix(*c), 0u) << "it plans whole";
  const auto sources = chain_sources(*c);
  ASSERT_FALSE(sources.ok());
  EXPECT_NE(sources.status().message().find("library chain"), std::string::npos) << sources.status().to_string();
}

TEST(LibraryChains, EitherOrderInPlaceAndEpiloguesPlan) {
  const at::Tensor w = at::randn({16, 32}), b = at::randn({32});
  const std::vector<std::pair<std::function<void()>, std::string>> cases = {
      {[&] { at::randn({6, 16}).mm(w).add(b); }, "addmm"},
      {[&] {
         at::Tensor y = at::randn({7, 16}).mm(w);
         y.add_(b);
       },
       "addmm"},
      {[&] { at::randn({5, 16}).mm(w).add(b).relu(); }, "_addmm_activation(relu)"},
      {[&] {
         at::Tensor y = at::randn({4, 16}).mm(w).add(b);
         y.relu_();
       },
       "_addmm_activation(relu)"},
      {[&] { at::gelu(b.add(at::randn({3, 16}).mm(w)), "tanh"); }, "_addmm_activation(gelu tanh)"},
      {[&] { at::addmm(b, at::randn({9, 16}), w).relu(); }, "_addmm_activation(relu)"},
  };
  for (const auto& [f, call] : cases) {
    dispatcher::ChainRecord* c = record(f);
    ASSERT_NE(c, nullptr) << call;
    auto p = chains::plan_library_chain(*c);
    ASSERT_TRUE(p.ok()) << call << ": " << p.status().to_string() << "\n" << c->text();
    EXPECT_EQ(p->call(), call) << c->text();
  }
}

TEST(LibraryChains, WhatIsNotExactlyTheLibraryCallIsDeclined) {
  const at::Tensor w = at::randn({16, 48}), b = at::randn({48}), full = at::randn({10, 48});
  const std::vector<std::pair<std::function<void()>, std::string>> cases = {
      {[&] { at::randn({2, 16}).mm(w).add(b, 2.0); }, "alpha != 1"},
      {[&] { at::randn({3, 16}).mm(w).add(full.narrow(0, 0, 3)); }, "not a contiguous [N] vector"},
      {[&] { at::gelu(at::randn({4, 16}).mm(w).add(b)); }, "not relu or gelu(approximate='tanh')"},
      {[&] { at::randn({5, 16}).mm(w).add(b).sigmoid(); }, "not relu or gelu(approximate='tanh')"},
      {[&] { at::randn({6, 16}).mm(w).mul(b); }, "not followed by a bias add"},
      {[&] { at::randn({6, 32}).narrow(1, 0, 32).as_strided({6, 16}, {32, 2}).mm(w).add(b); },
       "cuBLAS cannot read in place"},
      {[&] { at::addmm(b, at::randn({7, 16}), w, 0.5).relu(); }, "beta or alpha != 1"},
      {[&] { b.add(at::randn({8, 16}).mm(w).to(at::kDouble)); }, ""},  // a cast between: no chain or not this one
  };
  for (const auto& [f, why] : cases) {
    dispatcher::ChainRecord* c = record(f);
    if (why.empty()) {
      if (c) {
        EXPECT_FALSE(chains::plan_library_chain(*c).ok()) << c->text();
      }
      continue;
    }
    ASSERT_NE(c, nullptr) << why;
    auto p = chains::plan_library_chain(*c);
    ASSERT_FALSE(p.ok()) << why << "\n" << c->text();
    EXPECT_EQ(p.status().code(), Code::kUnsupported);
    EXPECT_NE(p.status().message().find(why), std::string::npos) << p.status().message();
  }
}

// A bias add followed by ops no epilogue has: the mm and its add fuse as a prefix (the rest runs as before).
TEST(LibraryChains, ABiasAddFollowedByOtherOpsFusesAsAPrefix) {
  const at::Tensor w = at::randn({16, 24}), b = at::randn({24});
  dispatcher::ChainRecord* c = record([&] { at::randn({11, 16}).mm(w).add(b).mul(0.5).tanh(); });
  ASSERT_NE(c, nullptr);
  ASSERT_EQ(c->nodes.size(), 4u) << c->text();
  EXPECT_EQ(fusable_prefix(*c), 2u);
}

/// HF's gelu_new as a traced GPT-2 runs it (the ops and Scalar overloads the dispatcher sees there).
at::Tensor gelu_new(const at::Tensor& x, double c = 0.044715) {
  const at::Tensor half = x.mul(0.5);
  const at::Tensor inner = x.add(x.pow(3.0).mul(c));
  return half.mul(inner.mul(0.7978845608028654).tanh().add(1.0));
}

// GPT-2's MLP from a traced model (Conv1D: `b + x.view(-1, K).mm(w)`, then `.view(B, T, N)`, then gelu_new, then
// the next Conv1D): the GEMM, its bias add and the composite read through the view (Note [Row views]) are one
// GELU_BIAS epilogue call; the chain goes on into the next GEMM, which fuses as a segment of its own.
TEST(LibraryChains, Gpt2MlpAsATracedModelRunsItIsOneGeluEpilogueThenASegment) {
  const at::Tensor w = at::randn({16, 48}), b = at::randn({48}), w2 = at::randn({48, 16}), b2 = at::randn({16});
  dispatcher::ChainRecord* c = record([&] {
    const at::Tensor h = b.add(at::randn({2, 3, 16}).view({-1, 16}).mm(w)).view({2, 3, 48});
    b2.add(gelu_new(h).view({-1, 48}).mm(w2));
  });
  ASSERT_NE(c, nullptr);
  ASSERT_EQ(c->nodes.size(), 12u) << c->text();
  EXPECT_TRUE(c->nodes[2].inputs[0].view) << "the composite reads the bias add's result through a row view\n" << c->text();
  EXPECT_EQ(c->nodes[2].inputs[0].producer, 1);
  EXPECT_TRUE(c->nodes[10].inputs[0].view) << "the next GEMM reads the GELU through a row view";
  EXPECT_FALSE(chain_plans(*c));
  const auto segments = fusable_segments(*c);
  ASSERT_EQ(segments.size(), 2u) << c->text();
  EXPECT_EQ(segments[0], (std::pair<size_t, size_t>{0, 10}));
  EXPECT_EQ(segments[1], (std::pair<size_t, size_t>{10, 12}));

  {  // As a traced model runs it: InferenceMode, the bias add's own tensor dropped once its view is made.
    c10::InferenceMode inference;
    dispatcher::ChainRecord* traced = record([&] {
      at::Tensor h = b.add(at::randn({3, 5, 16}).view({-1, 16}).mm(w));  // a new chain: another batch
      h = h.view({3, 5, 48});  // the base's TensorImpl dies here: the view alone holds the storage
      b2.add(gelu_new(h).view({-1, 48}).mm(w2));
    });
    ASSERT_NE(traced, nullptr);
    ASSERT_EQ(traced->nodes.size(), 12u) << traced->text();
    EXPECT_TRUE(traced->nodes[2].inputs[0].view) << traced->text();
  }

  dispatcher::ChainRecord* mlp = dispatcher::segment_chain(*c, 0, 10);
  ASSERT_NE(mlp, nullptr);
  auto p = chains::plan_library_chain(*mlp);
  ASSERT_TRUE(p.ok()) << p.status().to_string() << "\n" << mlp->text();
  EXPECT_EQ(p->call(), "_addmm_activation(gelu tanh)");
  EXPECT_EQ((std::vector<int64_t>{p->m, p->k, p->n}), (std::vector<int64_t>{6, 16, 48}));
  ASSERT_EQ(p->check.outputs.size(), 10u);
  EXPECT_EQ(p->check.steps.back().depth, 10.0) << "the ATen chain rounds at each of its steps";
  dispatcher::ChainRecord* next = dispatcher::segment_chain(*c, 10, 12);
  ASSERT_NE(next, nullptr);
  auto q = chains::plan_library_chain(*next);
  ASSERT_TRUE(q.ok()) << q.status().to_string() << "\n" << next->text();
  EXPECT_EQ(q->call(), "addmm");
}

// What only looks like the tanh GELU stays on ATen: another constant, an erf GELU written as ops, a composite
// that reads another tensor.
TEST(LibraryChains, CompositesThatAreNotTheTanhGeluAreDeclined) {
  const at::Tensor w = at::randn({16, 32}), b = at::randn({32}), other = at::randn({4, 32});
  const std::vector<std::function<void()>> cases = {
      [&] { gelu_new(b.add(at::randn({4, 16}).mm(w)), 0.04); },
      [&] {
        const at::Tensor h = b.add(at::randn({4, 16}).mm(w));
        h.mul(0.5).mul(h.mul(0.7071067811865476).erf().add(1.0));
      },
      [&] {
        const at::Tensor h = b.add(at::randn({4, 16}).mm(w));
        h.mul(0.5).mul(h.mul(0.7978845608028654).tanh().add(other));
      },
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    dispatcher::ChainRecord* c = record(cases[i]);
    ASSERT_NE(c, nullptr) << i;
    auto p = chains::plan_library_chain(*c);
    ASSERT_FALSE(p.ok()) << i << "\n" << c->text();
    EXPECT_EQ(p.status().code(), Code::kUnsupported);
    const auto segments = fusable_segments(*c);
    ASSERT_FALSE(segments.empty()) << i;
    EXPECT_EQ(segments[0], (std::pair<size_t, size_t>{0, 2})) << i << ": the GEMM and its bias add still fuse";
  }
}

/// The chain's externals and outputs as the region hands them over: x, w, bias and one output per node.
struct Call {
  std::vector<at::Tensor> ext;
  std::vector<std::vector<at::Tensor>> outs;
};
Call call_of(const LibraryPlan& p, size_t nodes, bool keep_intermediates) {
  Call c;
  c.ext.resize(3);
  c.ext[static_cast<size_t>(p.x)] = at::randn({p.m, p.k});
  c.ext[static_cast<size_t>(p.w)] = at::randn({p.k, p.n});
  c.ext[static_cast<size_t>(p.bias)] = at::randn({p.n});
  for (size_t k = 0; k < nodes; ++k)
    c.outs.push_back({keep_intermediates || k + 1 == nodes ? at::full({p.m, p.n}, NAN) : at::Tensor()});
  return c;
}

TEST(LibraryChains, TheKernelWritesTheChainsValueAndDeclinesWhenAnIntermediateIsKept) {
  const at::Tensor w = at::randn({32, 20}), b = at::randn({20});
  dispatcher::ChainRecord* c = record([&] { b.add(at::randn({12, 32}).mm(w)).relu(); });
  ASSERT_NE(c, nullptr);
  auto p = chains::plan_library_chain(*c);
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  auto kernel = chains::library_chain_kernel(*c, p.value());
  EXPECT_EQ(kernel->describe(), "library _addmm_activation(relu)");
  dispatcher::BypassScope aten_only;  // the references below are not part of any chain
  {
    Call k = call_of(p.value(), 3, /*keep_intermediates=*/false);
    ASSERT_TRUE(kernel->run(k.ext, k.outs).ok());
    const at::Tensor ref = at::relu(at::addmm(k.ext[2], k.ext[0], k.ext[1]));
    EXPECT_TRUE(at::allclose(k.outs[2][0], ref, 1e-5, 1e-5));
    EXPECT_TRUE(at::allclose(k.outs[2][0], at::relu(k.ext[2].add(k.ext[0].mm(k.ext[1]))), 1e-4, 1e-4));
  }
  {
    Call k = call_of(p.value(), 3, /*keep_intermediates=*/true);
    EXPECT_EQ(kernel->run(k.ext, k.outs).code(), Code::kUnavailable) << "declined: the region runs through ATen";
    EXPECT_TRUE(at::isnan(k.outs[2][0]).all().item<bool>()) << "nothing written";
  }
  {
    Call k = call_of(p.value(), 3, false);
    k.outs[2][0] = at::Tensor();  // the app dropped everything: nothing to write
    EXPECT_TRUE(kernel->run(k.ext, k.outs).ok());
  }
  {
    Call k = call_of(p.value(), 3, false);
    k.ext[1] = at::randn({p->k + 1, p->n});  // not the planned operand
    EXPECT_EQ(kernel->run(k.ext, k.outs).code(), Code::kUnsupported);
  }
}

TEST(LibraryChains, ACachedDescriptionIsCheckedAgainstThePlan) {
  const at::Tensor w = at::randn({8, 16}), b = at::randn({16});
  dispatcher::ChainRecord* c = record([&] { b.add(at::randn({13, 8}).mm(w)); });
  ASSERT_NE(c, nullptr);
  auto p = chains::plan_library_chain(*c);
  ASSERT_TRUE(p.ok());
  const std::string good = nlohmann::json{{"library", "addmm"}, {"plan", p->check.text}}.dump();
  const std::string other = nlohmann::json{{"library", "addmm"}, {"plan", "library addmm() 1x1"}}.dump();
  EXPECT_EQ(load_chain_kernel(*c, other, "").status().code(), Code::kMismatch);
  EXPECT_EQ(load_chain_kernel(*c, good, "code").status().code(), Code::kCorrupt);
  EXPECT_EQ(load_chain_kernel(*c, good, "").status().code(), Code::kUnsupported) << "a CPU chain has no device";
}


// Through a deferred region (Note [Deferred regions], CPU deferral as in the region tests): the chain runs as
// one call, the app reads its value; a kept GEMM result is the ATen chain's.
TEST(LibraryChains, ADeferredRegionRunsTheChainAsOneCallAndTheAppSeesItsValue) {
  const at::Tensor w = at::randn({20, 36}), b = at::randn({36});
  dispatcher::ChainRecord* c = record([&] { b.add(at::randn({10, 20}).mm(w)); });
  ASSERT_NE(c, nullptr);
  auto p = chains::plan_library_chain(*c);
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  dispatcher::DeferralOptions d;
  d.cpu = true;
  d.poison = true;  // a pending output read before its region ran would be NaN
  ASSERT_TRUE(dispatcher::enable_deferral(d).ok());
  const Status fused = dispatcher::fuse_chain(*c, chains::library_chain_kernel(*c, p.value()));
  ASSERT_TRUE(fused.ok()) << fused.to_string();
  const at::Tensor x = at::randn({10, 20});
  auto aten = [](const std::function<at::Tensor()>& f) {
    dispatcher::BypassScope aten_only;
    return f();
  };
  const dispatcher::RegionCounters before = dispatcher::region_counters();
  const at::Tensor y = b.add(x.mm(w));
  EXPECT_TRUE(dispatcher::region_open_on_this_thread());
  const at::Tensor ref = aten([&] { return b.add(x.mm(w)); });  // the region runs first
  EXPECT_TRUE(at::allclose(y, ref, 1e-5, 1e-5));
  const dispatcher::RegionCounters after = dispatcher::region_counters();
  EXPECT_EQ(after.completed, before.completed + 1);
  EXPECT_EQ(after.written, before.written + 1);
  EXPECT_EQ(after.skipped, before.skipped + 1) << "mm's result died inside the expression: never written";
  EXPECT_EQ(after.kernel_failures, before.kernel_failures);

  const at::Tensor mm = x.mm(w);
  const at::Tensor y2 = b.add(mm);
  EXPECT_TRUE(at::equal(mm, aten([&] { return x.mm(w); })));
  EXPECT_TRUE(at::equal(y2, aten([&] { return b.add(x.mm(w)); })));
  EXPECT_EQ(dispatcher::region_counters().lost, 0u);
}

}  // namespace
}  // namespace cudal1::optimizer
