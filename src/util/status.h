// Internal helpers over the public error type (tessera/status.h, the one home of ErrorCode, Error,
// Result and Status): make_error formats a message, TESSERA_TRY propagates an error.
#pragma once
#include <utility>

#include "tessera/status.h"
#include "util/check.h"

namespace tessera {

template <typename... Args>
Error make_error(ErrorCode code, fmt::format_string<Args...> format, Args&&... args) {
  return Error{code, fmt::format(format, std::forward<Args>(args)...)};
}

}  // namespace tessera

// Propagates an error from an expression returning Result/Status.
#define TESSERA_TRY(expr)                              \
  do {                                                 \
    auto&& tessera_try_result_ = (expr);               \
    if (!tessera_try_result_.ok()) return tessera_try_result_.error(); \
  } while (0)
