/// @brief Replays kernel times measured on the GPU through the tuner's search, offline (CPU only), so that a
/// search strategy can be compared on real landscapes without device time (docs/PERF.md, session 10).
///
/// Input: debug logs of `bench_kernels` (CUDAL1_LOG_LEVEL=debug, enough trials that every variant of a row was
/// timed), one line per variant: "<signature>: <variant id> speedup S (p25 P, ATen A us, kernel K us)". The rows
/// it knows are planned here exactly as the tuner plans them (sm_90); a variant the log lacks counts as 1.5x the
/// slowest one timed. For each row and seed the strategy picks `trials` variants in rounds of `round`, each
/// timing is the logged one with 1.5% Gaussian noise, and the variant kept is the fastest as measured; the
/// table gives its true time over the best one's (mean over the seeds) and how often it is within 2% and 5%.
///
/// Strategies (the tuner's own round selection, next_round in optimizer/search.h, on a fresh Policy for each seed;
/// the policy is not carried between rows, the bench's tuner carries one per family):
///   knobs   CUDAL1_TUNE_SEARCH=knobs, the default: round 1 by Policy::choose with strata, later rounds by the
///           knob model (Note [Knob model]).
///   policy  CUDAL1_TUNE_SEARCH=policy: later rounds by a copy of the policy adapted to the row's measurements.
///   random  uniform picks without repeats.
///
/// Usage: bench_tuner_replay LOG_DIR [strategy] [trials] [round] [seeds]
///   e.g. build/bench/bench_tuner_replay bench/replay knobs 24 8 400
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <random>
#include <regex>
#include <string>
#include <vector>

#include "cudal1/optimizer/family.h"
#include "cudal1/optimizer/policy.h"
#include "cudal1/optimizer/search.h"
#include "optimizer/problems.h"

namespace {

using cudal1::optimizer::Plan;
using cudal1::optimizer::Policy;
using cudal1::optimizer::Problem;
using cudal1::optimizer::Trials;
using cudal1::optimizer::Variant;
namespace t = cudal1::testing;

struct Row {
  std::string name;
  Problem problem;
  std::string log;    ///< file under LOG_DIR
  std::string match;  ///< substring of the log lines of this row's signature
};

std::vector<Row> known_rows() {
  const auto c = [](std::vector<int64_t> s) { return t::contiguous(std::move(s)); };
  return {
      {"argmax f32 [128,4096,32] dim1",
       t::reduce_problem("argmax", at::kFloat, {128, 4096, 32}, c({128, 4096, 32}), c10::IValue(int64_t{1})),
       "run5_columns.log", "aten::argmax("},
      {"var f32 [4096,4096] dim0",
       t::reduce_problem("var.correction", at::kFloat, {4096, 4096}, c({4096, 4096}), t::dims({0})),
       "run5_columns.log", "aten::var."},
      {"vector_norm f32 [4096,4096] dim 0 ord 1",
       t::vector_norm_problem(at::kFloat, {4096, 4096}, c({4096, 4096}), c10::IValue(1.0), t::dims({0})),
       "run5_columns.log", "aten::linalg_vector_norm("},
      {"group_norm bf16 [32,320,64,64] g32", t::group_norm_problem(at::kBFloat16, {32, 320, 64, 64}, 32),
       "run8_g32_stem.log", "bf16[32,320,64,64]"},
      {"group_norm f16 [64,256,28,28] g32", t::group_norm_problem(at::kHalf, {64, 256, 28, 28}, 32),
       "run8_g32_stem.log", "f16[64,256,28,28]"},
      {"max_pool2d f16 [64,64,112,112] k3 s2 p1",
       t::max_pool_problem(at::kHalf, {64, 64, 112, 112}, {}, {3, 3}, {2, 2}, {1, 1}, {1}, false),
       "run8_g32_stem.log", "f16[64,64,112,112]"},
      {"sum f32 [16,256,256] dim1 (small)",
       t::reduce_problem("sum.dim_IntList", at::kFloat, {16, 256, 256}, c({16, 256, 256}), t::dims({1})),
       "s13_sum_small.log", "aten::sum.dim_IntList("},
      {"silu bf16 gate half [8192,2x4096]", t::unary_problem("silu", at::kBFloat16, {8192, 4096}, {8192, 1}),
       "s14_silu_gate.log", "aten::silu("},
      {"cumsum bf16 [8192,4096] last dim",
       t::scan_problem("cumsum", at::kBFloat16, {8192, 4096}, c({8192, 4096}), -1), "s13_cumsum.log",
       "aten::cumsum("},
  };
}

/// Kernel times (us) by variant id from the log lines of one row.
std::map<std::string, double> read_times(const std::string& path, const std::string& match) {
  static const std::regex re(R"(: (\S+) speedup \S+ \(p25 \S+, ATen \S+ us, kernel ([0-9.]+) us\))");
  std::map<std::string, double> out;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    if (line.find(match) != std::string::npos && std::regex_search(line, m, re)) out[m[1]] = std::stod(m[2]);
  }
  return out;
}

struct Outcome {
  size_t variants = 0;
  int timed = 0;
  double best = 0, mean_ratio = 0, within2 = 0, within5 = 0;  ///< ratios: kept variant's true time over the best
};

struct Options {
  std::string strategy = "knobs";
  size_t trials = 24, round = 8;
  int seeds = 400;
};

/// Replays one row's logged `times` through `o.strategy` over `o.seeds` seeds.
Outcome replay_row(const Plan& plan, const std::map<std::string, double>& times, const Options& o) {
  const std::vector<Variant> space = plan.space();
  std::vector<std::vector<float>> feats;
  std::vector<int> strata;
  std::vector<double> truth;
  double slowest = 0, best = 1e300;
  for (const auto& [id, us] : times) slowest = std::max(slowest, us), best = std::min(best, us);
  int timed = 0;
  for (const auto& v : space) {
    feats.push_back(plan.features(v));
    strata.push_back(plan.stratum(v));
    const auto it = times.find(v.id());
    timed += it != times.end();
    truth.push_back(it != times.end() ? it->second : 1.5 * slowest);
  }
  double sum = 0;
  int within2 = 0, within5 = 0;
  for (int seed = 1; seed <= o.seeds; ++seed) {
    std::mt19937_64 rng(static_cast<uint64_t>(seed) * 7919);
    std::normal_distribution<double> noise(0.0, 0.015);
    Policy policy(feats.front().size(), static_cast<uint64_t>(seed));
    const auto search = o.strategy == "policy" ? cudal1::TuneSearch::kPolicy : cudal1::TuneSearch::kKnobs;
    Trials done;
    size_t kept = 0;
    double kept_us = 1e300;
    while (done.size() < o.trials) {
      const size_t k = std::min(o.round, o.trials - done.size());
      std::vector<size_t> picks;
      if (o.strategy == "random") {
        for (size_t i = 0; i < space.size(); ++i)
          if (std::find(done.index.begin(), done.index.end(), i) == done.index.end()) picks.push_back(i);
        std::shuffle(picks.begin(), picks.end(), rng);
        picks.resize(std::min(k, picks.size()));
      } else {  // as Tuner::tune_unlocked
        const uint64_t round_seed = static_cast<uint64_t>(seed) ^ (0x9E3779B97F4A7C15ULL * done.size());
        picks = cudal1::optimizer::next_round(policy, search, space, feats, strata, done, k, round_seed);
      }
      if (picks.empty()) break;
      for (size_t i : picks) {
        const double measured = truth[i] * (1.0 + noise(rng));
        done.add(i, feats[i], 100.0 / measured);  // "ATen" at 100 us: only ratios matter
        if (measured < kept_us) kept_us = measured, kept = i;
      }
    }
    const double ratio = truth[kept] / best;
    sum += ratio;
    within2 += ratio <= 1.02;
    within5 += ratio <= 1.05;
  }
  Outcome out;
  out.variants = space.size();
  out.timed = timed;
  out.best = best;
  out.mean_ratio = sum / o.seeds;
  out.within2 = 100.0 * within2 / o.seeds;
  out.within5 = 100.0 * within5 / o.seeds;
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s LOG_DIR [knobs|policy|random] [trials] [round] [seeds]\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  Options o;
  if (argc > 2) o.strategy = argv[2];
  if (argc > 3) o.trials = static_cast<size_t>(std::max(1, std::atoi(argv[3])));
  if (argc > 4) o.round = static_cast<size_t>(std::max(1, std::atoi(argv[4])));
  if (argc > 5) o.seeds = std::max(1, std::atoi(argv[5]));
  if (o.strategy != "knobs" && o.strategy != "policy" && o.strategy != "random") {
    std::fprintf(stderr, "unknown strategy '%s' (knobs, policy or random)\n", o.strategy.c_str());
    return 2;
  }
  std::printf("strategy %s, %zu trials in rounds of %zu, %d seeds, 1.5%% timing noise\n", o.strategy.c_str(),
              o.trials, o.round, o.seeds);
  std::printf("%-42s %8s %6s %9s %10s %9s %9s\n", "row", "variants", "timed", "best us", "kept/best", "within2%",
              "within5%");
  for (const Row& row : known_rows()) {
    const auto times = read_times(dir + "/" + row.log, row.match);
    const auto* family = cudal1::optimizer::family_for(row.problem.op, row.problem.overload);
    auto plan = family ? family->plan(row.problem) : cudal1::Status(cudal1::Code::kUnsupported, "no family");
    if (times.empty() || !plan.ok()) {
      std::printf("%-42s (no timings in %s, or not planned)\n", row.name.c_str(), row.log.c_str());
      continue;
    }
    const Outcome r = replay_row(*plan.value(), times, o);
    std::printf("%-42s %8zu %6d %9.2f %10.4f %8.0f%% %8.0f%%\n", row.name.c_str(), r.variants, r.timed, r.best,
                r.mean_ratio, r.within2, r.within5);
  }
  return 0;
}
