/// @brief NVRTC compiles every variant of the unary, softmax, norm, reduce, binary and batch-norm technique spaces,
/// for every dtype
/// and layout class, for sm_80 and sm_90, and every op for every dtype. Host-only: needs NVRTC, not a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>
#include <tuple>
#include <thread>


#include "cudal1/core/nvrtc.h"
#include "cudal1/optimizer/compiler.h"
#include "cudal1/optimizer/family.h"
#include "optimizer/problems.h"
#include "optimizer/source_digest.h"

namespace cudal1::optimizer {
namespace {

Problem problem(const std::string& op, c10::ScalarType dt, std::vector<int64_t> sizes, std::vector<int64_t> strides,
                int sm) {
  return testing::unary_problem(op, dt, std::move(sizes), std::move(strides), sm, 0, "none");
}

/// With CUDAL1_DUMP_CUBINS=DIR, every cubin compiled here is also written to DIR/<test>.p<plan>.<variant>.cubin,
/// so that a change meant to leave kernels alone (a refactor of generated text) can be shown to on the CPU: run
/// the test on the commits before and after into two folders and compare them (`diff -r`).
void dump_cubin(size_t plan, const Variant& v, const std::string& cubin) {
  static const char* dir = std::getenv("CUDAL1_DUMP_CUBINS");
  if (dir == nullptr || *dir == '\0') return;
  std::string test = ::testing::UnitTest::GetInstance()->current_test_info()->name();
  std::replace(test.begin(), test.end(), '/', '_');
  std::ofstream(std::string(dir) + "/" + test + ".p" + std::to_string(plan) + "." + v.id() + ".cubin",
                std::ios::binary)
      .write(cubin.data(), static_cast<std::streamsize>(cubin.size()));
}

/// Note [Source digests]
/// A family's generated code may change only with its version (Family::version, Note [Generator versions]): a
/// cache serves a record's cubin by the family's version, so code changed without a bump would pair new host code
/// with an old kernel. Each sweep test hashes every source it generates (per plan and variant: its id, kernel name
/// and code; order-independent) and compares the digest with tests/optimizer/source_digests.txt, which records it
/// with the family's version. Code that changed under the same version fails; a bumped version fails until the
/// file is updated. The chain generators' sources are pinned the same way (chain_plan_test.cpp, per LibTorch
/// version: they are recorded through its ops). To update, `CUDAL1_UPDATE_DIGESTS=DIR ctest -R
/// 'Archs|TheSuitesChains'` (sources only, nothing compiled) writes each test's line to DIR; the file's entries are
/// then replaced by `cat DIR/*.line | sort` (lines starting with '#' are comments).
const char* family_op_of(const std::string& test) {
  static const std::map<std::string, const char*> ops = {
      {"EveryVariantOfEveryLayoutClassAndDtype", "exp"}, {"EveryOpForEveryDtype", "exp"},
      {"EverySoftmaxRowVariant", "_softmax"}, {"EverySoftmaxColumnVariant", "_softmax"},
      {"EveryNormVariant", "native_layer_norm"},
      {"EveryBatchNormVariant", "cudnn_batch_norm"}, {"EveryPoolVariant", "max_pool2d"},
      {"EveryScanVariant", "cumsum"}, {"EveryReduceVariant", "amax"}, {"EveryBinaryVariant", "add.Tensor"},
      {"EveryGemmVariant", "mm"}};
  const auto it = ops.find(test.substr(0, test.find('/')));
  return it == ops.end() ? nullptr : it->second;
}

/// Checks (or, updating, records) the digest of every source of `work`; true when compiling should go on.
bool check_source_digest(const std::vector<std::pair<std::unique_ptr<Plan>, std::vector<Variant>>>& work, int sm) {
  const std::string test = ::testing::UnitTest::GetInstance()->current_test_info()->name();
  const char* op = family_op_of(test);
  EXPECT_NE(op, nullptr) << test << ": add it to family_op_of";
  if (!op) return true;
  const std::string spec = op;
  const auto dot = spec.find('.');
  const Family* f = family_for(spec.substr(0, dot), dot == std::string::npos ? "" : spec.substr(dot + 1));
  EXPECT_NE(f, nullptr) << spec;
  if (!f) return true;
  std::vector<std::string> parts;
  for (size_t p = 0; p < work.size(); ++p)
    for (const auto& v : work[p].second) {
      auto src = work[p].first->source(v);
      if (!src.ok()) continue;  // compile_all reports it
      parts.push_back(std::to_string(p) + "/" + v.id() + "/" + src->kernel_name + "\n" + src->code);
    }
  return testing::check_source_digest(test, f->name(), f->version(), std::move(parts));
}

void compile_all(const std::vector<std::pair<std::unique_ptr<Plan>, std::vector<Variant>>>& work, int sm,
                 std::atomic<int>* compiled) {
  if (!check_source_digest(work, sm)) {  // updating the digests: nothing is compiled
    for (const auto& w : work) *compiled += static_cast<int>(w.second.size());
    return;
  }
  std::vector<std::pair<const Plan*, Variant>> jobs;
  std::vector<size_t> plan_of;
  for (size_t p = 0; p < work.size(); ++p)
    for (const auto& v : work[p].second) jobs.emplace_back(work[p].first.get(), v), plan_of.push_back(p);
  std::atomic<size_t> next{0};
  std::vector<std::thread> threads;
  for (unsigned t = 0; t < std::max(2u, std::thread::hardware_concurrency()); ++t)
    threads.emplace_back([&] {
      for (size_t i; (i = next++) < jobs.size();) {
        auto src = jobs[i].first->source(jobs[i].second);
        ASSERT_TRUE(src.ok()) << src.status().to_string();
        auto k = compile(src.value(), sm);
        ASSERT_TRUE(k.ok()) << jobs[i].second.id() << ": " << k.status().to_string() << "\n" << src->code;
        EXPECT_GT(k->cubin.size(), 1000u);
        dump_cubin(plan_of[i], jobs[i].second, k->cubin);
        EXPECT_TRUE(k->log.empty() || k->log.find("warning") == std::string::npos) << k->log;
        ++*compiled;
      }
    });
  for (auto& t : threads) t.join();
}

/// Compiles every variant of `work` for `sm` and checks that each one did.
void expect_all_compile(const std::vector<std::pair<std::unique_ptr<Plan>, std::vector<Variant>>>& work, int sm) {
  std::atomic<int> compiled{0};
  compile_all(work, sm, &compiled);
  size_t expected = 0;
  for (const auto& w : work) expected += w.second.size();
  EXPECT_EQ(static_cast<size_t>(compiled.load()), expected);
}

/// Plans every problem with `f` (each must be accepted) and pairs each plan with its whole space.
std::vector<std::pair<std::unique_ptr<Plan>, std::vector<Variant>>> plan_all(const Family& f,
                                                                            const std::vector<Problem>& problems) {
  std::vector<std::pair<std::unique_ptr<Plan>, std::vector<Variant>>> work;
  for (const auto& p : problems) {
    auto plan = f.plan(p);
    EXPECT_TRUE(plan.ok()) << plan.status().to_string();
    if (!plan.ok()) continue;
    auto space = plan.value()->space();
    work.emplace_back(std::move(plan).value(), std::move(space));
  }
  EXPECT_EQ(work.size(), problems.size());
  return work;
}

/// Plans every problem with `f` and compiles every variant of every plan for `sm`.
void expect_every_variant_compiles(const Family& f, const std::vector<Problem>& problems, int sm) {
  expect_all_compile(plan_all(f, problems), sm);
}

class CompileVariants : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override {
    if (auto n = nvrtc(); !n.ok()) GTEST_SKIP() << "NVRTC not installed here: " << n.status().message();
  }
};

TEST_P(CompileVariants, EveryVariantOfEveryLayoutClassAndDtype) {
  const int sm = GetParam();
  const Family& f = *family_for("exp", "");
  std::vector<std::pair<std::unique_ptr<Plan>, std::vector<Variant>>> work;
  const char* ops[] = {"gelu", "silu", "sigmoid"};  // the heaviest math, rotated over the classes
  int i = 0;
  for (auto dt : {at::kFloat, at::kHalf, at::kBFloat16}) {
    // linear (with a tail: 1000003 is prime), strided with vectorisable rows, strided gather, 64-bit indexing,
    // every second column (picked vectors, Note [Unary picked vectors]).
    for (auto [sizes, strides] : std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>>{
             {{1000003}, {1}}, {{512, 256}, {512, 1}}, {{300, 77}, {1, 301}},
             {{3, int64_t{1} << 30}, {int64_t{1} << 30, 1}},
             {{512, 128}, {512, 2}}}) {
      auto plan = f.plan(problem(ops[i++ % 3], dt, sizes, strides, sm));
      ASSERT_TRUE(plan.ok()) << plan.status().to_string();
      auto space = plan.value()->space();
      work.emplace_back(std::move(plan).value(), std::move(space));
    }
  }
  expect_all_compile(work, sm);
}

TEST_P(CompileVariants, EveryOpForEveryDtype) {
  const int sm = GetParam();
  std::vector<std::pair<std::unique_ptr<Plan>, std::vector<Variant>>> work;
  for (const auto& op : family_for("exp", "")->ops())
    for (auto dt : {at::kFloat, at::kHalf, at::kBFloat16})
      for (const char* approx : {"none", "tanh"}) {
        if (op != "gelu" && std::string(approx) == "tanh") continue;
        Problem p = problem(op, dt, {4096, 33}, {33, 1}, sm);
        if (op == "gelu") p.args[1].value = std::string(approx);
        auto plan = family_for(op, "")->plan(p);
        ASSERT_TRUE(plan.ok()) << op << ": " << plan.status().to_string();
        auto space = plan.value()->space();
        std::vector<Variant> one = {space.back()};
        work.emplace_back(std::move(plan).value(), one);
      }
  std::atomic<int> compiled{0};
  compile_all(work, sm, &compiled);
  EXPECT_EQ(compiled.load(), 27);
}

// The softmax space is the sweep's largest (421.7 s for sm_90 on CI's 2 cores, 2026-12-07): rows and columns are
// two tests, each under ctest's 600 s.
TEST_P(CompileVariants, EverySoftmaxRowVariant) {
  const int sm = GetParam();
  const Family& f = *family_for("_softmax", "");
  std::vector<std::pair<std::unique_ptr<Plan>, std::vector<Variant>>> work;
  int i = 0;
  for (auto dt : {at::kFloat, at::kHalf, at::kBFloat16})
    for (auto [rows, cols, stride] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{
             {4096, 32000, 32000}, {8192, 1024, 1024}, {3, 7, 7}, {1000, 4096, 4608}, {1024, 50257, 50257}}) {
      const Problem p = testing::softmax_problem(i++ % 2 ? "_log_softmax" : "_softmax", dt, {rows, cols},
                                                 {stride, 1}, 1, false, sm);
      auto plan = f.plan(p);
      ASSERT_TRUE(plan.ok()) << plan.status().to_string();
      auto space = plan.value()->space();
      work.emplace_back(std::move(plan).value(), std::move(space));
    }
  // Odd widths (3 x 7, the 50257 vocabulary): head variants (Note [Softmax row heads]).
  expect_all_compile(work, sm);
}

TEST_P(CompileVariants, EverySoftmaxColumnVariant) {
  const int sm = GetParam();
  const Family& f = *family_for("_softmax", "");
  std::vector<std::pair<std::unique_ptr<Plan>, std::vector<Variant>>> work;
  int i = 1;  // as the single test numbered them: the first column problem is a log_softmax
  // Columns (softmax over an outer dim): small n with wide inner (every split caches), large n with small
  // inner (no caching; chunked tiles), odd inner (vec 1), n below every split, dim 0, n = 1; in every dtype. Held
  // slabs (Note [Softmax held slabs]) of 16-bit rows of 128, 512 and 64 bytes: [32,32000,64], [4,4096,256], [2,16384,32].
  for (auto dt : {at::kFloat, at::kHalf, at::kBFloat16})
    for (auto [sizes, dim] : std::vector<std::pair<std::vector<int64_t>, int64_t>>{
             {{4, 16, 3136}, 1}, {{32, 32000, 64}, 1}, {{5, 100, 7}, -2}, {{2, 3, 4096}, 1}, {{2048, 8, 16}, 0},
             {{8, 1, 16}, 1}, {{4, 4096, 256}, 1}, {{2, 16384, 32}, 1}}) {
      const Problem p = testing::softmax_problem(i++ % 2 ? "_log_softmax" : "_softmax", dt, sizes,
                                                 testing::contiguous(sizes), dim, false, sm);
      auto plan = f.plan(p);
      ASSERT_TRUE(plan.ok()) << plan.status().to_string();
      auto space = plan.value()->space();
      ASSERT_GT(space.front().get("split"), 0) << "not a column plan";
      work.emplace_back(std::move(plan).value(), std::move(space));
    }
  expect_all_compile(work, sm);
}

TEST_P(CompileVariants, EveryNormVariant) {
  const int sm = GetParam();
  const Family& f = *family_for("native_layer_norm", "");
  std::vector<Problem> problems = {
      testing::layer_norm_problem(at::kFloat, {64, 1024}, 1, true, true, sm),
      testing::layer_norm_problem(at::kBFloat16, {16, 8, 4096}, 2, false, false, sm),
      testing::layer_norm_problem(at::kHalf, {7, 999}, 1, true, false, sm),
      testing::group_norm_problem(at::kHalf, {2, 32, 8, 8}, 8, true, sm),
      testing::group_norm_problem(at::kFloat, {3, 12, 5}, 4, false, sm),
      // Rows long enough to split (modes 2, 7 and 8): fused-affine fp16 group norm, fp32 layer norm.
      testing::group_norm_problem(at::kHalf, {2, 64, 128, 128}, 4, true, sm),
      // fp32 rows of 699050 (vector width 2): split rows of 8-byte vectors whose last chunk is short.
      testing::layer_norm_problem(at::kFloat, {5, 699050}, 1, true, true, sm),
      // Vector width 2: 8- and 4-byte vectors on rows of 1002.
      testing::layer_norm_problem(at::kFloat, {9, 1002}, 1, true, true, sm),
      testing::layer_norm_problem(at::kHalf, {9, 1002}, 1, true, true, sm),
      // Long bf16 group-norm rows of 16-byte vectors (the held rows too) with rounded statistics and the fused
      // affine form.
      testing::group_norm_problem(at::kBFloat16, {1, 4, 512, 512}, 2, true, sm),
      // Held rows (mode 7; Note [Norm held]): 2 MB fp32 group-norm rows over clusters of 16, and fp32 rows of
      // 25001 vectors whose last chunk and last block's slice are short.
      testing::group_norm_problem(at::kFloat, {2, 16, 256, 256}, 2, true, sm),
      testing::layer_norm_problem(at::kFloat, {5, 100004}, 1, true, true, sm),
  };
  expect_every_variant_compiles(f, problems, sm);
}

TEST_P(CompileVariants, EveryBatchNormVariant) {
  const int sm = GetParam();
  const Family& f = *family_for("cudnn_batch_norm", "");
  const std::vector<int64_t> img = {4, 32, 8, 8};
  std::vector<Problem> problems = {
      // planes + flat, one channel per vector, fp32 with fp32 parameters, no saved statistics
      testing::batch_norm_problem("cudnn_batch_norm", at::kFloat, at::kFloat, img, {}, true, sm),
      // columns + flat over channel vectors, fp16 input with fp32 parameters, channels-last
      testing::batch_norm_problem("cudnn_batch_norm", at::kHalf, at::kFloat, img, testing::channels_last(img), true,
                                  sm),
      // saved statistics, bf16 parameters, no affine, [N, C] rows
      testing::batch_norm_problem("native_batch_norm", at::kBFloat16, at::kBFloat16, {64, 40}, {}, false, sm),
      // fp16 parameters, odd planes of a 5-d input (vec 1 only)
      testing::batch_norm_problem("native_batch_norm", at::kHalf, at::kHalf, {2, 3, 5, 7, 9}, {}, true, sm),
  };
  expect_every_variant_compiles(f, problems, sm);
}

TEST_P(CompileVariants, EveryPoolVariant) {
  const int sm = GetParam();
  const Family& f = *family_for("max_pool2d", "");
  const std::vector<int64_t> img = {2, 16, 33, 40};
  std::vector<Problem> problems = {
      testing::max_pool_problem(at::kFloat, img, {}, {4, 4}, {1, 1}, {1, 1}, {1, 1}, false, true, sm),
      testing::max_pool_problem(at::kHalf, img, {}, {2, 2}, {2, 2}, {1, 1}, {3, 3}, true, false, sm),
      testing::max_pool_problem(at::kBFloat16, img, testing::channels_last(img), {3, 3}, {2, 2}, {1, 1}, {1, 1},
                                false, true, sm),
      testing::avg_pool_problem(at::kFloat, {16, 33, 40}, {}, {3, 2}, {2, 1}, {1, 0}, true, false, 5, sm),
      testing::avg_pool_problem(at::kHalf, img, testing::channels_last(img), {2, 2}, {}, {0, 0}, false, true,
                                c10::IValue(), sm),
      testing::adaptive_avg_pool_problem(at::kBFloat16, img, {}, {7, 5}, sm),
      testing::avg_pool_problem(at::kFloat, {2, 24, 13, 9}, testing::channels_last({2, 24, 13, 9}), {3, 3}, {1, 2},
                                {1, 1}, true, false, c10::IValue(), sm),
  };
  auto work = plan_all(f, problems);  // the first one includes fp32 sliding windows (Note [Pooling slide])
  // Only the sliding-window variants of these: 16-bit VEC 4 and 8 with vector stores; OW = W + 1 with scalar
  // stores and no right halo; a 5x5 window with halos on both sides and a divisor.
  auto slides = plan_all(
      f, {testing::avg_pool_problem(at::kHalf, {2, 8, 13, 24}, {}, {3, 3}, {1, 1}, {1, 1}, false, false, c10::IValue(),
                                    sm),
          testing::max_pool_problem(at::kBFloat16, {2, 3, 9, 16}, {}, {2, 2}, {1, 1}, {1, 1}, {1, 1}, false, true, sm),
          testing::avg_pool_problem(at::kFloat, {3, 20, 12}, {}, {5, 5}, {1, 1}, {2, 2}, true, true, 7, sm)});
  // The channels-last runs (Note [Pooling exact division]): bf16 count_include_pad=False, fp32 with a divisor.
  for (auto& w : plan_all(f, {testing::avg_pool_problem(at::kBFloat16, {2, 64, 9, 13},
                                                       testing::channels_last({2, 64, 9, 13}),
                                                       {3, 3}, {1, 1}, {1, 1}, false, false, c10::IValue(), sm),
                              testing::avg_pool_problem(at::kFloat, {2, 8, 7, 6}, testing::channels_last({2, 8, 7, 6}),
                                                       {2, 3}, {2, 1}, {1, 1}, true, true, 5, sm)}))
    slides.push_back(std::move(w));
  // The channels-last walks (Note [Pooling channels-last walk]; the bf16 problem above has them too): fp32 with
  // ceil mode, fp16 on a 5-row image; the staged adaptive pooling (Note [Pooling adaptive staging]): fp32 rows of
  // whole vectors, bf16 3-d, fp16 rows of 45 elements.
  for (auto& w : plan_all(f, {testing::avg_pool_problem(at::kFloat, {2, 8, 7, 6}, testing::channels_last({2, 8, 7, 6}),
                                                       {3, 2}, {1, 1}, {1, 1}, true, true, c10::IValue(), sm),
                              testing::avg_pool_problem(at::kHalf, {1, 16, 5, 3}, testing::channels_last({1, 16, 5, 3}),
                                                       {3, 3}, {1, 1}, {1, 1}, false, false, 7, sm),
                              testing::adaptive_avg_pool_problem(at::kFloat, {2, 4, 14, 14}, {}, {7, 7}, sm),
                              testing::adaptive_avg_pool_problem(at::kBFloat16, {3, 14, 12}, {}, {7, 4}, sm),
                              testing::adaptive_avg_pool_problem(at::kHalf, {1, 3, 9, 15}, {}, {3, 5}, sm)}))
    slides.push_back(std::move(w));
  // The packed pairs (Note [Pooling packed pairs]): the fp16 stem's window with indices (left halo); bf16 rows of
  // three warps with halos on both sides and dilated rows; fp16 2 x 2 windows (no halo); an odd OW (scalar stores).
  for (auto& w : plan_all(f, {testing::max_pool_problem(at::kHalf, {2, 8, 20, 112}, {}, {3, 3}, {2, 2}, {1, 1}, {1, 1},
                                                       false, true, sm),
                              testing::max_pool_problem(at::kBFloat16, {3, 10, 264}, {}, {3, 4}, {1, 2}, {1, 1},
                                                       {2, 1}, true, false, sm),
                              testing::max_pool_problem(at::kHalf, {1, 4, 9, 12}, {}, {2, 2}, {2, 2}, {0, 0}, {1, 1},
                                                       false, true, sm),
                              testing::max_pool_problem(at::kBFloat16, {2, 3, 7, 20}, {}, {3, 3}, {3, 2}, {0, 0},
                                                       {1, 1}, false, true, sm)}))
    slides.push_back(std::move(w));
  for (auto& [plan, vs] : slides) {
    vs.erase(std::remove_if(vs.begin(), vs.end(),
                            [](const Variant& v) {
                              return v.get("slide") == 0 && v.get("cpx", 1) == 1 && v.get("walk", 0) == 0 &&
                                     v.get("flat", 0) == 0 && v.get("pair", 0) == 0;
                            }),
             vs.end());
    EXPECT_FALSE(vs.empty());
    work.emplace_back(std::move(plan), std::move(vs));
  }
  expect_all_compile(work, sm);
}

TEST_P(CompileVariants, EveryScanVariant) {
  const int sm = GetParam();
  const Family& f = *family_for("cumsum", "");
  using Case = std::tuple<const char*, c10::ScalarType, std::vector<int64_t>, std::vector<int64_t>, int64_t>;
  const std::vector<Case> cases = {
      {"cumsum", at::kFloat, {4, 1 << 20}, {1 << 20, 1}, 1},          // few long rows: every row technique
      {"cumsum", at::kFloat, {64, 48}, {48, 1}, -1},                  // short rows: serial rows too
      {"cumsum", at::kFloat, {3, 4096, 7}, {28672, 7, 1}, 1},         // middle dim: columns, split columns
      {"cumsum", at::kFloat, {512, 256}, {1, 512}, 0},                // transposed: strided columns
      {"cumsum", at::kFloat, {6, 5, 4, 3}, {1, 6, 30, 120}, 2},       // permuted rank 4, gathered columns
      {"cumsum", at::kHalf, {8192, 4096}, {4096, 1}, 1},              // ATen's tiles, rounded per step
      {"cumsum", at::kBFloat16, {8192, 4096}, {4096, 1}, 1},          // and in the dtype (native combines)
      {"cumsum", at::kBFloat16, {8, 300, 5}, {1500, 5, 1}, 1},        // ATen's serial columns
      {"cumprod", at::kFloat, {4096, 4096}, {4096, 1}, 1},
      {"cumprod", at::kHalf, {2, 64, 16}, {1024, 16, 1}, 0},
      {"cumprod", at::kBFloat16, {8, 300, 1}, {300, 1, 1}, 1},        // rows ATen scans serially
      {"cumprod", at::kHalf, {2}, {1}, 0},
      {"cumprod", at::kHalf, {4096, 64}, {1, 4096}, 1},            // a lane per tile, strided scalar loads
      {"cumsum", at::kFloat, {4096, 8190}, {8190, 1}, 0},          // single-pass columns, two per thread
  };
  std::vector<std::pair<std::unique_ptr<Plan>, std::vector<Variant>>> work;
  for (const auto& [op, dt, sizes, strides, dim] : cases) {
    auto plan = f.plan(testing::scan_problem(op, dt, sizes, strides, dim, sm));
    ASSERT_TRUE(plan.ok()) << op << ": " << plan.status().to_string();
    auto space = plan.value()->space();
    work.emplace_back(std::move(plan).value(), std::move(space));
  }
  expect_all_compile(work, sm);
}

TEST_P(CompileVariants, EveryReduceVariant) {
  const int sm = GetParam();
  const Family& f = *family_for("amax", "");
  using testing::contiguous;
  using testing::dims;
  auto contig = [&](const std::string& spec, c10::ScalarType dt, std::vector<int64_t> sizes, c10::IValue dim,
                    bool keepdim = false, c10::IValue extra = c10::IValue()) {
    const auto st = contiguous(sizes);
    return testing::reduce_problem(spec, dt, std::move(sizes), st, std::move(dim), keepdim, std::move(extra), sm);
  };
  // Every op and dtype over the layout classes: columns (vectorised), rows (vectorised, split), all dims,
  // gathers (two reduced runs), transposed and strided inputs.
  std::vector<Problem> problems = {
      contig("sum.dim_IntList", at::kFloat, {16, 256, 256}, dims({1})),
      contig("mean.dim", at::kBFloat16, {64, 4096}, dims({-1})),
      contig("max.dim", at::kHalf, {8, 40000}, c10::IValue(int64_t{1})),
      contig("argmin", at::kFloat, {33, 17, 5}, c10::IValue()),
      contig("var.correction", at::kFloat, {7, 9, 11}, dims({0, 2}), true, c10::IValue(0.0)),
      contig("std.correction", at::kBFloat16, {512, 300}, dims({0})),
      testing::reduce_problem("amin", at::kHalf, {100, 64}, {1, 100}, dims({1}), false, c10::IValue(), sm),
      contig("min.dim", at::kBFloat16, {5, 1024, 3}, c10::IValue(int64_t{1}), true),
      contig("sum.dim_IntList", at::kHalf, {3, 5}, c10::IValue(), true),
      contig("argmax", at::kFloat, {4096, 512}, c10::IValue(int64_t{0})),
      testing::reduce_problem("amax", at::kFloat, {9, 31}, {64, 2}, dims({1}), false, c10::IValue(), sm, 5),
      contig("max.dim", at::kFloat, {4, 64, 33}, c10::IValue(int64_t{1})),  // odd columns: column tiles, vec 1
  };
  // linalg_vector_norm: every ord class (ord 2 rows, ord 1 columns, inf/-inf, 0, p), dtype=float of fp16/bf16,
  // every dim (one output), a transposed input.
  const double inf = std::numeric_limits<double>::infinity();
  const c10::IValue f32(static_cast<int64_t>(at::kFloat));
  auto norm = [&](c10::ScalarType dt, std::vector<int64_t> sizes, c10::IValue ord, c10::IValue dim,
                  c10::IValue dtype = c10::IValue()) {
    const auto st = contiguous(sizes);
    return testing::vector_norm_problem(dt, std::move(sizes), st, std::move(ord), std::move(dim), false,
                                        std::move(dtype), sm);
  };
  problems.push_back(norm(at::kBFloat16, {64, 4096}, c10::IValue(2.0), dims({-1})));
  problems.push_back(norm(at::kFloat, {512, 300}, c10::IValue(int64_t{1}), dims({0})));
  problems.push_back(norm(at::kHalf, {33, 17, 5}, c10::IValue(inf), dims({0, 2}), f32));
  problems.push_back(norm(at::kFloat, {16, 64, 256}, c10::IValue(-inf), c10::IValue()));
  problems.push_back(norm(at::kBFloat16, {8, 40000}, c10::IValue(0.0), dims({1}), f32));
  problems.push_back(norm(at::kFloat, {7, 1000}, c10::IValue(-1.5), dims({1})));
  problems.push_back(testing::vector_norm_problem(at::kHalf, {100, 64}, {1, 100}, c10::IValue(3.0), dims({1}), true,
                                                  c10::IValue(), sm));
  expect_all_compile(plan_all(f, problems), sm);
}

TEST_P(CompileVariants, EveryBinaryVariant) {
  const int sm = GetParam();
  using testing::binary_problem;
  using testing::contiguous;
  using testing::tensor_arg;
  using testing::value_arg;
  auto dense = [](c10::ScalarType dt, std::vector<int64_t> sizes) {
    const auto st = contiguous(sizes);
    return tensor_arg(dt, std::move(sizes), st);
  };
  const c10::IValue one(int64_t{1});
  // Shape classes: same shape, row and column broadcast, scalar and 0-dim operands, mixed dtypes, strided and
  // transposed inputs, where.self with a broadcast mask, pow, maximum, and a CPU-scalar divisor.
  std::vector<Problem> problems = {
      binary_problem("add", "Tensor", {dense(at::kFloat, {256, 512}), dense(at::kFloat, {256, 512}), value_arg(one)},
                     sm),
      binary_problem("add", "Tensor", {dense(at::kBFloat16, {64, 4096}), dense(at::kBFloat16, {4096}), value_arg(one)},
                     sm),
      binary_problem("sub", "Tensor", {dense(at::kHalf, {64, 96}), dense(at::kHalf, {64, 1}), value_arg(2.0)}, sm),
      binary_problem("mul", "Scalar", {dense(at::kHalf, {1000, 8}), value_arg(0.5)}, sm),
      binary_problem("mul", "Tensor", {dense(at::kFloat, {8, 64, 7, 7}), dense(at::kFloat, {8, 64, 1, 1})}, sm),
      binary_problem("add", "Tensor", {dense(at::kHalf, {128, 64}), dense(at::kFloat, {128, 64}), value_arg(one)}, sm),
      binary_problem("add", "Tensor",
                     {dense(at::kBFloat16, {33, 17}), testing::zero_dim_arg(at::kDouble), value_arg(one)}, sm),
      binary_problem("div", "Tensor", {tensor_arg(at::kFloat, {64, 32}, {1, 64}), dense(at::kBFloat16, {32})}, sm),
      binary_problem("div", "Scalar", {tensor_arg(at::kHalf, {16, 40}, {80, 2}), value_arg(4.0)}, sm),
      binary_problem("maximum", "", {dense(at::kBFloat16, {50, 64}), testing::zero_dim_arg(at::kFloat)}, sm),
      binary_problem("pow", "Tensor_Tensor", {dense(at::kFloat, {300, 16}), dense(at::kFloat, {16})}, sm),
      binary_problem("where", "self",
                     {dense(at::kBool, {256}), dense(at::kHalf, {32, 256}), testing::zero_dim_arg(at::kHalf)}, sm),
      binary_problem("where", "self",
                     {dense(at::kBool, {32, 1}), dense(at::kFloat, {32, 256}), dense(at::kHalf, {256})}, sm),
      binary_problem("where", "self",
                     {tensor_arg(at::kBool, {8, 1, 512, 512}, {262144, 262144, 512, 1}),
                      testing::zero_dim_arg(at::kHalf), testing::zero_dim_arg(at::kHalf)},
                     sm),
  };
  expect_every_variant_compiles(*family_for("add", "Tensor"), problems, sm);
}

TEST_P(CompileVariants, EveryGemmVariant) {
  const int sm = GetParam();
  // GPT-2's vocabulary head (a weight seen transposed), a contiguous [K, N] operand, bf16, a tiny odd one.
  const std::vector<Problem> problems = {
      testing::mm_problem(at::kHalf, 4096, 768, 50257, sm),
      testing::mm_problem(at::kBFloat16, 512, 1024, 32001, sm, {32001, 1}),
      testing::mm_problem(at::kHalf, 3, 8, 5, sm),
      testing::addmm_problem(at::kHalf, 64, 768, 1001, sm),
  };
  expect_every_variant_compiles(*family_for("mm", ""), problems, sm);
}

INSTANTIATE_TEST_SUITE_P(Archs, CompileVariants, ::testing::Values(80, 90),
                         [](const auto& info) { return "sm_" + std::to_string(info.param); });

}  // namespace
}  // namespace cudal1::optimizer
