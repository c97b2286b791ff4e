/// @brief `cudal1-warm`: tunes the signatures on its standard input (one a line) with cudal1::warm and prints
/// what happened to each, or with --source prints their generated CUDA sources (cudal1::kernel_source).
/// `cudal1 warm` and `cudal1 source` start it; it links LibTorch and libcudal1.so, which the `cudal1` program
/// itself does not need.
#include <CLI/CLI.hpp>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "cudal1/cudal1.h"
#include "warm_fleet.h"

namespace {

/// `cudal1 source`: each signature's family, variants and generated source (cudal1::kernel_source); 1 when
/// any signature has none.
int print_sources(const std::vector<std::string>& sigs, const std::string& variant, int sm, int sm_count,
                  bool list) {
  int errors = 0;
  for (const auto& sig : sigs) {
    const cudal1::KernelSourceResult r = cudal1::kernel_source(sig, variant, sm, sm_count);
    std::printf("// signature: %s\n", sig.c_str());
    if (!r.variants.empty())
      std::printf("// family: %s, %zu variants for sm_%d (%d SMs)\n", r.family.c_str(), r.variants.size(), sm,
                  sm_count);
    if (!r.error.empty()) {
      std::printf("// error: %s\n", r.error.c_str());
      ++errors;
    } else if (list) {
      for (const auto& v : r.variants) std::printf("%s\n", v.c_str());
    } else {
      std::printf("// variant: %s (entry point %s)\n%s\n", r.variant.c_str(), r.kernel_name.c_str(), r.code.c_str());
    }
    std::printf("\n");
  }
  return errors > 0 ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"cudal1-warm: tunes the signatures on standard input (one a line) on this GPU and caches the "
               "outcomes. Normally started by `cudal1 warm`, which switches cudal1 on (CUDAL1_ENABLE=1, "
               "CUDAL1_MODE=tune) and chooses the signatures."};
  cudal1::WarmOptions o;
  app.add_option("--device", o.device, "CUDA device index")->check(CLI::NonNegativeNumber);
  app.add_option("--timeout", o.timeout_s, "seconds for the whole list")->check(CLI::PositiveNumber);
  app.add_flag("--dry-run", o.dry_run, "only check that every signature rebuilds to a call");
  bool source = false, list = false;
  std::string variant;
  int sm = 90, sm_count = 132;
  app.add_flag("--source", source, "print each signature's generated CUDA source instead (`cudal1 source`)");
  app.add_option("--variant", variant, "--source: this variant (default: the first of the space)");
  app.add_option("--sm", sm, "--source: plan for this compute capability (default 90)")->check(CLI::PositiveNumber);
  app.add_option("--sms", sm_count, "--source: plan for a device of this many SMs (default 132)")
      ->check(CLI::PositiveNumber);
  app.add_flag("--list", list, "--source: list the variants instead of printing a source");
  // Note [Fleet warm]: the coordinator (--fleet, one a machine) and its workers (--worker, one a GPU).
  bool fleet = false, worker = false;
  std::vector<std::string> gpus;
  cudal1::cli::FleetOptions f;
  std::string group;
  app.add_flag("--fleet", fleet, "coordinate workers, one a GPU given with --gpu (Note [Fleet warm])");
  app.add_option("--gpu", gpus, "--fleet: a worker's GPU as DEVICE=GROUP (GPUs of one model share a group); "
                                "DEVICE -1: a dry-run worker");
  app.add_option("--store", f.store, "--fleet, --worker: the c10d TCPStore, HOST:PORT (node 0 serves it)");
  app.add_option("--nodes", f.nodes, "--fleet: machines taking part")->check(CLI::PositiveNumber);
  app.add_option("--node", f.node, "--fleet: this machine's rank, 0 serves the store")->check(CLI::NonNegativeNumber);
  app.add_flag("--worker", worker, "a worker of --fleet (started by the coordinator)");
  app.add_option("--group", group, "--worker: its group");
  CLI11_PARSE(app, argc, argv);
  f.timeout_s = o.timeout_s;
  f.dry_run = o.dry_run;
  if (worker) return cudal1::cli::run_worker(f, o.device, group);

  std::vector<std::string> sigs;
  std::set<std::string> seen;
  for (std::string line; std::getline(std::cin, line);)
    if (!line.empty() && line[0] != '#' && seen.insert(line).second) sigs.push_back(line);
  if (sigs.empty() && !(fleet && f.node > 0)) {  // a fleet's other machines take node 0's list
    std::fprintf(stderr, "cudal1 warm: no signatures on standard input\n");
    return 1;
  }
  if (source) return print_sources(sigs, variant, sm, sm_count, list);
  if (fleet) {
    if (f.node >= f.nodes) {
      std::fprintf(stderr, "cudal1 warm: --node %d of --nodes %d\n", f.node, f.nodes);
      return 2;
    }
    for (const std::string& g : gpus) {
      const size_t eq = g.find('=');
      if (eq == std::string::npos) {
        std::fprintf(stderr, "cudal1 warm: --gpu wants DEVICE=GROUP, not %s\n", g.c_str());
        return 2;
      }
      f.gpus.push_back({std::atoi(g.substr(0, eq).c_str()), g.substr(eq + 1)});
    }
    char self[4096];
    const ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0 || f.gpus.empty()) {
      std::fprintf(stderr, "cudal1 warm: %s\n", f.gpus.empty() ? "no workers (--gpu)" : "cannot locate this program");
      return 1;
    }
    f.self.assign(self, static_cast<size_t>(n));
    return cudal1::cli::run_fleet(sigs, f);
  }
  if (!o.dry_run && !cudal1::is_active()) {
    std::printf("cudal1 warm: cudal1 is %s: nothing warmed (%zu signatures; --dry-run checks them without a GPU)\n",
                cudal1::status_line().c_str(), sigs.size());
    return 1;
  }
  std::printf("cudal1 warm: %zu signatures on device %d%s\n", sigs.size(), o.device,
              o.dry_run ? " (dry run: rebuilt on the meta device, nothing tuned)" : "");
  std::printf("%-8s %8s  %-40s %s\n", "outcome", "speedup", "variant", "signature");
  std::fflush(stdout);
  std::map<std::string, int> count;
  o.on_result = [&](const cudal1::WarmResult& r) {  // a line as each signature is done: tuning takes seconds each
    ++count[r.outcome];
    char speedup[32] = "-";
    if (r.speedup > 0) std::snprintf(speedup, sizeof speedup, "%.2fx", r.speedup);
    std::printf("%-8s %8s  %-40s %s\n", r.outcome.c_str(), speedup, r.variant.c_str(), r.signature.c_str());
    if (!r.tuned_signature.empty()) std::printf("%59s tuned as: %s\n", "", r.tuned_signature.c_str());
    if (!r.note.empty() && r.outcome != "kernel") std::printf("%59s note: %s\n", "", r.note.c_str());
    std::fflush(stdout);
  };
  const auto results = cudal1::warm(sigs, o);
  std::printf("%zu signatures (%zu outcomes): %d kernels, %d stay on ATen, %d already cached, %d checked, %d skipped, "
              "%d errors, %d timed out\n",
              sigs.size(), results.size(), count["kernel"], count["aten"], count["cached"], count["checked"],
              count["skipped"], count["error"], count["timeout"]);
  if (!o.dry_run) std::printf("%s\n", cudal1::status_line().c_str());
  return count["error"] + count["timeout"] > 0 ? 1 : 0;
}
