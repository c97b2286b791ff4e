/// @brief Encoding and checking of cache records, see Note [Cache layout].
#include <nlohmann/json.hpp>
#include <xxhash.h>

#include <cstring>

#include "cudal1/cache/kernel_cache.h"
#include "le_bytes.h"
#include "cudal1/core/version.h"

namespace cudal1::cache {
namespace {

constexpr char kMagic[4] = {'C', 'L', '1', 'E'};
constexpr size_t kHeader = 4 + 4 + 8;
using detail::get_le;
using detail::put_le;

}  // namespace

std::string KernelCache::entry_key(const GpuFingerprint& fp, const std::string& signature) {
  return "k/" + fp.key() + "/" + signature;
}

std::string KernelCache::encode(const GpuFingerprint& fp, const KernelEntry& e) {
  nlohmann::json j = {
      {"fingerprint", fp.canonical()},
      {"signature", e.signature},
      {"has_kernel", e.has_kernel},
      {"family", e.family},
      {"generator_version", e.generator_version},
      {"variant", e.variant},
      {"launch", e.launch_json},
      {"kernel_name", e.kernel_name},
      {"cubin", nlohmann::json::binary(std::vector<uint8_t>(e.cubin.begin(), e.cubin.end()))},
      {"speedup", e.speedup},
      {"aten_us", e.aten_us},
      {"kernel_us", e.kernel_us},
      {"trials", e.trials},
      {"created_unix", e.created_unix},
      {"in_app", e.in_app},
  };
  const std::vector<uint8_t> payload = nlohmann::json::to_cbor(j);
  std::string out(kMagic, 4);
  put_le<uint32_t>(out, static_cast<uint32_t>(kCacheFormatVersion));
  put_le<uint64_t>(out, XXH3_64bits(payload.data(), payload.size()));
  out.append(reinterpret_cast<const char*>(payload.data()), payload.size());
  return out;
}

Result<KernelEntry> KernelCache::decode(const std::string& value, const GpuFingerprint* expect_fp,
                                        const std::string* expect_signature) {
  if (value.size() < kHeader || std::memcmp(value.data(), kMagic, 4) != 0)
    return Status(Code::kCorrupt, "record has no cudal1 header");
  const auto format = get_le<uint32_t>(value.data() + 4);
  if (format != static_cast<uint32_t>(kCacheFormatVersion))
    return Status(Code::kMismatch, "record format " + std::to_string(format) + ", expected " +
                                       std::to_string(kCacheFormatVersion));
  const char* payload = value.data() + kHeader;
  const size_t n = value.size() - kHeader;
  if (get_le<uint64_t>(value.data() + 8) != XXH3_64bits(payload, n))
    return Status(Code::kCorrupt, "record checksum mismatch");
  const auto j = nlohmann::json::from_cbor(payload, payload + n, /*strict=*/true, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return Status(Code::kCorrupt, "record payload is not CBOR");
  try {
    if (expect_fp && j.at("fingerprint").get<std::string>() != expect_fp->canonical())
      return Status(Code::kMismatch, "record belongs to another GPU fingerprint");
    KernelEntry e;
    e.signature = j.at("signature").get<std::string>();
    if (expect_signature && e.signature != *expect_signature)
      return Status(Code::kMismatch, "record is for signature " + e.signature);
    e.has_kernel = j.at("has_kernel").get<bool>();
    e.family = j.at("family").get<std::string>();
    e.generator_version = j.at("generator_version").get<int>();
    e.variant = j.at("variant").get<std::string>();
    e.launch_json = j.at("launch").get<std::string>();
    e.kernel_name = j.at("kernel_name").get<std::string>();
    const auto& bin = j.at("cubin").get_binary();
    e.cubin.assign(bin.begin(), bin.end());
    e.speedup = j.at("speedup").get<double>();
    e.aten_us = j.at("aten_us").get<double>();
    e.kernel_us = j.at("kernel_us").get<double>();
    e.trials = j.at("trials").get<int64_t>();
    e.created_unix = j.at("created_unix").get<int64_t>();
    e.in_app = j.value("in_app", 0.0);  // optional: records written before it read as not judged
    if (e.has_kernel && (e.cubin.empty() != e.library() || e.kernel_name.empty()))
      return Status(Code::kCorrupt, e.library() ? "a library-call record with code" : "record claims a kernel but has no code");
    return e;
  } catch (const nlohmann::json::exception& ex) {
    return Status(Code::kCorrupt, std::string("record fields: ") + ex.what());
  }
}

}  // namespace cudal1::cache
