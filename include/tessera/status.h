// Expected failures, the error type of the public API: Error carries a code and a message that
// says what is wrong; Result<T> is a value or an Error (a small stand-in for C++23 std::expected);
// Status is a Result without a value. Convert to HTTP status or an exit code at the boundary
// (server/, cli/), never deeper. The one home of these types: internal code reaches them through
// util/status.h, which adds the formatting helpers (make_error, TESSERA_TRY).
#pragma once
#include <string>
#include <utility>
#include <variant>

namespace tessera {

enum class ErrorCode {
  kInvalidArgument,    // bad request or flag value
  kNotFound,           // missing file, unknown model or tensor
  kCorruptFile,        // a file that breaks its format's rules (GGUF is hostile input)
  kUnsupported,        // valid but not handled: architecture, tensor type
  kOutOfRange,         // prompt longer than the context, request that can never fit
  kResourceExhausted,  // queue full, no memory
  kIo,                 // read/mmap failures
  kInternal,
};

const char* error_code_name(ErrorCode code);

struct Error {
  ErrorCode code = ErrorCode::kInternal;
  std::string message;

  // Prefixes context, as the loader does at each stage: "loading tokenizer: <message>".
  Error with_context(const std::string& context) const { return {code, context + ": " + message}; }
};

// A Result read the wrong way (value() of an error, error() of a value) is a caller bug: prints
// the call site and the message, then aborts, as a failed TESSERA_CHECK does (util/status.cpp).
[[noreturn]] void result_access_failed(const char* condition, const std::string& message,
                                       const char* file = __builtin_FILE(), unsigned line = __builtin_LINE(),
                                       const char* function = __builtin_FUNCTION());

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Error error) : v_(std::move(error)) {}  // NOLINT

  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }
  T& value() & {
    if (!ok()) [[unlikely]] result_access_failed("ok()", "Result::value() on error: " + std::get<1>(v_).message);
    return std::get<0>(v_);
  }
  T&& value() && {
    if (!ok()) [[unlikely]] result_access_failed("ok()", "Result::value() on error: " + std::get<1>(v_).message);
    return std::get<0>(std::move(v_));
  }
  const T& value() const& {
    if (!ok()) [[unlikely]] result_access_failed("ok()", "Result::value() on error: " + std::get<1>(v_).message);
    return std::get<0>(v_);
  }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() { return value(); }
  const Error& error() const {
    if (ok()) [[unlikely]] result_access_failed("!ok()", "Result::error() on a value");
    return std::get<1>(v_);
  }

 private:
  std::variant<T, Error> v_;
};

// Status: Result without a value.
struct Ok {};
using Status = Result<Ok>;
inline Status ok_status() { return Ok{}; }

}  // namespace tessera
