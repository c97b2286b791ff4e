/// @brief RocksDB open helpers: read-only sessions and lock-aware write sessions.
#include "db_session.h"

#include <chrono>
#include <filesystem>
#include <system_error>
#include <thread>

namespace cudal1::cache::detail {
namespace {

rocksdb::Options base_options() {
  rocksdb::Options o;
  o.OptimizeForSmallDb();
  o.max_open_files = 64;
  o.keep_log_file_num = 2;
  o.info_log_level = rocksdb::InfoLogLevel::WARN_LEVEL;
  return o;
}

bool is_lock_error(const rocksdb::Status& s) {
  // Another process holds LOCK: RocksDB reports an IOError mentioning the lock file.
  return s.IsIOError() && s.ToString().find("lock") != std::string::npos;
}

}  // namespace

Status from_rocksdb(const rocksdb::Status& s, const std::string& what) {
  if (s.ok()) return Status();
  if (s.IsNotFound()) return Status(Code::kNotFound, what + ": " + s.ToString());
  if (s.IsCorruption()) return Status(Code::kCorrupt, what + ": " + s.ToString());
  return Status(Code::kIoError, what + ": " + s.ToString());
}

Result<std::unique_ptr<rocksdb::DB>> open_read(const std::string& dir) {
  std::error_code ec;
  if (!std::filesystem::exists(dir + "/CURRENT", ec))
    return Status(Code::kNotFound, "no cache database at " + dir);
  rocksdb::DB* db = nullptr;
  const auto s = rocksdb::DB::OpenForReadOnly(base_options(), dir, &db);
  if (!s.ok()) return from_rocksdb(s, "open cache " + dir + " read-only");
  return std::unique_ptr<rocksdb::DB>(db);
}

Result<std::unique_ptr<rocksdb::DB>> open_write(const std::string& dir, int wait_ms) {
  if (dir.empty()) return Status(Code::kInvalidArgument, "no cache directory configured");
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return Status(Code::kIoError, "cannot create cache directory " + dir + ": " + ec.message());
  auto o = base_options();
  o.create_if_missing = true;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(wait_ms);
  for (int attempt = 0;; ++attempt) {
    rocksdb::DB* db = nullptr;
    const auto s = rocksdb::DB::Open(o, dir, &db);
    if (s.ok()) return std::unique_ptr<rocksdb::DB>(db);
    if (!is_lock_error(s) || std::chrono::steady_clock::now() >= deadline)
      return Status(is_lock_error(s) ? Code::kUnavailable : from_rocksdb(s, "").code(),
                    "open cache " + dir + " for writing: " + s.ToString());
    std::this_thread::sleep_for(std::chrono::milliseconds(std::min(5 << std::min(attempt, 5), 100)));
  }
}

}  // namespace cudal1::cache::detail
