/// @brief `cudal1 cache ls / verify / repair / export / import` on real caches (Notes [Cache healing] and [Cache
/// bundles]): an unreadable database is named with the way out, verify lists bad records and fails, repair drops
/// them or replaces the database; a cache exported and imported elsewhere reads back. No GPU: kernels are not
/// loaded here ("not checked"), which is not a failure.
#include <gtest/gtest.h>
#include <rocksdb/db.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "cli_commands.h"
#include "gpus.h"
#include "cudal1/cache/kernel_cache.h"
#include "cudal1/core/cuda_driver.h"
#include "cudal1/core/version.h"
#include "cache/test_records.h"

namespace cudal1::cli {
namespace {

namespace fs = std::filesystem;

// sm 1.1: no GPU this test runs on is that one, so kernels are "not checked here" on a GPU machine too (the fake
// cubin would not load); loading real kernels on the GPU is tests/gpu/warm_then_serve.sh's `cache verify`.
GpuFingerprint fp() {
  GpuFingerprint f = cache::testing::test_fingerprint();
  f.sm = 11;
  return f;
}
cache::KernelEntry entry(const std::string& sig) { return cache::testing::test_entry(sig); }

// A bundle import compares the GPU model, SM count, driver and cudal1 version with this machine's GPU 0, when
// there is one (Note [Cache transfer]): records to ship are that GPU's own there, fp() on a machine without one.
GpuFingerprint shippable_fp() {
  GpuFingerprint f = fp();
  auto here = describe_gpu(0);
  if (!here.ok()) return f;
  f.gpu_name = here->gpu_name;
  f.sm = here->sm;
  f.sm_count = here->sm_count;
  f.driver_version = here->driver_version;
  f.cudal1_version = kVersion;
  return f;
}

class RepairTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("cudal1_repair_test_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    o_.cache_dir = dir_.string();
  }
  void TearDown() override {
    for (const auto& f : fs::directory_iterator(dir_.parent_path()))
      if (f.path().filename().string().rfind(dir_.filename().string(), 0) == 0) fs::remove_all(f.path());
  }
  int run(int (*cmd)(const Options&, std::ostream&), std::string* text) {
    std::ostringstream out;
    const int rc = cmd(o_, out);
    *text = out.str();
    return rc;
  }
  int verify(bool repair, std::string* text) {
    std::ostringstream out;
    const int rc = cache_verify(o_, repair, out);
    *text = out.str();
    return rc;
  }
  fs::path dir_;
  Options o_;
};

TEST_F(RepairTest, BadRecordsAreListedThenDropped) {
  cache::KernelCache c(dir_.string());
  ASSERT_TRUE(c.put(fp(), entry("good")).ok());
  cache::KernelEntry empty = entry("empty");
  empty.cubin.clear();
  ASSERT_TRUE(c.put(fp(), empty).ok());
  std::string text;
  EXPECT_EQ(verify(false, &text), 1);
  EXPECT_NE(text.find("bad: k/" + fp().key() + "/empty: Corrupt: record claims a kernel but has no code"), std::string::npos)
      << text;
  EXPECT_NE(text.find("1 bad records; `cudal1 cache repair` drops them"), std::string::npos) << text;
  EXPECT_EQ(verify(true, &text), 0);
  EXPECT_NE(text.find("dropped 1 bad records"), std::string::npos) << text;
  EXPECT_EQ(verify(false, &text), 0);
  EXPECT_NE(text.find("every record is sound"), std::string::npos) << text;
  EXPECT_TRUE(c.get(fp(), "good").ok());
}

TEST_F(RepairTest, AnUnreadableDatabaseIsNamedAndReplacedByRepair) {
  cache::KernelCache c(dir_.string());
  ASSERT_TRUE(c.put(fp(), entry("good")).ok());
  std::ofstream(dir_ / "CURRENT", std::ios::trunc) << "garbage\n";
  std::string text;
  EXPECT_EQ(run(cache_ls, &text), 1);
  EXPECT_NE(text.find("`cudal1 cache repair` keeps the unreadable database aside"), std::string::npos) << text;
  EXPECT_EQ(verify(false, &text), 1);
  EXPECT_NE(text.find("the database cannot be read"), std::string::npos) << text;
  EXPECT_EQ(verify(true, &text), 0);
  EXPECT_NE(text.find("a fresh cache is in place"), std::string::npos) << text;
  EXPECT_EQ(run(cache_ls, &text), 0) << text;
  EXPECT_EQ(verify(false, &text), 0) << text;
  int aside = 0;
  for (const auto& f : fs::directory_iterator(dir_.parent_path()))
    aside += f.path().filename().string().rfind(dir_.filename().string() + ".corrupt-", 0) == 0;
  EXPECT_EQ(aside, 1);
}

TEST_F(RepairTest, ExportThenImportShipsACache) {
  cache::KernelCache c(dir_.string());
  const GpuFingerprint f = shippable_fp();
  ASSERT_TRUE(c.put(f, entry("a")).ok());
  ASSERT_TRUE(c.put(f, entry("b")).ok());
  o_.bundle = (dir_.parent_path() / (dir_.filename().string() + ".bundle")).string();
  std::string text;
  EXPECT_EQ(run(cache_export, &text), 0) << text;  // one fingerprint: no --gpu needed
  EXPECT_NE(text.find("exported 2 records of fingerprint " + f.key()), std::string::npos) << text;
  Options other = o_;
  other.cache_dir = dir_.string() + ".other";
  std::ostringstream out;
  EXPECT_EQ(cache_import(other, out), 0) << out.str();
  EXPECT_NE(out.str().find("imported 2 records of fingerprint " + f.key()), std::string::npos) << out.str();
  EXPECT_TRUE(cache::KernelCache(other.cache_dir).get(f, "b").ok());
  ASSERT_TRUE(c.put(cache::testing::test_fingerprint("NVIDIA A100"), entry("c")).ok());
  EXPECT_EQ(run(cache_export, &text), 1);  // two fingerprints: say which
  EXPECT_NE(text.find("holds 2 fingerprints: say which with --gpu KEY"), std::string::npos) << text;
  std::ofstream(o_.bundle, std::ios::trunc) << "damaged";
  std::ostringstream bad;
  EXPECT_EQ(cache_import(other, bad), 1);
  EXPECT_NE(bad.str().find("nothing was imported"), std::string::npos) << bad.str();
}

// Note [Cache transfer]: --allow names the fields that may differ and stores them with the records; a field that
// can never differ is refused before anything is read. Without a GPU the machine is not compared (the app checks
// at start-up); on a GPU machine the fake sm 1.1 bundle is for another GPU model and is refused whole.
TEST_F(RepairTest, ImportAllowsNamedFieldsToDiffer) {
  cache::KernelCache c(dir_.string());
  ASSERT_TRUE(c.put(fp(), entry("a")).ok());
  o_.bundle = (dir_.parent_path() / (dir_.filename().string() + ".allow.bundle")).string();
  std::string text;
  ASSERT_EQ(run(cache_export, &text), 0) << text;
  Options other = o_;
  other.cache_dir = dir_.string() + ".allow";
  other.allow = {"driver", "sm"};
  std::ostringstream bad;
  EXPECT_EQ(cache_import(other, bad), 1);
  EXPECT_NE(bad.str().find("--allow sm: not a field that may differ"), std::string::npos) << bad.str();
  EXPECT_FALSE(fs::exists(other.cache_dir));
  other.allow = {"driver", "torch"};
  std::ostringstream out;
  const int rc = cache_import(other, out);
  if (driver().ok()) {
    EXPECT_EQ(rc, 1);
    EXPECT_NE(out.str().find("never transfer across GPU models"), std::string::npos) << out.str();
  } else {
    EXPECT_EQ(rc, 0) << out.str();
    EXPECT_NE(out.str().find("differs in driver, torch too, each kernel verified"), std::string::npos) << out.str();
    auto allowed = cache::KernelCache(other.cache_dir).transfer_allowance(fp());
    ASSERT_TRUE(allowed.ok()) << allowed.status().to_string();
    EXPECT_EQ(allowed.value(), (std::vector<std::string>{"driver", "torch"}));
  }
  fs::remove_all(other.cache_dir);
  fs::remove(o_.bundle);
}

// `--gpu current` picks this machine's GPU's fingerprint; without a GPU it says so and writes nothing.
TEST_F(RepairTest, ExportOfTheCurrentGpuNeedsOne) {
  cache::KernelCache c(dir_.string());
  ASSERT_TRUE(c.put(fp(), entry("a")).ok());
  o_.fingerprint = "current";
  o_.bundle = (dir_.parent_path() / (dir_.filename().string() + ".current.bundle")).string();
  std::string text;
  const int rc = run(cache_export, &text);
  if (driver().ok()) {  // a GPU machine: the fake sm 1.1 record is not this GPU's
    EXPECT_EQ(rc, 1);
    EXPECT_NE(text.find("no fingerprint in this cache is this machine's GPU"), std::string::npos) << text;
  } else {
    EXPECT_EQ(rc, 1);
    EXPECT_NE(text.find("error: --gpu current: Unavailable"), std::string::npos) << text;
  }
  EXPECT_FALSE(fs::exists(o_.bundle));
}

}  // namespace
}  // namespace cudal1::cli
