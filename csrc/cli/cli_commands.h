/// @brief The CLI's commands, one function each; they print to `out` and return the exit code.
#pragma once

#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "cudal1/core/status.h"

namespace cudal1::cli {

struct Options {
  std::string cache_dir;    ///< empty: from the configuration
  bool json = false;
  bool all = false;
  bool list_runs = false;
  std::string fingerprint;  ///< cache clear / export: a fingerprint key
  std::string bundle;       ///< cache export: the file written; cache import: the file read
  bool overwrite = false;   ///< cache import: replace records this cache already has
  std::vector<std::string> allow;  ///< cache import: fingerprint fields that may differ (Note [Cache transfer])
  std::string run;
  std::string signatures_file;  ///< warm: where the signatures come from (else the run `run`, or the newest)
  int device = 0;               ///< warm: CUDA device index
  bool device_given = false;    ///< warm: --device was given (one GPU), else every visible GPU (Note [Fleet warm])
  std::vector<int> gpus;        ///< warm: these GPUs (empty: every visible one)
  std::string store;            ///< warm: HOST:PORT of the c10d TCPStore shared by the machines of a fleet
  int nodes = 1, node = 0;      ///< warm: machines taking part, this one's rank
  int workers = 1;              ///< warm --dry-run: workers to start (a dry run needs no GPU)
  double timeout_s = 3600;      ///< warm: for the whole list
  bool dry_run = false;         ///< warm: only check that each signature rebuilds to a call
  std::vector<std::string> signatures;  ///< source: signature texts given as arguments
  std::string variant;                  ///< source: this variant (empty: the first of the space)
  int sm = 90;                          ///< source: plan for this compute capability
  int sm_count = 132;                   ///< source: plan for a device of this many SMs (an H100 SXM, an H200)
  bool list_variants = false;           ///< source: list the variants instead of printing a source
  bool insights = false;                ///< report: techniques that won, were necessary, helped together
};

/// The cache directory the commands use: `o.cache_dir`, else the configured one (CUDAL1_CACHE_DIR or its default).
std::string cache_dir(const Options& o);

int cache_ls(const Options& o, std::ostream& out);
int cache_clear(const Options& o, std::ostream& out);
/// `cudal1 cache verify` (`repair` false: lists every bad record, exit 1 if any) and `cudal1 cache repair` (drops
/// them; an unreadable database is moved aside and replaced). Note [Cache healing].
int cache_verify(const Options& o, bool repair, std::ostream& out);
/// `cudal1 cache export` / `import` (Note [Cache bundles]): one fingerprint's records to a bundle file (the key
/// may be left out when the cache holds one fingerprint), and a bundle merged into the cache.
int cache_export(const Options& o, std::ostream& out);
int cache_import(const Options& o, std::ostream& out);
int report(const Options& o, std::ostream& out);

/// One tuned signature's stored trials (Note [Technique insights] in insights.cpp): variant id and speedup over
/// ATen (<= 0: failed), in trial order.
struct TunedSignature {
  std::string signature, family;
  std::vector<std::pair<std::string, double>> trials;
};
/// `cudal1 report --insights`: per GPU fingerprint of the cache, print_insights of its stored trials.
int report_insights(const Options& o, std::ostream& out);
/// Per family: which techniques won, which were necessary (gatekeepers), which only helped together.
void print_insights(const std::vector<TunedSignature>& sigs, std::ostream& out);
int env(const Options& o, std::ostream& out);

/// The signatures `cudal1 warm` tunes: from `o.signatures_file` (a run report as `cudal1 report --json` prints
/// it, a JSON array of signature strings, or text with one signature a line, `#` comments), else from the
/// recorded run `o.run` (default: the newest) in the cache; hot ones only unless `o.all`. Errors name the file
/// or the run and what was wrong with it.
Result<std::vector<std::string>> warm_signatures(const Options& o);

/// `cudal1 warm`: hands the signatures to the `cudal1-warm` program beside this one (it links LibTorch and
/// libcudal1.so) on its standard input, with cudal1 on in tune mode and this cache directory. Returns only
/// when that cannot be started (with the exit code to use); otherwise the process becomes `cudal1-warm`.
int warm_exec(const Options& o, const std::vector<std::string>& signatures, std::ostream& err);

/// `cudal1 source`: hands the signatures to `cudal1-warm --source` (cudal1 off: nothing is tuned or cached),
/// which prints each one's family, variants and generated CUDA source. Returns only when that cannot be started,
/// or when `signatures` is empty (an error).
int source_exec(const Options& o, const std::vector<std::string>& signatures, std::ostream& err);

}  // namespace cudal1::cli
