/// @brief `cudal1 report` on a recorded run (no GPU, no LibTorch): hot signatures and hot op chains with their
/// ops, signatures, dataflow, share, state and speedup; --all adds the cold ones; a report from before chains
/// were recorded still prints; --insights reads the tuner's stored trials.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <sstream>

#include "cache/test_records.h"
#include "cli_commands.h"
#include "cudal1/cache/kernel_cache.h"

namespace cudal1::cli {
namespace {

class ReportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("cudal1_report_test_" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  /// `cudal1 report` with `o` on this test's cache.
  std::string report_of(Options o) {
    o.cache_dir = dir_.string();
    std::ostringstream out;
    EXPECT_EQ(report(o, out), 0);
    return out.str();
  }

  std::string run_report(const std::string& json, bool all) {
    cache::KernelCache cache(dir_.string());
    EXPECT_TRUE(cache.put_run({"1800000000-1", json}).ok());
    Options o;
    o.all = all;
    return report_of(o);
  }

  std::string insights() {
    Options o;
    o.insights = true;
    return report_of(o);
  }

  std::filesystem::path dir_;
};

const char* kRun = R"json({"run_id":"1800000000-1","mode":"tune","written_unix":1800000000,"hot_calls":50,
 "counters":{"hooked_calls":100,"signatures":3,"replaced_calls":0,"fallbacks":0,"cache_hits":0,"tuned":0},
 "signatures":[{"signature":"aten::native_layer_norm(f16[8,768]{768,1}, [768], None, None, 1e-05)","calls":60,
   "share":0.5,"mean_us":3.0,"state":"aten","hot":true,"speedup":0,"variant":"","note":""}],
 "chains":[
  {"ops":["aten::add.Tensor(f16[8,768]{768,1}, f16[8,768]{768,1}, alpha=1)",
          "aten::native_layer_norm(f16[8,768]{768,1}, [768], None, None, 1e-05)"],
   "inputs":[["ext0","ext1"],["%0.0"]],"count":60,"mean_us":5.5,"est_total_us":330,"share":0.374,
   "externals":2,"same_external":[0,0],"state":"aten","speedup":0,"kernel":"",
   "note":"chain: a node with several outputs"},
  {"ops":["aten::silu(bf16[64,512]{512,1})","aten::mul.Tensor(bf16[64,512]{512,1}, bf16[64,512]{512,1})"],
   "inputs":[["ext0"],["%0.0","ext1"]],"count":80,"mean_us":4.0,"est_total_us":320,"share":0.36,
   "externals":2,"same_external":[0,1],"state":"fused","speedup":1.55,"kernel":"pointwise vec4.b128.grid",
   "note":""},
  {"ops":["aten::sigmoid(f32[4]{1})","aten::mul.Tensor(f32[4]{1}, f32[4]{1})"],
   "inputs":[["ext0"],["ext0","%0.0"]],"count":3,"mean_us":1.0,"est_total_us":3,"share":0.001,
   "externals":1,"same_external":[0],"state":"cold","speedup":0}]})json";

TEST_F(ReportTest, ListsHotChainsWithOpsSignaturesAndDataflow) {
  const std::string out = run_report(kRun, false);
  EXPECT_NE(out.find("op chains"), std::string::npos) << out;
  EXPECT_NE(out.find("37.4% "), std::string::npos) << out;
  EXPECT_NE(out.find("aten          -  add.Tensor -> native_layer_norm"), std::string::npos) << out;
  EXPECT_NE(out.find("chain kernel: none (chain: a node with several outputs)"), std::string::npos) << out;
  EXPECT_NE(out.find("fused     1.55x  silu -> mul.Tensor"), std::string::npos) << out;
  EXPECT_NE(out.find("chain kernel: pointwise vec4.b128.grid\n"), std::string::npos) << out;
  EXPECT_NE(out.find("%1 = aten::native_layer_norm(f16[8,768]{768,1}, [768], None, None, 1e-05) <- %0.0"),
            std::string::npos) << out;
  EXPECT_NE(out.find("%0 = aten::add.Tensor(f16[8,768]{768,1}, f16[8,768]{768,1}, alpha=1) <- ext0, ext1"),
            std::string::npos) << out;
  EXPECT_EQ(out.find("sigmoid -> mul.Tensor"), std::string::npos) << out;  // cold: only with --all
}

TEST_F(ReportTest, AllAddsColdChains) {
  const std::string out = run_report(kRun, true);
  EXPECT_NE(out.find("cold          -  sigmoid -> mul.Tensor"), std::string::npos) << out;
  EXPECT_NE(out.find("<- ext0, %0.0"), std::string::npos) << out;
}

TEST_F(ReportTest, AReportWithoutChainsSaysSo) {
  std::string old = kRun;
  old = old.substr(0, old.find(",\n \"chains\"")) + "}";
  const std::string out = run_report(old, false);
  EXPECT_NE(out.find("native_layer_norm"), std::string::npos) << out;
  EXPECT_NE(out.find("(no hot chains; --all shows every one)"), std::string::npos) << out;
}

// `cudal1 report --insights` (Note [Technique insights]): from the trials the tuner stores per signature, which
// techniques won, which were necessary, which only helped together.
// A norm signature where the held row (mode1) and its cache (cache1) are both needed and only pay together, and
// the vector width barely matters: vec4 wins, within 5% of vec2.
const char* kNormTrials = R"json({"family":"norm","trials":[
  ["mode1.vec4.cache1",2.0],["mode1.vec2.cache1",1.95],["mode1.vec4.cache0",1.0],["mode0.vec4.cache1",1.1],
  ["mode0.vec4.cache0",0.9],["mode0.vec2.cache0",0.85],["mode0.vec2.cache1",0]]})json";

TEST_F(ReportTest, InsightsNamesWinnersGatekeepersAndTechniquesThatOnlyHelpTogether) {
  cache::KernelCache cache(dir_.string());
  const GpuFingerprint fp = cache::testing::test_fingerprint();
  ASSERT_TRUE(cache.put_state(fp, "trials/aten::native_group_norm(f16[64,256,28,28], ...)", kNormTrials).ok());
  ASSERT_TRUE(cache.put_state(fp, "policy.norm.f1", "{}").ok());  // other state is not read as trials
  const std::string out = insights();
  EXPECT_NE(out.find("NVIDIA H200, sm 90): techniques over 1 tuned signature"), std::string::npos) << out;
  EXPECT_NE(out.find("norm (1 signature tuned)"), std::string::npos) << out;
  const size_t won = out.find("won"), gate = out.find("necessary"), together = out.find("only together");
  ASSERT_TRUE(won < gate && gate < together && together != std::string::npos) << out;
  const auto section = [&](size_t from, size_t to) { return out.substr(from, to - from); };
  for (const char* t : {"mode1 ", "cache1 ", "vec4 "}) EXPECT_NE(section(won, gate).find(t), std::string::npos) << t;
  EXPECT_NE(section(gate, together).find("mode1 "), std::string::npos) << out;
  EXPECT_NE(section(gate, together).find("cache1 "), std::string::npos) << out;
  EXPECT_EQ(section(gate, together).find("vec4"), std::string::npos) << "vec2 is within 5% too:\n" << out;
  EXPECT_NE(section(together, out.size()).find("cache1 + mode1"), std::string::npos) << out;
}

TEST_F(ReportTest, InsightsACacheWithoutTrialsSaysSo) {
  cache::KernelCache cache(dir_.string());
  ASSERT_TRUE(cache.put(cache::testing::test_fingerprint(), cache::testing::test_entry("aten::relu(f32[4])")).ok());
  EXPECT_NE(insights().find("no tuning trials stored"), std::string::npos);
}

}  // namespace
}  // namespace cudal1::cli
