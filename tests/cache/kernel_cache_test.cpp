/// @brief KernelCache on a real RocksDB directory: round trip, isolation between fingerprints, rejection of
/// corrupt and mismatched records, run reports, and two processes writing at once.
#include <gtest/gtest.h>
#include <rocksdb/db.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <random>

#include "cudal1/cache/kernel_cache.h"
#include "cudal1/core/version.h"
#include "test_records.h"

namespace cudal1::cache {
namespace {

GpuFingerprint fp(const std::string& gpu = "NVIDIA H200") { return testing::test_fingerprint(gpu); }
KernelEntry entry(const std::string& sig, bool kernel = true) { return testing::test_entry(sig, kernel); }

class CacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("cudal1_cache_test_" + std::to_string(::getpid()) + "_" + std::to_string(std::random_device()()));
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_;
};

TEST_F(CacheTest, RoundTripKeepsEveryFieldAndTheBinary) {
  KernelCache c(dir_.string());
  ASSERT_EQ(c.get(fp(), "aten::relu(f32[4]{1})").status().code(), Code::kNotFound);  // no database yet
  ASSERT_TRUE(c.put(fp(), entry("aten::relu(f32[4]{1})")).ok());
  auto back = c.get(fp(), "aten::relu(f32[4]{1})");
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  const KernelEntry want = entry("aten::relu(f32[4]{1})");
  EXPECT_EQ(back->cubin, want.cubin);
  EXPECT_EQ(back->variant, want.variant);
  EXPECT_EQ(back->launch_json, want.launch_json);
  EXPECT_DOUBLE_EQ(back->speedup, 1.25);
  EXPECT_TRUE(back->has_kernel);
  EXPECT_EQ(back->family, "unary_elementwise");
  EXPECT_EQ(back->generator_version, 1);
  // A fresh object (as in a second process) sees it too.
  KernelCache again(dir_.string());
  auto all = again.load_all(fp(), nullptr);
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 1u);
}

TEST_F(CacheTest, AnotherFingerprintNeverSeesTheEntry) {
  KernelCache c(dir_.string());
  ASSERT_TRUE(c.put(fp(), entry("aten::exp(f32[4]{1})")).ok());
  GpuFingerprint other = fp();
  other.driver_version = 12080;
  EXPECT_EQ(c.get(other, "aten::exp(f32[4]{1})").status().code(), Code::kNotFound);
  auto all = c.load_all(fp("NVIDIA H100 80GB HBM3"), nullptr);
  ASSERT_TRUE(all.ok());
  EXPECT_TRUE(all->empty());
}

TEST_F(CacheTest, CorruptAndMismatchedRecordsAreRejectedNotUsed) {
  {
    KernelCache c(dir_.string());
    ASSERT_TRUE(c.put(fp(), entry("good")).ok());
  }
  // Write bad records under this fingerprint's prefix directly, as a damaged or foreign file would have them.
  {
    rocksdb::DB* raw = nullptr;
    ASSERT_TRUE(rocksdb::DB::Open(rocksdb::Options(), dir_.string(), &raw).ok());
    std::unique_ptr<rocksdb::DB> db(raw);
    std::string flipped = KernelCache::encode(fp(), entry("flipped"));
    flipped.back() ^= 0x55;
    db->Put(rocksdb::WriteOptions(), KernelCache::entry_key(fp(), "flipped"), flipped);
    GpuFingerprint foreign = fp("NVIDIA A100-SXM4-80GB");
    db->Put(rocksdb::WriteOptions(), KernelCache::entry_key(fp(), "foreign"),
            KernelCache::encode(foreign, entry("foreign")));
    db->Put(rocksdb::WriteOptions(), KernelCache::entry_key(fp(), "moved"),
            KernelCache::encode(fp(), entry("elsewhere")));
    db->Put(rocksdb::WriteOptions(), KernelCache::entry_key(fp(), "garbage"), "not a record");
    std::string old_format = KernelCache::encode(fp(), entry("old"));
    old_format[4] = static_cast<char>(kCacheFormatVersion + 1);
    db->Put(rocksdb::WriteOptions(), KernelCache::entry_key(fp(), "old"), old_format);
  }
  KernelCache c(dir_.string());
  std::vector<std::string> rejected;
  auto all = c.load_all(fp(), &rejected);
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 1u);
  EXPECT_EQ(all->front().signature, "good");
  EXPECT_EQ(rejected.size(), 5u);
  EXPECT_EQ(c.get(fp(), "flipped").status().code(), Code::kCorrupt);
  EXPECT_EQ(c.get(fp(), "foreign").status().code(), Code::kMismatch);
  EXPECT_EQ(c.get(fp(), "moved").status().code(), Code::kMismatch);
  EXPECT_EQ(c.get(fp(), "garbage").status().code(), Code::kCorrupt);
  EXPECT_EQ(c.get(fp(), "old").status().code(), Code::kMismatch);
  auto listing = c.list();
  ASSERT_TRUE(listing.ok());
  ASSERT_EQ(listing->size(), 1u);
  EXPECT_EQ(listing->front().rejected.size(), 5u);
}

TEST_F(CacheTest, NoWinnerOutcomesAndStateAndErase) {
  KernelCache c(dir_.string());
  ASSERT_TRUE(c.put(fp(), entry("aten", /*kernel=*/false)).ok());
  auto e = c.get(fp(), "aten");
  ASSERT_TRUE(e.ok());
  EXPECT_FALSE(e->has_kernel);
  EXPECT_TRUE(e->cubin.empty());
  ASSERT_TRUE(c.put_state(fp(), "policy.unary_elementwise", "{\"w\":[1]}").ok());
  EXPECT_EQ(c.get_state(fp(), "policy.unary_elementwise").value(), "{\"w\":[1]}");
  auto n = c.erase(fp().key());
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(n.value(), 3);  // fingerprint record, entry, state
  EXPECT_EQ(c.get(fp(), "aten").status().code(), Code::kNotFound);
}

// Note [Cache layout]: a learned policy belongs to the GPU architecture, not to one software stack, so a new driver
// or torch (another fingerprint) keeps it; another architecture never sees it; clearing the cache removes it.
TEST_F(CacheTest, ArchitectureStateOutlivesAFingerprintAndStaysWithItsArchitecture) {
  KernelCache c(dir_.string());
  ASSERT_TRUE(c.put_arch_state(90, "policy.norm.f1", "{\"w\":[1]}").ok());
  EXPECT_EQ(c.get_arch_state(90, "policy.norm.f1").value(), "{\"w\":[1]}");
  EXPECT_EQ(c.get_arch_state(80, "policy.norm.f1").status().code(), Code::kNotFound);
  EXPECT_EQ(c.get_arch_state(90, "policy.norm.f2").status().code(), Code::kNotFound);
  EXPECT_EQ(c.put_arch_state(0, "policy.norm.f1", "{}").code(), Code::kInvalidArgument);
  ASSERT_TRUE(c.put(fp(), entry("sig")).ok());
  auto one = c.erase(fp().key());  // one fingerprint's records: the architecture's state stays
  ASSERT_TRUE(one.ok());
  EXPECT_TRUE(c.get_arch_state(90, "policy.norm.f1").ok());
  auto all = c.erase("");
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(c.get_arch_state(90, "policy.norm.f1").status().code(), Code::kNotFound);
}

TEST_F(CacheTest, RunReportsNewestFirstAndPruned) {
  KernelCache c(dir_.string());
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(c.put_run({"17640000" + std::to_string(10 + i) + "-1", "{}"}, 3).ok());
  auto runs = c.runs();
  ASSERT_TRUE(runs.ok());
  ASSERT_EQ(runs->size(), 3u);
  EXPECT_EQ(runs->front().run_id, "1764000014-1");
  EXPECT_EQ(runs->back().run_id, "1764000012-1");
}

constexpr int kPerProcess = 40;

// Writes kPerProcess entries; like the tuner, retries a put that gave up waiting for the other process's lock
// (Unavailable: the contract's "caller keeps the entry to retry later"), so that a loaded machine cannot fail
// the test, while any other failure, or an entry lost after an ok put, still does.
int write_many(const std::string& dir, const std::string& who) {
  KernelCache c(dir);
  int failures = 0;
  for (int i = 0; i < kPerProcess; ++i) {
    Status s;
    for (int attempt = 0; attempt < 30; ++attempt)
      if ((s = c.put(fp(), entry(who + std::to_string(i)))).code() != Code::kUnavailable) break;
    failures += !s.ok();
  }
  return failures;
}

// The other process of TwoProcessesWritingAtOnceLoseNothing (a fresh exec: forking a process that already runs
// RocksDB's background threads is not safe). Skipped unless that test started it.
TEST(CacheChildProcess, Writes) {
  const char* dir = std::getenv("CUDAL1_TEST_CHILD_DIR");
  if (!dir) GTEST_SKIP() << "only run as the child of TwoProcessesWritingAtOnceLoseNothing";
  EXPECT_EQ(write_many(dir, "child"), 0);
}

TEST_F(CacheTest, TwoProcessesWritingAtOnceLoseNothing) {
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    setenv("CUDAL1_TEST_CHILD_DIR", dir_.c_str(), 1);
    execl("/proc/self/exe", "cache_test", "--gtest_filter=CacheChildProcess.Writes", static_cast<char*>(nullptr));
    _exit(127);
  }
  const int failures = write_many(dir_.string(), "parent");
  int status = 0;
  waitpid(child, &status, 0);
  EXPECT_EQ(failures, 0);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  KernelCache c(dir_.string());
  auto all = c.load_all(fp(), nullptr);
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->size(), 2u * kPerProcess);
}

TEST_F(CacheTest, ReadsWorkWhileAnotherHandleHoldsTheWriteLock) {
  KernelCache c(dir_.string());
  ASSERT_TRUE(c.put(fp(), entry("x")).ok());
  rocksdb::DB* raw = nullptr;
  ASSERT_TRUE(rocksdb::DB::Open(rocksdb::Options(), dir_.string(), &raw).ok());
  std::unique_ptr<rocksdb::DB> holder(raw);
  EXPECT_TRUE(c.get(fp(), "x").ok());
}

TEST_F(CacheTest, UnwritableDirectoryIsAnErrorNotACrash) {
  KernelCache c("/proc/cudal1-cannot-exist/cache");
  const Status s = c.put(fp(), entry("x"));
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(c.get(fp(), "x").status().code(), Code::kNotFound);
}

}  // namespace
}  // namespace cudal1::cache
