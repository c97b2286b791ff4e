/// @brief The `cudal1` command line: inspect the kernel cache and run reports, show the configuration, pre-warm,
/// print generated kernel sources.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <iostream>

#include "cli_commands.h"
#include "cudal1/core/version.h"

int main(int argc, char** argv) {
  CLI::App app{"cudal1: inspect the per-GPU kernel cache and what cudal1 did in recorded runs; pre-warm the cache.\n"
               "Apps turn cudal1 on with CUDAL1_ENABLE=1; see `cudal1 env` for every variable."};
  app.set_version_flag("--version", std::string("cudal1 ") + cudal1::kVersion);
  app.require_subcommand(1);
  cudal1::cli::Options opts;
  app.add_option("--cache-dir", opts.cache_dir, "cache directory (default: CUDAL1_CACHE_DIR or its default)");

  auto* cache = app.add_subcommand("cache", "the kernel cache");
  cache->require_subcommand(1);
  auto* ls = cache->add_subcommand("ls", "list cached kernels per GPU fingerprint, with their speedups");
  ls->add_flag("--json", opts.json, "print JSON instead of a table");
  auto* clear = cache->add_subcommand("clear", "delete cached records");
  clear->add_option("--fingerprint", opts.fingerprint, "only this fingerprint key (16 hex digits)");
  clear->add_flag("--all", opts.all, "everything, run reports included");
  auto* verify = cache->add_subcommand("verify", "check every record (and, on the GPU it was tuned for, that each "
                                                 "kernel loads); exit 1 if any is bad");
  auto* exp = cache->add_subcommand("export", "write one GPU fingerprint's records to a bundle file (to ship)");
  exp->add_option("--gpu", opts.fingerprint,
                  "fingerprint key (`cudal1 cache ls`), or `current`: this machine's GPU 0 (name, SMs, driver, "
                  "cudal1 version); optional with one fingerprint");
  exp->add_option("-o,--output", opts.bundle, "bundle file to write")->required();
  auto* imp = cache->add_subcommand("import", "merge a bundle file into this cache");
  imp->add_option("bundle", opts.bundle, "bundle file (`cudal1 cache export`)")->required();
  imp->add_flag("--overwrite", opts.overwrite, "replace records this cache already has");
  imp->add_option("--allow", opts.allow,
                  "fingerprint fields that may differ where its records serve (driver,cuda_runtime,nvrtc,torch,"
                  "cudal1): each kernel is then verified on that machine before it serves")
      ->delimiter(',');
  auto* repair = cache->add_subcommand("repair", "drop the records `verify` finds bad; an unreadable database is "
                                                 "kept aside and replaced by a fresh one");

  auto* report = app.add_subcommand("report", "hot signatures of a recorded run: what was replaced, speedups");
  report->add_option("--run", opts.run, "run id (default: the newest)");
  report->add_flag("--runs", opts.list_runs, "list recorded runs instead");
  report->add_flag("--all", opts.all, "show every signature, not only hot ones");
  report->add_flag("--json", opts.json, "print the report's JSON");
  report->add_flag("--insights", opts.insights,
                   "from the tuner's stored trials on each GPU: which techniques won, which were necessary, which "
                   "only helped together");

  app.add_subcommand("env", "every CUDAL1_* variable with its default and current value");

  auto* warm = app.add_subcommand("warm", "tune recorded signatures now, on this GPU, and cache the outcomes "
                                          "(pre-warms the cache before deployment)");
  auto* from = warm->add_option("--signatures", opts.signatures_file,
                                "file of signatures: a run report (`cudal1 report --json`), a JSON array, or one "
                                "a line; default: the newest recorded app run in the cache");
  warm->add_option("--run", opts.run, "take the signatures of this recorded run (`cudal1 report --runs`)")
      ->excludes(from);
  warm->add_flag("--all", opts.all, "every signature of the run, not only the hot ones");
  auto* device = warm->add_option("--device", opts.device, "tune on this CUDA device only (default: every visible "
                                                          "GPU, a worker each)")
                     ->check(CLI::NonNegativeNumber);
  warm->add_option("--gpus", opts.gpus, "tune on these CUDA devices (a worker each; GPUs of one model share the "
                                        "list, each signature tuned once a model)")
      ->delimiter(',')
      ->excludes(device);
  warm->add_option("--store", opts.store, "HOST:PORT of a c10d TCPStore that machines of a fleet share (node 0 "
                                          "serves it and the list; the others take the list from it)");
  warm->add_option("--nodes", opts.nodes, "machines taking part (with --store)")->check(CLI::PositiveNumber);
  warm->add_option("--node", opts.node, "this machine's rank, 0 to --nodes - 1 (with --store)")
      ->check(CLI::NonNegativeNumber);
  warm->add_option("--workers", opts.workers, "--dry-run: workers to start (no GPU needed)")
      ->check(CLI::PositiveNumber);
  warm->add_option("--timeout", opts.timeout_s, "seconds for the whole list (default 3600)")
      ->check(CLI::PositiveNumber);
  warm->add_flag("--dry-run", opts.dry_run, "only check that every signature rebuilds to a call");

  auto* source = app.add_subcommand("source", "the CUDA source cudal1 generates for signatures (no GPU needed)");
  source->add_option("signature", opts.signatures, "signature texts, as `cudal1 report` prints them");
  auto* source_file = source->add_option("--signatures", opts.signatures_file,
                                         "file of signatures (as for warm: text, a JSON array or a run report; "
                                         "every signature of a report)");
  source->add_option("--variant", opts.variant, "this variant of the family's space (default: the first)");
  source->add_option("--sm", opts.sm, "plan for this compute capability (default 90)")->check(CLI::PositiveNumber);
  source->add_option("--sms", opts.sm_count, "plan for a device of this many SMs (default 132: an H100 SXM, an H200)")
      ->check(CLI::PositiveNumber);
  source->add_flag("--list", opts.list_variants, "list the variants instead of printing a source");

  CLI11_PARSE(app, argc, argv);
  try {
    if (cache->got_subcommand(ls)) return cudal1::cli::cache_ls(opts, std::cout);
    if (cache->got_subcommand(clear)) return cudal1::cli::cache_clear(opts, std::cout);
    if (cache->got_subcommand(verify)) return cudal1::cli::cache_verify(opts, /*repair=*/false, std::cout);
    if (cache->got_subcommand(repair)) return cudal1::cli::cache_verify(opts, /*repair=*/true, std::cout);
    if (cache->got_subcommand(exp)) return cudal1::cli::cache_export(opts, std::cout);
    if (cache->got_subcommand(imp)) return cudal1::cli::cache_import(opts, std::cout);
    if (app.got_subcommand(report)) return cudal1::cli::report(opts, std::cout);
    if (app.got_subcommand("env")) return cudal1::cli::env(opts, std::cout);
    if (app.got_subcommand(source)) {
      std::vector<std::string> sigs = opts.signatures;
      if (source_file->count() > 0) {
        opts.all = true;
        auto from = cudal1::cli::warm_signatures(opts);
        if (!from.ok()) {
          std::cerr << "cudal1 source: " << from.status().message() << "\n";
          return 1;
        }
        sigs.insert(sigs.end(), from->begin(), from->end());
      }
      return cudal1::cli::source_exec(opts, sigs, std::cerr);
    }
    if (app.got_subcommand(warm)) {
      opts.device_given = device->count() > 0;
      if (!opts.store.empty() && opts.node > 0)  // Note [Fleet warm]: node 0 hands the list out
        return cudal1::cli::warm_exec(opts, {}, std::cerr);
      auto sigs = cudal1::cli::warm_signatures(opts);
      if (!sigs.ok()) {
        std::cerr << "cudal1 warm: " << sigs.status().message() << "\n";
        return 1;
      }
      return cudal1::cli::warm_exec(opts, sigs.value(), std::cerr);
    }
  } catch (const std::exception& e) {
    std::cerr << "cudal1: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
