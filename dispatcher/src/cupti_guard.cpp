/// @brief The CUPTI guard of deferred regions (Note [Deferred regions]): CUDA work issued outside ATen flushes
/// every open region first. libcupti is opened at run time, like libcuda; only its headers are needed to build.
#include <dlfcn.h>

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include <ATen/ATen.h>

#include "cudal1/core/log.h"
#include "cudal1/dispatcher/capture_gate.h"
#include "cudal1/dispatcher/hook.h"
#include "region.h"

#if __has_include(<cupti_callbacks.h>)
#include <cupti_callbacks.h>
#include <cupti_result.h>
#define CUDAL1_HAVE_CUPTI 1
#endif

namespace cudal1::dispatcher::detail {

#if defined(CUDAL1_HAVE_CUPTI)
namespace {

using SubscribeFn = CUptiResult (*)(CUpti_SubscriberHandle*, CUpti_CallbackFunc, void*);
using EnableFn = CUptiResult (*)(uint32_t, CUpti_SubscriberHandle, CUpti_CallbackDomain, CUpti_CallbackId);
using NameFn = CUptiResult (*)(CUpti_CallbackDomain, uint32_t, const char**);

std::string g_watch = "not armed";  // what the guard watches (cupti_guard_watch), set once by arm()
std::vector<bool> g_driver_launch;  // by driver callback id: a kernel launch entry point (set before subscribing)
thread_local int t_launches_seen = -1;  // arm()'s check: driver launches seen on this thread; -1: not counting
// By callback id: 1 a call that begins a stream capture, 2 one that ends it (Note [Captures and context
// synchronisation]); [0] the driver API's, [1] the runtime API's. Set before subscribing.
std::vector<char> g_capture_call[2];

int capture_call(const char* name) {
  if (std::strstr(name, "BeginCapture")) return 1;
  if (std::strstr(name, "EndCapture")) return 2;
  return 0;
}

/// The app's captures pass the capture gate: a begin counts its stream at its entry (taken back when it failed), an
/// end releases it at its exit when the capture is over: ended, or ended with a stream-capture error (900-907 in
/// both APIs: unsupported, invalidated, merge, unmatched, unjoined, isolation, implicit, captured event). Only a
/// call from the wrong thread (908) or an invalid argument leaves the capture going, and the stream counted.
void gate_capture_call(const CUpti_CallbackData* d, int kind) {
  const bool enter = d->callbackSite == CUPTI_API_ENTER;
  const int rc = !enter && d->functionReturnValue ? *static_cast<const int*>(d->functionReturnValue) : 0;
  // Every capture call's parameters begin with the stream (cuStreamBeginCapture_v2_params, cudaStreamEndCapture...).
  const void* stream = d->functionParams ? *static_cast<void* const*>(d->functionParams) : nullptr;
  if (kind == 1 && enter) note_app_capture(true, stream);
  if (kind == 1 && !enter && rc != 0) note_app_capture(false, stream);
  if (kind == 2 && !enter && (rc == 0 || (rc >= 900 && rc <= 907))) note_app_capture(false, stream);
}

void CUPTIAPI on_api(void*, CUpti_CallbackDomain domain, CUpti_CallbackId id, const void* data) {
  const auto* d = static_cast<const CUpti_CallbackData*>(data);
  if (!d) return;
  const std::vector<char>& calls = g_capture_call[domain == CUPTI_CB_DOMAIN_RUNTIME_API ? 1 : 0];
  const int capture = id < calls.size() ? calls[id] : 0;
  if (capture) gate_capture_call(d, capture);
  if (d->callbackSite != CUPTI_API_ENTER || capture == 2) return;
  if (t_launches_seen >= 0 && domain == CUPTI_CB_DOMAIN_DRIVER_API && id < g_driver_launch.size() &&
      g_driver_launch[id])
    ++t_launches_seen;
  if (!in_region_work()) flush_all(FlushReason::kCuda);
}

/// The runtime API's kernel launches (cudaLaunchKernel and its variants): with the lean guard they are seen
/// through the driver's cuLaunchKernel(Ex) they call (Note [Lean CUPTI guard] in region.h).
bool runtime_launch(const char* name) { return std::strstr(name, "LaunchKernel") != nullptr; }

/// Launches one kernel through ATen (the runtime API) on this thread, on `device` (-1: torch's current one); the
/// number of driver launch callbacks it triggered, or -1 when it could not launch.
int driver_launches_of_one_runtime_launch(int device) {
  RegionWorkScope ours;  // its callbacks flush nothing
  BypassScope bypass;
  t_launches_seen = 0;
  int seen = -1;
  try {
    const at::Device on = device >= 0 ? at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(device)) : at::kCUDA;
    at::Tensor t = at::empty({16}, at::TensorOptions().dtype(at::kFloat).device(on));
    t.fill_(1.0f);
    seen = t_launches_seen;
  } catch (...) {
  }
  t_launches_seen = -1;
  return seen;
}

/// The API entry points that put work on a stream, wait for it, or read or write device memory.
bool watched(const char* name) {
  static const char* const kWords[] = {"Launch",          "Memcpy",          "Memset",         "Synchronize",
                                       "EventRecord",     "StreamWaitEvent", "BeginCapture",   "StreamQuery",
                                       "StreamWaitValue", "StreamWriteValue", "BatchMemOp",    "ExternalSemaphore",
                                       "MemPrefetch",     "GraphUpload"};
  for (const char* w : kWords)
    if (std::strstr(name, w)) return true;
  return false;
}

Status arm(bool full, int device) {
  std::vector<std::string> candidates;
  if (const char* p = std::getenv("CUDAL1_CUPTI_LIBRARY"); p && *p) {
    candidates.emplace_back(p);
  } else {
    candidates = {"libcupti.so.13", "libcupti.so.12", "libcupti.so", "/usr/local/cuda/lib64/libcupti.so",
                  "/usr/local/cuda/extras/CUPTI/lib64/libcupti.so"};
  }
  void* lib = nullptr;
  std::string tried;
  for (const auto& c : candidates) {
    lib = dlopen(c.c_str(), RTLD_NOW | RTLD_NOLOAD);  // torch's own copy, when it is loaded already
    if (!lib) lib = dlopen(c.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (lib) break;
    const char* e = dlerror();
    tried += (tried.empty() ? "" : "; ") + std::string(e ? e : c);
  }
  if (!lib) return Status(Code::kUnavailable, "libcupti not found (" + tried + "; set CUDAL1_CUPTI_LIBRARY)");
  auto subscribe = reinterpret_cast<SubscribeFn>(dlsym(lib, "cuptiSubscribe"));
  auto enable = reinterpret_cast<EnableFn>(dlsym(lib, "cuptiEnableCallback"));
  auto name_of = reinterpret_cast<NameFn>(dlsym(lib, "cuptiGetCallbackName"));
  if (!subscribe || !enable || !name_of) return Status(Code::kUnavailable, "libcupti lacks the callback API");
  g_driver_launch.assign(4096, false);
  for (uint32_t id = 1; id < 4096; ++id) {
    const char* name = nullptr;
    g_driver_launch[id] = name_of(CUPTI_CB_DOMAIN_DRIVER_API, id, &name) == CUPTI_SUCCESS && name &&
                          std::strstr(name, "Launch") != nullptr;
  }
  for (int api = 0; api < 2; ++api) {
    g_capture_call[api].assign(4096, 0);
    for (uint32_t id = 1; id < 4096; ++id) {
      const char* name = nullptr;
      if (name_of(api ? CUPTI_CB_DOMAIN_RUNTIME_API : CUPTI_CB_DOMAIN_DRIVER_API, id, &name) == CUPTI_SUCCESS && name)
        g_capture_call[api][id] = static_cast<char>(capture_call(name));
    }
  }
  CUpti_SubscriberHandle sub = nullptr;
  if (const CUptiResult r = subscribe(&sub, &on_api, nullptr); r != CUPTI_SUCCESS)
    return Status(Code::kUnavailable,
                  r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED
                      ? std::string("another CUPTI client (a profiler or a tool) is subscribed")
                      : "cuptiSubscribe failed (CUPTI error " + std::to_string(static_cast<int>(r)) + ")");
  int enabled = 0;
  std::vector<uint32_t> runtime_launches;  // watched, not enabled yet (the lean guard)
  for (CUpti_CallbackDomain dom : {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_CB_DOMAIN_DRIVER_API}) {
    for (uint32_t id = 1; id < 4096; ++id) {  // past the header's sizes: a newer libcupti may know more
      const char* name = nullptr;
      if (name_of(dom, id, &name) != CUPTI_SUCCESS || !name || !(watched(name) || capture_call(name))) continue;
      if (!full && dom == CUPTI_CB_DOMAIN_RUNTIME_API && runtime_launch(name)) {
        runtime_launches.push_back(id);
        continue;
      }
      enabled += enable(1, sub, dom, id) == CUPTI_SUCCESS;
    }
  }
  if (enabled == 0) return Status(Code::kUnavailable, "CUPTI enabled no API callbacks");
  g_watch = full ? "full: kernel launches in the runtime and driver APIs"
                 : "lean: the runtime's kernel launches through the driver's";
  if (!runtime_launches.empty()) {
    const int seen = driver_launches_of_one_runtime_launch(device);
    if (seen < 1) {  // the driver did not report the runtime's launch: watch the runtime's launches too
      for (uint32_t id : runtime_launches) enable(1, sub, CUPTI_CB_DOMAIN_RUNTIME_API, id);
      g_watch = seen < 0 ? "full: no runtime launch could be made to check the driver's"
                         : "full: the driver did not report a runtime launch";
      CUDAL1_LOG(kInfo, "CUPTI guard: a runtime kernel launch "
                            << (seen < 0 ? "could not be made" : "was not reported by the driver API")
                            << "; watching the runtime API's launches as well (two callbacks a launch)");
    }
  }
  return Status();
}

}  // namespace

std::string cupti_guard_watch() { return g_watch; }

Status arm_cupti_guard(bool full, int device) {
  static std::once_flag once;
  static Status armed;
  std::call_once(once, [full, device] { armed = arm(full, device); });
  return armed;
}

#else

std::string cupti_guard_watch() { return "not armed"; }
Status arm_cupti_guard(bool, int) { return Status(Code::kUnavailable, "built without the CUPTI headers"); }

#endif

}  // namespace cudal1::dispatcher::detail
