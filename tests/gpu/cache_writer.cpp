/// @brief GPU test, first process: tunes one relu signature (any verified kernel is kept) and writes it to the
/// cache directory given as argv[1]. With argv[2] "--transfer" (or "--refused") the record is moved to this
/// fingerprint with the driver version lowered by one, and the move allowed for "driver" (or only for "torch"):
/// Note [Cache transfer]. With "--bad-cubin" the record's code is overwritten with bytes the driver cannot load
/// (tests/gpu/damaged_cache.sh: a cached kernel that fails to load falls back to ATen). Exit 77 (skip) without a GPU.
#include <ATen/ATen.h>

#include <cstdio>

#include "cudal1/cache/kernel_cache.h"
#include "cudal1/dispatcher/hook.h"
#include "cudal1/optimizer/device_info.h"
#include "cudal1/optimizer/family.h"
#include "cudal1/optimizer/tuner.h"
#include "gpu/gpu_env.h"

int main(int argc, char** argv) {
  using namespace cudal1;
  if (argc != 2 && argc != 3) return 2;
  const std::string mode = argc == 3 ? argv[2] : "";
  if (!mode.empty() && mode != "--transfer" && mode != "--refused" && mode != "--bad-cubin") return 2;
  std::string why;
  if (!testing::gpu_available(&why)) {
    std::printf("skip: %s\n", why.c_str());
    return 77;
  }
  dispatcher::HookOptions o;
  o.ops = optimizer::all_family_ops();
  o.hot_calls = 2;
  if (!dispatcher::install_hooks(o, {}).ok()) return 1;
  cache::KernelCache cache(argv[1]);
  optimizer::TunerOptions t;
  t.trials = 2;
  t.timing_reps = 5;
  t.require_faster = false;
  optimizer::Tuner tuner(t, &cache);
  const at::Tensor x = at::randn({4096, 1024}, at::TensorOptions().device(at::kCUDA));
  at::relu(x);
  at::relu(x);
  dispatcher::SigRecord* rec = nullptr;
  dispatcher::for_each_record([&](dispatcher::SigRecord& r) { rec = &r; });
  if (!rec) return 1;
  auto r = tuner.tune(*rec);
  if (!r.ok() || !r->replaced) {
    std::printf("tuning failed: %s\n", r.ok() ? r->note.c_str() : r.status().to_string().c_str());
    return 1;
  }
  auto fp = optimizer::fingerprint_for(0);
  auto e = cache.get(fp.value(), rec->sig.text);
  if (!e.ok() || !e->has_kernel) {
    std::printf("no cache entry: %s\n", e.status().to_string().c_str());
    return 1;
  }
  if (mode == "--bad-cubin") {
    cache::KernelEntry bad = e.value();
    bad.cubin = std::string(bad.cubin.size(), '\x5a');
    if (!cache.put(fp.value(), bad).ok()) return 1;
    std::printf("wrote %s with %zu bytes of garbage for its cubin\n", rec->sig.text.c_str(), bad.cubin.size());
    return 0;
  }
  if (!mode.empty()) {  // the same record as if tuned under an older driver, allowed to serve this one or not
    GpuFingerprint older = fp.value();
    older.driver_version -= 1;
    if (!cache.put(older, e.value()).ok() || !cache.erase(fp->key()).ok() ||
        !cache.allow_transfer(older, {mode == "--transfer" ? "driver" : "torch"}).ok()) {
      std::printf("could not move the record\n");
      return 1;
    }
    std::printf("moved %s to fingerprint %s (driver %d), allowed to differ in %s\n", rec->sig.text.c_str(),
                older.key().c_str(), older.driver_version, mode == "--transfer" ? "driver" : "torch only");
    return 0;
  }
  std::printf("wrote %s -> %s (%zu bytes of cubin) for fingerprint %s\n", rec->sig.text.c_str(), e->variant.c_str(),
              e->cubin.size(), fp->key().c_str());
  return 0;
}
