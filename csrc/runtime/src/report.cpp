/// @brief Building the run report from the signature tables.
#include "report.h"

#include <nlohmann/json.hpp>
#include <unistd.h>

#include <algorithm>
#include <ctime>

#include "cudal1/dispatcher/hook.h"

namespace cudal1::runtime {

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
                    {"note", o.note}});
  });
  for (auto& s : sigs) s["share"] = total_us > 0 ? s["est_total_us"].get<double>() / total_us : 0.0;
  std::sort(sigs.begin(), sigs.end(), [](const json& a, const json& b) {
    return a["est_total_us"].get<double>() > b["est_total_us"].get<double>() ||
           (a["est_total_us"].get<double>() == b["est_total_us"].get<double>() &&
            a["calls"].get<uint64_t>() > b["calls"].get<uint64_t>());
  });
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
              {"signatures", sigs}};
  return doc.dump();
}

}  // namespace cudal1::runtime
