/// @brief spdlog set-up: one stderr logger owned by cudal1, not registered globally (the app may use spdlog).
#include "cudal1/core/log.h"

#include <spdlog/sinks/stdout_color_sinks.h>

#include <mutex>
#include <string>
#include <unordered_set>

namespace cudal1 {

spdlog::logger& log() {
  static spdlog::logger* logger = [] {
    auto sink = std::make_shared<spdlog::sinks::stderr_color_sink_mt>();
    auto* l = new spdlog::logger("cudal1", sink);  // leaked on purpose: usable during process exit
    l->set_pattern("[cudal1] [%l] %v");
    l->set_level(spdlog::level::warn);
    l->set_error_handler([](const std::string&) {});  // a bad format string must never reach the app
    return l;
  }();
  return *logger;
}

void set_log_level(LogLevel level) {
  static const spdlog::level::level_enum map[] = {spdlog::level::trace, spdlog::level::debug,
                                                  spdlog::level::info,  spdlog::level::warn,
                                                  spdlog::level::err,   spdlog::level::off};
  log().set_level(map[static_cast<int>(level)]);
}

bool first_time(std::string_view key) {
  static std::mutex mu;
  static auto* seen = new std::unordered_set<std::string>();
  std::lock_guard<std::mutex> lock(mu);
  return seen->insert(std::string(key)).second;
}

}  // namespace cudal1
