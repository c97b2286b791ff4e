/// @brief Building the run report from the signature tables.
#include "report.h"

#include <nlohmann/json.hpp>
#include <unistd.h>

#include <algorithm>
#include <ctime>

#include "cudal1/dispatcher/chains.h"
#include "cudal1/optimizer/chain_tuner.h"
#include "cudal1/dispatcher/hook.h"
#include "cudal1/dispatcher/region_graph.h"
#include "cudal1/dispatcher/regions.h"

namespace cudal1::runtime {
namespace {

using json = nlohmann::json;

/// Note [Region graphs]: what the chains' CUDA graphs did.
json graph_json() {
  const auto g = dispatcher::graph_counters();
  return {{"captures", g.captures},         {"capture_failures", g.capture_failures},
          {"check_failures", g.check_failures}, {"replays", g.replays},
          {"eager", g.eager},               {"invalidated", g.invalidated},
          {"kept", g.kept},                 {"rejected", g.rejected},
          {"idle_released", g.idle_released}, {"bytes", g.bytes}};
}

/// Note [Deferred regions]: whether regions can open, and what they did.
json region_json() {
  const auto r = dispatcher::region_counters();
  return {{"status", dispatcher::deferral_status()},
          {"opened", r.opened},
          {"completed", r.completed},
          {"flushed_early", {{"diverged", r.diverged}, {"by_op", r.by_op}, {"by_cuda", r.by_cuda},
                             {"by_other", r.by_other}}},
          {"outputs_written", r.written},
          {"outputs_skipped", r.skipped},
          {"kernel_failures", r.kernel_failures},
          {"declined", r.declined},
          {"site_declined", r.site_declined},
          {"advanced", r.advanced},
          {"recycled", r.recycled},
          {"lost", r.lost},
          {"graphs", graph_json()}};
}

/// What the chain's fused kernel did in this process (ChainKernel::describe), empty while none is fused.
std::string kernel_now(const dispatcher::ChainRecord& ch) {
  const dispatcher::ChainKernel* k = ch.kernel.load(std::memory_order_acquire);
  return k ? k->describe() : std::string();
}

}  // namespace

std::string build_report(const ReportHeader& h) {
  using nlohmann::json;
  json sigs = json::array();
  double total_us = 0;
  dispatcher::for_each_record([&](dispatcher::SigRecord& r) {
    const auto o = r.outcome();
    const uint64_t calls = r.calls.load();
    const double est_us = r.mean_us() * static_cast<double>(calls);
    total_us += est_us;
    sigs.push_back({{"signature", r.sig.text},
                    {"device", r.device_index},
                    {"calls", calls},
                    {"mean_us", r.mean_us()},
                    {"samples", r.samples.load()},
                    {"est_total_us", est_us},
                    {"hot", calls >= static_cast<uint64_t>(h.hot_calls)},
                    {"state", dispatcher::state_name(r.state.load())},
                    {"variant", o.variant},
                    {"speedup", o.speedup},
                    {"aten_us", o.aten_us},
                    {"kernel_us", o.kernel_us},
                    {"trials", o.trials},
                    {"from_cache", o.from_cache},
                    {"replaced_calls", r.replaced_calls.load()},
                    {"in_app", o.in_app},
                    {"verdict", o.verdict},
                    {"note", o.note}});
  });
  for (auto& s : sigs) s["share"] = total_us > 0 ? s["est_total_us"].get<double>() / total_us : 0.0;
  std::sort(sigs.begin(), sigs.end(), [](const json& a, const json& b) {
    return a["est_total_us"].get<double>() > b["est_total_us"].get<double>() ||
           (a["est_total_us"].get<double>() == b["est_total_us"].get<double>() &&
            a["calls"].get<uint64_t>() > b["calls"].get<uint64_t>());
  });
  json chains = json::array();  // Note [Chain profiling]: the recurring chains, largest device time first
  dispatcher::for_each_chain([&](dispatcher::ChainRecord& ch) {
    const dispatcher::ChainOutcome outcome = ch.outcome();
    json ops = json::array(), sources = json::array();
    for (const auto& n : ch.nodes) {
      ops.push_back(n.rec->sig.text);
      json in = json::array();
      for (const auto& i : n.inputs)
        in.push_back(i.producer >= 0 ? "%" + std::to_string(i.producer) + "." + std::to_string(i.index) +
                                           (i.view ? ":view" : "")
                                     : (i.index >= 0 ? "ext" + std::to_string(i.index) : "none"));
      sources.push_back(in);
    }
    chains.push_back({{"key", optimizer::chain_cache_key(ch)},
                      {"ops", ops},
                      {"inputs", sources},
                      {"count", ch.count.load()},
                      {"mean_us", ch.mean_us()},
                      {"est_total_us", ch.est_total_us()},
                      {"share", total_us > 0 ? ch.est_total_us() / total_us : 0.0},
                      {"externals", ch.externals},
                      {"same_external", ch.same_external()},
                      {"state", dispatcher::chain_state_name(ch.state.load())},
                      {"regions", {{"opened", ch.regions.load()},
                                   {"completed", ch.completed.load()},
                                   {"flushed_early", ch.flushed_early.load()}}},
                      {"kernel", outcome.kernel},
                      {"kernel_now", kernel_now(ch)},
                      {"plan", outcome.plan},
                      {"aten_us", outcome.aten_us},
                      {"kernel_us", outcome.kernel_us},
                      {"speedup", outcome.speedup},
                      {"note", outcome.note}});
  });
  std::sort(chains.begin(), chains.end(), [](const json& a, const json& b) {
    return a["est_total_us"].get<double>() > b["est_total_us"].get<double>() ||
           (a["est_total_us"].get<double>() == b["est_total_us"].get<double>() &&
            a["count"].get<uint64_t>() > b["count"].get<uint64_t>());
  });
  if (chains.size() > 100) chains.erase(chains.begin() + 100, chains.end());
  const auto c = dispatcher::hook_counters();
  json doc = {{"run_id", h.run_id},
              {"pid", static_cast<int64_t>(::getpid())},
              {"written_unix", static_cast<int64_t>(std::time(nullptr))},
              {"mode", h.mode},
              {"warm", h.warm},
              {"hot_calls", h.hot_calls},
              {"counters",
               {{"hooked_calls", c.hooked_calls},
                {"signatures", c.signatures},
                {"replaced_calls", c.replaced_calls},
                {"fallbacks", c.fallbacks},
                {"cache_hits", h.cache_hits},
                {"tuned", h.tuned}}},
              {"signatures", sigs},
              {"chains", chains},
              {"regions", region_json()}};
  return doc.dump();
}

}  // namespace cudal1::runtime
