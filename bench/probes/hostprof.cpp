// Host sampling profiler for one thread of a running app (no perf or gdb on the GPU machine): preloaded, it samples
// the main thread's stack every HOSTPROF_US microseconds of wall time (default 500) while a window is open, and at
// exit writes the samples to HOSTPROF_OUT as return addresses with their library and offset. hostprof_report.py
// symbolises them (addr2line) and prints self and inclusive shares by function.
//
// The window: an app that declares `extern "C" void cudal1_probe_window(int) __attribute__((weak));` opens it with
// cudal1_probe_window(1) and closes it with cudal1_probe_window(0) (examples/model_runner.cpp does, around its
// timed loops); without such calls, HOSTPROF_ALL=1 samples from start to exit.
//
// Build and use (GPU machine):
//   g++ -O2 -shared -fPIC -o /tmp/hostprof.so bench/probes/hostprof.cpp -ldl
//   HOSTPROF_OUT=/tmp/serve.prof LD_PRELOAD=/tmp/hostprof.so ./cudal1_model_runner ...
//   python3 bench/probes/hostprof_report.py /tmp/serve.prof [other.prof]
// backtrace() in a signal handler is not async-signal-safe: a sample taken while the thread holds the loader's
// lock can hang; the window keeps sampling to the app's steady state.
#include <dlfcn.h>
#include <execinfo.h>
#include <signal.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <vector>

namespace {

constexpr int kDepth = 48;
constexpr size_t kMaxSamples = 200000;

struct Sample {
  int depth;
  void* pc[kDepth];
};

Sample* g_samples = nullptr;
std::atomic<size_t> g_count{0};
std::atomic<bool> g_open{false};
pid_t g_tid = 0;
timer_t g_timer;
bool g_armed = false;

void on_signal(int, siginfo_t*, void*) {
  if (!g_open.load(std::memory_order_relaxed) || syscall(SYS_gettid) != g_tid) return;
  const size_t i = g_count.fetch_add(1, std::memory_order_relaxed);
  if (i >= kMaxSamples) return;
  g_samples[i].depth = backtrace(g_samples[i].pc, kDepth);
}

void dump() {
  const char* path = std::getenv("HOSTPROF_OUT");
  if (!path || !g_samples || g_count.load() == 0) return;  // a process that never opened the window (timeout)
  FILE* f = std::fopen(path, "w");
  if (!f) return;
  const size_t n = std::min(g_count.load(), kMaxSamples);
  std::map<void*, int> ids;
  for (size_t i = 0; i < n; ++i)
    for (int d = 0; d < g_samples[i].depth; ++d) ids.emplace(g_samples[i].pc[d], 0);
  int next = 0;
  for (auto& [pc, id] : ids) {
    id = next++;
    Dl_info info{};
    const bool ok = dladdr(pc, &info) && info.dli_fname;
    // Return addresses point past the call: pc - 1 stays inside the calling function.
    const uintptr_t off = ok ? reinterpret_cast<uintptr_t>(pc) - 1 - reinterpret_cast<uintptr_t>(info.dli_fbase) : 0;
    std::fprintf(f, "A %d %s 0x%lx %s\n", id, ok ? info.dli_fname : "?", static_cast<unsigned long>(off),
                 ok && info.dli_sname ? info.dli_sname : "?");
  }
  // Frames 0-1 are this handler and the signal trampoline.
  for (size_t i = 0; i < n; ++i) {
    std::fputc('S', f);
    for (int d = 2; d < g_samples[i].depth; ++d) std::fprintf(f, " %d", ids[g_samples[i].pc[d]]);
    std::fputc('\n', f);
  }
  std::fclose(f);
  std::fprintf(stderr, "hostprof: %zu samples of thread %d written to %s\n", n, g_tid, path);
}

__attribute__((constructor)) void start() {
  if (!std::getenv("HOSTPROF_OUT")) return;
  g_samples = static_cast<Sample*>(std::calloc(kMaxSamples, sizeof(Sample)));
  if (!g_samples) return;
  g_tid = static_cast<pid_t>(syscall(SYS_gettid));
  void* warm[4];
  backtrace(warm, 4);  // loads the unwinder now, not inside the handler
  struct sigaction sa{};
  sa.sa_sigaction = on_signal;
  sa.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGPROF, &sa, nullptr);
  struct sigevent sev{};
  sev.sigev_notify = SIGEV_THREAD_ID;
  sev.sigev_signo = SIGPROF;
  sev._sigev_un._tid = g_tid;
  if (timer_create(CLOCK_MONOTONIC, &sev, &g_timer) != 0) return;
  const char* us = std::getenv("HOSTPROF_US");
  const long period = us ? std::max(50L, std::atol(us)) : 500L;
  itimerspec its{};
  its.it_interval.tv_sec = period / 1000000;
  its.it_interval.tv_nsec = (period % 1000000) * 1000;
  its.it_value = its.it_interval;
  timer_settime(g_timer, 0, &its, nullptr);
  g_armed = true;
  if (const char* all = std::getenv("HOSTPROF_ALL"); all && all[0] == '1') g_open = true;
  std::atexit(dump);
}

}  // namespace

extern "C" void cudal1_probe_window(int open) {
  if (g_armed) g_open.store(open != 0);
}
