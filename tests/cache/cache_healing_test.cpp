/// @brief Cache healing on a real RocksDB directory (Note [Cache healing]): bytes flipped and files truncated in
/// every file type of the database, a garbage CURRENT, a file where the directory should be, each time the cache
/// heals (kept as it was when the damage is harmless, else moved aside and replaced) and works afterwards;
/// verify() names every bad record and drop() removes exactly those.
#include <gtest/gtest.h>
#include <rocksdb/db.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>

#include "cudal1/cache/kernel_cache.h"
#include "cudal1/core/version.h"
#include "test_records.h"

namespace cudal1::cache {
namespace {

namespace fs = std::filesystem;

GpuFingerprint fp() { return testing::test_fingerprint(); }
KernelEntry entry(const std::string& sig, bool kernel = true) { return testing::test_entry(sig, kernel); }

class HealTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("cudal1_heal_" + std::to_string(::getpid()) + "_" +
                                        std::to_string(std::random_device()()));
    fs::create_directories(root_);
  }
  void TearDown() override { fs::remove_all(root_); }

  /// A database with 40 entries in a table file and 5 more in the write-ahead log.
  fs::path populated(const std::string& name) {
    const fs::path dir = root_ / name;
    KernelCache c(dir.string());
    for (int i = 0; i < 40; ++i) EXPECT_TRUE(c.put(fp(), entry("sig" + std::to_string(i))).ok());
    {
      rocksdb::DB* raw = nullptr;
      EXPECT_TRUE(rocksdb::DB::Open(rocksdb::Options(), dir.string(), &raw).ok());
      std::unique_ptr<rocksdb::DB> db(raw);
      EXPECT_TRUE(db->Flush(rocksdb::FlushOptions()).ok());
    }
    for (int i = 40; i < 45; ++i) EXPECT_TRUE(c.put(fp(), entry("sig" + std::to_string(i))).ok());
    return dir;
  }

  /// After heal(): the cache works (a write reads back), and every entry it still has is one that was written.
  void expect_works(const fs::path& dir, const std::string& what) {
    SCOPED_TRACE(what);
    KernelCache c(dir.string());
    auto h = c.heal();
    ASSERT_TRUE(h.ok()) << h.status().to_string();
    if (h->healed) {
      EXPECT_TRUE(fs::exists(h->moved_to)) << h->moved_to;
      EXPECT_FALSE(h->reason.empty());
    }
    ASSERT_TRUE(c.put(fp(), entry("after")).ok());
    ASSERT_TRUE(c.get(fp(), "after").ok());
    std::vector<std::string> rejected;
    auto all = c.load_all(fp(), &rejected);
    ASSERT_TRUE(all.ok()) << all.status().to_string();
    for (const KernelEntry& e : all.value()) EXPECT_EQ(e.cubin, e.signature == "after" ? entry("after").cubin : entry(e.signature).cubin);
    auto problems = c.verify(nullptr);
    ASSERT_TRUE(problems.ok()) << problems.status().to_string();
    ++(h->healed ? healed_ : kept_);
  }
  fs::path root_;
  int healed_ = 0, kept_ = 0;
};

std::vector<fs::path> files_of(const fs::path& dir) {
  std::vector<fs::path> out;
  for (const auto& f : fs::directory_iterator(dir))
    if (f.is_regular_file() && f.path().filename() != "LOCK") out.push_back(f.path());
  return out;
}

TEST_F(HealTest, FlippedBytesInEveryFileOfTheDatabaseHeal) {
  const fs::path base = populated("base");
  std::mt19937 rng(42);
  int files = 0;
  for (const fs::path& f : files_of(base)) {
    for (int trial = 0; trial < 3; ++trial) {
      const fs::path dir = root_ / ("flip_" + f.filename().string() + "_" + std::to_string(trial));
      fs::copy(base, dir, fs::copy_options::recursive);
      const fs::path target = dir / f.filename();
      std::fstream io(target, std::ios::in | std::ios::out | std::ios::binary);
      io.seekg(0, std::ios::end);
      const auto size = static_cast<uint64_t>(io.tellg());
      if (size == 0) continue;
      for (int k = 0; k < 8; ++k) {  // eight bytes flipped at random places
        const uint64_t at = rng() % size;
        io.seekg(static_cast<std::streamoff>(at));
        char ch = 0;
        io.read(&ch, 1);
        io.seekp(static_cast<std::streamoff>(at));
        ch = static_cast<char>(ch ^ (1 + rng() % 255));
        io.write(&ch, 1);
      }
      io.close();
      expect_works(dir, "flipped " + f.filename().string());
    }
    ++files;
  }
  EXPECT_GE(files, 5);  // CURRENT, IDENTITY, MANIFEST, OPTIONS, a table, a log (and RocksDB's LOG)
  EXPECT_GT(healed_, 0);
  std::printf("flipped bytes: %d healed by moving aside, %d harmless\n", healed_, kept_);
}

TEST_F(HealTest, TruncatedFilesHeal) {
  const fs::path base = populated("base");
  for (const fs::path& f : files_of(base)) {
    const fs::path dir = root_ / ("trunc_" + f.filename().string());
    fs::copy(base, dir, fs::copy_options::recursive);
    fs::resize_file(dir / f.filename(), fs::file_size(dir / f.filename()) / 2);
    expect_works(dir, "truncated " + f.filename().string());
  }
  EXPECT_GT(healed_, 0);
}

TEST_F(HealTest, AGarbageCurrentIsMovedAsideAndAFreshDatabaseMade) {
  const fs::path dir = populated("garbage");
  std::ofstream(dir / "CURRENT", std::ios::trunc) << "MANIFEST-nonsense\n";
  KernelCache c(dir.string());
  EXPECT_FALSE(c.load_all(fp(), nullptr).ok());  // unreadable as it is
  expect_works(dir, "garbage CURRENT");
  EXPECT_EQ(healed_, 1);
  auto all = KernelCache(dir.string()).load_all(fp(), nullptr);
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->size(), 1u);  // the fresh database: only what was written after healing
}

TEST_F(HealTest, AFileWhereTheDirectoryShouldBeIsMovedAside) {
  const fs::path dir = root_ / "a_file";
  std::ofstream(dir) << "not a directory";
  expect_works(dir, "a file");
  EXPECT_EQ(healed_, 1);
  EXPECT_TRUE(fs::is_directory(dir));
}

TEST_F(HealTest, AnUnwritableDirectoryIsLeftAloneWithAnError) {
  if (::geteuid() == 0) GTEST_SKIP() << "running as root: directory permissions do not bind";
  const fs::path dir = populated("ro");
  fs::permissions(dir, fs::perms::owner_read | fs::perms::owner_exec);
  KernelCache c(dir.string());
  auto h = c.heal();
  EXPECT_FALSE(h.ok());
  EXPECT_TRUE(fs::exists(dir / "CURRENT"));  // not moved
  EXPECT_TRUE(c.get(fp(), "sig1").ok());     // still readable
  fs::permissions(dir, fs::perms::owner_all);
}

TEST_F(HealTest, AHealthyDatabaseIsKept) {
  const fs::path dir = populated("healthy");
  KernelCache c(dir.string());
  auto h = c.heal();
  ASSERT_TRUE(h.ok());
  EXPECT_FALSE(h->healed);
  auto all = c.load_all(fp(), nullptr);
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->size(), 45u);
}

TEST_F(HealTest, VerifyNamesEveryBadRecordAndDropRemovesExactlyThose) {
  const fs::path dir = root_ / "verify";
  KernelCache c(dir.string());
  ASSERT_TRUE(c.put(fp(), entry("good")).ok());
  ASSERT_TRUE(c.put(fp(), entry("aten", false)).ok());
  KernelEntry no_code = entry("no_code");
  no_code.cubin.clear();
  ASSERT_TRUE(c.put(fp(), no_code).ok());
  KernelEntry nan = entry("nan");
  nan.speedup = std::nan("");
  ASSERT_TRUE(c.put(fp(), nan).ok());
  KernelEntry aten_code = entry("aten_code", false);
  aten_code.cubin = "code";
  ASSERT_TRUE(c.put(fp(), aten_code).ok());
  ASSERT_TRUE(c.put(fp(), entry("refused_here")).ok());
  KernelEntry library = entry("library");  // a chain rewritten to one library call: no code, nothing to load
  library.family = "chain";
  library.kernel_name = kLibraryKernel;
  library.cubin.clear();
  ASSERT_TRUE(c.put(fp(), library).ok());
  KernelEntry library_code = library;
  library_code.signature = "library_code";
  library_code.cubin = "code";
  ASSERT_TRUE(c.put(fp(), library_code).ok());
  ASSERT_TRUE(c.put_run({"1-1", "{\"ok\": true}"}).ok());
  {
    rocksdb::DB* raw = nullptr;
    ASSERT_TRUE(rocksdb::DB::Open(rocksdb::Options(), dir.string(), &raw).ok());
    std::unique_ptr<rocksdb::DB> db(raw);
    db->Put(rocksdb::WriteOptions(), KernelCache::entry_key(fp(), "garbage"), "not a record");
    db->Put(rocksdb::WriteOptions(), "k/nofp/orphan", KernelCache::encode(fp(), entry("orphan")));
    db->Put(rocksdb::WriteOptions(), "r/2-2", "{not json");
  }
  const KernelCheck check = [](const GpuFingerprint&, const KernelEntry& e) {
    if (e.signature == "refused_here") return Status(Code::kInternal, "CUDA_ERROR_INVALID_IMAGE");
    if (e.library()) return Status(Code::kInternal, "a library call has nothing to load: never checked");
    if (e.signature == "good") return Status(Code::kUnavailable, "no GPU here");  // not checked: fine
    return Status();
  };
  auto problems = c.verify(check);
  ASSERT_TRUE(problems.ok()) << problems.status().to_string();
  std::set<std::string> keys;
  for (const auto& p : problems.value()) keys.insert(p.key);
  const std::string k = "k/" + fp().key() + "/";
  EXPECT_EQ(keys, (std::set<std::string>{k + "no_code", k + "nan", k + "aten_code", k + "refused_here", k + "garbage",
                                         k + "library_code", "k/nofp/orphan", "r/2-2"}));
  auto dropped = c.drop(problems.value());
  ASSERT_TRUE(dropped.ok());
  EXPECT_EQ(dropped.value(), 8);
  auto again = c.verify(check);
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->empty());
  EXPECT_TRUE(c.get(fp(), "good").ok());
  EXPECT_TRUE(c.get(fp(), "aten").ok());
  auto lib = c.get(fp(), "library");
  ASSERT_TRUE(lib.ok()) << lib.status().to_string();
  EXPECT_TRUE(lib->library());
  auto runs = c.runs();
  ASSERT_TRUE(runs.ok());
  EXPECT_EQ(runs->size(), 1u);
}

}  // namespace
}  // namespace cudal1::cache
