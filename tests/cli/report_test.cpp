/// @brief `cudal1 report` on a recorded run (no GPU, no LibTorch): hot signatures and hot op chains with their
/// ops, signatures, dataflow, share, state and speedup; --all adds the cold ones; a report from before chains
/// were recorded still prints.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <sstream>

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

  std::string run_report(const std::string& json, bool all) {
    cache::KernelCache cache(dir_.string());
    EXPECT_TRUE(cache.put_run({"1800000000-1", json}).ok());
    Options o;
    o.cache_dir = dir_.string();
    o.all = all;
    std::ostringstream out;
    EXPECT_EQ(report(o, out), 0);
    return out.str();
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

}  // namespace
}  // namespace cudal1::cli
