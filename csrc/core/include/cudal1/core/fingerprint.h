/// @brief GpuFingerprint: everything that makes a compiled, verified kernel valid, and its hash, the prefix of
/// every cache key. A different card (name, compute capability or SM count), driver, CUDA runtime, NVRTC, torch,
/// cudal1, generator or format version gives a different key, so a stale entry is never found, let alone used.
#pragma once

#include <string>
#include <vector>

#include "cudal1/core/status.h"

namespace cudal1 {

struct GpuFingerprint {
  std::string gpu_name;          ///< e.g. "NVIDIA H200"
  int sm = 0;                    ///< compute capability as 10*major+minor, e.g. 90
  int sm_count = 0;              ///< SMs: some kernels size their grid in the source (Note [Softmax held slabs])
  int driver_version = 0;        ///< cuDriverGetVersion
  int cuda_runtime_version = 0;  ///< the CUDA runtime torch was built with (0 for CPU-only torch)
  std::string nvrtc_version;     ///< "13.0"
  std::string torch_version;     ///< "2.11.0"
  std::string cudal1_version;    ///< kVersion
  /// "unary_elementwise:1,..." from the optimizer's family registry: shown, not part of canonical() or key()
  /// (each record carries its own family's version instead: Note [Generator versions] in kernel_cache.h).
  std::string generators;
  int format_version = 0;        ///< kCacheFormatVersion

  /// Canonical text, one "field=value" per line in a fixed order: what the key hashes (every field but
  /// `generators`).
  std::string canonical() const;
  /// 16 hex digits: hash of canonical(). Equal keys mean equal fingerprints (up to hash collisions, which the
  /// stored canonical text rules out on read).
  std::string key() const;
  /// JSON round trip (for cache records and the CLI).
  std::string to_json() const;
  static Result<GpuFingerprint> from_json(const std::string& text);

  /// The canonical fields ("gpu_name", "sm", "sm_count", "driver", "cuda_runtime", "nvrtc", "torch", "cudal1",
  /// "format") whose values differ from `o`'s, in canonical order; empty when the fingerprints are equal.
  std::vector<std::string> differing_fields(const GpuFingerprint& o) const;

  bool operator==(const GpuFingerprint& o) const { return canonical() == o.canonical(); }
  bool operator!=(const GpuFingerprint& o) const { return !(*this == o); }
};

}  // namespace cudal1
