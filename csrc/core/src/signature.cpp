/// @brief Hashing for signatures and cache keys (xxh3).
#include "cudal1/core/signature.h"

#include <xxhash.h>

#include <cstdio>

namespace cudal1 {

uint64_t hash_words(const int64_t* words, size_t n) noexcept { return XXH3_64bits(words, n * sizeof(int64_t)); }

std::string hash_hex(const void* data, size_t n) {
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(XXH3_64bits(data, n)));
  return buf;
}

}  // namespace cudal1
