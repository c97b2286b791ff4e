/// @brief Records of one fingerprint serving another after re-verification (Note [Cache transfer]).
#include <nlohmann/json.hpp>

#include <algorithm>

#include "cudal1/cache/kernel_cache.h"
#include "db_session.h"

namespace cudal1::cache {
namespace {

constexpr char kAllowance[] = "transfer";

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

}  // namespace

const std::vector<std::string>& transferable_fields() {
  static const std::vector<std::string> f = {"driver", "cuda_runtime", "nvrtc", "torch", "cudal1"};
  return f;
}

Status transfer_check(const GpuFingerprint& from, const GpuFingerprint& to, const std::vector<std::string>& allowed) {
  std::vector<std::string> fixed, refused;
  for (const auto& f : from.differing_fields(to)) {
    const auto& t = transferable_fields();
    if (std::find(t.begin(), t.end(), f) == t.end())
      fixed.push_back(f);
    else if (std::find(allowed.begin(), allowed.end(), f) == allowed.end())
      refused.push_back(f);
  }
  if (!fixed.empty())
    return Status(Code::kMismatch, "tuned for another " + joined(fixed) + " (" + from.gpu_name + " sm_" +
                                       std::to_string(from.sm) + ", " + std::to_string(from.sm_count) +
                                       " SMs): kernels never transfer across GPU models or record formats");
  if (!refused.empty())
    return Status(Code::kMismatch, "fingerprint differs in " + joined(refused) + ", which its allowance does not name");
  return Status();
}

Result<std::vector<GpuFingerprint>> KernelCache::fingerprints() const {
  std::vector<GpuFingerprint> out;
  auto db = detail::open_read(dir_);
  if (!db.ok()) return db.status().code() == Code::kNotFound ? Result<std::vector<GpuFingerprint>>(out) : db.status();
  std::unique_ptr<rocksdb::Iterator> it(db.value()->NewIterator(rocksdb::ReadOptions()));
  for (it->Seek("f/"); it->Valid() && it->key().starts_with("f/"); it->Next()) {
    auto fp = GpuFingerprint::from_json(it->value().ToString());
    if (fp.ok() && "f/" + fp->key() == it->key().ToString()) out.push_back(std::move(fp).value());
  }
  return out;
}

Status KernelCache::allow_transfer(const GpuFingerprint& fp, const std::vector<std::string>& fields) {
  for (const auto& f : fields) {
    const auto& t = transferable_fields();
    if (std::find(t.begin(), t.end(), f) == t.end())
      return Status(Code::kInvalidArgument, "'" + f + "' cannot be allowed to differ (allowed: " + joined(t) + ")");
  }
  return put_state(fp, kAllowance, nlohmann::json{{"allow", fields}}.dump());
}

Result<std::vector<std::string>> KernelCache::transfer_allowance(const GpuFingerprint& fp) const {
  CUDAL1_ASSIGN_OR_RETURN(std::string text, get_state(fp, kAllowance));
  const auto j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object() || !j.contains("allow") || !j["allow"].is_array())
    return Status(Code::kCorrupt, "transfer allowance of " + fp.key() + " is not {\"allow\": [...]}");
  std::vector<std::string> out;
  for (const auto& f : j["allow"])
    if (f.is_string()) out.push_back(f.get<std::string>());
  return out;
}

}  // namespace cudal1::cache
