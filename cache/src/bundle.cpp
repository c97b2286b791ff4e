/// @brief Cache bundles (Note [Cache bundles] in kernel_cache.h): one fingerprint's records in one checked file,
/// written by export_bundle and merged into another cache by import_bundle.
#include <rocksdb/write_batch.h>
#include <xxhash.h>

#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cudal1/cache/kernel_cache.h"
#include "le_bytes.h"
#include "cudal1/core/version.h"
#include "db_session.h"

namespace cudal1::cache {
namespace {

constexpr char kMagic[4] = {'C', 'L', '1', 'B'};
constexpr uint32_t kBundleFormat = 1;
constexpr size_t kHeader = 4 + 4 + 8;
using detail::get_le;
using detail::put_le;

}  // namespace

Result<int64_t> KernelCache::export_bundle(const std::string& fp_key, const std::string& path) const {
  auto db = detail::open_read(dir_);
  if (!db.ok()) return db.status();
  std::string fp_json;
  if (const auto s = db.value()->Get(rocksdb::ReadOptions(), "f/" + fp_key, &fp_json); !s.ok())
    return s.IsNotFound() ? Status(Code::kNotFound, "no fingerprint " + fp_key + " in " + dir_)
                          : detail::from_rocksdb(s, "read fingerprint " + fp_key);
  CUDAL1_ASSIGN_OR_RETURN(GpuFingerprint fp, GpuFingerprint::from_json(fp_json));
  nlohmann::json records = nlohmann::json::array();
  const std::string prefix = "k/" + fp_key + "/";
  rocksdb::ReadOptions r;
  r.verify_checksums = true;
  std::unique_ptr<rocksdb::Iterator> it(db.value()->NewIterator(r));
  int64_t n = 0;
  for (it->Seek(prefix); it->Valid() && it->key().starts_with(prefix); it->Next()) {
    const std::string sig = it->key().ToString().substr(prefix.size()), value = it->value().ToString();
    if (!decode(value, &fp, &sig).ok()) continue;  // a bad record is not shipped
    records.push_back({{"signature", sig}, {"record", nlohmann::json::binary_t(std::vector<uint8_t>(value.begin(), value.end()))}});
    ++n;
  }
  CUDAL1_RETURN_IF_ERROR(detail::from_rocksdb(it->status(), "read cache " + dir_));
  const nlohmann::json payload = {{"cudal1", kVersion},
                                  {"created_unix", static_cast<int64_t>(std::time(nullptr))},
                                  {"fingerprint_key", fp_key},
                                  {"fingerprint", fp_json},
                                  {"records", records}};
  const std::vector<uint8_t> body = nlohmann::json::to_cbor(payload);
  std::string out(kMagic, 4);
  put_le<uint32_t>(out, kBundleFormat);
  put_le<uint64_t>(out, XXH3_64bits(body.data(), body.size()));
  out.append(body.begin(), body.end());
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f) return Status(Code::kIoError, "cannot write " + tmp);
    f.write(out.data(), static_cast<std::streamsize>(out.size()));
    f.flush();
    if (!f) return Status(Code::kIoError, "cannot write " + tmp);
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);  // the bundle appears whole or not at all
  if (ec) return Status(Code::kIoError, "cannot write " + path + ": " + ec.message());
  return n;
}

Result<BundleImport> KernelCache::import_bundle(const std::string& path, bool overwrite,
                                                const std::function<Status(const GpuFingerprint&)>& check) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return Status(Code::kIoError, "cannot read " + path);
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string data = ss.str();
  if (data.size() < kHeader || std::memcmp(data.data(), kMagic, 4) != 0)
    return Status(Code::kCorrupt, path + " is not a cudal1 cache bundle");
  if (get_le<uint32_t>(data.data() + 4) != kBundleFormat)
    return Status(Code::kMismatch, path + ": bundle format " + std::to_string(get_le<uint32_t>(data.data() + 4)) +
                                       ", this cudal1 reads " + std::to_string(kBundleFormat));
  if (get_le<uint64_t>(data.data() + 8) != XXH3_64bits(data.data() + kHeader, data.size() - kHeader))
    return Status(Code::kCorrupt, path + ": checksum mismatch (damaged or truncated)");
  BundleImport rep;
  std::vector<std::pair<std::string, std::string>> puts;
  std::string fp_json;
  try {
    const nlohmann::json j = nlohmann::json::from_cbor(data.begin() + kHeader, data.end());
    rep.fingerprint_key = j.at("fingerprint_key").get<std::string>();
    fp_json = j.at("fingerprint").get<std::string>();
    CUDAL1_ASSIGN_OR_RETURN(GpuFingerprint fp, GpuFingerprint::from_json(fp_json));
    if (fp.key() != rep.fingerprint_key) return Status(Code::kCorrupt, path + ": fingerprint and its key disagree");
    if (check) CUDAL1_RETURN_IF_ERROR(check(fp));
    for (const auto& rec : j.at("records")) {
      const std::string sig = rec.at("signature").get<std::string>();
      const auto& bytes = rec.at("record").get_binary();
      std::string value(bytes.begin(), bytes.end());
      if (!decode(value, &fp, &sig).ok()) {
        ++rep.rejected;
        continue;
      }
      puts.emplace_back(entry_key(fp, sig), std::move(value));
    }
  } catch (const std::exception& e) {
    return Status(Code::kCorrupt, path + ": " + e.what());
  }
  std::lock_guard<std::mutex> lock(write_mu_);
  auto db = detail::open_write(dir_);
  if (!db.ok()) return db.status();
  rocksdb::WriteBatch batch;
  batch.Put("f/" + rep.fingerprint_key, fp_json);
  for (const auto& [key, value] : puts) {
    std::string existing;
    if (!overwrite && db.value()->Get(rocksdb::ReadOptions(), key, &existing).ok()) {
      ++rep.kept;
      continue;
    }
    batch.Put(key, value);
    ++rep.imported;
  }
  rocksdb::WriteOptions w;
  w.sync = true;
  CUDAL1_RETURN_IF_ERROR(detail::from_rocksdb(db.value()->Write(w, &batch), "import bundle"));
  return rep;
}

}  // namespace cudal1::cache
