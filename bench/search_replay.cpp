/// @brief The search replay (search_replay.h): landscapes from the logs, and the tuner's rounds over them.
#include "search_replay.h"

#include <algorithm>
#include <fstream>
#include <random>

#include "cudal1/optimizer/shared_features.h"
#include "optimizer/problems.h"

namespace cudal1::bench {

using optimizer::Plan;
using optimizer::Policy;
using optimizer::Trials;
using optimizer::Variant;
namespace t = cudal1::testing;

double Outcome::quantile(double q) const {
  std::vector<double> r = ratios;
  std::sort(r.begin(), r.end());
  const auto n = static_cast<size_t>(q * static_cast<double>(r.size()) + 0.5);
  return r.empty() ? 0 : r[std::min(r.size(), std::max<size_t>(n, 1)) - 1];
}

namespace {

Landscape landscape(const std::string& family, const Plan& plan, const optimizer::ProblemClass& c,
                    const std::map<std::string, double>& times) {
  Landscape l;
  l.family = family;
  l.space = plan.space();
  const optimizer::SpaceRange range = optimizer::space_range(l.space);
  double slowest = 0;
  for (const auto& [id, us] : times) slowest = std::max(slowest, us), l.best = std::min(l.best, us);
  for (const auto& v : l.space) {
    l.feats.push_back(plan.features(v));
    l.shared.push_back(optimizer::shared_features(v, c, range));
    l.strata.push_back(plan.stratum(v));
    const auto it = times.find(v.id());
    l.timed += it != times.end();
    l.truth.push_back(it != times.end() ? it->second : 1.5 * slowest);
  }
  return l;
}

/// Tunes one row of seed `seed` with `policy` (round 1, and the fallback of later rounds) as Tuner::tune_unlocked
/// does; returns the kept variant's true time over the best's, leaves the trials in `done` and sets `trials95` to
/// the trials until one within 95% of the best's speed was tried (o.trials + 1: none was).
double tune_row(const Landscape& l, Policy& policy, const Options& o, int seed, Trials& done, size_t* trials95,
                const std::vector<double>& prior = {}) {
  std::mt19937_64 rng(static_cast<uint64_t>(seed) * 7919);
  std::normal_distribution<double> noise(0.0, 0.015);
  const auto search = o.strategy == "policy"       ? TuneSearch::kPolicy
                     : o.strategy == "knobs-mean" ? TuneSearch::kKnobsMean
                     : o.strategy == "knobs"      ? TuneSearch::kKnobs
                                                  : TuneSearch::kGp;
  size_t kept = 0;
  *trials95 = o.trials + 1;
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
      picks = optimizer::next_round(policy, search, l.space, l.feats, l.strata, done, k, round_seed, prior);
    }
    if (picks.empty()) break;
    for (size_t i : picks) {
      const double measured = l.truth[i] * (1.0 + noise(rng));
      done.add(i, l.feats[i], 100.0 / measured);  // "ATen" at 100 us: only ratios matter
      if (l.truth[i] <= l.best / 0.95 && *trials95 > o.trials) *trials95 = done.size();
      if (measured < kept_us) kept_us = measured, kept = i;
    }
  }
  return l.truth[kept] / l.best;
}

}  // namespace

std::vector<Row> known_rows() {
  const auto c = [](std::vector<int64_t> s) { return t::contiguous(std::move(s)); };
  // In the benchmark table's order (the order a carried policy meets them).
  return {
      {"gelu f16 [4096,11008]",
       t::unary_problem("gelu", at::kHalf, {4096, 11008}, c({4096, 11008}), 90, 0, "none"), "gelu_f16_4096x11008.csv"},
      {"silu bf16 gate half [8192,2x4096]", t::unary_problem("silu", at::kBFloat16, {8192, 4096}, {8192, 1}),
       "silu_bf16_gate_8192x2x4096.csv"},
      {"group_norm bf16 [32,320,64,64] g32", t::group_norm_problem(at::kBFloat16, {32, 320, 64, 64}, 32),
       "group_norm_bf16_32x320x64x64_g32.csv"},
      {"group_norm f16 [64,256,28,28] g32", t::group_norm_problem(at::kHalf, {64, 256, 28, 28}, 32),
       "group_norm_f16_64x256x28x28_g32.csv"},
      {"max_pool2d f16 [64,64,112,112] k3 s2 p1",
       t::max_pool_problem(at::kHalf, {64, 64, 112, 112}, {}, {3, 3}, {2, 2}, {1, 1}, {1}, false),
       "max_pool2d_f16_64x64x112x112_k3s2p1.csv"},
      {"cumsum bf16 [8192,4096] last dim",
       t::scan_problem("cumsum", at::kBFloat16, {8192, 4096}, c({8192, 4096}), -1), "cumsum_bf16_8192x4096_last.csv"},
      {"sum f32 [16,256,256] dim1 (small)",
       t::reduce_problem("sum.dim_IntList", at::kFloat, {16, 256, 256}, c({16, 256, 256}), t::dims({1})),
       "sum_f32_16x256x256_dim1.csv"},
      {"argmax f32 [128,4096,32] dim1",
       t::reduce_problem("argmax", at::kFloat, {128, 4096, 32}, c({128, 4096, 32}), c10::IValue(int64_t{1})),
       "argmax_f32_128x4096x32_dim1.csv"},
      {"var f32 [4096,4096] dim0",
       t::reduce_problem("var.correction", at::kFloat, {4096, 4096}, c({4096, 4096}), t::dims({0})),
       "var_f32_4096x4096_dim0.csv"},
      {"vector_norm f32 [4096,4096] dim 0 ord 1",
       t::vector_norm_problem(at::kFloat, {4096, 4096}, c({4096, 4096}), c10::IValue(1.0), t::dims({0})),
       "vector_norm_f32_4096x4096_dim0_ord1.csv"},
  };
}

std::map<std::string, double> read_times(const std::string& path) {
  std::map<std::string, double> out;
  std::ifstream in(path);
  std::string line;
  if (!std::getline(in, line) || line.rfind("variant,kernel_us", 0) != 0) return out;  // the header
  while (std::getline(in, line)) {
    const size_t comma = line.find(',');
    if (comma == std::string::npos) continue;
    try {
      out[line.substr(0, comma)] = std::stod(line.substr(comma + 1));
    } catch (const std::exception&) {
      continue;  // a malformed line is skipped, not fatal
    }
  }
  return out;
}

std::vector<Landscape> load_landscapes(const std::string& dir, std::vector<std::string>* skipped) {
  std::vector<Landscape> rows;
  for (const Row& row : known_rows()) {
    const auto times = read_times(dir + "/" + row.csv);
    const auto* family = optimizer::family_for(row.problem.op, row.problem.overload);
    auto plan = family ? family->plan(row.problem) : Status(Code::kUnsupported, "no family");
    if (times.empty() || !plan.ok()) {
      if (skipped) skipped->push_back(row.name + " (no timings in " + row.csv + ", or not planned)");
      continue;
    }
    rows.push_back(landscape(family->name(), *plan.value(), optimizer::problem_class(row.problem), times));
    rows.back().name = row.name;
  }
  return rows;
}

namespace {

/// Adds one seed's result to `out` (o.seeds seeds in all).
void tally(Outcome& out, double ratio, size_t trials95, const Options& o) {
  out.mean_trials95 += static_cast<double>(trials95) / o.seeds;
  out.mean_ratio += ratio / o.seeds;
  out.ratios.push_back(ratio);
  out.within2 += ratio <= 1.02 ? 100.0 / o.seeds : 0.0;
  out.within5 += ratio <= 1.05 ? 100.0 / o.seeds : 0.0;
}

void describe(std::vector<Outcome>& out, const std::vector<Landscape>& rows) {
  for (size_t r = 0; r < rows.size(); ++r) {
    out[r].variants = rows[r].space.size();
    out[r].timed = rows[r].timed;
    out[r].best = rows[r].best;
  }
}

}  // namespace

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
      size_t trials95 = 0;
      const double ratio = tune_row(l, *policy, o, seed, done, &trials95);
      if (o.carry) policy->learn(done.features, done.speedups);
      tally(out[r], ratio, trials95, o);
    }
  }
  describe(out, rows);
  return out;
}

std::vector<Outcome> replay_held_out(const std::vector<Landscape>& rows, const Options& o, std::vector<int>* taught_by) {
  std::vector<Outcome> out(rows.size());
  if (taught_by) taught_by->assign(rows.size(), 0);
  Options teach = o;
  teach.strategy = "gp";  // the teaching rows are tuned as the tuner tunes them
  for (int seed = 1; seed <= o.seeds; ++seed)
    for (size_t r = 0; r < rows.size(); ++r) {
      const Landscape& l = rows[r];
      Policy policy(l.feats.front().size(), static_cast<uint64_t>(seed));
      for (size_t q = 0; q < rows.size(); ++q) {  // the family's other rows, in table order
        if (q == r || rows[q].family != l.family || rows[q].feats.front().size() != l.feats.front().size()) continue;
        Trials taught;
        size_t unused = 0;
        tune_row(rows[q], policy, teach, seed + 1000, taught, &unused);
        policy.learn(taught.features, taught.speedups);
        if (taught_by && seed == 1) ++(*taught_by)[r];
      }
      Trials done;
      size_t trials95 = 0;
      const double ratio = tune_row(l, policy, o, seed, done, &trials95);
      tally(out[r], ratio, trials95, o);
    }
  describe(out, rows);
  return out;
}

Policy teach_shared(const std::vector<const Landscape*>& rows, int epochs) {
  Policy shared(optimizer::shared_feature_dim(), 1);
  std::vector<std::vector<double>> speedups;
  for (const Landscape* l : rows) {
    speedups.emplace_back();
    for (double us : l->truth) speedups.back().push_back(l->best / us);
  }
  std::vector<Policy::Landscape> sets;
  for (size_t i = 0; i < rows.size(); ++i) sets.push_back({&rows[i]->shared, &speedups[i]});
  shared.learn_landscapes(sets, epochs);
  return shared;
}

std::vector<Outcome> replay_family_out(const std::vector<Landscape>& rows, const Options& o, int epochs) {
  std::vector<Outcome> out(rows.size());
  std::map<std::string, Policy> taught;  // by the family left out
  for (const Landscape& l : rows) {
    if (taught.count(l.family)) continue;
    std::vector<const Landscape*> others;
    for (const Landscape& q : rows)
      if (q.family != l.family) others.push_back(&q);
    taught.emplace(l.family, teach_shared(others, epochs)).first->second.learning_rate =
        optimizer::kSharedPolicyLearningRate;
  }
  for (int seed = 1; seed <= o.seeds; ++seed) {
    std::map<std::string, Policy> carried = taught;  // o.carry: learning online, as the tuner's does
    for (size_t r = 0; r < rows.size(); ++r) {
      const Landscape& l = rows[r];
      Policy fresh(l.feats.front().size(), static_cast<uint64_t>(seed));
      Policy& shared = carried.at(l.family);
      Trials done;
      size_t trials95 = 0;
      const double ratio = tune_row(l, fresh, o, seed, done, &trials95, optimizer::prior_scores(shared, l.shared));
      if (o.carry) {
        std::vector<std::vector<float>> f;
        for (size_t i : done.index) f.push_back(l.shared[i]);
        shared.learn(f, done.speedups);
      }
      tally(out[r], ratio, trials95, o);
    }
  }
  describe(out, rows);
  return out;
}

}  // namespace cudal1::bench
