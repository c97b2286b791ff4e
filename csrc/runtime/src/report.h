/// @brief Private: the run report (JSON) that `cudal1 report` shows.
#pragma once

#include <cstdint>
#include <string>

namespace cudal1::runtime {

struct ReportHeader {
  std::string run_id;
  std::string mode;
  int64_t hot_calls = 0;
  uint64_t cache_hits = 0;
  uint64_t tuned = 0;
  bool warm = false;  ///< the process ran cudal1::warm (`cudal1 warm` skips such runs when it picks one)
};

/// Report document: header, counters, every signature (calls, device time and its share, state, what serves
/// it, measured speedup) and the recorded op chains (at most 100: ops, dataflow, count, device time and its
/// share, state), each list sorted by estimated device time, largest first.
std::string build_report(const ReportHeader& h);

}  // namespace cudal1::runtime
