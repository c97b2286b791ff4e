/// @brief The fingerprint key changes with every field that makes a kernel stale, and round-trips as JSON.
#include <gtest/gtest.h>

#include <functional>
#include <set>

#include "cudal1/core/fingerprint.h"

namespace cudal1 {
namespace {

GpuFingerprint base() {
  GpuFingerprint f;
  f.gpu_name = "NVIDIA H200";
  f.sm = 90;
  f.sm_count = 132;
  f.driver_version = 13000;
  f.cuda_runtime_version = 13000;
  f.nvrtc_version = "13.0";
  f.torch_version = "2.11.0";
  f.cudal1_version = "0.1.0";
  f.generators = "unary_elementwise:1";
  f.format_version = 1;
  return f;
}

TEST(Fingerprint, EveryFieldChangesTheKey) {
  const std::vector<std::function<void(GpuFingerprint&)>> changes = {
      [](GpuFingerprint& f) { f.gpu_name = "NVIDIA H100 80GB HBM3"; },
      [](GpuFingerprint& f) { f.sm = 80; },
      [](GpuFingerprint& f) { f.sm_count = 114; },
      [](GpuFingerprint& f) { f.driver_version = 12080; },
      [](GpuFingerprint& f) { f.cuda_runtime_version = 12080; },
      [](GpuFingerprint& f) { f.nvrtc_version = "12.8"; },
      [](GpuFingerprint& f) { f.torch_version = "2.10.0"; },
      [](GpuFingerprint& f) { f.cudal1_version = "0.2.0"; },
      [](GpuFingerprint& f) { f.format_version = 2; },
  };
  std::set<std::string> keys = {base().key()};
  const std::vector<std::string> names = {"gpu_name", "sm",    "sm_count", "driver", "cuda_runtime",
                                          "nvrtc",    "torch", "cudal1",   "format"};
  for (size_t i = 0; i < changes.size(); ++i) {
    GpuFingerprint f = base();
    changes[i](f);
    EXPECT_NE(f, base());
    EXPECT_EQ(f.differing_fields(base()), std::vector<std::string>{names[i]});  // Note [Cache transfer]
    keys.insert(f.key());
  }
  EXPECT_TRUE(base().differing_fields(base()).empty());
  EXPECT_EQ(keys.size(), changes.size() + 1);
  EXPECT_EQ(base().key().size(), 16u);
  EXPECT_EQ(base().key(), base().key());
}

// Note [Generator versions]: each record carries its family's version, so a family's bump leaves the others'
// records (and the key) alone; the list is still shown.
TEST(Fingerprint, GeneratorVersionsAreNotPartOfTheKey) {
  GpuFingerprint f = base();
  f.generators = "unary_elementwise:2,chains:3";
  EXPECT_EQ(f.key(), base().key());
  EXPECT_EQ(f.canonical().find("generators"), std::string::npos);
  auto back = GpuFingerprint::from_json(f.to_json());
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->generators, f.generators);
}

TEST(Fingerprint, JsonRoundTripAndCorruptInput) {
  auto back = GpuFingerprint::from_json(base().to_json());
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  EXPECT_EQ(back.value(), base());
  EXPECT_EQ(GpuFingerprint::from_json("{not json").status().code(), Code::kCorrupt);
  EXPECT_EQ(GpuFingerprint::from_json("{\"gpu_name\": 3}").status().code(), Code::kCorrupt);
}

}  // namespace
}  // namespace cudal1
