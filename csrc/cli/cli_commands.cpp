/// @brief The CLI commands: cache ls / clear, report, env.
#include "cli_commands.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <ctime>

#include "cudal1/cache/kernel_cache.h"
#include "cudal1/core/config.h"

namespace cudal1::cli {
namespace {

std::string when(int64_t unix_time) {
  const std::time_t t = static_cast<std::time_t>(unix_time);
  char buf[32] = "?";
  if (std::tm tm{}; gmtime_r(&t, &tm)) std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M", &tm);
  return buf;
}

int fail(std::ostream& out, const Status& s) {
  out << "error: " << s.to_string() << "\n";
  return 1;
}

}  // namespace

std::string cache_dir(const Options& o) { return o.cache_dir.empty() ? config().cache_dir : o.cache_dir; }

int cache_ls(const Options& o, std::ostream& out) {
  cache::KernelCache cache(cache_dir(o));
  auto listing = cache.list();
  if (!listing.ok()) {
    fail(out, listing.status());
    out << "`cudal1 cache repair` keeps the unreadable database aside and starts a fresh one\n";
    return 1;
  }
  if (o.json) {
    nlohmann::json j = nlohmann::json::array();
    for (const auto& l : listing.value()) {
      nlohmann::json entries = nlohmann::json::array();
      for (const auto& e : l.entries)
        entries.push_back({{"signature", e.signature}, {"has_kernel", e.has_kernel}, {"family", e.family},
                           {"generator_version", e.generator_version}, {"variant", e.variant}, {"speedup", e.speedup}, {"aten_us", e.aten_us},
                           {"kernel_us", e.kernel_us}, {"trials", e.trials}, {"cubin_bytes", e.cubin.size()},
                           {"created_unix", e.created_unix}});
      j.push_back({{"fingerprint_key", l.key},
                   {"fingerprint", l.fingerprint.ok() ? nlohmann::json::parse(l.fingerprint->to_json())
                                                      : nlohmann::json(l.fingerprint.status().to_string())},
                   {"entries", entries},
                   {"rejected", l.rejected}});
    }
    out << j.dump(2) << "\n";
    return 0;
  }
  out << "cache: " << cache.dir() << "\n";
  if (listing->empty()) out << "(empty)\n";
  for (const auto& l : listing.value()) {
    out << "\nfingerprint " << l.key << ": ";
    if (l.fingerprint.ok()) {
      const auto& f = l.fingerprint.value();
      out << f.gpu_name << " sm_" << f.sm << " (" << f.sm_count << " SMs), driver " << f.driver_version
          << ", CUDA runtime " << f.cuda_runtime_version << ", NVRTC " << f.nvrtc_version << ", torch "
          << f.torch_version << ", cudal1 " << f.cudal1_version << ", format "
          << f.format_version << "\n";
    } else {
      out << l.fingerprint.status().to_string() << "\n";
    }
    int kernels = 0;
    for (const auto& e : l.entries) kernels += e.has_kernel;
    out << fmt::format("  {} signatures tuned, {} served by cudal1 kernels\n", l.entries.size(), kernels);
    // Each record's generator (family:version, Note [Generator versions]): the runtime serves a record only
    // while its family's generator is still that version.
    out << fmt::format("  {:<9} {:>8} {:>10} {:>10}  {:<22} {:<26} {:<16} {}\n", "outcome", "speedup", "ATen us",
                       "kernel us", "generator", "variant", "tuned (UTC)", "signature");
    for (const auto& e : l.entries)
      out << fmt::format("  {:<9} {:>7.2f}x {:>10.1f} {:>10.1f}  {:<22} {:<26} {:<16} {}\n",
                         e.has_kernel ? "kernel" : "aten", e.speedup, e.aten_us, e.kernel_us,
                         e.family + ":" + std::to_string(e.generator_version), e.variant, when(e.created_unix),
                         e.signature);
    for (const auto& r : l.rejected) out << "  rejected: " << r << "\n";
  }
  return 0;
}

int cache_clear(const Options& o, std::ostream& out) {
  if (!o.all && o.fingerprint.empty()) {
    out << "error: say --fingerprint KEY or --all\n";
    return 2;
  }
  cache::KernelCache cache(cache_dir(o));
  auto n = cache.erase(o.all ? "" : o.fingerprint);
  if (!n.ok()) return fail(out, n.status());
  out << "deleted " << n.value() << " records from " << cache.dir() << "\n";
  return 0;
}

namespace {

/// The op's name in a signature text: "aten::mul.Tensor(f32[8]{1}, ...)" -> "mul.Tensor".
std::string op_word(const std::string& sig) {
  const size_t b = sig.rfind("aten::", 0) == 0 ? 6 : 0;
  return sig.substr(b, sig.find('(') == std::string::npos ? std::string::npos : sig.find('(') - b);
}

/// The report's chains (Note [Chain profiling]): hot ones, or every one with `all`.
void print_chains(const nlohmann::json& j, bool all, std::ostream& out) {
  const auto chains = j.value("chains", nlohmann::json::array());
  out << fmt::format("\nop chains (recurring connected calls; CUDAL1_FUSE=off records none):\n");
  out << fmt::format("{:>9} {:>6} {:>9} {:<6} {:>8}  {}\n", "runs", "share", "mean us", "state", "speedup",
                     "ops (then each op's signature and its inputs: %node.output or external slot)");
  int shown = 0;
  for (const auto& ch : chains) {
    if (!all && ch.value("state", "") == "cold") continue;
    ++shown;
    std::string ops;
    for (const auto& s : ch["ops"]) ops += (ops.empty() ? "" : " -> ") + op_word(s.get<std::string>());
    const double sp = ch.value("speedup", 0.0);
    out << fmt::format("{:>9} {:>5.1f}% {:>9.2f} {:<6} {:>8}  {}\n", ch.value("count", 0),
                       100.0 * ch.value("share", 0.0), ch.value("mean_us", 0.0), ch.value("state", "?"),
                       sp > 0 ? fmt::format("{:.2f}x", sp) : "-", ops);
    for (size_t i = 0; i < ch["ops"].size(); ++i) {
      std::string in;
      for (const auto& s : ch["inputs"][i]) in += (in.empty() ? "" : ", ") + s.get<std::string>();
      out << fmt::format("{:>45}%{} = {} <- {}\n", "", i, ch["ops"][i].get<std::string>(), in);
    }
    const std::string kernel = ch.value("kernel", ""), note = ch.value("note", "");
    if (!kernel.empty() || !note.empty())  // Note [Chain tuning]: what tuning found
      out << fmt::format("{:>45}chain kernel: {}{}\n", "", kernel.empty() ? "none" : kernel,
                         note.empty() ? "" : " (" + note + ")");
    const std::string now = ch.value("kernel_now", "");
    if (!now.empty() && ch.contains("regions"))  // the last run: what its fused kernel did
      out << fmt::format("{:>45}last run: {} regions opened, {} whole, {} flushed early; kernel {}\n", "",
                         ch["regions"].value("opened", 0), ch["regions"].value("completed", 0),
                         ch["regions"].value("flushed_early", 0), now);
  }
  if (!shown) out << (all ? "(no chains)\n" : "(no hot chains; --all shows every one)\n");
}

}  // namespace

int report(const Options& o, std::ostream& out) {
  if (o.insights) return report_insights(o, out);
  cache::KernelCache cache(cache_dir(o));
  auto runs = cache.runs();
  if (!runs.ok()) return fail(out, runs.status());
  if (o.list_runs) {
    out << fmt::format("{:<24} {:<10} {:>12} {:>10} {:>9}\n", "run", "mode", "calls", "signatures", "replaced");
    for (const auto& r : runs.value()) {
      const auto j = nlohmann::json::parse(r.json, nullptr, false);
      if (j.is_discarded()) continue;
      size_t replaced = 0;
      for (const auto& s : j.value("signatures", nlohmann::json::array()))
        replaced += s.value("state", "") == "replaced";
      const std::string mode = j.value("mode", "?") + (j.value("warm", false) ? "/warm" : "");
      out << fmt::format("{:<24} {:<10} {:>12} {:>10} {:>9}\n", r.run_id, mode,
                         j["counters"].value("hooked_calls", 0), j["counters"].value("signatures", 0), replaced);
    }
    return 0;
  }
  const cache::RunRecord* run = nullptr;
  for (const auto& r : runs.value())
    if (o.run.empty() || r.run_id == o.run) {
      run = &r;
      break;
    }
  if (!run) {
    out << (o.run.empty() ? "no recorded runs in " + cache.dir() + " (run an app with CUDAL1_ENABLE=1)\n"
                          : "no run " + o.run + " (see `cudal1 report --runs`)\n");
    return o.run.empty() ? 0 : 1;
  }
  const auto j = nlohmann::json::parse(run->json, nullptr, false);
  if (j.is_discarded()) return fail(out, Status(Code::kCorrupt, "run report is not JSON"));
  if (o.json) {
    out << j.dump(2) << "\n";
    return 0;
  }
  const auto& c = j["counters"];
  out << fmt::format("run {} (mode {}{}, written {} UTC)\n", run->run_id, j.value("mode", "?"),
                     j.value("warm", false) ? ", a `cudal1 warm` run" : "",
                     when(j.value("written_unix", int64_t{0})));
  out << fmt::format("{} hooked calls, {} signatures, {} tuned, {} from cache, {} calls served by cudal1 kernels, "
                     "{} fallbacks\n\n",
                     c.value("hooked_calls", 0), c.value("signatures", 0), c.value("tuned", 0),
                     c.value("cache_hits", 0), c.value("replaced_calls", 0), c.value("fallbacks", 0));
  out << fmt::format("{:>9} {:>6} {:>9} {:<9} {:>8} {:>9} {:>9} {:>7}  {:<26} {}\n", "calls", "share", "mean us",
                     "state", "speedup", "ATen us", "ours us", "in-app", "variant", "signature");
  int shown = 0;
  for (const auto& s : j["signatures"]) {
    if (!o.all && !s.value("hot", false)) continue;
    ++shown;
    const bool tuned = s.value("speedup", 0.0) > 0;
    // Note [In-app confirmation]: the ratio the app's own calls measured, "trial" while one runs
    const double in_app = s.value("in_app", 0.0);
    const std::string judged = in_app > 0                                 ? fmt::format("{:.2f}x", in_app)
                               : s.value("verdict", "") == "on trial" ? std::string("trial")
                                                                         : std::string("-");
    out << fmt::format("{:>9} {:>5.1f}% {:>9.2f} {:<9} {:>8} {:>9} {:>9} {:>7}  {:<26} {}\n", s.value("calls", 0),
                       100.0 * s.value("share", 0.0), s.value("mean_us", 0.0), s.value("state", "?"),
                       tuned ? fmt::format("{:.2f}x", s.value("speedup", 0.0)) : "-",
                       tuned ? fmt::format("{:.1f}", s.value("aten_us", 0.0)) : "-",
                       tuned ? fmt::format("{:.1f}", s.value("kernel_us", 0.0)) : "-", judged,
                       s.value("variant", "") + (s.value("from_cache", false) ? " (cache)" : ""),
                       s.value("signature", ""));
    if (!s.value("note", "").empty()) out << fmt::format("{:>61}note: {}\n", "", s.value("note", ""));
  }
  if (!shown) out << (o.all ? "(no signatures)\n" : "(no hot signatures; --all shows every one)\n");
  print_chains(j, o.all, out);
  return 0;
}

int env(const Options&, std::ostream& out) {
  const Config& c = config();
  out << fmt::format("{:<22} {:<28} {}\n", "variable", "value", "default / meaning");
  for (const auto& v : config_variables()) {
    const char* cur = std::getenv(v.name);
    out << fmt::format("{:<22} {:<28} {} / {}\n", v.name, cur ? cur : "(unset)", v.default_text, v.meaning);
  }
  out << "\nresolved cache directory: " << c.cache_dir << "\n";
  return 0;
}

}  // namespace cudal1::cli
