/// @brief `cudal1 report --insights` (Note [Technique insights]): which techniques won on each GPU of the cache,
/// which were necessary and which only helped together, from the tuner's stored trials.
///
/// Note [Technique insights]
/// The tuner stores every tuned signature's trials (variant id, measured speedup over ATen; <= 0: failed) as the
/// optimizer state "trials/<signature>" of the GPU's fingerprint (Tuner::tune). A technique is one knob value of a
/// family's variant id ("mode4", "cache1", "vec8"), counted only where the signature's timed trials had more than
/// one value of that knob (a knob fixed by the shape is no choice). Per fingerprint and family:
///   won: the signature's fastest timed variant has the technique;
///   necessary (a gatekeeper): every timed variant within 5% of the best's time has it, and some timed variant
///   lacks it;
///   only together: two techniques of the fastest variant whose joint effect exceeds the sum of their own effects
///   by more than 5% in time: with the mean log speedup of the timed variants having both (ab), only a, only b and
///   neither (n), (ab - n) - ((a - n) + (b - n)) > log 1.05, each group non-empty.
/// Each line counts the signatures where it held, of the family's signatures where the technique was a choice.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>
#include <set>

#include "cli_commands.h"
#include "cudal1/cache/kernel_cache.h"

namespace cudal1::cli {
namespace {

/// The knob segments of a variant id: "mode4.vec1.block256" -> {mode:4, vec:1, block:256}.
std::map<std::string, std::string> knobs_of(const std::string& id) {
  std::map<std::string, std::string> out;
  size_t start = 0;
  while (start <= id.size()) {
    const size_t dot = std::min(id.find('.', start), id.size());
    const std::string seg = id.substr(start, dot - start);
    size_t digit = seg.size();
    while (digit > 0 && (std::isdigit(static_cast<unsigned char>(seg[digit - 1])) || seg[digit - 1] == '-')) --digit;
    if (digit > 0 && digit < seg.size()) out[seg.substr(0, digit)] = seg.substr(digit);
    start = dot + 1;
  }
  return out;
}

struct Counts {
  std::map<std::string, int> choice, won, gate;  ///< by technique: signatures where it was a choice, won, was needed
  std::map<std::pair<std::string, std::string>, int> together;
  int signatures = 0;
};

void analyse(const TunedSignature& sig, Counts& c) {
  std::vector<std::pair<std::map<std::string, std::string>, double>> timed;
  for (const auto& [id, speedup] : sig.trials)
    if (speedup > 0 && std::isfinite(speedup)) timed.emplace_back(knobs_of(id), speedup);
  if (timed.size() < 2) return;
  ++c.signatures;
  std::map<std::string, std::set<std::string>> values;
  for (const auto& [k, s] : timed)
    for (const auto& [knob, value] : k) values[knob].insert(value);
  const auto has = [](const std::map<std::string, std::string>& k, const std::string& tech) {
    const size_t eq = tech.find('=');
    const auto it = k.find(tech.substr(0, eq));
    return it != k.end() && it->second == tech.substr(eq + 1);
  };
  size_t best = 0;
  for (size_t i = 1; i < timed.size(); ++i)
    if (timed[i].second > timed[best].second) best = i;
  std::set<std::string> techniques;  // every knob value that was a choice here
  for (const auto& [knob, vals] : values)
    if (vals.size() > 1)
      for (const auto& v : vals) techniques.insert(knob + "=" + v);
  std::vector<std::string> winners;
  for (const auto& t : techniques) {
    ++c.choice[t];
    if (!has(timed[best].first, t)) continue;
    winners.push_back(t);
    ++c.won[t];
    bool all_near = true, some_lack = false;
    for (const auto& [k, s] : timed) {
      const bool with = has(k, t);
      some_lack |= !with;
      if (s >= 0.95 * timed[best].second && !with) all_near = false;
    }
    if (all_near && some_lack) ++c.gate[t];
  }
  for (size_t i = 0; i < winners.size(); ++i)
    for (size_t j = i + 1; j < winners.size(); ++j) {
      double sum[4] = {0, 0, 0, 0};
      int n[4] = {0, 0, 0, 0};
      for (const auto& [k, s] : timed) {
        const int cell = (has(k, winners[i]) ? 2 : 0) + (has(k, winners[j]) ? 1 : 0);
        sum[cell] += std::log(s), ++n[cell];
      }
      if (!n[0] || !n[1] || !n[2] || !n[3]) continue;
      const double none = sum[0] / n[0], b = sum[1] / n[1] - none, a = sum[2] / n[2] - none, ab = sum[3] / n[3] - none;
      if (ab - (a + b) > std::log(1.05)) ++c.together[{winners[i], winners[j]}];
    }
}

/// "mode=4" -> "mode4", as in a variant id.
std::string shown(std::string t) {
  t.erase(std::remove(t.begin(), t.end(), '='), t.end());
  return t;
}

}  // namespace

void print_insights(const std::vector<TunedSignature>& sigs, std::ostream& out) {
  std::map<std::string, Counts> by_family;
  for (const auto& s : sigs) analyse(s, by_family[s.family]);
  for (const auto& [family, c] : by_family) {
    if (c.signatures == 0) continue;
    out << fmt::format("  {} ({} signature{} tuned)\n", family, c.signatures, c.signatures == 1 ? "" : "s");
    const auto list = [&](const char* title, const std::map<std::string, int>& m) {
      std::vector<std::pair<int, std::string>> rows;
      for (const auto& [t, n] : m) rows.emplace_back(-n, t);
      std::sort(rows.begin(), rows.end());
      out << "    " << title << (rows.empty() ? " none\n" : "\n");
      for (const auto& [n, t] : rows) out << fmt::format("      {:<24} {}/{}\n", shown(t), -n, c.choice.at(t));
    };
    list("won (the fastest variant has it):", c.won);
    list("necessary (every variant within 5% of the best has it):", c.gate);
    out << "    only together (joint gain over the sum of their own by >5%):"
        << (c.together.empty() ? " none\n" : "\n");
    std::vector<std::pair<int, std::pair<std::string, std::string>>> rows;
    for (const auto& [p, n] : c.together) rows.emplace_back(-n, p);
    std::sort(rows.begin(), rows.end());
    for (const auto& [n, p] : rows)
      out << fmt::format("      {:<24} {}/{}\n", shown(p.first) + " + " + shown(p.second), -n, c.signatures);
  }
}

int report_insights(const Options& o, std::ostream& out) {
  cache::KernelCache cache(cache_dir(o));
  auto fps = cache.fingerprints();
  if (!fps.ok()) return out << "error: " << fps.status().to_string() << "\n", 1;
  bool any = false;
  for (const auto& fp : fps.value()) {
    auto states = cache.states(fp, "trials/");
    if (!states.ok()) return out << "error: " << states.status().to_string() << "\n", 1;
    std::vector<TunedSignature> sigs;
    for (const auto& [name, json] : states.value()) {
      const auto j = nlohmann::json::parse(json, nullptr, false);
      if (j.is_discarded() || !j.is_object() || !j.contains("trials") || !j["trials"].is_array()) continue;
      TunedSignature s{name.substr(7), j.value("family", "?"), {}};
      for (const auto& t : j["trials"])
        if (t.is_array() && t.size() == 2 && t[0].is_string() && t[1].is_number())
          s.trials.emplace_back(t[0].get<std::string>(), t[1].get<double>());
      sigs.push_back(std::move(s));
    }
    if (sigs.empty()) continue;
    any = true;
    out << fmt::format("GPU {} ({}, sm {}): techniques over {} tuned signature{}\n", fp.key(), fp.gpu_name, fp.sm,
                       sigs.size(), sigs.size() == 1 ? "" : "s");
    print_insights(sigs, out);
  }
  if (!any) out << "no tuning trials stored in " << cache.dir() << " (tune with CUDAL1_ENABLE=1 or `cudal1 warm`)\n";
  return 0;
}

}  // namespace cudal1::cli
