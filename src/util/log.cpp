#include "util/log.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>

namespace tessera {
namespace {

LogLevel level_from_env() {
  const char* env = std::getenv("TESSERA_LOG_LEVEL");
  if (!env) return LogLevel::kInfo;
  const std::string v(env);
  if (v == "debug") return LogLevel::kDebug;
  if (v == "warn") return LogLevel::kWarn;
  if (v == "error") return LogLevel::kError;
  if (v == "off") return LogLevel::kOff;
  return LogLevel::kInfo;
}

std::atomic<int> g_level{static_cast<int>(level_from_env())};
std::mutex g_mutex;

}  // namespace

LogLevel log_level() { return static_cast<LogLevel>(g_level.load(std::memory_order_relaxed)); }
void set_log_level(LogLevel level) { g_level.store(static_cast<int>(level)); }

void log_line(LogLevel level, std::string_view message) {
  static const char* kNames[] = {"debug", "info", "warn", "error", "off"};
  std::lock_guard<std::mutex> lock(g_mutex);
  std::fprintf(stderr, "[tessera %s] %.*s\n", kNames[static_cast<int>(level)],
               static_cast<int>(message.size()), message.data());
}

}  // namespace tessera
