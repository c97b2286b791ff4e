/// @brief spdlog set-up: one stderr logger owned by cudal1, not registered globally (the app may use spdlog).
#include "cudal1/core/log.h"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <mutex>
#include <unordered_set>

namespace cudal1 {
namespace {

spdlog::level::level_enum to_spdlog(LogLevel level) {
  static const spdlog::level::level_enum map[] = {spdlog::level::trace, spdlog::level::debug,
                                                  spdlog::level::info,  spdlog::level::warn,
                                                  spdlog::level::err,   spdlog::level::off};
  return map[static_cast<int>(level)];
}

spdlog::logger& logger() {
  static spdlog::logger* l = [] {
    auto sink = std::make_shared<spdlog::sinks::stderr_color_sink_mt>();
    auto* lg = new spdlog::logger("cudal1", sink);  // leaked on purpose: usable during process exit
    lg->set_pattern("[cudal1] [%l] %v");
    lg->set_level(spdlog::level::warn);
    lg->set_error_handler([](const std::string&) {});  // a logging failure must never reach the app
    return lg;
  }();
  return *l;
}

}  // namespace

bool log_enabled(LogLevel level) noexcept { return level != LogLevel::kOff && logger().should_log(to_spdlog(level)); }

void log_write(LogLevel level, const std::string& message) noexcept {
  try {
    logger().log(to_spdlog(level), "{}", message);
  } catch (...) {
  }
}

void set_log_level(LogLevel level) noexcept { logger().set_level(to_spdlog(level)); }

bool first_time(std::string_view key) {
  static std::mutex mu;
  static auto* seen = new std::unordered_set<std::string>();
  std::lock_guard<std::mutex> lock(mu);
  return seen->insert(std::string(key)).second;
}

}  // namespace cudal1
