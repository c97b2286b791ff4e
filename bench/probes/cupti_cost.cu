// Host cost of the CUPTI guard of deferred regions (dispatcher/src/cupti_guard.cpp) per CUDA API call, and of
// switching its callbacks on and off (session 48).
//
// Launches an empty kernel in batches of 256 (never enough to fill the launch queue) and times only the launch
// calls, median of 40 batches, in ns a launch:
//   none        no CUPTI subscriber (what an app without cudal1 pays)
//   guard       the guard as cudal1 arms it: every runtime and driver API whose name holds Launch, Memcpy, ...
//   runtime     the same names, runtime API only;  driver: driver API only
//   subscribed  subscribed, every callback off
//   lean        the guard as cudal1 arms it since: the runtime's LaunchKernel entry points left to the driver's
// and counts the callbacks a launch triggers in each mode (does a runtime launch also call back from the driver
// domain?), and the driver-domain callbacks of the runtime's other watched calls. Then times switching the guard's callbacks: one cuptiEnableCallback per watched id (both domains, off
// and on again), and cuptiEnableDomain for both domains (off and on).
//
// nvcc -O3 -std=c++17 -arch=sm_90 -o cupti_cost cupti_cost.cu -ldl
// ./cupti_cost [libcupti path]   (default: libcupti.so.13, then the toolkit's)
#include <cupti_callbacks.h>
#include <cupti_result.h>
#include <dlfcn.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <utility>
#include <vector>

__global__ void empty() {}

namespace {

using SubscribeFn = CUptiResult (*)(CUpti_SubscriberHandle*, CUpti_CallbackFunc, void*);
using EnableFn = CUptiResult (*)(uint32_t, CUpti_SubscriberHandle, CUpti_CallbackDomain, CUpti_CallbackId);
using EnableDomainFn = CUptiResult (*)(uint32_t, CUpti_SubscriberHandle, CUpti_CallbackDomain);
using NameFn = CUptiResult (*)(CUpti_CallbackDomain, uint32_t, const char**);

std::atomic<long> g_calls{0};
void CUPTIAPI on_api(void*, CUpti_CallbackDomain, CUpti_CallbackId, const void* data) {
  const auto* d = static_cast<const CUpti_CallbackData*>(data);
  if (d && d->callbackSite == CUPTI_API_ENTER) g_calls.fetch_add(1, std::memory_order_relaxed);
}

bool watched(const char* name) {  // as cupti_guard.cpp
  static const char* const kWords[] = {"Launch",          "Memcpy",           "Memset",       "Synchronize",
                                       "EventRecord",     "StreamWaitEvent",  "BeginCapture", "StreamQuery",
                                       "StreamWaitValue", "StreamWriteValue", "BatchMemOp",   "ExternalSemaphore",
                                       "MemPrefetch",     "GraphUpload"};
  for (const char* w : kWords)
    if (std::strstr(name, w)) return true;
  return false;
}

double now_ns() {
  return std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

/// Median ns a launch over 40 batches of 256, and callbacks a launch.
std::pair<double, double> launches() {
  std::vector<double> per;
  const long before = g_calls.load();
  for (int b = 0; b < 42; ++b) {
    const double t0 = now_ns();
    for (int i = 0; i < 256; ++i) empty<<<1, 32>>>();
    const double t1 = now_ns();
    cudaDeviceSynchronize();
    if (b >= 2) per.push_back((t1 - t0) / 256);
  }
  const long calls = g_calls.load() - before;
  std::sort(per.begin(), per.end());
  return {per[per.size() / 2], static_cast<double>(calls) / (42.0 * 256)};
}

}  // namespace

int main(int argc, char** argv) {
  const char* candidates[] = {argc > 1 ? argv[1] : "libcupti.so.13", "/usr/local/cuda/lib64/libcupti.so",
                              "/usr/local/cuda/extras/CUPTI/lib64/libcupti.so"};
  void* lib = nullptr;
  for (const char* c : candidates)
    if ((lib = dlopen(c, RTLD_NOW | RTLD_LOCAL))) break;
  if (!lib) return std::printf("no libcupti: %s\n", dlerror()), 1;
  auto subscribe = reinterpret_cast<SubscribeFn>(dlsym(lib, "cuptiSubscribe"));
  auto enable = reinterpret_cast<EnableFn>(dlsym(lib, "cuptiEnableCallback"));
  auto enable_domain = reinterpret_cast<EnableDomainFn>(dlsym(lib, "cuptiEnableDomain"));
  auto name_of = reinterpret_cast<NameFn>(dlsym(lib, "cuptiGetCallbackName"));
  if (!subscribe || !enable || !enable_domain || !name_of) return std::printf("libcupti lacks the callback API\n"), 1;

  cudaFree(nullptr);
  empty<<<1, 32>>>();
  cudaDeviceSynchronize();
  auto report = [](const char* mode) {
    const auto [ns, calls] = launches();
    std::printf("%-11s %8.0f ns a launch, %.2f callbacks a launch\n", mode, ns, calls);
  };
  report("none");

  CUpti_SubscriberHandle sub = nullptr;
  if (subscribe(&sub, &on_api, nullptr) != CUPTI_SUCCESS) return std::printf("cuptiSubscribe failed\n"), 1;
  report("subscribed");
  std::vector<std::pair<CUpti_CallbackDomain, uint32_t>> ids;
  for (CUpti_CallbackDomain dom : {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_CB_DOMAIN_DRIVER_API})
    for (uint32_t id = 1; id < 4096; ++id) {
      const char* name = nullptr;
      if (name_of(dom, id, &name) == CUPTI_SUCCESS && name && watched(name)) ids.emplace_back(dom, id);
    }
  auto set = [&](bool runtime, bool driver) {
    for (const auto& [dom, id] : ids)
      enable(dom == CUPTI_CB_DOMAIN_RUNTIME_API ? runtime : driver, sub, dom, id);
  };
  set(true, false);
  report("runtime");
  set(false, true);
  report("driver");
  // Which of the runtime's other watched calls the driver domain reports too (callbacks on entry, driver only).
  {
    float* buf = nullptr;
    cudaMalloc(&buf, 1 << 20);
    cudaStream_t st;
    cudaStreamCreate(&st);
    cudaEvent_t ev;
    cudaEventCreate(&ev);
    std::vector<float> host(1024);
    auto count = [&](const char* what, auto&& call) {
      cudaDeviceSynchronize();
      const long before = g_calls.load();
      call();
      std::printf("driver callbacks of %-22s %ld\n", what, g_calls.load() - before);
    };
    count("<<<>>> launch", [&] { empty<<<1, 32, 0, st>>>(); });
    count("cudaMemcpy D2H", [&] { cudaMemcpy(host.data(), buf, 4096, cudaMemcpyDeviceToHost); });
    count("cudaMemcpyAsync D2D", [&] { cudaMemcpyAsync(buf + 2048, buf, 4096, cudaMemcpyDeviceToDevice, st); });
    count("cudaMemset", [&] { cudaMemset(buf, 0, 4096); });
    count("cudaMemsetAsync", [&] { cudaMemsetAsync(buf, 0, 4096, st); });
    count("cudaEventRecord", [&] { cudaEventRecord(ev, st); });
    count("cudaEventSynchronize", [&] { cudaEventSynchronize(ev); });
    count("cudaStreamWaitEvent", [&] { cudaStreamWaitEvent(st, ev, 0); });
    count("cudaStreamQuery", [&] { cudaStreamQuery(st); });
    count("cudaStreamSynchronize", [&] { cudaStreamSynchronize(st); });
    count("cudaDeviceSynchronize", [&] { cudaDeviceSynchronize(); });
    cudaEventDestroy(ev);
    cudaStreamDestroy(st);
    cudaFree(buf);
  }
  set(true, true);
  report("guard");
  set(true, true);
  for (const auto& [dom, id] : ids)  // the lean guard: the runtime's kernel launches only through the driver's
    if (const char* name = nullptr; dom == CUPTI_CB_DOMAIN_RUNTIME_API && name_of(dom, id, &name) == CUPTI_SUCCESS &&
                                    name && std::strstr(name, "LaunchKernel"))
      enable(0, sub, dom, id);
  report("lean");
  set(true, true);
  std::printf("%zu watched ids\n", ids.size());

  std::vector<double> per;
  for (int r = 0; r < 21; ++r) {
    const double t0 = now_ns();
    set(false, false);
    set(true, true);
    per.push_back((now_ns() - t0) / 2);
  }
  std::sort(per.begin(), per.end());
  std::printf("switching the watched ids one by one: %.0f ns a switch (median of 21)\n", per[per.size() / 2]);
  per.clear();
  for (int r = 0; r < 201; ++r) {
    const double t0 = now_ns();
    enable_domain(0, sub, CUPTI_CB_DOMAIN_RUNTIME_API);
    enable_domain(0, sub, CUPTI_CB_DOMAIN_DRIVER_API);
    enable_domain(1, sub, CUPTI_CB_DOMAIN_RUNTIME_API);
    enable_domain(1, sub, CUPTI_CB_DOMAIN_DRIVER_API);
    per.push_back((now_ns() - t0) / 2);
  }
  std::sort(per.begin(), per.end());
  std::printf("switching both domains: %.0f ns a switch (median of 201)\n", per[per.size() / 2]);
  report("all on");  // both domains fully on: every API calls back
  enable_domain(0, sub, CUPTI_CB_DOMAIN_RUNTIME_API);
  enable_domain(0, sub, CUPTI_CB_DOMAIN_DRIVER_API);
  report("all off");
  return 0;
}
