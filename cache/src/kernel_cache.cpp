/// @brief KernelCache operations on short-lived RocksDB sessions.
#include "cudal1/cache/kernel_cache.h"

#include <rocksdb/write_batch.h>

#include <algorithm>
#include <map>

#include "cudal1/core/version.h"
#include "db_session.h"

namespace cudal1::cache {

using detail::from_rocksdb;
using detail::open_read;
using detail::open_write;

namespace {

rocksdb::WriteOptions synced() {
  rocksdb::WriteOptions w;
  w.sync = true;
  return w;
}

/// Visits every key with `prefix` in a read-only session. NotFound (no database) visits nothing.
Status scan(const std::string& dir, const std::string& prefix,
            const std::function<void(const std::string&, const std::string&)>& fn) {
  auto db = open_read(dir);
  if (!db.ok()) return db.status().code() == Code::kNotFound ? Status() : db.status();
  std::unique_ptr<rocksdb::Iterator> it(db.value()->NewIterator(rocksdb::ReadOptions()));
  for (it->Seek(prefix); it->Valid() && it->key().starts_with(prefix); it->Next())
    fn(it->key().ToString(), it->value().ToString());
  return from_rocksdb(it->status(), "scan cache " + dir);
}

}  // namespace

KernelCache::KernelCache(std::string dir) : dir_(std::move(dir)) {}

Status KernelCache::prepare() {
  std::lock_guard<std::mutex> lock(write_mu_);
  auto db = open_write(dir_);
  if (!db.ok()) return db.status();
  return from_rocksdb(db.value()->Put(synced(), "meta/format", std::to_string(kCacheFormatVersion)),
                      "write cache format marker");
}

Status KernelCache::put(const GpuFingerprint& fp, const KernelEntry& e) {
  if (e.signature.empty()) return Status(Code::kInvalidArgument, "entry without a signature");
  std::lock_guard<std::mutex> lock(write_mu_);
  auto db = open_write(dir_);
  if (!db.ok()) return db.status();
  rocksdb::WriteBatch batch;
  batch.Put("f/" + fp.key(), fp.to_json());
  batch.Put(entry_key(fp, e.signature), encode(fp, e));
  return from_rocksdb(db.value()->Write(synced(), &batch), "write cache entry");
}

Result<KernelEntry> KernelCache::get(const GpuFingerprint& fp, const std::string& signature) const {
  auto db = open_read(dir_);
  if (!db.ok()) return db.status();
  std::string value;
  const auto s = db.value()->Get(rocksdb::ReadOptions(), entry_key(fp, signature), &value);
  if (s.IsNotFound()) return Status(Code::kNotFound, "no entry for " + signature);
  if (!s.ok()) return from_rocksdb(s, "read cache entry");
  return decode(value, &fp, &signature);
}

Result<std::vector<KernelEntry>> KernelCache::load_all(const GpuFingerprint& fp,
                                                        std::vector<std::string>* rejected) const {
  std::vector<KernelEntry> out;
  const std::string prefix = "k/" + fp.key() + "/";
  const auto st = scan(dir_, prefix, [&](const std::string& key, const std::string& value) {
    const std::string sig = key.substr(prefix.size());
    auto e = decode(value, &fp, &sig);
    if (e.ok()) out.push_back(std::move(e).value());
    else if (rejected) rejected->push_back(sig + ": " + e.status().to_string());
  });
  if (!st.ok()) return st;
  return out;
}

Result<std::vector<FingerprintListing>> KernelCache::list() const {
  std::map<std::string, FingerprintListing> by_key;
  auto st = scan(dir_, "f/", [&](const std::string& key, const std::string& value) {
    auto& l = by_key[key.substr(2)];
    l.key = key.substr(2);
    l.fingerprint = GpuFingerprint::from_json(value);
  });
  if (!st.ok()) return st;
  st = scan(dir_, "k/", [&](const std::string& key, const std::string& value) {
    const auto slash = key.find('/', 2);
    if (slash == std::string::npos) return;
    const std::string fpk = key.substr(2, slash - 2), sig = key.substr(slash + 1);
    auto& l = by_key[fpk];
    l.key = fpk;
    const GpuFingerprint* fp = l.fingerprint.ok() ? &l.fingerprint.value() : nullptr;
    auto e = decode(value, fp, &sig);
    if (e.ok() && fp) l.entries.push_back(std::move(e).value());
    else l.rejected.push_back(sig + ": " + (e.ok() ? "no fingerprint record" : e.status().to_string()));
  });
  if (!st.ok()) return st;
  std::vector<FingerprintListing> out;
  for (auto& [k, l] : by_key) out.push_back(std::move(l));
  return out;
}

Status KernelCache::put_state(const GpuFingerprint& fp, const std::string& name, const std::string& json) {
  std::lock_guard<std::mutex> lock(write_mu_);
  auto db = open_write(dir_);
  if (!db.ok()) return db.status();
  rocksdb::WriteBatch batch;
  batch.Put("f/" + fp.key(), fp.to_json());
  batch.Put("p/" + fp.key() + "/" + name, json);
  return from_rocksdb(db.value()->Write(synced(), &batch), "write optimizer state");
}

Result<std::string> KernelCache::get_state(const GpuFingerprint& fp, const std::string& name) const {
  auto db = open_read(dir_);
  if (!db.ok()) return db.status();
  std::string value;
  const auto s = db.value()->Get(rocksdb::ReadOptions(), "p/" + fp.key() + "/" + name, &value);
  if (!s.ok()) return from_rocksdb(s, "read optimizer state " + name);
  return value;
}

Result<std::vector<std::pair<std::string, std::string>>> KernelCache::states(const GpuFingerprint& fp,
                                                                             const std::string& prefix) const {
  std::vector<std::pair<std::string, std::string>> out;
  const std::string head = "p/" + fp.key() + "/";
  const auto st = scan(dir_, head + prefix, [&](const std::string& key, const std::string& value) {
    out.emplace_back(key.substr(head.size()), value);
  });
  if (!st.ok()) return st;
  return out;
}

namespace {
std::string arch_key(int sm, const std::string& name) { return "a/sm" + std::to_string(sm) + "/" + name; }
}  // namespace

Status KernelCache::put_arch_state(int sm, const std::string& name, const std::string& json) {
  if (sm <= 0 || name.empty()) return Status(Code::kInvalidArgument, "architecture state needs an sm and a name");
  std::lock_guard<std::mutex> lock(write_mu_);
  auto db = open_write(dir_);
  if (!db.ok()) return db.status();
  rocksdb::WriteBatch batch;
  batch.Put(arch_key(sm, name), json);
  return from_rocksdb(db.value()->Write(synced(), &batch), "write architecture state");
}

Result<std::string> KernelCache::get_arch_state(int sm, const std::string& name) const {
  if (sm <= 0 || name.empty()) return Status(Code::kInvalidArgument, "architecture state needs an sm and a name");
  auto db = open_read(dir_);
  if (!db.ok()) return db.status();
  std::string value;
  const auto s = db.value()->Get(rocksdb::ReadOptions(), arch_key(sm, name), &value);
  if (!s.ok()) return from_rocksdb(s, "read architecture state " + name);
  return value;
}

Status KernelCache::put_run(const RunRecord& run, int keep) {
  if (run.run_id.empty()) return Status(Code::kInvalidArgument, "run without an id");
  std::lock_guard<std::mutex> lock(write_mu_);
  auto db = open_write(dir_);
  if (!db.ok()) return db.status();
  rocksdb::WriteBatch batch;
  batch.Put("r/" + run.run_id, run.json);
  // Prune: keep the newest `keep` runs, counting this one.
  std::vector<std::string> ids;
  std::unique_ptr<rocksdb::Iterator> it(db.value()->NewIterator(rocksdb::ReadOptions()));
  for (it->Seek("r/"); it->Valid() && it->key().starts_with("r/"); it->Next()) ids.push_back(it->key().ToString());
  if (std::find(ids.begin(), ids.end(), "r/" + run.run_id) == ids.end()) ids.push_back("r/" + run.run_id);
  std::sort(ids.begin(), ids.end());
  for (size_t i = 0; i + static_cast<size_t>(std::max(keep, 1)) < ids.size(); ++i) batch.Delete(ids[i]);
  return from_rocksdb(db.value()->Write(synced(), &batch), "write run report");
}

Result<std::vector<RunRecord>> KernelCache::runs() const {
  std::vector<RunRecord> out;
  const auto st = scan(dir_, "r/", [&](const std::string& key, const std::string& value) {
    out.push_back({key.substr(2), value});
  });
  if (!st.ok()) return st;
  std::reverse(out.begin(), out.end());
  return out;
}

Result<int64_t> KernelCache::erase(const std::string& fp_key) {
  std::lock_guard<std::mutex> lock(write_mu_);
  auto db = open_write(dir_);
  if (!db.ok()) return db.status();
  rocksdb::WriteBatch batch;
  int64_t n = 0;
  std::unique_ptr<rocksdb::Iterator> it(db.value()->NewIterator(rocksdb::ReadOptions()));
  for (const char* kind : {"f/", "k/", "p/"}) {
    const std::string prefix = std::string(kind) + fp_key;
    for (it->Seek(prefix); it->Valid() && it->key().starts_with(prefix); it->Next()) {
      batch.Delete(it->key());
      ++n;
    }
  }
  if (fp_key.empty())
    for (const char* kind : {"r/", "a/"})
      for (it->Seek(kind); it->Valid() && it->key().starts_with(kind); it->Next()) batch.Delete(it->key()), ++n;
  const auto st = from_rocksdb(db.value()->Write(synced(), &batch), "erase cache records");
  if (!st.ok()) return st;
  return n;
}

}  // namespace cudal1::cache
