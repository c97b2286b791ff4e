/// @brief Cache healing and verification (Note [Cache healing] in kernel_cache.h): a database that cannot be used
/// is moved aside and replaced by a fresh one; every record can be checked and the failing ones dropped.
#include <rocksdb/write_batch.h>

#include <chrono>
#include <cmath>
#include <ctime>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>

#include "cudal1/cache/kernel_cache.h"
#include "cudal1/core/version.h"
#include "db_session.h"

namespace cudal1::cache {
namespace {

namespace fs = std::filesystem;

/// Reads every key and value with checksums verified; the first error.
Status read_everything(rocksdb::DB& db, const std::string& dir) {
  rocksdb::ReadOptions r;
  r.verify_checksums = true;
  r.fill_cache = false;
  std::unique_ptr<rocksdb::Iterator> it(db.NewIterator(r));
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
  }
  return detail::from_rocksdb(it->status(), "read cache " + dir);
}

/// True for an open error that moving the database aside cannot cure: another process holds it, or this process
/// may not write there.
bool keep(const Status& s) {
  if (s.code() == Code::kUnavailable) return true;  // a lock held past the wait
  const std::string& m = s.message();
  return m.find("Permission denied") != std::string::npos || m.find("Read-only file system") != std::string::npos ||
         m.find("cannot create cache directory") != std::string::npos;
}

std::string utc_stamp() {
  const std::time_t t = std::time(nullptr);
  char buf[32] = "unknown-time";
  if (std::tm tm{}; gmtime_r(&t, &tm)) std::strftime(buf, sizeof buf, "%Y%m%dT%H%M%SZ", &tm);
  return buf;
}

bool finite_nonneg(double v) { return std::isfinite(v) && v >= 0; }

}  // namespace

Result<HealReport> KernelCache::heal() {
  std::lock_guard<std::mutex> lock(write_mu_);
  HealReport rep;
  std::error_code ec;
  if (fs::exists(dir_, ec) && !fs::is_directory(dir_, ec)) {
    rep.reason = dir_ + " is not a directory";
  } else {
    auto db = detail::open_write(dir_);
    if (db.ok()) {
      const Status s = read_everything(*db.value(), dir_);
      if (s.ok()) return rep;  // usable
      rep.reason = s.to_string();
    } else if (keep(db.status())) {
      return db.status();
    } else {
      rep.reason = db.status().to_string();
    }
  }
  // Unusable: keep it for inspection under a name of its own and start afresh.
  std::string aside = dir_ + ".corrupt-" + utc_stamp();
  for (int i = 1; fs::exists(aside, ec); ++i) aside = dir_ + ".corrupt-" + utc_stamp() + "-" + std::to_string(i);
  fs::rename(dir_, aside, ec);
  if (ec) return Status(Code::kIoError, "cache " + dir_ + " is unusable (" + rep.reason + ") and cannot be moved aside: " +
                                            ec.message());
  rep.healed = true;
  rep.moved_to = aside;
  auto fresh = detail::open_write(dir_);
  if (!fresh.ok()) return fresh.status();
  const Status s = detail::from_rocksdb(
      fresh.value()->Put(rocksdb::WriteOptions(), "meta/format", std::to_string(kCacheFormatVersion)),
      "write cache format marker");
  if (!s.ok()) return s;
  return rep;
}

Result<std::vector<RecordProblem>> KernelCache::verify(const KernelCheck& check_kernel) const {
  auto db = detail::open_read(dir_);
  if (!db.ok()) {
    if (db.status().code() == Code::kNotFound) return std::vector<RecordProblem>{};
    return db.status();
  }
  std::vector<RecordProblem> out;
  std::map<std::string, Result<GpuFingerprint>> fps;
  rocksdb::ReadOptions r;
  r.verify_checksums = true;
  std::unique_ptr<rocksdb::Iterator> it(db.value()->NewIterator(r));
  for (it->Seek("f/"); it->Valid() && it->key().starts_with("f/"); it->Next()) {
    auto f = GpuFingerprint::from_json(it->value().ToString());
    if (!f.ok()) out.push_back({it->key().ToString(), "fingerprint record: " + f.status().to_string()});
    fps.emplace(it->key().ToString().substr(2), std::move(f));
  }
  for (it->Seek("k/"); it->Valid() && it->key().starts_with("k/"); it->Next()) {
    const std::string key = it->key().ToString();
    const size_t slash = key.find('/', 2);
    if (slash == std::string::npos) {
      out.push_back({key, "a kernel key without a signature"});
      continue;
    }
    const std::string fpk = key.substr(2, slash - 2), sig = key.substr(slash + 1);
    const auto f = fps.find(fpk);
    if (f == fps.end() || !f->second.ok()) {
      out.push_back({key, "no valid fingerprint record for " + fpk});
      continue;
    }
    auto e = decode(it->value().ToString(), &f->second.value(), &sig);
    if (!e.ok()) {
      out.push_back({key, e.status().to_string()});
      continue;
    }
    const KernelEntry& k = e.value();
    std::string why;
    if (!finite_nonneg(k.speedup) || !finite_nonneg(k.in_app) || !finite_nonneg(k.aten_us) || !finite_nonneg(k.kernel_us) || k.trials < 0)
      why = "a speedup, time or trial count that is negative or not finite";
    else if (k.has_kernel && (k.cubin.empty() != k.library() || k.kernel_name.empty()))
      why = k.library() ? "a library call with code" : "a kernel without code or entry point";
    else if (!k.has_kernel && !k.cubin.empty())
      why = "an ATen outcome with code";
    else if (k.has_kernel && !k.library() && check_kernel)
      if (const Status s = check_kernel(f->second.value(), k); !s.ok() && s.code() != Code::kUnavailable)
        why = "the kernel does not load here: " + s.to_string();
    if (!why.empty()) out.push_back({key, why});
  }
  for (it->Seek("r/"); it->Valid() && it->key().starts_with("r/"); it->Next())
    if (!nlohmann::json::accept(it->value().ToString())) out.push_back({it->key().ToString(), "a run report that is not JSON"});
  const Status s = detail::from_rocksdb(it->status(), "read cache " + dir_);
  if (!s.ok()) return s;
  return out;
}

Result<int64_t> KernelCache::drop(const std::vector<RecordProblem>& problems) {
  std::lock_guard<std::mutex> lock(write_mu_);
  auto db = detail::open_write(dir_);
  if (!db.ok()) return db.status();
  rocksdb::WriteBatch batch;
  for (const RecordProblem& p : problems) batch.Delete(p.key);
  rocksdb::WriteOptions w;
  w.sync = true;
  const Status s = detail::from_rocksdb(db.value()->Write(w, &batch), "drop cache records");
  if (!s.ok()) return s;
  return static_cast<int64_t>(problems.size());
}

}  // namespace cudal1::cache
