/// @brief `cudal1 warm` over several GPUs and machines (Note [Fleet warm] in warm_fleet.cpp): a coordinator per
/// machine, a worker process per GPU, one signature list shared through a c10d TCPStore.
#pragma once

#include <string>
#include <vector>

namespace cudal1::cli {

/// One worker: a GPU and the group it tunes for (GPUs of one model share a group: each signature is tuned once
/// a group). Device -1: a dry-run worker, which needs no GPU.
struct FleetGpu {
  int device = 0;
  std::string group;
};

struct FleetOptions {
  std::vector<FleetGpu> gpus;  ///< this machine's workers
  /// HOST:PORT of the store every machine's coordinator and worker connect to; node 0 serves it. Empty: this
  /// machine only, on a store of its own (127.0.0.1, a free port).
  std::string store;
  int nodes = 1, node = 0;  ///< machines taking part, and this one's rank (0 serves the store and the list)
  double timeout_s = 3600;  ///< for the whole list
  bool dry_run = false;     ///< workers only rebuild each call on the meta device (no GPU, nothing tuned)
  std::string self;         ///< the cudal1-warm program the workers run
};

/// The coordinator: publishes (node 0) or fetches the list, starts a worker a GPU, prints each signature's
/// outcome as any worker of its groups finishes it, with the group's progress and an estimate of the time left,
/// then stores in this machine's cache the records other machines' workers tuned for its groups. Returns 0 when
/// every signature of every group got an outcome that is neither an error nor a timeout.
int run_fleet(const std::vector<std::string>& signatures, const FleetOptions& o);

/// A worker (its own process, cudal1 on in tune mode unless a dry run): claims the group's next signature until
/// none is left, warms it on `device` and publishes the outcome and the cache records it made.
int run_worker(const FleetOptions& o, int device, const std::string& group);

}  // namespace cudal1::cli
