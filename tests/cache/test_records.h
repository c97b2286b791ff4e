/// @brief Test helpers: a GPU fingerprint and a kernel entry as a tuning run on an H200 would store them
/// (cache, healing and CLI tests share them).
#pragma once

#include <string>

#include "cudal1/cache/kernel_cache.h"
#include "cudal1/core/version.h"

namespace cudal1::cache::testing {

inline GpuFingerprint test_fingerprint(const std::string& gpu = "NVIDIA H200") {
  GpuFingerprint f;
  f.gpu_name = gpu;
  f.sm = 90;
  f.driver_version = 13000;
  f.cuda_runtime_version = 13000;
  f.nvrtc_version = "13.0";
  f.torch_version = "2.11.0";
  f.cudal1_version = kVersion;
  f.generators = "unary_elementwise:1";
  f.format_version = kCacheFormatVersion;
  return f;
}

/// A kernel (with a small fake cubin) or, with `kernel` false, an "ATen stays" outcome.
inline KernelEntry test_entry(const std::string& sig, bool kernel = true) {
  KernelEntry e;
  e.signature = sig;
  e.has_kernel = kernel;
  e.family = "unary_elementwise";
  e.generator_version = 1;
  e.variant = "vec4.block256.unroll2.grid1";
  e.launch_json = "[[\"vec\",4]]";
  e.kernel_name = kernel ? "cudal1_unary" : "";
  if (kernel) e.cubin = std::string("\x7f" "ELF\0\1\2binary", 13);
  e.speedup = 1.25;
  e.aten_us = 100;
  e.kernel_us = 80;
  e.trials = 8;
  e.created_unix = 1764000000;
  return e;
}

}  // namespace cudal1::cache::testing
