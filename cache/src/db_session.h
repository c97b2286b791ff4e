/// @brief Private: short-lived RocksDB handles, see Note [Cache processes].
#pragma once

#include <rocksdb/db.h>

#include <memory>
#include <string>

#include "cudal1/core/status.h"

namespace cudal1::cache::detail {

/// Opens `dir` read-only. NotFound when no database exists there yet.
Result<std::unique_ptr<rocksdb::DB>> open_read(const std::string& dir);

/// Opens `dir` for writing (creating it), retrying for up to `wait_ms` while another process holds the lock.
Result<std::unique_ptr<rocksdb::DB>> open_write(const std::string& dir, int wait_ms = 2000);

/// Converts a RocksDB status into ours.
Status from_rocksdb(const rocksdb::Status& s, const std::string& what);

}  // namespace cudal1::cache::detail
