/// @brief Private: the process-wide runtime that switches cudal1 on at library load and wires the modules:
/// hook (dispatcher) -> hot queue -> tuner (optimizer) -> cache, and cache -> hook on first use.
#pragma once

#include <string>

#include "cudal1/core/status.h"
#include "cudal1/dispatcher/chains.h"
#include "cudal1/dispatcher/sig_record.h"

namespace cudal1::runtime {

/// Reads the configuration and, when CUDAL1_ENABLE is on and the driver and NVRTC can be opened, installs the
/// hooks and starts the tuner. Called once from the library's load-time initializer. Never throws.
void start_from_environment() noexcept;

/// True when cudal1 is on in tune mode (a tuner runs).
bool tuning_on() noexcept;

/// Hands a cold record to the tuner as if it had just become hot (Note [Pre-warming] in warm.cpp). Returns
/// false when the record is not cold (already queued, tuned or served) or the tuner refused it.
bool enqueue_for_tuning(dispatcher::SigRecord& rec);

/// Marks a cold chain hot (Note [Pre-warming chains] in warm_chain.cpp): the runtime's next tick handles it as
/// any hot chain. A chain already hot or handled is left as it is.
void mark_chain_hot(dispatcher::ChainRecord& chain);

/// Marks this run as a pre-warming run in its report (Note [Pre-warming]).
void note_warm() noexcept;

/// OK when the cache holds an outcome for `signature` under `device`'s fingerprint; otherwise why not.
Status check_cached(int device, const std::string& signature);

/// The JSON report of this run (hot signatures, replacements, speedups).
std::string report_json();

}  // namespace cudal1::runtime
