// Probe (CPU, not part of the product; bench/probes/README.md): the cross-family prior measured with its teaching
// constants chosen by *nested* leave-one-family-out (Note [Cross-family policy] in optimizer/include/cudal1/optimizer/
// policy.h). For each family F: every candidate (search mode, near-best threshold, weight decay) is scored on the
// other families only (each of their rows tuned with a prior taught without F and without the row's own family),
// the best is then run on F's rows with a prior taught without F. The search is the tuner's own (next_round,
// Policy::choose, similarity_model_picks, prior_scores); the landscapes, noise (1.5%), 64 trials in rounds of 4 and
// 24 seeds are bench_tuner_replay's. Written 2026-12-07 (session 56); its result is in docs/PERF.md "Tuner replay".
// Build from a configured tree (after `ninja -C build optimizer_test`):
//   g++ -O2 -std=gnu++17 -D_GLIBCXX_USE_CXX11_ABI=1 -I. -Itests -Ioptimizer/include -Icsrc/core/include \
//     -Ibuild/csrc/core/include -Idispatcher/include -Icache/include -isystem /usr/local/cuda/include \
//     -isystem /usr/include/torch/csrc/api/include bench/probes/prior_nested_replay.cpp bench/search_replay.cpp \
//     build/optimizer/libcudal1_optimizer.a build/dispatcher/libcudal1_dispatcher.a build/cache/libcudal1_cache.a \
//     build/csrc/core/libcudal1_core.a -ltorch -ltorch_cpu -lc10 -lspdlog -lfmt -lxxhash -lrocksdb -ldl -lpthread \
//     -o /tmp/prior_nested_replay
// Run: GRID=prior /tmp/prior_nested_replay nested      (the 15-cell grid of teaching constants, nested: 14.84)
//      /tmp/prior_nested_replay prior                  (today's constants, 0.8 / 0.1, not nested: 10.42)
//      ENSEMBLE=1 /tmp/prior_nested_replay prior       (the prior averaged over the 15 cells, nothing chosen)
// REPLAY_DIR: the landscapes (default bench/replay).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>

#include "bench/search_replay.h"
#include "cudal1/optimizer/shared_features.h"
using namespace cudal1::bench;
using namespace cudal1::optimizer;
static int g_verbose = 0;
static std::string g_row;
// strategy hooks
struct Cfg {
  std::string mode = "prior";
  double pw = 0;
  int r1 = 0;
  double near = 0.8, decay = 0.1;
};
Policy teach2(const std::vector<const Landscape*>& rows, double near, double decay, int epochs = 200) {
  size_t D = shared_feature_dim();
  std::vector<double> w(D, 0.0);
  struct P {
    const Landscape* l;
    std::vector<std::pair<size_t, size_t>> ab;
  };
  std::vector<P> sets;
  for (auto* l : rows) {
    P p{l, {}};
    size_t n = l->truth.size();
    for (size_t a = 0; a < n; ++a) {
      double sa = l->best / l->truth[a];
      if (sa < near) continue;
      for (size_t b = 0; b < n; ++b) {
        double sb = l->best / l->truth[b];
        if ((near <= 0 || sb < near) && sb * 1.05 < sa) p.ab.emplace_back(a, b);
      }
    }
    if (!p.ab.empty()) sets.push_back(std::move(p));
  }
  auto score = [&](const std::vector<float>& f) {
    double s = 0;
    for (size_t i = 0; i < D; ++i) s += w[i] * f[i];
    return s;
  };
  std::vector<double> g(D);
  for (int e = 0; e < epochs; ++e) {
    std::fill(g.begin(), g.end(), 0.0);
    for (auto& p : sets) {
      double wt = 1.0 / (p.ab.size() * sets.size());
      for (auto& [a, b] : p.ab) {
        auto& fa = p.l->shared[a];
        auto& fb = p.l->shared[b];
        double d = wt * (1.0 - 1.0 / (1.0 + std::exp(-(score(fa) - score(fb)))));
        for (size_t i = 0; i < D; ++i) g[i] += d * (fa[i] - fb[i]);
      }
    }
    for (size_t i = 0; i < D; ++i) w[i] += g[i] - decay * w[i];
  }
  std::string js = "{\"dim\":" + std::to_string(D) + ",\"updates\":1,\"w\":[";
  for (size_t i = 0; i < D; ++i) {
    char b[64];
    snprintf(b, 64, "%s%.17g", i ? "," : "", w[i]);
    js += b;
  }
  js += "]}";
  return Policy::from_json(js, D, 1).value();
}
std::vector<size_t> round_picks(const Cfg& c, Policy& policy, const Landscape& l, const Trials& done, size_t k,
                                uint64_t seed, const std::vector<double>& prior) {
  if (c.mode == "none")
    return next_round(policy, cudal1::TuneSearch::kGp, l.space, l.feats, l.strata, done, k, seed, {});
  if (c.mode == "prior")
    return next_round(policy, cudal1::TuneSearch::kGp, l.space, l.feats, l.strata, done, k, seed, prior);
  if (done.index.empty()) return policy.choose(l.feats, k, l.strata, {}, prior);
  SimilarityModel m;
  m.prior_weight = c.pw;
  if (c.mode == "pwdecay") m.prior_weight = c.pw * 4.0 / done.size();
  if (c.mode == "mixR") m.prior_weight = 0;
  if (c.mode == "beta") {
    m.prior_weight = 0;
    m.beta = c.pw;
  }
  if (c.mode == "mixgp") {
    SimilarityModel m0;
    auto p = similarity_model_picks(l.space, done.index, done.speedups, k - 1, m0, prior);
    if (p.empty()) return p;
    // the last pick: the GP with the prior's mean, believing the round's other picks
    std::vector<size_t> idx = done.index;
    std::vector<double> sp = done.speedups;
    // (believer values unknown here: exclude them by asking for k picks and taking the first not in p)
    auto q = similarity_model_picks(l.space, done.index, done.speedups, k, m, prior);
    for (size_t i : q)
      if (std::find(p.begin(), p.end(), i) == p.end()) {
        p.push_back(i);
        break;
      }
    return p;
  }
  if (c.mode == "mix" || (c.mode == "mix2" && done.size() == k) || (c.mode == "mixR" && done.size() <= c.pw * k) ||
      c.mode == "mixstrat") {
    auto p = similarity_model_picks(l.space, done.index, done.speedups, k - 1, m, prior);
    if (p.empty()) return p;
    std::vector<char> t(l.space.size(), 0);
    for (size_t i : done.index) t[i] = 1;
    for (size_t i : p) t[i] = 1;
    if (c.mode == "mixstrat") {  // strata whose every trial was > 2x slower than the best trial: ruled out
      double bestsp = 0;
      for (double x : done.speedups) bestsp = std::max(bestsp, x);
      std::map<int, double> sb;
      for (size_t j = 0; j < done.size(); ++j) {
        auto& e = sb[l.strata[done.index[j]]];
        e = std::max(e, done.speedups[j]);
      }
      for (size_t i = 0; i < l.space.size(); ++i) {
        auto it = sb.find(l.strata[i]);
        if (it != sb.end() && it->second * 2 < bestsp) t[i] = 1;
      }
    }
    size_t b = l.space.size();
    for (size_t i = 0; i < l.space.size(); ++i)
      if (!t[i] && (b == l.space.size() || prior[i] > prior[b])) b = i;
    if (b < l.space.size()) p.push_back(b);
    return p;
  }
  auto p = similarity_model_picks(l.space, done.index, done.speedups, k, m, prior);
  if (!p.empty()) return p;
  return next_round(policy, cudal1::TuneSearch::kGp, l.space, l.feats, l.strata, done, k, seed, prior);
}
size_t tune_row(const Cfg& c, const Landscape& l, int seed, const std::vector<double>& prior, size_t trials = 64,
                size_t round = 4) {
  std::mt19937_64 rng(static_cast<uint64_t>(seed) * 7919);
  std::normal_distribution<double> noise(0.0, 0.015);
  Policy policy(l.feats.front().size(), static_cast<uint64_t>(seed));
  Trials done;
  size_t t95 = trials + 1;
  while (done.size() < trials) {
    const size_t k = std::min(round, trials - done.size());
    const uint64_t round_seed = static_cast<uint64_t>(seed) ^ (0x9E3779B97F4A7C15ULL * done.size());
    auto picks = round_picks(c, policy, l, done, k, round_seed, prior);
    if (picks.empty()) break;
    for (size_t i : picks) {
      const double measured = l.truth[i] * (1.0 + noise(rng));
      done.add(i, l.feats[i], 100.0 / measured);
      if (l.truth[i] <= l.best / 0.95 && t95 > trials) t95 = done.size();
      if (g_verbose && l.name == g_row && t95 > trials)
        std::printf("   seed %d trial %zu: %.3f %s\n", seed, done.size(), l.truth[i] / l.best, l.space[i].id().c_str());
    }
  }
  return t95;
}
double eval_rows(const Cfg& c, const std::vector<Landscape>& rows, const std::vector<size_t>& which,
                 const std::vector<std::string>& excl_extra, std::vector<double>* per, int seeds = 24) {
  static std::map<std::string, Policy> cache;
  double mean = 0;
  for (size_t r : which) {
    const auto& l = rows[r];
    std::vector<std::string> ex = excl_extra;
    ex.push_back(l.family);
    std::sort(ex.begin(), ex.end());
    ex.erase(std::unique(ex.begin(), ex.end()), ex.end());
    std::string key = std::to_string(c.near) + "/" + std::to_string(c.decay) + "|";
    for (auto& e : ex) key += e + "|";
    if (!cache.count(key)) {
      std::vector<const Landscape*> o;
      for (auto& q : rows)
        if (std::find(ex.begin(), ex.end(), q.family) == ex.end()) o.push_back(&q);
      cache.emplace(key, teach2(o, c.near, c.decay));
    }
    auto pr = prior_scores(cache.at(key), l.shared);
    if (getenv("ENSEMBLE")) {
      std::vector<double> acc(l.shared.size(), 0.0);
      for (double nr : {0.6, 0.7, 0.8, 0.9, 0.95})
        for (double dc : {0.03, 0.1, 0.3}) {
          std::string k2 = std::to_string(nr) + "/" + std::to_string(dc) + "|";
          for (auto& e : ex) k2 += e + "|";
          if (!cache.count(k2)) {
            std::vector<const Landscape*> o;
            for (auto& q : rows)
              if (std::find(ex.begin(), ex.end(), q.family) == ex.end()) o.push_back(&q);
            cache.emplace(k2, teach2(o, nr, dc));
          }
          auto z = prior_scores(cache.at(k2), l.shared);
          for (size_t i = 0; i < z.size(); ++i) acc[i] += z[i];
        }
      double mu = 0, var = 0;
      for (double x : acc) mu += x / acc.size();
      for (double x : acc) var += (x - mu) * (x - mu) / acc.size();
      for (size_t i = 0; i < acc.size(); ++i) pr[i] = var > 1e-12 ? (acc[i] - mu) / std::sqrt(var) : 0.0;
    }
    double s = 0;
    for (int seed = 1; seed <= seeds; ++seed) s += tune_row(c, l, seed, pr);
    s /= seeds;
    mean += s / which.size();
    if (per) per->push_back(s);
  }
  return mean;
}
int nested(const std::vector<Cfg>& cands) {
  auto rows = load_landscapes((getenv("REPLAY_DIR") ? getenv("REPLAY_DIR") : "bench/replay"), nullptr);
  std::vector<std::string> fams;
  for (auto& l : rows)
    if (std::find(fams.begin(), fams.end(), l.family) == fams.end()) fams.push_back(l.family);
  std::vector<double> out(rows.size());
  for (auto& F : fams) {
    std::vector<size_t> inner, outer;
    for (size_t r = 0; r < rows.size(); ++r) (rows[r].family == F ? outer : inner).push_back(r);
    size_t best = 0;
    double bv = 1e9;
    for (size_t ci = 0; ci < cands.size(); ++ci) {
      double v = eval_rows(cands[ci], rows, inner, {F}, nullptr);
      std::printf("  outer %s: cand %s %.2f n%.2f d%.2f inner %.2f\n", F.c_str(), cands[ci].mode.c_str(), cands[ci].pw,
                  cands[ci].near, cands[ci].decay, v);
      if (v < bv - 1e-9) bv = v, best = ci;
    }
    std::vector<double> per;
    eval_rows(cands[best], rows, outer, {}, &per);
    std::printf("outer %s: chose %s %.2f n%.2f d%.2f (inner %.2f)\n", F.c_str(), cands[best].mode.c_str(),
                cands[best].pw, cands[best].near, cands[best].decay, bv);
    for (size_t j = 0; j < outer.size(); ++j) out[outer[j]] = per[j];
  }
  double m = 0;
  for (size_t r = 0; r < rows.size(); ++r) {
    std::printf("%-42s %6.1f\n", rows[r].name.c_str(), out[r]);
    m += out[r] / rows.size();
  }
  std::printf("nested mean %.2f\n", m);
  return 0;
}
int main(int argc, char** argv) {
  if (argc > 1 && std::string(argv[1]) == "nested") {
    std::vector<Cfg> cands;
    if (getenv("GRID")) {
      for (double nr : {0.6, 0.7, 0.8, 0.9, 0.95})
        for (double dc : {0.03, 0.1, 0.3}) {
          Cfg c;
          c.mode = getenv("GRID");
          c.pw = getenv("GRIDPW") ? atof(getenv("GRIDPW")) : 0;
          c.near = nr;
          c.decay = dc;
          cands.push_back(c);
        }
    }
    for (int i = 2; i + 1 < argc; i += 2) {
      Cfg c;
      c.mode = argv[i];
      c.pw = atof(argv[i + 1]);
      if (getenv("NEAR")) c.near = atof(getenv("NEAR"));
      if (getenv("DECAY")) c.decay = atof(getenv("DECAY"));
      cands.push_back(c);
    }
    return nested(cands);
  }
  Cfg c;
  if (argc > 1) c.mode = argv[1];
  if (argc > 2) c.pw = atof(argv[2]);
  if (getenv("ROW")) g_row = getenv("ROW"), g_verbose = 1;
  int seeds = 24;
  auto rows = load_landscapes((getenv("REPLAY_DIR") ? getenv("REPLAY_DIR") : "bench/replay"), nullptr);
  std::map<std::string, Policy> taught;
  for (auto& l : rows)
    if (!taught.count(l.family)) {
      std::vector<const Landscape*> o;
      for (auto& q : rows)
        if (q.family != l.family) o.push_back(&q);
      taught.emplace(l.family, teach_shared(o, kSharedPriorEpochs));
    }
  double mean = 0;
  for (auto& l : rows) {
    auto pr = prior_scores(taught.at(l.family), l.shared);
    double s = 0;
    for (int seed = 1; seed <= seeds; ++seed) s += tune_row(c, l, seed, pr);
    s /= seeds;
    mean += s / rows.size();
    std::printf("%-42s %6.1f\n", l.name.c_str(), s);
  }
  std::printf("mean %.2f\n", mean);
}
