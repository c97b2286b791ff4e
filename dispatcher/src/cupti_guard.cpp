/// @brief The CUPTI guard of deferred regions (Note [Deferred regions]): CUDA work issued outside ATen flushes
/// every open region first. libcupti is opened at run time, like libcuda; only its headers are needed to build.
#include <dlfcn.h>

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

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

void CUPTIAPI on_api(void*, CUpti_CallbackDomain, CUpti_CallbackId, const void* data) {
  const auto* d = static_cast<const CUpti_CallbackData*>(data);
  if (d && d->callbackSite == CUPTI_API_ENTER && !in_region_work()) flush_all(FlushReason::kCuda);
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

Status arm() {
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
  CUpti_SubscriberHandle sub = nullptr;
  if (const CUptiResult r = subscribe(&sub, &on_api, nullptr); r != CUPTI_SUCCESS)
    return Status(Code::kUnavailable,
                  r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED
                      ? std::string("another CUPTI client (a profiler or a tool) is subscribed")
                      : "cuptiSubscribe failed (CUPTI error " + std::to_string(static_cast<int>(r)) + ")");
  int enabled = 0;
  for (CUpti_CallbackDomain dom : {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_CB_DOMAIN_DRIVER_API}) {
    for (uint32_t id = 1; id < 4096; ++id) {  // past the header's sizes: a newer libcupti may know more
      const char* name = nullptr;
      if (name_of(dom, id, &name) != CUPTI_SUCCESS || !name || !watched(name)) continue;
      enabled += enable(1, sub, dom, id) == CUPTI_SUCCESS;
    }
  }
  if (enabled == 0) return Status(Code::kUnavailable, "CUPTI enabled no API callbacks");
  return Status();
}

}  // namespace

Status arm_cupti_guard() {
  static std::once_flag once;
  static Status armed;
  std::call_once(once, [] { armed = arm(); });
  return armed;
}

#else

Status arm_cupti_guard() { return Status(Code::kUnavailable, "built without the CUPTI headers"); }

#endif

}  // namespace cudal1::dispatcher::detail
