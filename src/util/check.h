// TESSERA_CHECK: invariants that stay on in release builds. A failed check prints file:line and
// the message, then aborts. For expected failures (bad input, no free blocks) use Result<T>.
#pragma once
#include <fmt/format.h>

#include <string>

namespace tessera {

// file/line/function come from __builtin_FILE & co. (GCC and clang; clang 14 with libstdc++ 12
// lacks std::source_location).
[[noreturn]] void check_failed(const char* condition, const std::string& message, const char* file,
                               unsigned line, const char* function);

}  // namespace tessera

#define TESSERA_CHECK(cond, ...)                                                               \
  do {                                                                                         \
    if (!(cond)) [[unlikely]] {                                                                \
      ::tessera::check_failed(#cond, ::fmt::format("" __VA_ARGS__), __builtin_FILE(),          \
                              __builtin_LINE(), __builtin_FUNCTION());                          \
    }                                                                                          \
  } while (0)
