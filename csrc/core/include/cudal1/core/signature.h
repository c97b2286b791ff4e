/// @brief Signature: the key of one ATen call (op, overload, dtypes, sizes, strides, scalars, device type).
///
/// Note [Signature encoding]
/// A signature is a flat vector of 64-bit words (op identity, then one tagged group per argument) plus its
/// 64-bit hash; the hook builds it on the stack without allocating (dispatcher/src/signature_of.cpp). Its
/// readable text, e.g. `aten::gelu(f32[64,1024]{1024,1}, approximate='tanh')`, is built only when a new
/// signature is first seen; the text is complete and stable, so it is also the cache key. Doubles are written
/// exactly (17 significant digits), an integral one with a ".0" (`alpha=1.0` against the int's `alpha=1`), so that
/// no text stands for two keys (until 2026-12-01 both read `alpha=1`; such older entries are no longer found, and
/// their signatures are tuned again). The device *index*
/// is not part of either: the tables are per device, and one cache entry serves every card of one model.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace cudal1 {

/// Argument tags inside the word encoding.
enum class ArgTag : int64_t { kTensor = 1, kInt, kDouble, kBool, kString, kNone, kIntList, kDoubleList,
                              kTensorList, kScalarType, kOther };

/// A signature in owned form (the hook's transient form is a stack buffer of the same words).
struct Signature {
  std::vector<int64_t> words;  ///< canonical encoding, see Note [Signature encoding]
  uint64_t hash = 0;           ///< hash_words(words)
  std::string text;            ///< readable form; stable across processes and versions of cudal1's build
};

/// xxh3 64-bit hash of `n` words. Stable across processes and machines (little-endian).
uint64_t hash_words(const int64_t* words, size_t n) noexcept;

/// xxh3 64-bit hash of bytes, as 16 lowercase hex digits.
std::string hash_hex(const void* data, size_t n);

}  // namespace cudal1
