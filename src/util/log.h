// Minimal leveled logging to stderr. TESSERA_LOG_LEVEL=debug|info|warn|error (default info).
#pragma once
#include <fmt/format.h>

#include <string_view>

namespace tessera {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3, kOff = 4 };

LogLevel log_level();
void set_log_level(LogLevel level);
void log_line(LogLevel level, std::string_view message);

template <typename... Args>
void log_at(LogLevel level, fmt::format_string<Args...> format, Args&&... args) {
  if (level < log_level()) return;
  log_line(level, fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace tessera

#define TESSERA_LOG_DEBUG(...) ::tessera::log_at(::tessera::LogLevel::kDebug, __VA_ARGS__)
#define TESSERA_LOG_INFO(...) ::tessera::log_at(::tessera::LogLevel::kInfo, __VA_ARGS__)
#define TESSERA_LOG_WARN(...) ::tessera::log_at(::tessera::LogLevel::kWarn, __VA_ARGS__)
#define TESSERA_LOG_ERROR(...) ::tessera::log_at(::tessera::LogLevel::kError, __VA_ARGS__)
