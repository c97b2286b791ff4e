/// @brief Private: the process-wide runtime that switches cudal1 on at library load and wires the modules:
/// hook (dispatcher) -> hot queue -> tuner (optimizer) -> cache, and cache -> hook on first use.
#pragma once

#include <string>

namespace cudal1::runtime {

/// Reads the configuration and, when CUDAL1_ENABLE is on and the driver and NVRTC can be opened, installs the
/// hooks and starts the tuner. Called once from the library's load-time initializer. Never throws.
void start_from_environment() noexcept;

/// The JSON report of this run (hot signatures, replacements, speedups).
std::string report_json();

}  // namespace cudal1::runtime
