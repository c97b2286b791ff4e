/// @brief Fleet warm (Note [Fleet warm]): the coordinator and the worker of `cudal1 warm` over several GPUs.
///
/// Note [Fleet warm]
/// `cudal1 warm` tunes one signature list for every GPU model of a fleet, each signature once a model. On each
/// machine a coordinator (cudal1-warm --fleet, cudal1 off: it never touches a GPU) starts one worker process a
/// GPU (cudal1-warm --worker, cudal1 on in tune mode). GPUs are grouped by model (name and SM count, the
/// fingerprint's hardware part): the workers of a group, on every machine, claim the list's signatures one at a
/// time from a shared counter, so a signature is tuned by one GPU of each model, and the machine's cache (one
/// directory, shared by its processes: Note [Cache processes]) serves it to the others of that model. Different
/// models tune the whole list each. Everything shared lives in a c10d TCPStore: node 0's coordinator serves it
/// (on 127.0.0.1 and a free port when the run is this machine's only) and publishes the list; the other machines'
/// coordinators fetch it (`--store HOST:PORT --nodes N --node R`). Each finished signature is logged in the store
/// with its outcome, and each cache record a worker made with it; every coordinator prints its groups' log as it
/// grows, with progress and an estimate of the time left (time so far over signatures done), and at the end
/// stores the records of its groups that other machines made, so every machine's cache holds the whole list.
/// Node 0 keeps the store up until every machine has finished (or, once all that joined have, two more minutes),
/// and each coordinator reaps its workers before it leaves. A worker whose cudal1 is off claims nothing.
/// Resuming: a signature whose outcome the cache already holds is reported "cached" in milliseconds (the hook
/// attaches it, Note [Pre-warming]), so running the same command again after an interruption tunes only what is
/// left. A worker that dies leaves its claimed signature unfinished: reported as such, exit status 1.
#include "warm_fleet.h"

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nlohmann/json.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <thread>

#include "cudal1/cudal1.h"

extern char** environ;

namespace cudal1::cli {
namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

std::vector<uint8_t> bytes(const std::string& s) { return std::vector<uint8_t>(s.begin(), s.end()); }
std::string text(const std::vector<uint8_t>& b) { return std::string(b.begin(), b.end()); }

/// Connects to (or, serving, starts) the store at `address` ("HOST:PORT"; port 0 with `serve`: a free one).
std::unique_ptr<c10d::TCPStore> open_store(const std::string& address, bool serve, double timeout_s) {
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos) throw std::invalid_argument("--store wants HOST:PORT, not " + address);
  c10d::TCPStoreOptions opts;
  opts.port = static_cast<std::uint16_t>(std::stoi(address.substr(colon + 1)));
  opts.isServer = serve;
  opts.waitWorkers = false;
  opts.timeout = std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000));
  return std::make_unique<c10d::TCPStore>(address.substr(0, colon), opts);
}

std::string key(const std::string& what, const std::string& group) { return "cudal1/" + what + "/" + group; }
std::string key(const std::string& what, const std::string& group, int64_t k) {
  return key(what, group) + "/" + std::to_string(k);
}

std::string duration(double s) {
  char buf[32];
  if (s >= 3600) std::snprintf(buf, sizeof buf, "%dh%02dm", static_cast<int>(s / 3600), static_cast<int>(s / 60) % 60);
  else if (s >= 60) std::snprintf(buf, sizeof buf, "%dm%02ds", static_cast<int>(s / 60), static_cast<int>(s) % 60);
  else std::snprintf(buf, sizeof buf, "%ds", static_cast<int>(s));
  return buf;
}

/// Starts `o.self --worker ...` for one GPU with cudal1 on (tune mode) unless a dry run. Returns its pid, or -1.
pid_t spawn_worker(const FleetOptions& o, const FleetGpu& g, const std::string& store) {
  std::vector<std::string> args = {o.self,   "--worker", "--device", std::to_string(std::max(g.device, 0)),
                                   "--group",  g.group,    "--store",  store,
                                   "--timeout", std::to_string(o.timeout_s)};
  if (o.dry_run) args.push_back("--dry-run");
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e)
    if (std::string(*e).rfind("CUDAL1_ENABLE=", 0) != 0 && std::string(*e).rfind("CUDAL1_MODE=", 0) != 0)
      env.emplace_back(*e);
  env.push_back(std::string("CUDAL1_ENABLE=") + (o.dry_run ? "0" : "1"));
  env.push_back("CUDAL1_MODE=tune");
  std::vector<char*> argv, envp;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  pid_t pid = -1;
  if (::posix_spawn(&pid, o.self.c_str(), nullptr, nullptr, argv.data(), envp.data()) != 0) return -1;
  return pid;
}

struct Progress {
  int64_t printed = 0;  ///< log entries shown
  std::map<std::string, int> outcomes;
};

/// Prints the log entries of `group` that appeared since the last call; returns how many.
int print_new(c10d::Store& store, const std::string& group, size_t n, Progress& p, Clock::time_point start,
              bool several_groups) {
  int shown = 0;
  while (p.printed < static_cast<int64_t>(n) && store.check({key("log", group, p.printed)})) {
    const json j = json::parse(text(store.get(key("log", group, p.printed))), nullptr, false);
    ++p.printed;
    ++shown;
    const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
    const double left = elapsed / static_cast<double>(p.printed) * static_cast<double>(n - p.printed);
    char head[96];
    std::snprintf(head, sizeof head, "[%lld/%zu %3.0f%% ETA %s]", static_cast<long long>(p.printed), n,
                  100.0 * static_cast<double>(p.printed) / static_cast<double>(n), duration(left).c_str());
    const std::string where = j.is_object() ? j.value("worker", std::string("?")) : "?";
    if (!j.is_object() || !j.contains("results") || j["results"].empty()) {
      ++p.outcomes["error"];
      std::printf("%s %-8s %s (%s)\n", head, "error", "a log entry that does not parse", where.c_str());
      continue;
    }
    for (const json& r : j["results"]) {
      const std::string outcome = r.value("outcome", std::string("error"));
      ++p.outcomes[outcome];
      char speedup[32] = "-";
      if (r.value("speedup", 0.0) > 0) std::snprintf(speedup, sizeof speedup, "%.2fx", r.value("speedup", 0.0));
      std::printf("%s %-8s %8s  %-36s %s  (%s%s)\n", head, outcome.c_str(), speedup,
                  r.value("variant", std::string()).c_str(), j.value("signature", std::string()).c_str(),
                  where.c_str(), several_groups ? (", " + group).c_str() : "");
      const std::string note = r.value("note", std::string());
      if (!note.empty() && outcome != "kernel") std::printf("%*s note: %s\n", 20, "", note.c_str());
    }
  }
  if (shown) std::fflush(stdout);
  return shown;
}

}  // namespace

int run_worker(const FleetOptions& o, int device, const std::string& group) {
  try {
    auto store = open_store(o.store, /*serve=*/false, o.timeout_s + 600);
    store->wait({"cudal1/list"});
    std::vector<std::string> list;
    std::istringstream in(text(store->get("cudal1/list")));
    for (std::string line; std::getline(in, line);) list.push_back(line);
    const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                             std::chrono::duration<double>(o.timeout_s));
    if (!o.dry_run && !is_active()) {  // claiming would only turn the group's signatures into errors
      std::fprintf(stderr, "cudal1 warm worker (device %d): cudal1 is %s; claiming nothing\n", device,
                   status_line().c_str());
      return 1;
    }
    char host[256] = "";
    ::gethostname(host, sizeof host - 1);
    const std::string me = std::string(host) + (o.dry_run ? " dry run " + std::to_string(::getpid())
                                                           : " gpu " + std::to_string(device));
    for (;;) {
      const int64_t i = store->add(key("claim", group), 1) - 1;
      if (i >= static_cast<int64_t>(list.size())) break;
      const std::string& sig = list[static_cast<size_t>(i)];
      WarmOptions w;
      w.device = device;
      w.dry_run = o.dry_run;
      w.timeout_s = std::max(0.0, std::chrono::duration<double>(deadline - Clock::now()).count());
      const std::vector<WarmResult> results = warm({sig}, w);
      json entry = {{"index", i}, {"signature", sig}, {"worker", me}, {"results", json::array()}};
      for (const WarmResult& r : results) {
        entry["results"].push_back({{"outcome", r.outcome}, {"speedup", r.speedup}, {"variant", r.variant},
                                    {"note", r.note}, {"tuned", r.tuned_signature}});
        CacheRecord rec;
        const std::string cached_key = r.tuned_signature.empty() ? r.signature : r.tuned_signature;
        if (!o.dry_run && (r.outcome == "kernel" || r.outcome == "aten" || r.outcome == "cached") &&
            cache_record(device, cached_key, &rec)) {
          const int64_t k = store->add(key("recn", group), 1) - 1;
          store->set(key("recfp", group, k), bytes(rec.fingerprint));
          store->set(key("rec", group, k), bytes(rec.record));
        }
      }
      const int64_t k = store->add(key("logn", group), 1) - 1;
      store->set(key("log", group, k), bytes(entry.dump()));
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cudal1 warm worker (device %d): %s\n", device, e.what());
    return 1;
  }
}

int run_fleet(const std::vector<std::string>& signatures, const FleetOptions& o) {
  try {
    const auto start = Clock::now();
    std::unique_ptr<c10d::TCPStore> store;
    std::string address = o.store;
    if (address.empty()) {
      store = open_store("127.0.0.1:0", /*serve=*/true, o.timeout_s + 600);
      address = "127.0.0.1:" + std::to_string(store->getPort());
    } else {
      store = open_store(address, /*serve=*/o.node == 0, o.timeout_s + 600);
    }
    store->add("cudal1/joined", 1);
    std::vector<std::string> list = signatures;
    if (o.node == 0) {
      std::string joined;
      for (const auto& s : signatures) joined += s + "\n";
      store->set("cudal1/list", bytes(joined));
    } else {
      store->wait({"cudal1/list"});
      list.clear();
      std::istringstream in(text(store->get("cudal1/list")));
      for (std::string line; std::getline(in, line);) list.push_back(line);
    }
    std::vector<std::string> groups;
    for (const FleetGpu& g : o.gpus)
      if (std::find(groups.begin(), groups.end(), g.group) == groups.end()) groups.push_back(g.group);
    std::printf("cudal1 warm: %zu signatures, machine %d of %d, %zu workers here:", list.size(), o.node + 1, o.nodes,
                o.gpus.size());
    for (const FleetGpu& g : o.gpus)
      std::printf(" %s",
                  g.device >= 0 ? ("gpu " + std::to_string(g.device) + " (" + g.group + ")").c_str() : "dry run");
    std::printf("%s\n", o.dry_run ? "; dry run: calls rebuilt on the meta device, nothing tuned" : "");
    std::printf("store %s; each signature is tuned once by one GPU of each model\n", address.c_str());
    std::fflush(stdout);

    std::map<pid_t, FleetGpu> workers;
    int failed_workers = 0;
    for (const FleetGpu& g : o.gpus) {
      const pid_t pid = spawn_worker(o, g, address);
      if (pid < 0) {
        std::printf("error: cannot start a worker for device %d\n", g.device);
        ++failed_workers;
        continue;
      }
      workers[pid] = g;
    }
    std::map<std::string, Progress> progress;
    const auto deadline = start + std::chrono::duration_cast<Clock::duration>(
                                      std::chrono::duration<double>(o.timeout_s + 60));
    auto all_done = [&] {
      for (const auto& g : groups)
        if (progress[g].printed < static_cast<int64_t>(list.size())) return false;
      return true;
    };
    for (;;) {
      for (const auto& g : groups) print_new(*store, g, list.size(), progress[g], start, groups.size() > 1);
      for (auto it = workers.begin(); it != workers.end();) {
        int status = 0;
        if (::waitpid(it->first, &status, WNOHANG) == it->first) {
          if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            std::printf("worker for %s exited abnormally (status %d)\n",
                        it->second.device >= 0 ? ("gpu " + std::to_string(it->second.device)).c_str() : "dry run",
                        status);
            ++failed_workers;
          }
          it = workers.erase(it);
        } else {
          ++it;
        }
      }
      // Done when every group is, or (this machine alone) when its workers are gone; other machines may still be
      // finishing signatures of our groups until the deadline.
      if (all_done() || (workers.empty() && (o.nodes == 1 || Clock::now() > deadline))) break;
      if (Clock::now() > deadline + std::chrono::seconds(60)) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    for (const auto& g : groups) print_new(*store, g, list.size(), progress[g], start, groups.size() > 1);
    // Every signature has its outcome: the workers' next claim ends them. Reap them before the store can go.
    for (int waited = 0; !workers.empty() && waited < 300; ++waited) {
      for (auto it = workers.begin(); it != workers.end();) {
        int status = 0;
        it = ::waitpid(it->first, &status, WNOHANG) == it->first ? workers.erase(it) : std::next(it);
      }
      if (!workers.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    for (const auto& [pid, g] : workers) {  // still running after 30 s: stopped
      ::kill(pid, SIGTERM);
      ::waitpid(pid, nullptr, 0);
      ++failed_workers;
    }

    // Records other machines tuned for our groups (ours are in this machine's cache already).
    int imported = 0, present = 0, rejected = 0;
    if (!o.dry_run)
      for (const auto& g : groups) {
        const int64_t n = store->add(key("recn", g), 0);
        for (int64_t k = 0; k < n; ++k) {
          if (!store->check({key("rec", g, k), key("recfp", g, k)})) continue;
          CacheRecord rec{text(store->get(key("recfp", g, k))), text(store->get(key("rec", g, k)))};
          std::string why;
          if (!store_cache_record(rec, &why)) {
            ++rejected;
            std::printf("a record from another worker was not stored: %s\n", why.c_str());
          } else {
            ++(why == "present" ? present : imported);
          }
        }
      }
    // Node 0 serves the store: it stays until every machine has finished, or, once every machine that joined has,
    // for two more minutes for the ones that have not joined yet (bounded by the deadline either way).
    store->add("cudal1/finished", 1);
    if (o.node == 0) {
      auto idle_since = Clock::now();
      for (;;) {
        const int64_t finished = store->add("cudal1/finished", 0), joined = store->add("cudal1/joined", 0);
        if (finished >= o.nodes || Clock::now() > deadline + std::chrono::seconds(60)) break;
        if (finished < joined) idle_since = Clock::now();
        else if (Clock::now() - idle_since > std::chrono::seconds(120)) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
      }
    }

    int missing = 0;
    std::map<std::string, int> total;
    for (const auto& g : groups) {
      missing += static_cast<int>(list.size()) - static_cast<int>(progress[g].printed);
      for (const auto& [k, v] : progress[g].outcomes) total[k] += v;
    }
    const double took = std::chrono::duration<double>(Clock::now() - start).count();
    std::printf("%zu signatures x %zu GPU models in %s: %d kernels, %d stay on ATen, %d already cached, %d checked, "
                "%d skipped, %d errors, %d timed out, %d never finished; %d records from other machines stored "
                "(%d present already, %d rejected)\n",
                list.size(), groups.size(), duration(took).c_str(), total["kernel"], total["aten"], total["cached"],
                total["checked"], total["skipped"], total["error"], total["timeout"], missing, imported, present,
                rejected);
    return total["error"] + total["timeout"] + missing + rejected + failed_workers > 0 ? 1 : 0;
  } catch (const std::exception& e) {
    std::printf("cudal1 warm: %s\n", e.what());
    return 1;
  }
}

}  // namespace cudal1::cli
