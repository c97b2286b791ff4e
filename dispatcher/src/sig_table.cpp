/// @brief Sharded signature table.
#include "cudal1/dispatcher/sig_table.h"

#include <algorithm>
#include <mutex>

namespace cudal1::dispatcher {
namespace {

bool same_words(const SigRecord& r, const SigKey& k) {
  return r.sig.words.size() == k.words.size() &&
         std::equal(k.words.begin(), k.words.end(), r.sig.words.begin());
}

}  // namespace

SigRecord* SigTable::find(const SigKey& key) const {
  const Shard& s = shards_[key.hash % kShards];
  std::shared_lock<std::shared_mutex> lock(s.mu);
  const auto it = s.by_hash.find(key.hash);
  if (it == s.by_hash.end()) return nullptr;
  for (const auto& r : it->second)
    if (same_words(*r, key)) return r.get();
  return nullptr;
}

std::pair<SigRecord*, bool> SigTable::insert(const SigKey& key,
                                             const std::function<std::unique_ptr<SigRecord>()>& make) {
  Shard& s = shards_[key.hash % kShards];
  std::unique_lock<std::shared_mutex> lock(s.mu);
  auto& bucket = s.by_hash[key.hash];
  for (const auto& r : bucket)
    if (same_words(*r, key)) return {r.get(), false};
  bucket.push_back(make());
  return {bucket.back().get(), true};
}

void SigTable::for_each(const std::function<void(SigRecord&)>& fn) const {
  for (const Shard& s : shards_) {
    std::shared_lock<std::shared_mutex> lock(s.mu);
    for (const auto& [h, bucket] : s.by_hash)
      for (const auto& r : bucket) fn(*r);
  }
}

size_t SigTable::size() const {
  size_t n = 0;
  for (const Shard& s : shards_) {
    std::shared_lock<std::shared_mutex> lock(s.mu);
    for (const auto& [h, bucket] : s.by_hash) n += bucket.size();
  }
  return n;
}

}  // namespace cudal1::dispatcher
