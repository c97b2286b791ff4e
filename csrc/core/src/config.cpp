/// @brief Parsing of the CUDAL1_* variables (the only place cudal1 calls getenv).
#include "cudal1/core/config.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <memory>
#include <mutex>

#include "cudal1/core/log.h"

namespace cudal1 {
namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

std::string quoted(const char* name, const char* v) { return std::string(name) + "='" + v + "'"; }

bool parse_bool(const char* name, const char* v, bool dflt, std::vector<std::string>* w) {
  const std::string s = lower(v);
  if (s == "1" || s == "true" || s == "on" || s == "yes") return true;
  if (s == "0" || s == "false" || s == "off" || s == "no" || s.empty()) return false;
  if (w) w->push_back(quoted(name, v) + " is not a boolean (1/0, true/false, on/off); using " +
                      (dflt ? "1" : "0"));
  return dflt;
}

/// CUDAL1_TUNE_MEMORY: "30%" or "0.3" (a share of free memory, in (0, 1]), or "512M", "2G", "1T", "4096K",
/// "123456" (bytes; binary units). A bad value keeps the default share with a warning.
void parse_memory(const char* name, const char* v, Config* c, std::vector<std::string>* w) {
  std::string s = lower(v);
  errno = 0;
  char* end = nullptr;
  const double x = std::strtod(s.c_str(), &end);
  const std::string unit = end ? std::string(end) : "";
  const bool number = end != s.c_str() && errno == 0 && x > 0;
  if (number && unit == "%" && x <= 100) {
    c->tune_memory_fraction = x / 100;
    c->tune_memory_bytes = 0;
    return;
  }
  if (number && unit.empty() && x <= 1 && s.find('.') != std::string::npos) {
    c->tune_memory_fraction = x;
    c->tune_memory_bytes = 0;
    return;
  }
  static const std::pair<const char*, double> kUnits[] = {
      {"", 1}, {"k", 1024.0}, {"m", 1024.0 * 1024}, {"g", 1024.0 * 1024 * 1024}, {"t", 1024.0 * 1024 * 1024 * 1024}};
  for (const auto& [u, scale] : kUnits)
    if (number && (unit == u || unit == std::string(u) + "b" || unit == std::string(u) + "ib") && x * scale >= 1 &&
        x * scale < 9.0e18 && (scale > 1 || s.find('.') == std::string::npos)) {  // no fractional bytes
      c->tune_memory_bytes = static_cast<int64_t>(x * scale);
      return;
    }
  if (w) w->push_back(quoted(name, v) + " is neither a size (512M, 2G) nor a share (30%, 0.3); using 50%");
}

int64_t parse_int(const char* name, const char* v, int64_t dflt, int64_t lo, int64_t hi,
                  std::vector<std::string>* w) {
  errno = 0;
  char* end = nullptr;
  const long long x = std::strtoll(v, &end, 10);
  if (end == v || *end != '\0' || errno != 0) {
    if (w) w->push_back(quoted(name, v) + " is not an integer; using " + std::to_string(dflt));
    return dflt;
  }
  if (x < lo || x > hi) {
    if (w) w->push_back(quoted(name, v) + " is outside [" + std::to_string(lo) + ", " + std::to_string(hi) +
                        "]; using " + std::to_string(dflt));
    return dflt;
  }
  return x;
}

double parse_double(const char* name, const char* v, double dflt, double lo, double hi,
                    std::vector<std::string>* w) {
  errno = 0;
  char* end = nullptr;
  const double x = std::strtod(v, &end);
  if (end == v || *end != '\0' || errno != 0 || !(x >= lo && x <= hi)) {
    if (w) w->push_back(quoted(name, v) + " is not a number in [" + std::to_string(lo) + ", " +
                        std::to_string(hi) + "]; using " + std::to_string(dflt));
    return dflt;
  }
  return x;
}

std::string default_cache_dir(const EnvLookup& env) {
  const char* xdg = env("XDG_CACHE_HOME");
  if (xdg && *xdg) return std::string(xdg) + "/cudal1";
  const char* home = env("HOME");
  if (home && *home) return std::string(home) + "/.cache/cudal1";
  return "";
}

}  // namespace

const char* mode_name(Mode m) noexcept {
  switch (m) {
    case Mode::kTune: return "tune";
    case Mode::kServe: return "serve";
    case Mode::kProfile: return "profile";
  }
  return "?";
}

const char* l2_flush_name(L2FlushKind k) noexcept { return k == L2FlushKind::kWrite ? "write" : "read"; }

const char* tune_search_name(TuneSearch s) noexcept {
  switch (s) {
    case TuneSearch::kGp: return "gp";
    case TuneSearch::kKnobs: return "knobs";
    case TuneSearch::kKnobsMean: return "knobs-mean";
    case TuneSearch::kPolicy: return "policy";
  }
  return "?";
}

const std::vector<ConfigVar>& config_variables() {
  static const std::vector<ConfigVar> vars = {
      {"CUDAL1_ENABLE", "0", "1/true/on turns cudal1 on; otherwise the library registers nothing"},
      {"CUDAL1_MODE", "tune",
       "tune: profile, tune hot signatures in the background, swap verified kernels, use the cache; "
       "serve: swap cached kernels only, never tune; profile: count and time every functional op, replace "
       "nothing"},
      {"CUDAL1_CACHE_DIR", "$XDG_CACHE_HOME/cudal1, else ~/.cache/cudal1", "RocksDB kernel cache directory"},
      {"CUDAL1_LOG_LEVEL", "warn", "trace, debug, info, warn, error or off (spdlog levels)"},
      {"CUDAL1_HOT_CALLS", "50", "calls of one signature before it is hot and queued for the optimizer"},
      {"CUDAL1_TRIALS", "16", "kernel variants compiled, verified and timed per hot signature"},
      {"CUDAL1_TUNE_ROUND", "4",
       "variants per tuning round: each round's variants compile concurrently, and the next round is picked "
       "from the signature's measurements so far (>= CUDAL1_TRIALS: one round)"},
      {"CUDAL1_TUNE_SEARCH", "gp",
       "how rounds after the first are picked: gp (a Gaussian process over the variants' shared knob values "
       "fitted to the signature's measured times, lowest confidence bound first), knobs (a ridge model on the "
       "knob values, lowest confidence bound first), knobs-mean (its predictions alone) or policy (the "
       "contrastive policy adapted to those measurements); round 1 is the policy's"},
      {"CUDAL1_TUNE_PRIOR", "on",
       "on: round 1 also follows the cross-family policy, learned from every tuned signature of every family on "
       "this GPU architecture (the shipped prior for sm 90 until then); off: round 1 by the family's policy alone, "
       "as before 2026-12-07 (the cross-family policy still learns)"},
      {"CUDAL1_VERIFY_TRIALS", "5", "verification trials, each on fresh random inputs"},
      {"CUDAL1_TIMING_REPS", "40", "interleaved ATen/candidate timing repetitions per candidate"},
      {"CUDAL1_MIN_SPEEDUP", "1.03", "median paired speedup over ATen a kernel needs to be swapped in"},
      {"CUDAL1_CONFIRM_CALLS", "32",
       "tune mode: a kernel that beat ATen in isolation goes on trial in the app first: its calls alternate with "
       "ATen's, each timed on the app's stream, and it stays only when faster there (judged after this many calls "
       "of each, sampling on up to 8 times as many while undecided; the verdict is cached); 0: swap without a "
       "trial"},
      {"CUDAL1_L2_FLUSH", "read",
       "how timing evicts L2 before each repetition: read (a 256 MiB read, L2 left clean) or write (a 256 MiB "
       "memset, L2 left dirty, so the timed kernel also pays the write-back)"},
      {"CUDAL1_PROFILE_SAMPLE", "64", "one call in N per signature is timed with GPU events"},
      {"CUDAL1_SEED", "0", "seed for exploration and random inputs; 0 seeds from the clock"},
      {"CUDAL1_CUDA_LIBRARY", "(search libcuda.so.1)", "path of the CUDA driver library (only it, when set)"},
      {"CUDAL1_NVRTC_LIBRARY", "(search libnvrtc.so.13, .12, libnvrtc.so)",
       "path of the NVRTC library (only it, when set)"},
      {"CUDAL1_FUSE", "on",
       "on: also hook the chain ops (pow, rsqrt, sqrt, log, reciprocal, clamp, erf, in-place forms) and record "
       "recurring chains of connected calls with their dataflow; hot chains are tuned as chain kernels and, "
       "where one wins, deferred and run as it (`cudal1 report` lists them); off: exactly the single-op "
       "behaviour"},
      {"CUDAL1_CHAIN_SHARE", "0.01",
       "share of the profiled device time a chain recorded CUDAL1_HOT_CALLS times needs to turn hot"},
      {"CUDAL1_GRAPHS", "on",
       "on: a fused chain's kernel is captured into a CUDA graph and replayed where the app's own measured period "
       "is shorter with it (`cudal1 report` says which); off: fused chains launch from the host"},
      {"CUDAL1_GRAPH_MEMORY", "4096",
       "GPU memory, in MiB, that all region graphs may hold together (and all forward graphs, apart)"},
      {"CUDAL1_FORWARD_GRAPHS", "on",
       "on (tune, serve): a TorchScript method's whole call (the app's Module::forward) is captured into one CUDA "
       "graph once cudal1 has settled, checked against the eager call, and replayed where the app's own period "
       "is shorter with it; needs libcudal1.so linked before torch or preloaded; off: methods run as before"},
      {"CUDAL1_JIT_FUSER", "keep",
       "keep leaves TorchScript's TensorExpr fuser as the app set it; off (with CUDAL1_FUSE on, tune or serve) "
       "turns it off at start-up, so that the elementwise chains it would run outside the dispatcher (HF's "
       "gelu_new in a traced GPT-2) reach cudal1's chain kernels and epilogues, at a host cost per op"},
      {"CUDAL1_CUPTI_GUARD", "lean",
       "lean: the CUPTI guard of deferred regions sees the runtime's kernel launches through the driver's "
       "(checked when it is armed), one callback a launch; full: also through the runtime's own, two callbacks a "
       "launch (its host cost before 2026-12-06; for measuring it)"},
      {"CUDAL1_TUNE_MEMORY", "50%",
       "GPU memory one signature's tuning may hold: a size (512M, 2G, bytes) or a share of the device's free "
       "memory (30%, 0.3); a signature that would need more is not tuned (`cudal1 report` says why)"},
  };
  return vars;
}

Config parse_config(const EnvLookup& env, std::vector<std::string>* w) {
  Config c;
  c.cache_dir = default_cache_dir(env);
  if (const char* v = env("CUDAL1_ENABLE")) c.enable = parse_bool("CUDAL1_ENABLE", v, false, w);
  if (const char* v = env("CUDAL1_MODE")) {
    const std::string s = lower(v);
    if (s == "tune") c.mode = Mode::kTune;
    else if (s == "serve") c.mode = Mode::kServe;
    else if (s == "profile") c.mode = Mode::kProfile;
    else if (w) w->push_back(quoted("CUDAL1_MODE", v) + " is not tune, serve or profile; using tune");
  }
  if (const char* v = env("CUDAL1_CACHE_DIR"); v && *v) c.cache_dir = v;
  if (const char* v = env("CUDAL1_LOG_LEVEL")) {
    const std::string s = lower(v);
    static const std::pair<const char*, LogLevel> levels[] = {
        {"trace", LogLevel::kTrace}, {"debug", LogLevel::kDebug}, {"info", LogLevel::kInfo},
        {"warn", LogLevel::kWarn},   {"warning", LogLevel::kWarn}, {"error", LogLevel::kError},
        {"off", LogLevel::kOff}};
    bool found = false;
    for (const auto& [n, l] : levels)
      if (s == n) c.log_level = l, found = true;
    if (!found && w) w->push_back(quoted("CUDAL1_LOG_LEVEL", v) + " is not a log level; using warn");
  }
  if (const char* v = env("CUDAL1_HOT_CALLS")) c.hot_calls = parse_int("CUDAL1_HOT_CALLS", v, 50, 1, 1LL << 40, w);
  if (const char* v = env("CUDAL1_TRIALS")) c.trials = parse_int("CUDAL1_TRIALS", v, 16, 1, 4096, w);
  if (const char* v = env("CUDAL1_TUNE_ROUND")) c.tune_round = parse_int("CUDAL1_TUNE_ROUND", v, 4, 1, 4096, w);
  if (const char* v = env("CUDAL1_TUNE_SEARCH")) {
    const std::string s = lower(v);
    if (s == "gp") c.tune_search = TuneSearch::kGp;
    else if (s == "knobs") c.tune_search = TuneSearch::kKnobs;
    else if (s == "policy") c.tune_search = TuneSearch::kPolicy;
    else if (s == "knobs-mean") c.tune_search = TuneSearch::kKnobsMean;
    else if (w)
      w->push_back(quoted("CUDAL1_TUNE_SEARCH", v) + " is not gp, knobs, knobs-mean or policy; using gp");
  }
  if (const char* v = env("CUDAL1_VERIFY_TRIALS"))
    c.verify_trials = parse_int("CUDAL1_VERIFY_TRIALS", v, 5, 1, 1000, w);
  if (const char* v = env("CUDAL1_TIMING_REPS")) c.timing_reps = parse_int("CUDAL1_TIMING_REPS", v, 40, 5, 100000, w);
  if (const char* v = env("CUDAL1_MIN_SPEEDUP"))
    c.min_speedup = parse_double("CUDAL1_MIN_SPEEDUP", v, 1.03, 1.0, 100.0, w);
  if (const char* v = env("CUDAL1_CONFIRM_CALLS"))
    c.confirm_calls = parse_int("CUDAL1_CONFIRM_CALLS", v, 32, 0, 1 << 16, w);
  if (const char* v = env("CUDAL1_L2_FLUSH")) {
    const std::string s = lower(v);
    if (s == "read") c.l2_flush = L2FlushKind::kRead;
    else if (s == "write") c.l2_flush = L2FlushKind::kWrite;
    else if (w) w->push_back(quoted("CUDAL1_L2_FLUSH", v) + " is not read or write; using read");
  }
  if (const char* v = env("CUDAL1_PROFILE_SAMPLE"))
    c.profile_sample = parse_int("CUDAL1_PROFILE_SAMPLE", v, 64, 1, 1 << 20, w);
  if (const char* v = env("CUDAL1_SEED"))
    c.seed = static_cast<uint64_t>(parse_int("CUDAL1_SEED", v, 0, 0, INT64_MAX, w));
  if (const char* v = env("CUDAL1_CUDA_LIBRARY")) c.cuda_library = v;
  if (const char* v = env("CUDAL1_NVRTC_LIBRARY")) c.nvrtc_library = v;
  if (const char* v = env("CUDAL1_TUNE_PRIOR")) c.tune_prior = parse_bool("CUDAL1_TUNE_PRIOR", v, false, w);
  if (const char* v = env("CUDAL1_FUSE")) c.fuse = parse_bool("CUDAL1_FUSE", v, true, w);
  if (const char* v = env("CUDAL1_CHAIN_SHARE"))
    c.chain_share = parse_double("CUDAL1_CHAIN_SHARE", v, 0.01, 0.0, 1.0, w);
  if (const char* v = env("CUDAL1_GRAPHS")) c.graphs = parse_bool("CUDAL1_GRAPHS", v, true, w);
  if (const char* v = env("CUDAL1_FORWARD_GRAPHS"))
    c.forward_graphs = parse_bool("CUDAL1_FORWARD_GRAPHS", v, true, w);
  if (const char* v = env("CUDAL1_GRAPH_MEMORY"))
    c.graph_memory_mb = parse_int("CUDAL1_GRAPH_MEMORY", v, 4096, 0, int64_t{1} << 24, w);
  if (const char* v = env("CUDAL1_TUNE_MEMORY")) parse_memory("CUDAL1_TUNE_MEMORY", v, &c, w);
  if (const char* v = env("CUDAL1_JIT_FUSER")) {
    const std::string s = lower(v);
    if (s == "off" || s == "keep") c.jit_fuser_off = s == "off";
    else if (w) w->push_back(quoted("CUDAL1_JIT_FUSER", v) + " is neither keep nor off; using keep");
  }
  if (const char* v = env("CUDAL1_CUPTI_GUARD")) {
    const std::string s = lower(v);
    if (s == "full" || s == "lean") c.cupti_full = s == "full";
    else if (w) w->push_back(quoted("CUDAL1_CUPTI_GUARD", v) + " is neither lean nor full; using lean");
  }
  return c;
}

namespace {
std::mutex g_config_mu;
std::unique_ptr<Config> g_config;  // replaced only by set_config (tests), never freed while in use
}  // namespace

const Config& config() {
  std::lock_guard<std::mutex> lock(g_config_mu);
  if (!g_config) {
    std::vector<std::string> warnings;
    g_config = std::make_unique<Config>(parse_config([](const char* n) { return std::getenv(n); }, &warnings));
    set_log_level(g_config->log_level);
    for (const auto& m : warnings) CUDAL1_LOG(kWarn, m);
  }
  return *g_config;
}

void set_config(const Config& c) {
  std::lock_guard<std::mutex> lock(g_config_mu);
  // Keep the old object alive: a reader may still hold a reference to it.
  static std::vector<std::unique_ptr<Config>> retired;
  if (g_config) retired.push_back(std::move(g_config));
  g_config = std::make_unique<Config>(c);
  set_log_level(c.log_level);
}

}  // namespace cudal1
