// TESSERA_CHECK: invariants that stay on in release builds. A failed check prints file:line and
// the message, then aborts. For expected failures (bad input, no free blocks) use Result<T>.
#pragma once
#include <fmt/format.h>

#include <source_location>
#include <string>

namespace tessera {

[[noreturn]] void check_failed(const char* condition, const std::string& message,
                               std::source_location where);

}  // namespace tessera

#define TESSERA_CHECK(cond, ...)                                                               \
  do {                                                                                         \
    if (!(cond)) [[unlikely]] {                                                                \
      ::tessera::check_failed(#cond, ::fmt::format("" __VA_ARGS__),                          \
                              std::source_location::current());                                \
    }                                                                                          \
  } while (0)
