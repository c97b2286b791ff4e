/// @brief SigTable: the signatures seen on one device, found by their word encoding without allocating.
#pragma once

#include <array>
#include <functional>
#include <memory>
#include <shared_mutex>
#include <unordered_map>
#include <vector>

#include "cudal1/dispatcher/sig_record.h"
#include "cudal1/dispatcher/signature_of.h"

namespace cudal1::dispatcher {

class SigTable {
 public:
  /// The record for `key`, or null. Lock-free for readers in the common case (a shared lock per shard).
  SigRecord* find(const SigKey& key) const;
  /// Inserts a record built by `make` unless one already exists for `key`; returns the record in the table
  /// and whether it was new. `make` runs under the shard lock, at most once.
  std::pair<SigRecord*, bool> insert(const SigKey& key, const std::function<std::unique_ptr<SigRecord>()>& make);
  /// Visits every record (for reports). Records are never removed, so pointers stay valid for the process.
  void for_each(const std::function<void(SigRecord&)>& fn) const;
  size_t size() const;

 private:
  static constexpr size_t kShards = 16;
  struct Shard {
    mutable std::shared_mutex mu;
    std::unordered_map<uint64_t, std::vector<std::unique_ptr<SigRecord>>> by_hash;
  };
  std::array<Shard, kShards> shards_;
};

}  // namespace cudal1::dispatcher
