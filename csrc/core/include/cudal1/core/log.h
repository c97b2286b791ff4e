/// @brief The cudal1 logger: stderr, prefix "[cudal1]", level from CUDAL1_LOG_LEVEL. spdlog does the work but
/// stays private to log.cpp (torch wheels bundle their own fmt headers; keeping spdlog/fmt out of headers that
/// meet torch's avoids mixing two fmt versions). Logging never throws into the caller.
///
///   CUDAL1_LOG(kInfo, rec.sig.text << ": replaced by " << variant);
#pragma once

#include <sstream>
#include <string>
#include <string_view>

#include "cudal1/core/config.h"

namespace cudal1 {

/// True when messages of `level` are written (cheap; check before building a message).
bool log_enabled(LogLevel level) noexcept;
/// Writes one message at `level`. Thread-safe; never throws.
void log_write(LogLevel level, const std::string& message) noexcept;
/// Sets the logger's level.
void set_log_level(LogLevel level) noexcept;

/// True the first time it is called with `key` in this process, false afterwards: for "log once" messages.
bool first_time(std::string_view key);

}  // namespace cudal1

/// Logs a streamed message at `level` (a LogLevel enumerator name), building it only when enabled.
#define CUDAL1_LOG(level, stream_expr)                                                   \
  do {                                                                                   \
    if (::cudal1::log_enabled(::cudal1::LogLevel::level)) {                              \
      std::ostringstream _cudal1_os;                                                     \
      _cudal1_os << stream_expr;                                                         \
      ::cudal1::log_write(::cudal1::LogLevel::level, _cudal1_os.str());                  \
    }                                                                                    \
  } while (0)
