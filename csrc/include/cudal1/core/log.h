/// @brief The cudal1 logger (spdlog, stderr, prefix "[cudal1]"). Logging never throws into the caller.
#pragma once

#include <spdlog/spdlog.h>

#include <string_view>

#include "cudal1/core/config.h"

namespace cudal1 {

/// The process-wide logger. Thread-safe; never null.
spdlog::logger& log();

/// Sets the logger's level.
void set_log_level(LogLevel level);

/// True the first time it is called with `key` in this process, false afterwards: for "log once" messages.
bool first_time(std::string_view key);

}  // namespace cudal1
