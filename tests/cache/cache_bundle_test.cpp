/// @brief Cache bundles on real RocksDB directories (Note [Cache bundles]): a fingerprint's records exported and
/// imported into another cache read back identical; a damaged, truncated or foreign file is refused whole and
/// writes nothing; existing records are kept unless overwritten; another fingerprint's records stay behind.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <functional>
#include <fstream>
#include <random>

#include "cudal1/cache/kernel_cache.h"
#include "test_records.h"

namespace cudal1::cache {
namespace {

namespace fs = std::filesystem;
using testing::test_entry;
using testing::test_fingerprint;

class BundleTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("cudal1_bundle_" + std::to_string(::getpid()) + "_" +
                                        std::to_string(std::random_device()()));
    fs::create_directories(root_);
    KernelCache a((root_ / "a").string());
    for (int i = 0; i < 5; ++i) EXPECT_TRUE(a.put(h200_, test_entry("sig" + std::to_string(i), i % 2 == 0)).ok());
    EXPECT_TRUE(a.put(a100_, test_entry("other")).ok());
  }
  void TearDown() override { fs::remove_all(root_); }

  std::string bundle() {
    const std::string path = (root_ / "h200.bundle").string();
    auto n = KernelCache((root_ / "a").string()).export_bundle(h200_.key(), path);
    EXPECT_TRUE(n.ok()) << n.status().to_string();
    EXPECT_EQ(n.ok() ? n.value() : -1, 5);
    return path;
  }
  fs::path root_;
  const GpuFingerprint h200_ = test_fingerprint(), a100_ = test_fingerprint("NVIDIA A100-SXM4-80GB");
};

TEST_F(BundleTest, ARoundTripReadsBackEveryRecordOfThatFingerprintOnly) {
  const std::string path = bundle();
  KernelCache b((root_ / "b").string());
  auto r = b.import_bundle(path, false);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->imported, 5);
  EXPECT_EQ(r->fingerprint_key, h200_.key());
  auto all = b.load_all(h200_, nullptr);
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 5u);
  for (const KernelEntry& e : all.value()) {
    const KernelEntry want = test_entry(e.signature, e.signature == "sig0" || e.signature == "sig2" || e.signature == "sig4");
    EXPECT_EQ(e.has_kernel, want.has_kernel);
    EXPECT_EQ(e.cubin, want.cubin);
    EXPECT_EQ(e.variant, want.variant);
    EXPECT_EQ(e.speedup, want.speedup);
  }
  auto other = b.load_all(a100_, nullptr);
  ASSERT_TRUE(other.ok());
  EXPECT_TRUE(other->empty());
  auto listing = b.list();
  ASSERT_TRUE(listing.ok());
  ASSERT_EQ(listing->size(), 1u);
  EXPECT_TRUE(listing->front().fingerprint.ok());  // the fingerprint record came along
}

TEST_F(BundleTest, ExistingRecordsAreKeptUnlessOverwritten) {
  const std::string path = bundle();
  KernelCache b((root_ / "b").string());
  KernelEntry mine = test_entry("sig1");
  mine.speedup = 9;
  ASSERT_TRUE(b.put(h200_, mine).ok());
  auto r = b.import_bundle(path, false);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->imported, 4);
  EXPECT_EQ(r->kept, 1);
  EXPECT_EQ(b.get(h200_, "sig1")->speedup, 9);
  r = b.import_bundle(path, true);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->imported, 5);
  EXPECT_EQ(b.get(h200_, "sig1")->speedup, test_entry("sig1").speedup);
}

TEST_F(BundleTest, DamagedTruncatedAndForeignFilesAreRefusedWhole) {
  const std::string path = bundle();
  std::string bytes;
  {
    std::ifstream f(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(f), {});
  }
  auto write = [&](const std::string& name, const std::string& content) {
    const std::string p = (root_ / name).string();
    std::ofstream(p, std::ios::binary) << content;
    return p;
  };
  std::mt19937 rng(7);
  std::vector<std::pair<std::string, Code>> cases;
  for (int i = 0; i < 20; ++i) {  // a byte flipped anywhere
    std::string flipped = bytes;
    flipped[rng() % flipped.size()] ^= static_cast<char>(1 + rng() % 255);
    cases.push_back({write("flip" + std::to_string(i), flipped), Code::kCorrupt});
  }
  cases.push_back({write("half", bytes.substr(0, bytes.size() / 2)), Code::kCorrupt});
  cases.push_back({write("empty", ""), Code::kCorrupt});
  cases.push_back({write("text", "just some text that is long enough"), Code::kCorrupt});
  std::string newer = bytes;
  newer[4] = 9;
  cases.push_back({write("newer", newer), Code::kMismatch});
  KernelCache b((root_ / "b").string());
  ASSERT_TRUE(b.put(a100_, test_entry("mine")).ok());
  for (const auto& [p, code] : cases) {
    auto r = b.import_bundle(p, false);
    ASSERT_FALSE(r.ok()) << p;
    // A flipped format byte reads as another format; every other damage as corrupt.
    if (code == Code::kMismatch) EXPECT_EQ(r.status().code(), Code::kMismatch) << p;
    else EXPECT_TRUE(r.status().code() == Code::kCorrupt || r.status().code() == Code::kMismatch) << p;
  }
  EXPECT_EQ(b.import_bundle((root_ / "missing").string(), false).status().code(), Code::kIoError);
  auto all = b.load_all(h200_, nullptr);
  ASSERT_TRUE(all.ok());
  EXPECT_TRUE(all->empty());            // nothing written by any refused file
  EXPECT_TRUE(b.get(a100_, "mine").ok());  // and nothing lost
}

TEST_F(BundleTest, AnUnknownFingerprintIsNotFound) {
  EXPECT_EQ(KernelCache((root_ / "a").string()).export_bundle("0123456789abcdef", (root_ / "x").string()).status().code(),
            Code::kNotFound);
  EXPECT_FALSE(fs::exists(root_ / "x"));
}

// Note [Cache transfer]: which fingerprint differences an allowance can cover, and what is stored.
TEST(CacheTransfer, OnlyTheSoftwareStackMayDifferAndOnlyWhereAllowed) {
  const GpuFingerprint tuned = test_fingerprint();
  GpuFingerprint node = tuned;
  EXPECT_TRUE(transfer_check(tuned, node, {}).ok());  // the same fingerprint
  node.driver_version += 10;
  node.torch_version = "2.11.1";
  EXPECT_EQ(tuned.differing_fields(node), (std::vector<std::string>{"driver", "torch"}));
  const Status none = transfer_check(tuned, node, {});
  EXPECT_EQ(none.code(), Code::kMismatch);
  EXPECT_NE(none.message().find("differs in driver, torch"), std::string::npos) << none.message();
  EXPECT_EQ(transfer_check(tuned, node, {"driver"}).code(), Code::kMismatch);  // torch not allowed
  EXPECT_TRUE(transfer_check(tuned, node, {"driver", "torch"}).ok());
  for (auto change : std::vector<std::function<void(GpuFingerprint&)>>{
           [](GpuFingerprint& f) { f.gpu_name = "NVIDIA H100 80GB HBM3"; }, [](GpuFingerprint& f) { f.sm = 100; },
           [](GpuFingerprint& f) { f.sm_count = 114; }, [](GpuFingerprint& f) { f.format_version += 1; }}) {
    GpuFingerprint other = tuned;
    change(other);
    const Status s = transfer_check(tuned, other, transferable_fields());
    EXPECT_EQ(s.code(), Code::kMismatch);
    EXPECT_NE(s.message().find("never transfer"), std::string::npos) << s.message();
  }
}

TEST_F(BundleTest, AnAllowanceIsStoredPerFingerprintAndAnImportCheckCanRefuse) {
  const std::string path = bundle();
  KernelCache b((root_ / "b").string());
  // A check that refuses: nothing is written.
  auto refused = b.import_bundle(path, false, [](const GpuFingerprint& fp) {
    return Status(Code::kMismatch, "not for " + fp.gpu_name);
  });
  EXPECT_EQ(refused.status().code(), Code::kMismatch);
  EXPECT_NE(refused.status().message().find("not for NVIDIA H200"), std::string::npos);
  EXPECT_TRUE(b.load_all(h200_, nullptr)->empty());
  ASSERT_TRUE(b.import_bundle(path, false, [](const GpuFingerprint&) { return Status(); }).ok());
  EXPECT_EQ(b.transfer_allowance(h200_).status().code(), Code::kNotFound);
  EXPECT_EQ(b.allow_transfer(h200_, {"driver", "sm"}).code(), Code::kInvalidArgument);
  ASSERT_TRUE(b.allow_transfer(h200_, {"driver", "nvrtc"}).ok());
  auto allowed = b.transfer_allowance(h200_);
  ASSERT_TRUE(allowed.ok()) << allowed.status().to_string();
  EXPECT_EQ(allowed.value(), (std::vector<std::string>{"driver", "nvrtc"}));
  EXPECT_EQ(b.transfer_allowance(a100_).status().code(), Code::kNotFound);
  auto fps = b.fingerprints();
  ASSERT_TRUE(fps.ok());
  ASSERT_EQ(fps->size(), 1u);
  EXPECT_EQ(fps->front().key(), h200_.key());
  EXPECT_TRUE(KernelCache((root_ / "none").string()).fingerprints()->empty());
}

}  // namespace
}  // namespace cudal1::cache
