/// @brief The search replay shared by bench_tuner_replay and the search test (tests/optimizer/search_replay_test.cpp):
/// GPU-measured kernel landscapes (bench/replay/*.csv, one a benchmark row: variant id, kernel time in us; their
/// provenance in bench/replay/README.md) replayed through the tuner's search offline, CPU only.
/// Each row's space is planned today exactly as the tuner plans it (sm_90); a variant its log lacks counts as 1.5x
/// the slowest one timed; every timing the search sees is the logged one with 1.5% Gaussian noise.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "cudal1/optimizer/family.h"
#include "cudal1/optimizer/policy.h"
#include "cudal1/optimizer/search.h"

namespace cudal1::bench {

/// One benchmark row with a recorded landscape.
struct Row {
  std::string name;
  optimizer::Problem problem;
  std::string csv;  ///< its landscape: a file under the replay directory
};

/// The rows with logs in bench/replay, in the benchmark table's order (the order a carried policy meets them).
std::vector<Row> known_rows();

/// Kernel times (us) by variant id from a landscape CSV (header "variant,kernel_us"); empty when the file is missing
/// or lacks the header; malformed lines are skipped.
std::map<std::string, double> read_times(const std::string& path);

/// What replaying one row over the seeds gave.
struct Outcome {
  size_t variants = 0;
  int timed = 0;
  double best = 0, mean_ratio = 0, within2 = 0, within5 = 0;  ///< ratios: kept variant's true time over the best
  std::vector<double> ratios;                                   ///< one a seed
  /// Mean over the seeds of the trials until a variant within 95% of the best's speed (true time <= best / 0.95)
  /// had been tried; a seed that never tried one counts trials + 1.
  double mean_trials95 = 0;
  /// The ratio that a fraction `q` in (0, 1] of the seeds stay within.
  double quantile(double q) const;
};

struct Options {
  std::string strategy = "gp";  ///< gp, knobs, knobs-mean, policy (CUDAL1_TUNE_SEARCH) or random
  size_t trials = 24, round = 8;
  int seeds = 400;
  bool carry = false;  ///< one policy a family across the rows, in table order, learning after each row
};

/// One row's landscape as the tuner sees it: its space, features, strata and true kernel times (us).
struct Landscape {
  std::string name;
  std::string family;
  std::vector<optimizer::Variant> space;
  std::vector<std::vector<float>> feats;
  std::vector<std::vector<float>> shared;  ///< shared features (Note [Shared features]), one a variant
  std::vector<int> strata;
  std::vector<double> truth;
  double best = 1e300;
  int timed = 0;
};

/// The landscapes of every known row whose CSV in `dir` has timings and whose problem plans today; `skipped`
/// (may be null) gets a line for each other row.
std::vector<Landscape> load_landscapes(const std::string& dir, std::vector<std::string>* skipped);

/// Replays every row over `o.seeds` seeds: a fresh policy a row, or (o.carry) one a family carried across the
/// rows in their order, learning from each row's trials as the tuner's persistent policy does.
std::vector<Outcome> replay(const std::vector<Landscape>& rows, const Options& o);

/// The learner held out (Note [Contrastive policy]): each row is tuned with `o.strategy` by a policy that first
/// learned, as the persistent policy does, from tuning the *other* rows of its family (in table order, default
/// search, `o.trials` trials each), never from the row itself. `taught_by` (may be null) gets, per row, how many
/// rows taught its policy (0: the family has no other row; the policy starts untrained).
std::vector<Outcome> replay_held_out(const std::vector<Landscape>& rows, const Options& o, std::vector<int>* taught_by);

/// The cross-family policy (Note [Cross-family policy]) taught offline by `rows`' whole landscapes, `epochs` steps
/// (Policy::learn_landscapes).
optimizer::Policy teach_shared(const std::vector<const Landscape*>& rows, int epochs);

/// Passes over each landscape when the cross-family policy is taught offline.
constexpr int kSharedPriorEpochs = 200;

/// Leave one family out: for each family of `rows`, the cross-family policy is taught by the other families' rows
/// only (teach_shared), then each of the family's rows is tuned with `o.strategy` from a fresh family policy with
/// that prior (next_round's `prior`). With `o.carry` the prior also learns from each of the family's rows in table
/// order, as the tuner's learns from every signature (Policy::learn at kSharedPolicyLearningRate); without, every
/// row meets the prior as taught. Outcomes per row, in `rows`' order.
std::vector<Outcome> replay_family_out(const std::vector<Landscape>& rows, const Options& o,
                                      int epochs = kSharedPriorEpochs);

}  // namespace cudal1::bench
