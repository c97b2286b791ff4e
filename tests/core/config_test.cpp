/// @brief Config parsing: defaults, every variable, bad values warn and keep the default, cache directory.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "cudal1/core/config.h"

namespace cudal1 {
namespace {

Config parse(const std::map<std::string, std::string>& env, std::vector<std::string>* w = nullptr) {
  return parse_config([&](const char* n) -> const char* {
    auto it = env.find(n);
    return it == env.end() ? nullptr : it->second.c_str();
  }, w);
}

TEST(Config, DefaultsAreOffAndDocumented) {
  std::vector<std::string> w;
  const Config c = parse({{"HOME", "/home/u"}}, &w);
  EXPECT_FALSE(c.enable);
  EXPECT_EQ(c.mode, Mode::kTune);
  EXPECT_EQ(c.cache_dir, "/home/u/.cache/cudal1");
  EXPECT_EQ(c.hot_calls, 50);
  EXPECT_EQ(c.log_level, LogLevel::kWarn);
  EXPECT_EQ(c.trials, 16);
  EXPECT_EQ(c.tune_round, 4);
  EXPECT_EQ(c.tune_search, TuneSearch::kGp);
  EXPECT_FALSE(c.tune_prior);
  EXPECT_TRUE(w.empty());
  for (const auto& v : config_variables()) EXPECT_EQ(std::string(v.name).rfind("CUDAL1_", 0), 0u);
}

TEST(Config, FuseIsOnByDefaultAndTakesOnOffAndAShare) {
  std::vector<std::string> w;
  EXPECT_TRUE(parse({}).fuse);
  EXPECT_DOUBLE_EQ(parse({}).chain_share, 0.01);
  EXPECT_FALSE(parse({{"CUDAL1_FUSE", "off"}}, &w).fuse);
  EXPECT_TRUE(parse({{"CUDAL1_FUSE", "On"}}, &w).fuse);
  EXPECT_DOUBLE_EQ(parse({{"CUDAL1_CHAIN_SHARE", "0.2"}}, &w).chain_share, 0.2);
  EXPECT_TRUE(w.empty());
  EXPECT_TRUE(parse({{"CUDAL1_FUSE", "sometimes"}}, &w).fuse);  // a bad value keeps the default, with a warning
  EXPECT_DOUBLE_EQ(parse({{"CUDAL1_CHAIN_SHARE", "2"}}, &w).chain_share, 0.01);
  ASSERT_EQ(w.size(), 2u);
  EXPECT_NE(w[0].find("CUDAL1_FUSE='sometimes'"), std::string::npos);
}

// Note [Lean CUPTI guard]: runtime launches are watched through the driver's unless told full.
TEST(Config, CuptiGuardIsLeanUnlessFull) {
  std::vector<std::string> w;
  EXPECT_FALSE(parse({}).cupti_full);
  EXPECT_TRUE(parse({{"CUDAL1_CUPTI_GUARD", "Full"}}, &w).cupti_full);
  EXPECT_FALSE(parse({{"CUDAL1_CUPTI_GUARD", "lean"}}, &w).cupti_full);
  EXPECT_TRUE(w.empty());
  EXPECT_FALSE(parse({{"CUDAL1_CUPTI_GUARD", "1"}}, &w).cupti_full);
  ASSERT_EQ(w.size(), 1u);
  EXPECT_NE(w[0].find("CUDAL1_CUPTI_GUARD='1'"), std::string::npos);
}

// Note [Forward graphs]: on unless turned off; a bad value keeps it on, with a warning.
TEST(Config, ForwardGraphsAreOnUnlessTurnedOff) {
  std::vector<std::string> w;
  EXPECT_TRUE(parse({}).forward_graphs);
  EXPECT_FALSE(parse({{"CUDAL1_FORWARD_GRAPHS", "off"}}, &w).forward_graphs);
  EXPECT_TRUE(w.empty());
  EXPECT_TRUE(parse({{"CUDAL1_FORWARD_GRAPHS", "maybe"}}, &w).forward_graphs);
  ASSERT_EQ(w.size(), 1u);
  EXPECT_NE(w[0].find("CUDAL1_FORWARD_GRAPHS='maybe'"), std::string::npos);
}

// Note [TorchScript fuser]: the app's fuser is kept unless CUDAL1_JIT_FUSER=off.
TEST(Config, JitFuserIsKeptUnlessTurnedOff) {
  std::vector<std::string> w;
  EXPECT_FALSE(parse({}).jit_fuser_off);
  EXPECT_TRUE(parse({{"CUDAL1_JIT_FUSER", "Off"}}, &w).jit_fuser_off);
  EXPECT_FALSE(parse({{"CUDAL1_JIT_FUSER", "keep"}}, &w).jit_fuser_off);
  EXPECT_TRUE(w.empty());
  EXPECT_FALSE(parse({{"CUDAL1_JIT_FUSER", "0"}}, &w).jit_fuser_off);  // neither word: the default, with a warning
  ASSERT_EQ(w.size(), 1u);
  EXPECT_NE(w[0].find("CUDAL1_JIT_FUSER='0'"), std::string::npos);
}

TEST(Config, TuneMemoryTakesASizeOrAShareOfFreeMemory) {  // Note [Tuning memory]
  EXPECT_EQ(parse({}).tune_memory_bytes, 0);
  EXPECT_DOUBLE_EQ(parse({}).tune_memory_fraction, 0.5);
  EXPECT_DOUBLE_EQ(parse({{"CUDAL1_TUNE_MEMORY", "30%"}}).tune_memory_fraction, 0.3);
  EXPECT_DOUBLE_EQ(parse({{"CUDAL1_TUNE_MEMORY", "0.25"}}).tune_memory_fraction, 0.25);
  EXPECT_EQ(parse({{"CUDAL1_TUNE_MEMORY", "512M"}}).tune_memory_bytes, int64_t{512} << 20);
  EXPECT_EQ(parse({{"CUDAL1_TUNE_MEMORY", "2GiB"}}).tune_memory_bytes, int64_t{2} << 30);
  EXPECT_EQ(parse({{"CUDAL1_TUNE_MEMORY", "1.5g"}}).tune_memory_bytes, int64_t{3} << 29);
  EXPECT_EQ(parse({{"CUDAL1_TUNE_MEMORY", "4096"}}).tune_memory_bytes, 4096);
  for (const char* bad : {"lots", "-1G", "150%", "0", "2X", "1.5"}) {
    std::vector<std::string> w;
    const Config c = parse({{"CUDAL1_TUNE_MEMORY", bad}}, &w);
    EXPECT_EQ(c.tune_memory_bytes, 0) << bad;
    EXPECT_DOUBLE_EQ(c.tune_memory_fraction, 0.5) << bad;
    ASSERT_EQ(w.size(), 1u) << bad;
    EXPECT_NE(w[0].find("neither a size"), std::string::npos) << w[0];
  }
}

TEST(Config, XdgCacheHomeWinsOverHomeAndExplicitDirWinsOverBoth) {
  EXPECT_EQ(parse({{"HOME", "/h"}, {"XDG_CACHE_HOME", "/x"}}).cache_dir, "/x/cudal1");
  EXPECT_EQ(parse({{"HOME", "/h"}, {"XDG_CACHE_HOME", "/x"}, {"CUDAL1_CACHE_DIR", "/c"}}).cache_dir, "/c");
  EXPECT_EQ(parse({}).cache_dir, "");
}

TEST(Config, ParsesEveryVariable) {
  std::vector<std::string> w;
  const Config c = parse({{"CUDAL1_ENABLE", "on"},        {"CUDAL1_MODE", "Serve"},
                          {"CUDAL1_LOG_LEVEL", "debug"},  {"CUDAL1_HOT_CALLS", "7"},
                          {"CUDAL1_TRIALS", "3"},         {"CUDAL1_VERIFY_TRIALS", "9"},
                          {"CUDAL1_TUNE_ROUND", "2"},     {"CUDAL1_TUNE_SEARCH", "Policy"},
                          {"CUDAL1_TIMING_REPS", "11"},   {"CUDAL1_MIN_SPEEDUP", "1.1"},
                          {"CUDAL1_PROFILE_SAMPLE", "4"}, {"CUDAL1_SEED", "42"},
                          {"CUDAL1_L2_FLUSH", "Write"},
                          {"CUDAL1_CUDA_LIBRARY", "/l/libcuda.so.1"}, {"CUDAL1_NVRTC_LIBRARY", "/l/nvrtc.so"}},
                         &w);
  EXPECT_TRUE(w.empty()) << w.front();
  EXPECT_TRUE(c.enable);
  EXPECT_EQ(c.mode, Mode::kServe);
  EXPECT_EQ(c.log_level, LogLevel::kDebug);
  EXPECT_EQ(c.hot_calls, 7);
  EXPECT_EQ(c.trials, 3);
  EXPECT_EQ(c.tune_round, 2);
  EXPECT_EQ(c.tune_search, TuneSearch::kPolicy);
  EXPECT_EQ(parse({{"CUDAL1_TUNE_SEARCH", "Knobs-Mean"}}, &w).tune_search, TuneSearch::kKnobsMean);
  EXPECT_STREQ(tune_search_name(TuneSearch::kKnobsMean), "knobs-mean");
  EXPECT_EQ(parse({{"CUDAL1_TUNE_SEARCH", "knobs"}}, &w).tune_search, TuneSearch::kKnobs);
  EXPECT_EQ(parse({{"CUDAL1_TUNE_SEARCH", "GP"}}, &w).tune_search, TuneSearch::kGp);
  EXPECT_STREQ(tune_search_name(TuneSearch::kGp), "gp");
  EXPECT_FALSE(parse({{"CUDAL1_TUNE_PRIOR", "off"}}, &w).tune_prior);
  EXPECT_TRUE(parse({{"CUDAL1_TUNE_PRIOR", "on"}}, &w).tune_prior);
  EXPECT_EQ(c.verify_trials, 9);
  EXPECT_EQ(c.timing_reps, 11);
  EXPECT_DOUBLE_EQ(c.min_speedup, 1.1);
  EXPECT_EQ(c.profile_sample, 4);
  EXPECT_EQ(c.seed, 42u);
  EXPECT_EQ(c.l2_flush, L2FlushKind::kWrite);
  EXPECT_EQ(c.cuda_library, "/l/libcuda.so.1");
  EXPECT_EQ(c.nvrtc_library, "/l/nvrtc.so");
}

TEST(Config, BadValuesWarnAndKeepDefaults) {
  std::vector<std::string> w;
  const Config c = parse({{"CUDAL1_ENABLE", "maybe"},   {"CUDAL1_MODE", "fast"},      {"CUDAL1_LOG_LEVEL", "loud"},
                          {"CUDAL1_HOT_CALLS", "12abc"}, {"CUDAL1_TRIALS", "0"},       {"CUDAL1_MIN_SPEEDUP", "0.5"},
                          {"CUDAL1_TIMING_REPS", ""},    {"CUDAL1_SEED", "-3"},
                          {"CUDAL1_TUNE_ROUND", "0"},   {"CUDAL1_L2_FLUSH", "dirty"}, {"CUDAL1_TUNE_SEARCH", "best"}},
                         &w);
  EXPECT_FALSE(c.enable);
  EXPECT_EQ(c.mode, Mode::kTune);
  EXPECT_EQ(c.log_level, LogLevel::kWarn);
  EXPECT_EQ(c.hot_calls, 50);
  EXPECT_EQ(c.trials, 16);
  EXPECT_DOUBLE_EQ(c.min_speedup, 1.03);
  EXPECT_EQ(c.timing_reps, 40);
  EXPECT_EQ(c.seed, 0u);
  EXPECT_EQ(c.tune_round, 4);
  EXPECT_EQ(c.l2_flush, L2FlushKind::kRead);
  EXPECT_EQ(c.tune_search, TuneSearch::kGp);
  ASSERT_EQ(w.size(), 11u);
  EXPECT_NE(w[6].find("CUDAL1_TUNE_SEARCH='best' is not gp, knobs, knobs-mean or policy; using gp"),
            std::string::npos)
      << w[6];
  EXPECT_NE(w[9].find("CUDAL1_L2_FLUSH='dirty' is not read or write; using read"), std::string::npos) << w[9];
  EXPECT_NE(w[3].find("CUDAL1_HOT_CALLS='12abc' is not an integer; using 50"), std::string::npos) << w[3];
}

TEST(Config, SetConfigOverridesTheProcessWideOne) {
  Config c = config();
  c.hot_calls = 3;
  set_config(c);
  EXPECT_EQ(config().hot_calls, 3);
}

}  // namespace
}  // namespace cudal1
