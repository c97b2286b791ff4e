/// @brief Replays kernel times measured on the GPU through the tuner's search, offline (CPU only), so that a
/// search strategy can be compared on real landscapes without device time (docs/PERF.md, session 10).
///
/// Input: debug logs of `bench_kernels` (CUDAL1_LOG_LEVEL=debug, enough trials that every variant of a row was
/// timed), one line per variant: "<signature>: <variant id> speedup S (p25 P, ATen A us, kernel K us)". The rows
/// it knows are planned here exactly as the tuner plans them (sm_90); a variant the log lacks counts as 1.5x the
/// slowest one timed. For each row and seed the strategy picks `trials` variants in rounds of `round`, each
/// timing is the logged one with 1.5% Gaussian noise, and the variant kept is the fastest as measured; the
/// table gives its true time over the best one's (mean over the seeds), how often it is within 2% and 5%, the
/// ratio 90% of the seeds stay within and the worst seed's.
///
/// Strategies (the tuner's own round selection, next_round in optimizer/search.h, on a fresh Policy for each row
/// and seed):
///   gp      CUDAL1_TUNE_SEARCH=gp, the default: round 1 by Policy::choose with strata, later rounds by the
///           similarity model's lower confidence bound (Note [Similarity model]).
///   knobs   CUDAL1_TUNE_SEARCH=knobs: later rounds by the knob model's lower confidence bound (Note [Knob model]).
///   knobs-mean  CUDAL1_TUNE_SEARCH=knobs-mean: the knob model's predictions alone (before session 14).
///   policy  CUDAL1_TUNE_SEARCH=policy: later rounds by a copy of the policy adapted to the row's measurements.
///   random  uniform picks without repeats.
/// A "+carry" suffix (gp+carry, knobs+carry) keeps one policy a family for each seed, carried across the rows
/// in the benchmark table's order and taught by each row's trials (Policy::learn), as the bench's tuner does; the
/// table's rows without a log here still teach the real tuner's policy first, which the replay cannot.
///
/// Usage: bench_tuner_replay LOG_DIR [strategy[+carry]] [trials] [round] [seeds]
///   e.g. build/bench/bench_tuner_replay bench/replay gp+carry 24 4 400
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
  // In the benchmark table's order (the order a carried policy meets them).
  return {
      {"gelu f16 [4096,11008]",
       t::unary_problem("gelu", at::kHalf, {4096, 11008}, c({4096, 11008}), 90, 0, "none"), "s17_gelu_f16.log",
       "aten::gelu("},
      {"silu bf16 gate half [8192,2x4096]", t::unary_problem("silu", at::kBFloat16, {8192, 4096}, {8192, 1}),
       "s17_silu_gate.log", "aten::silu("},
      {"group_norm bf16 [32,320,64,64] g32", t::group_norm_problem(at::kBFloat16, {32, 320, 64, 64}, 32),
       "run8_g32_stem.log", "bf16[32,320,64,64]"},
      {"group_norm f16 [64,256,28,28] g32", t::group_norm_problem(at::kHalf, {64, 256, 28, 28}, 32),
       "run8_g32_stem.log", "f16[64,256,28,28]"},
      {"max_pool2d f16 [64,64,112,112] k3 s2 p1",
       t::max_pool_problem(at::kHalf, {64, 64, 112, 112}, {}, {3, 3}, {2, 2}, {1, 1}, {1}, false),
       "run8_g32_stem.log", "f16[64,64,112,112]"},
      {"cumsum bf16 [8192,4096] last dim",
       t::scan_problem("cumsum", at::kBFloat16, {8192, 4096}, c({8192, 4096}), -1), "s13_cumsum.log",
       "aten::cumsum("},
      {"sum f32 [16,256,256] dim1 (small)",
       t::reduce_problem("sum.dim_IntList", at::kFloat, {16, 256, 256}, c({16, 256, 256}), t::dims({1})),
       "s17_sum.log", "aten::sum.dim_IntList("},
      {"argmax f32 [128,4096,32] dim1",
       t::reduce_problem("argmax", at::kFloat, {128, 4096, 32}, c({128, 4096, 32}), c10::IValue(int64_t{1})),
       "s17_argmax.log", "aten::argmax("},
      {"var f32 [4096,4096] dim0",
       t::reduce_problem("var.correction", at::kFloat, {4096, 4096}, c({4096, 4096}), t::dims({0})),
       "s17_var.log", "aten::var."},
      {"vector_norm f32 [4096,4096] dim 0 ord 1",
       t::vector_norm_problem(at::kFloat, {4096, 4096}, c({4096, 4096}), c10::IValue(1.0), t::dims({0})),
       "run5_columns.log", "aten::linalg_vector_norm("},
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
  std::vector<double> ratios;                                   ///< one a seed
  /// The ratio that a fraction `q` in (0, 1] of the seeds stay within.
  double quantile(double q) const {
    std::vector<double> r = ratios;
    std::sort(r.begin(), r.end());
    const auto n = static_cast<size_t>(q * static_cast<double>(r.size()) + 0.5);
    return r.empty() ? 0 : r[std::min(r.size(), std::max<size_t>(n, 1)) - 1];
  }
};

struct Options {
  std::string strategy = "gp";
  size_t trials = 24, round = 8;
  int seeds = 400;
  bool carry = false;  ///< one policy a family across the rows, in table order, learning after each row
};

/// One row's landscape as the tuner sees it: its space, features, strata and true kernel times (us).
struct Landscape {
  std::string family;
  std::vector<Variant> space;
  std::vector<std::vector<float>> feats;
  std::vector<int> strata;
  std::vector<double> truth;
  double best = 1e300;
  int timed = 0;
};

Landscape landscape(const std::string& family, const Plan& plan, const std::map<std::string, double>& times) {
  Landscape l;
  l.family = family;
  l.space = plan.space();
  double slowest = 0;
  for (const auto& [id, us] : times) slowest = std::max(slowest, us), l.best = std::min(l.best, us);
  for (const auto& v : l.space) {
    l.feats.push_back(plan.features(v));
    l.strata.push_back(plan.stratum(v));
    const auto it = times.find(v.id());
    l.timed += it != times.end();
    l.truth.push_back(it != times.end() ? it->second : 1.5 * slowest);
  }
  return l;
}

/// Tunes one row of seed `seed` with `policy` (round 1, and the fallback of later rounds) as Tuner::tune_unlocked
/// does; returns the kept variant's true time over the best's and leaves the trials in `done`.
double tune_row(const Landscape& l, Policy& policy, const Options& o, int seed, Trials& done) {
  std::mt19937_64 rng(static_cast<uint64_t>(seed) * 7919);
  std::normal_distribution<double> noise(0.0, 0.015);
  const auto search = o.strategy == "policy"       ? cudal1::TuneSearch::kPolicy
                     : o.strategy == "knobs-mean" ? cudal1::TuneSearch::kKnobsMean
                     : o.strategy == "knobs"      ? cudal1::TuneSearch::kKnobs
                                                  : cudal1::TuneSearch::kGp;
  size_t kept = 0;
  double kept_us = 1e300;
  while (done.size() < o.trials) {
    const size_t k = std::min(o.round, o.trials - done.size());
    std::vector<size_t> picks;
    if (o.strategy == "random") {
      for (size_t i = 0; i < l.space.size(); ++i)
        if (std::find(done.index.begin(), done.index.end(), i) == done.index.end()) picks.push_back(i);
      std::shuffle(picks.begin(), picks.end(), rng);
      picks.resize(std::min(k, picks.size()));
    } else {  // as Tuner::tune_unlocked
      const uint64_t round_seed = static_cast<uint64_t>(seed) ^ (0x9E3779B97F4A7C15ULL * done.size());
      picks = cudal1::optimizer::next_round(policy, search, l.space, l.feats, l.strata, done, k, round_seed);
    }
    if (picks.empty()) break;
    for (size_t i : picks) {
      const double measured = l.truth[i] * (1.0 + noise(rng));
      done.add(i, l.feats[i], 100.0 / measured);  // "ATen" at 100 us: only ratios matter
      if (measured < kept_us) kept_us = measured, kept = i;
    }
  }
  return l.truth[kept] / l.best;
}

/// Replays every row over `o.seeds` seeds: a fresh policy a row, or (o.carry) one a family carried across the
/// rows in their order, learning from each row's trials as the tuner's persistent policy does.
std::vector<Outcome> replay(const std::vector<Landscape>& rows, const Options& o) {
  std::vector<Outcome> out(rows.size());
  for (int seed = 1; seed <= o.seeds; ++seed) {
    std::map<std::string, Policy> carried;
    for (size_t r = 0; r < rows.size(); ++r) {
      const Landscape& l = rows[r];
      Policy fresh(l.feats.front().size(), static_cast<uint64_t>(seed));
      Policy* policy = &fresh;
      if (o.carry) policy = &carried.try_emplace(l.family, l.feats.front().size(), seed).first->second;
      Trials done;
      const double ratio = tune_row(l, *policy, o, seed, done);
      if (o.carry) policy->learn(done.features, done.speedups);
      out[r].mean_ratio += ratio / o.seeds;
      out[r].ratios.push_back(ratio);
      out[r].within2 += ratio <= 1.02 ? 100.0 / o.seeds : 0.0;
      out[r].within5 += ratio <= 1.05 ? 100.0 / o.seeds : 0.0;
    }
  }
  for (size_t r = 0; r < rows.size(); ++r) {
    out[r].variants = rows[r].space.size();
    out[r].timed = rows[r].timed;
    out[r].best = rows[r].best;
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s LOG_DIR [gp|knobs|knobs-mean|policy|random][+carry] [trials] [round] [seeds]\n",
                 argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  Options o;
  if (argc > 2) o.strategy = argv[2];
  if (argc > 3) o.trials = static_cast<size_t>(std::max(1, std::atoi(argv[3])));
  if (argc > 4) o.round = static_cast<size_t>(std::max(1, std::atoi(argv[4])));
  if (argc > 5) o.seeds = std::max(1, std::atoi(argv[5]));
  const std::string carry = "+carry";
  const size_t stem = o.strategy.size() - std::min(o.strategy.size(), carry.size());
  if (stem > 0 && o.strategy.compare(stem, carry.size(), carry) == 0) o.carry = true, o.strategy.resize(stem);
  if (o.strategy != "gp" && o.strategy != "knobs" && o.strategy != "knobs-mean" && o.strategy != "policy" &&
      o.strategy != "random") {
    std::fprintf(stderr, "unknown strategy '%s' (gp, knobs, knobs-mean, policy or random)\n", o.strategy.c_str());
    return 2;
  }
  std::printf("strategy %s%s, %zu trials in rounds of %zu, %d seeds, 1.5%% timing noise\n", o.strategy.c_str(),
              o.carry ? " (one policy a family, carried across the rows)" : "", o.trials, o.round, o.seeds);
  std::printf("%-42s %8s %6s %9s %10s %9s %9s %6s %6s\n", "row", "variants", "timed", "best us", "kept/best",
              "within2%", "within5%", "p90", "worst");
  std::vector<Landscape> rows;
  std::vector<std::string> names;
  for (const Row& row : known_rows()) {
    const auto times = read_times(dir + "/" + row.log, row.match);
    const auto* family = cudal1::optimizer::family_for(row.problem.op, row.problem.overload);
    auto plan = family ? family->plan(row.problem) : cudal1::Status(cudal1::Code::kUnsupported, "no family");
    if (times.empty() || !plan.ok()) {
      std::printf("%-42s (no timings in %s, or not planned)\n", row.name.c_str(), row.log.c_str());
      continue;
    }
    rows.push_back(landscape(family->name(), *plan.value(), times));
    names.push_back(row.name);
  }
  const std::vector<Outcome> out = replay(rows, o);
  for (size_t r = 0; r < rows.size(); ++r)
    std::printf("%-42s %8zu %6d %9.2f %10.4f %8.0f%% %8.0f%% %6.3f %6.3f\n", names[r].c_str(), out[r].variants,
                out[r].timed, out[r].best, out[r].mean_ratio, out[r].within2, out[r].within5, out[r].quantile(0.9),
                out[r].quantile(1.0));
  double mean = 0;
  for (const Outcome& x : out) mean += x.mean_ratio / static_cast<double>(out.size());
  std::printf("mean kept/best over the rows: %.4f\n", mean);
  return 0;
}
