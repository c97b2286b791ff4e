/// @brief `cudal1 warm` and `cudal1 source`: collect the signatures and start `cudal1-warm` on them (Note [Pre-warming]
/// in csrc/runtime/src/warm.cpp).
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <algorithm>
#include <fstream>
#include <sstream>

#include "cli_commands.h"
#include "cudal1/cache/kernel_cache.h"
#include "gpus.h"

namespace cudal1::cli {
namespace {

std::string trim(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t\r");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t\r") - b + 1);
}

/// Signatures of a run report, or of a JSON array of strings (or of objects with a "signature").
Result<std::vector<std::string>> from_json(const nlohmann::json& j, bool all, const std::string& what) {
  std::vector<std::string> out;
  if (j.is_object() && j.contains("signatures") && j["signatures"].is_array()) {
    for (const auto& s : j["signatures"])
      if (s.is_object() && s.contains("signature") && s["signature"].is_string() && (all || s.value("hot", false)))
        out.push_back(s["signature"].get<std::string>());
    // Its chains after them, by their cache keys (Note [Pre-warming chains]): the hot ones, or with --all every one.
    if (j.contains("chains") && j["chains"].is_array())
      for (const auto& c : j["chains"])
        if (c.is_object() && c.contains("key") && c["key"].is_string() &&
            (all || c.value("state", std::string("cold")) != "cold"))
          out.push_back(c["key"].get<std::string>());
    return out;
  }
  if (j.is_array()) {
    for (const auto& s : j) {
      if (s.is_string()) out.push_back(s.get<std::string>());
      else if (s.is_object() && s.contains("signature") && s["signature"].is_string())
        out.push_back(s["signature"].get<std::string>());
      else return Status(Code::kInvalidArgument, what + ": an element is neither a string nor {\"signature\": ...}");
    }
    return out;
  }
  return Status(Code::kInvalidArgument, what + " is JSON but neither a run report nor a list of signatures");
}

Result<std::vector<std::string>> from_file(const std::string& path, bool all) {
  std::ifstream in(path);
  if (!in) return Status(Code::kIoError, "cannot read " + path + ": " + std::strerror(errno));
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  const size_t first = text.find_first_not_of(" \t\r\n");
  if (first != std::string::npos && (text[first] == '{' || text[first] == '[')) {
    const auto j = nlohmann::json::parse(text, nullptr, false);
    if (j.is_discarded()) return Status(Code::kInvalidArgument, path + " starts like JSON but does not parse");
    return from_json(j, all, path);
  }
  std::vector<std::string> out;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    line = trim(line);
    if (!line.empty() && line[0] != '#') out.push_back(line);
  }
  return out;
}

Result<std::vector<std::string>> from_run(const Options& o, const std::string& dir) {
  cache::KernelCache cache(dir);
  auto runs = cache.runs();
  if (!runs.ok()) return runs.status();
  for (const auto& r : runs.value()) {  // newest first
    if (!o.run.empty() && r.run_id != o.run) continue;
    const auto j = nlohmann::json::parse(r.json, nullptr, false);
    if (j.is_discarded()) {
      if (o.run.empty()) continue;
      return Status(Code::kCorrupt, "run " + r.run_id + ": the report is not JSON");
    }
    if (o.run.empty() && j.value("warm", false)) continue;  // an earlier `cudal1 warm`, not an app
    return from_json(j, o.all, "run " + r.run_id);
  }
  if (o.run.empty())
    return Status(Code::kNotFound, "no recorded app runs in " + dir +
                                       " (run the app with CUDAL1_ENABLE=1 first, or pass --signatures FILE)");
  return Status(Code::kNotFound, "no run " + o.run + " in " + dir + " (see `cudal1 report --runs`)");
}

}  // namespace

Result<std::vector<std::string>> warm_signatures(const Options& o) {
  const std::string dir = cache_dir(o);
  auto sigs = o.signatures_file.empty() ? from_run(o, dir) : from_file(o.signatures_file, o.all);
  if (sigs.ok() && sigs->empty())  // repeats are dropped by cudal1-warm
    return Status(Code::kNotFound, std::string("no signatures to warm") +
                                       (o.all ? "" : " (only hot ones are taken; --all takes every one)"));
  return sigs;
}

namespace {

/// Starts `cudal1-warm` (beside this program) with `args` after `argv[0]`, the signatures on its standard input
/// and cudal1 switched on (`enable`, tune mode, this cache directory) or off. Returns only on failure.
int helper_exec(const Options& o, const std::vector<std::string>& signatures, const std::vector<std::string>& args,
                bool enable, std::ostream& err) {
  char self[4096];
  const ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) {
    err << "error: cannot locate this program (/proc/self/exe): " << std::strerror(errno) << "\n";
    return 1;
  }
  std::string helper(self, static_cast<size_t>(n));
  helper = helper.substr(0, helper.rfind('/') + 1) + "cudal1-warm";
  if (::access(helper.c_str(), X_OK) != 0) {
    err << "error: " << helper << " is missing (it is built and installed with libcudal1.so)\n";
    return 1;
  }
  // The list goes in on standard input, from an unnamed temporary file: no size limit, nothing left behind.
  std::FILE* list = std::tmpfile();
  if (!list) {
    err << "error: cannot create a temporary file: " << std::strerror(errno) << "\n";
    return 1;
  }
  for (const auto& s : signatures) std::fprintf(list, "%s\n", s.c_str());
  if (std::fflush(list) != 0 || std::fseek(list, 0, SEEK_SET) != 0 || ::dup2(::fileno(list), 0) < 0) {
    err << "error: cannot hand the signatures over: " << std::strerror(errno) << "\n";
    return 1;
  }
  // libcudal1.so reads its configuration when it loads, so it is set before the helper starts.
  ::setenv("CUDAL1_ENABLE", enable ? "1" : "0", 1);
  ::setenv("CUDAL1_MODE", "tune", 1);
  ::setenv("CUDAL1_CACHE_DIR", cache_dir(o).c_str(), 1);
  std::vector<std::string> all = {"cudal1-warm"};
  all.insert(all.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : all) argv.push_back(a.data());
  argv.push_back(nullptr);
  ::execv(helper.c_str(), argv.data());
  err << "error: cannot run " << helper << ": " << std::strerror(errno) << "\n";
  return 1;
}

}  // namespace

int warm_exec(const Options& o, const std::vector<std::string>& signatures, std::ostream& err) {
  // Note [Fleet warm]: the GPUs to tune on, a worker each, grouped by model.
  std::vector<std::pair<int, std::string>> workers;
  if (o.dry_run) {
    for (int i = 0; i < o.workers; ++i) workers.emplace_back(-1, "dry run");
  } else if (o.device_given) {  // one GPU; its model names the group when the list is shared over machines
    auto g = describe_gpu(o.device);
    workers.emplace_back(o.device, g.ok() ? fmt::format("{} ({} SMs)", g->gpu_name, g->sm_count) : "");
  } else {
    std::vector<int> devices = o.gpus;
    if (devices.empty())
      for (int d = 0; d < gpu_count(); ++d) devices.push_back(d);
    for (int d : devices) {
      auto g = describe_gpu(d);
      if (!g.ok()) {
        err << "error: " << (gpu_count() == 0 ? std::string("no GPU visible (--dry-run checks the list without one)")
                                               : "GPU " + std::to_string(d) + ": " + g.status().message())
            << "\n";
        return 1;
      }
      workers.emplace_back(d, fmt::format("{} ({} SMs)", g->gpu_name, g->sm_count));
    }
    if (workers.empty()) workers.emplace_back(o.device, "");  // cudal1-warm says why nothing can be tuned
  }
  std::vector<std::string> args = {"--timeout", fmt::format("{}", o.timeout_s)};
  if (o.dry_run) args.push_back("--dry-run");
  if (workers.size() == 1 && o.store.empty()) {  // one GPU: tuned in the helper itself
    args.insert(args.end(), {"--device", std::to_string(std::max(workers[0].first, 0))});
    return helper_exec(o, signatures, args, !o.dry_run, err);  // a dry run needs cudal1 off
  }
  if (o.node >= o.nodes) {
    err << "error: --node " << o.node << " is not below --nodes " << o.nodes << "\n";
    return 1;
  }
  if (o.nodes > 1 && o.store.empty()) {
    err << "error: --nodes " << o.nodes << " needs --store HOST:PORT (node 0 serves it)\n";
    return 1;
  }
  args.insert(args.end(), {"--fleet", "--nodes", std::to_string(o.nodes), "--node", std::to_string(o.node)});
  if (!o.store.empty()) args.insert(args.end(), {"--store", o.store});
  for (const auto& [device, group] : workers) args.push_back("--gpu=" + std::to_string(device) + "=" + group);
  return helper_exec(o, signatures, args, /*enable=*/false, err);  // the coordinator never touches a GPU
}

int source_exec(const Options& o, const std::vector<std::string>& signatures, std::ostream& err) {
  if (signatures.empty()) {
    err << "error: no signatures (give them as arguments or with --signatures FILE)\n";
    return 1;
  }
  std::vector<std::string> args = {"--source", "--sm", std::to_string(o.sm), "--sms",
                                   std::to_string(o.sm_count)};
  if (!o.variant.empty()) args.insert(args.end(), {"--variant", o.variant});
  if (o.list_variants) args.push_back("--list");
  return helper_exec(o, signatures, args, /*enable=*/false, err);
}

}  // namespace cudal1::cli
