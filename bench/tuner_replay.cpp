/// @brief Replays kernel times measured on the GPU through the tuner's search, offline (CPU only), so that a
/// search strategy can be compared on real landscapes without device time (docs/PERF.md, "Tuner replay").
///
/// Input: one CSV a benchmark row (bench/replay/*.csv, "variant,kernel_us"), GPU-measured kernel times of every
/// variant (bench/replay/README.md: where they come from and how to record more). The rows it knows are planned
/// here exactly as the tuner plans them (sm_90); a variant the CSV lacks counts as 1.5x the slowest one timed. For each row and seed the strategy picks `trials` variants in rounds of `round`, each
/// timing is the logged one with 1.5% Gaussian noise, and the variant kept is the fastest as measured; the
/// table gives its true time over the best one's (mean over the seeds), how often it is within 2% and 5%, the
/// ratio 90% of the seeds stay within, the worst seed's, and the mean trials until a variant within 95% of the
/// best's speed was tried (to95%; trials + 1 when none was). The replay itself is bench/search_replay.h.
///
/// Strategies (the tuner's own round selection, next_round in optimizer/search.h, on a fresh Policy for each row
/// and seed):
///   gp      CUDAL1_TUNE_SEARCH=gp, the default: round 1 by Policy::choose with strata, later rounds by the
///           similarity model's lower confidence bound (Note [Similarity model]); without the cross-family prior
///           the tuner adds to round 1 by default (CUDAL1_TUNE_PRIOR=off), which "+shared" replays.
///   knobs   CUDAL1_TUNE_SEARCH=knobs: later rounds by the knob model's lower confidence bound (Note [Knob model]).
///   knobs-mean  CUDAL1_TUNE_SEARCH=knobs-mean: the knob model's predictions alone (the earlier default).
///   policy  CUDAL1_TUNE_SEARCH=policy: later rounds by a copy of the policy adapted to the row's measurements.
///   random  uniform picks without repeats.
/// A "+carry" suffix (gp+carry, knobs+carry) keeps one policy a family for each seed, carried across the rows
/// in the benchmark table's order and taught by each row's trials (Policy::learn), as the bench's tuner does; the
/// table's rows without a CSV here still teach the real tuner's policy first, which the replay cannot.
/// A "+heldout" suffix tunes each row with a policy taught only by the family's other rows (replay_held_out).
///
/// A "+shared" suffix leaves one family out at a time (replay_family_out): the cross-family policy (Note
/// [Cross-family policy]) is taught by the other families' recorded landscapes, and each row of the family left out
/// is tuned from a fresh family policy with that prior; "+shared+carry" lets the prior learn from each of the
/// family's rows in turn, as the tuner's does.
/// `bench_tuner_replay DIR --write-prior` prints the cross-family policy taught by every row (the shipped prior,
/// optimizer/framework/shared_prior_sm90.inc).
///
/// Usage: bench_tuner_replay DIR [strategy[+carry|+heldout|+shared|+shared+carry]] [trials] [round] [seeds]
///   e.g. build/bench/bench_tuner_replay bench/replay gp+carry 24 4 400
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "search_replay.h"

using namespace cudal1::bench;

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr,
                 "usage: %s DIR [gp|knobs|knobs-mean|policy|random][+carry|+heldout|+shared] [trials] [round] [seeds]\n"
                 "       %s DIR --write-prior\n",
                 argv[0], argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  if (argc > 2 && std::string(argv[2]) == "--write-prior") {  // the shipped prior (shipped_shared_prior)
    const std::vector<Landscape> rows = load_landscapes(dir, nullptr);
    std::vector<const Landscape*> all;
    for (const Landscape& l : rows) all.push_back(&l);
    std::printf("R\"json(%s)json\"\n", teach_shared(all, kSharedPriorEpochs).to_json().c_str());
    return 0;
  }
  Options o;
  if (argc > 2) o.strategy = argv[2];
  if (argc > 3) o.trials = static_cast<size_t>(std::max(1, std::atoi(argv[3])));
  if (argc > 4) o.round = static_cast<size_t>(std::max(1, std::atoi(argv[4])));
  if (argc > 5) o.seeds = std::max(1, std::atoi(argv[5]));
  bool held_out = false;
  bool family_out = false;
  for (const std::string suffix : {"+carry", "+heldout", "+shared"}) {
    const size_t stem = o.strategy.size() - std::min(o.strategy.size(), suffix.size());
    if (stem == 0 || o.strategy.compare(stem, suffix.size(), suffix) != 0) continue;
    (suffix == "+carry" ? o.carry : suffix == "+heldout" ? held_out : family_out) = true;
    o.strategy.resize(stem);
  }
  if (o.strategy != "gp" && o.strategy != "knobs" && o.strategy != "knobs-mean" && o.strategy != "policy" &&
      o.strategy != "random") {
    std::fprintf(stderr, "unknown strategy '%s' (gp, knobs, knobs-mean, policy or random)\n", o.strategy.c_str());
    return 2;
  }
  std::printf("strategy %s%s, %zu trials in rounds of %zu, %d seeds, 1.5%% timing noise\n", o.strategy.c_str(),
              family_out && o.carry ? " (a cross-family prior taught by the other families' rows, then learning)"
              : family_out          ? " (a cross-family prior taught by the other families' rows only)"
              : o.carry             ? " (one policy a family, carried across the rows)"
              : held_out            ? " (each row's policy taught by its family's other rows only)"
                                    : "",
              o.trials, o.round, o.seeds);
  std::printf("%-42s %8s %6s %9s %10s %9s %9s %6s %6s %8s\n", "row", "variants", "timed", "best us", "kept/best",
              "within2%", "within5%", "p90", "worst", "to95%");
  std::vector<std::string> skipped;
  const std::vector<Landscape> rows = load_landscapes(dir, &skipped);
  for (const auto& s : skipped) std::printf("%s\n", s.c_str());
  const std::vector<Outcome> out = held_out     ? replay_held_out(rows, o, nullptr)
                                   : family_out ? replay_family_out(rows, o)
                                                : replay(rows, o);
  for (size_t r = 0; r < rows.size(); ++r)
    std::printf("%-42s %8zu %6d %9.2f %10.4f %8.0f%% %8.0f%% %6.3f %6.3f %8.1f\n", rows[r].name.c_str(),
                out[r].variants, out[r].timed, out[r].best, out[r].mean_ratio, out[r].within2, out[r].within5,
                out[r].quantile(0.9), out[r].quantile(1.0), out[r].mean_trials95);
  double mean = 0, t95 = 0;
  for (const Outcome& x : out) {
    mean += x.mean_ratio / static_cast<double>(out.size());
    t95 += x.mean_trials95 / static_cast<double>(out.size());
  }
  std::printf("mean kept/best over the rows: %.4f; mean trials to 95%% of the best: %.1f\n", mean, t95);
  return 0;
}
