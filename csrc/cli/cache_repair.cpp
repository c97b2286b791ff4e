/// @brief `cudal1 cache verify`, `repair` (Note [Cache healing] in cudal1/cache/kernel_cache.h: every record
/// checked, a kernel's code loaded on this machine's GPU when it is that GPU's entry), `export` and `import`
/// (Note [Cache bundles]).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "cli_commands.h"
#include "cudal1/cache/kernel_cache.h"
#include "cudal1/core/cuda_driver.h"
#include "cudal1/core/version.h"
#include "gpus.h"

namespace cudal1::cli {
namespace {

/// What the driver says of this machine's GPU 0 (gpus.h).
Result<GpuFingerprint> this_gpu() { return describe_gpu(0); }

/// Loads `e`'s cubin on device 0 and finds its entry point, when device 0 is the GPU `f` describes (its compute
/// capability); Unavailable ("not checked here") without a GPU or for another GPU's entry.
Status load_here(const GpuFingerprint& f, const cache::KernelEntry& e) {
  auto here = this_gpu();
  if (!here.ok()) return Status(Code::kUnavailable, "no GPU here");
  if (f.sm != here->sm) return Status(Code::kUnavailable, "another GPU's entry");
  const DriverApi* d = driver().value();
  CUdevice dev = 0;
  CUDAL1_CU_TRY(d->cuDeviceGet(&dev, 0));
  CUcontext ctx = nullptr;
  CUDAL1_CU_TRY(d->cuDevicePrimaryCtxRetain(&ctx, dev));
  CUDAL1_CU_TRY(d->cuCtxSetCurrent(ctx));
  CUmodule m = nullptr;
  CUDAL1_CU_TRY(d->cuModuleLoadData(&m, e.cubin.data()));
  CUfunction fn = nullptr;
  const CUresult r = d->cuModuleGetFunction(&fn, m, e.kernel_name.c_str());
  d->cuModuleUnload(m);
  if (r != CUDA_SUCCESS) return cu_status(r, "cuModuleGetFunction(entry point)", __FILE__, __LINE__);
  return Status();
}

/// The key of the one fingerprint in `listing` that describes this machine's GPU 0 as far as the CLI can see it
/// (name, compute capability, SM count, driver, cudal1 version and record format; torch's and NVRTC's versions
/// are the app's, unknown here); an error saying why none or which several otherwise.
Result<std::string> current_key(const std::vector<cache::FingerprintListing>& listing) {
  CUDAL1_ASSIGN_OR_RETURN(const GpuFingerprint g, this_gpu());
  std::vector<std::string> matches;
  for (const auto& l : listing) {
    if (!l.fingerprint.ok()) continue;
    const GpuFingerprint& f = l.fingerprint.value();
    if (f.gpu_name == g.gpu_name && f.sm == g.sm && f.sm_count == g.sm_count && f.driver_version == g.driver_version &&
        f.cudal1_version == kVersion && f.format_version == kCacheFormatVersion)
      matches.push_back(l.key + " (torch " + f.torch_version + ", NVRTC " + f.nvrtc_version + ")");
  }
  const std::string here = fmt::format("{} sm_{} ({} SMs), driver {}, cudal1 {}", g.gpu_name, g.sm, g.sm_count,
                                       g.driver_version, kVersion);
  if (matches.empty()) return Status(Code::kNotFound, "no fingerprint in this cache is this machine's GPU: " + here);
  if (matches.size() > 1) {
    std::string all;
    for (const auto& m : matches) all += "\n  " + m;
    return Status(Code::kInvalidArgument, "several fingerprints are this machine's GPU (" + here +
                                              "): say which with --gpu KEY" + all);
  }
  return matches.front().substr(0, matches.front().find(' '));
}

}  // namespace

int cache_verify(const Options& o, bool repair, std::ostream& out) {
  cache::KernelCache cache(cache_dir(o));
  out << "cache: " << cache.dir() << "\n";
  auto problems = cache.verify(load_here);
  if (!problems.ok()) {
    if (!repair) {
      out << "error: " << problems.status().to_string() << "\n"
          << "the database cannot be read; `cudal1 cache repair` moves it aside and starts a fresh one\n";
      return 1;
    }
    auto h = cache.heal();
    if (!h.ok()) {
      out << "error: " << h.status().to_string() << "\n";
      return 1;
    }
    if (h->healed) out << "unreadable (" << h->reason << "): kept as " << h->moved_to << "; a fresh cache is in place\n";
    else out << "readable now (" << problems.status().to_string() << " was transient)\n";
    return 0;
  }
  for (const auto& p : problems.value()) out << "  bad: " << p.key << ": " << p.why << "\n";
  if (problems->empty()) {
    out << "every record is sound\n";
    return 0;
  }
  if (!repair) {
    out << problems->size() << " bad records; `cudal1 cache repair` drops them\n";
    return 1;
  }
  auto dropped = cache.drop(problems.value());
  if (!dropped.ok()) {
    out << "error: " << dropped.status().to_string() << "\n";
    return 1;
  }
  out << "dropped " << dropped.value() << " bad records\n";
  return 0;
}

int cache_export(const Options& o, std::ostream& out) {
  cache::KernelCache cache(cache_dir(o));
  std::string key = o.fingerprint;
  if (key.empty() || key == "current") {
    auto listing = cache.list();
    if (!listing.ok()) {
      out << "error: " << listing.status().to_string() << "\n";
      return 1;
    }
    if (key == "current") {
      auto here = current_key(listing.value());
      if (!here.ok()) {
        out << "error: --gpu current: " << here.status().to_string() << "\n";
        return 1;
      }
      key = here.value();
    } else if (listing->size() != 1) {
      out << "error: the cache holds " << listing->size() << " fingerprints: say which with --gpu KEY "
          << "(`cudal1 cache ls` shows them)\n";
      return 1;
    } else {
      key = listing->front().key;
    }
  }
  auto n = cache.export_bundle(key, o.bundle);
  if (!n.ok()) {
    out << "error: " << n.status().to_string() << "\n";
    return 1;
  }
  out << "exported " << n.value() << " records of fingerprint " << key << " to " << o.bundle << "\n";
  return 0;
}

int cache_import(const Options& o, std::ostream& out) {
  const auto& t = cache::transferable_fields();
  for (const auto& f : o.allow)
    if (std::find(t.begin(), t.end(), f) == t.end()) {
      out << "error: --allow " << f << ": not a field that may differ (driver, cuda_runtime, nvrtc, torch, cudal1; "
          << "the GPU model, SM count and record format never may)\nnothing was imported\n";
      return 1;
    }
  cache::KernelCache cache(cache_dir(o));
  GpuFingerprint bundle_fp;
  // Note [Cache transfer]: what the CLI can see of this machine (GPU 0 through the driver, and cudal1's own
  // version) must match the bundle or differ only where allowed; torch's, NVRTC's and the CUDA runtime's
  // versions are the app's, checked by it at start-up.
  auto check = [&](const GpuFingerprint& fp) -> Status {
    bundle_fp = fp;
    auto here = this_gpu();
    if (!here.ok()) return Status();  // no GPU here (an image build): the app checks at start-up
    GpuFingerprint seen = fp;
    seen.gpu_name = here->gpu_name;
    seen.sm = here->sm;
    seen.sm_count = here->sm_count;
    seen.driver_version = here->driver_version;
    seen.cudal1_version = kVersion;
    const Status s = cache::transfer_check(fp, seen, o.allow);
    if (s.ok()) return s;
    std::vector<std::string> allow;
    for (const auto& f : fp.differing_fields(seen))
      if (std::find(t.begin(), t.end(), f) != t.end()) allow.push_back(f);
    return Status(Code::kMismatch,
                  fmt::format("this machine ({}, driver {}, cudal1 {}): {}{}", here->gpu_name, here->driver_version,
                              kVersion, s.message(),
                              allow.empty() ? "" : fmt::format("; pass --allow {} to import it anyway",
                                                               fmt::join(allow, ","))));
  };
  auto r = cache.import_bundle(o.bundle, o.overwrite, check);
  if (!r.ok()) {
    out << "error: " << r.status().to_string() << "\nnothing was imported\n";
    return 1;
  }
  out << fmt::format("imported {} records of fingerprint {} into {} ({} already there and kept, {} rejected)\n",
                     r->imported, r->fingerprint_key, cache.dir(), r->kept, r->rejected);
  if (!o.allow.empty()) {
    const Status s = cache.allow_transfer(bundle_fp, o.allow);
    if (!s.ok()) {
      out << "error: the allowance was not stored: " << s.to_string() << "\n";
      return 1;
    }
    out << fmt::format("its records serve a GPU whose fingerprint differs in {} too, each kernel verified against "
                       "ATen there before its first call\n", fmt::join(o.allow, ", "));
  }
  return r->rejected ? 1 : 0;
}

}  // namespace cudal1::cli
