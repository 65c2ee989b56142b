#include "util/status.h"

#include "util/check.h"

namespace tessera {

const char* error_code_name(ErrorCode code) {
  switch (code) {
    case ErrorCode::kInvalidArgument: return "invalid_argument";
    case ErrorCode::kNotFound: return "not_found";
    case ErrorCode::kCorruptFile: return "corrupt_file";
    case ErrorCode::kUnsupported: return "unsupported";
    case ErrorCode::kOutOfRange: return "out_of_range";
    case ErrorCode::kResourceExhausted: return "resource_exhausted";
    case ErrorCode::kIo: return "io_error";
    case ErrorCode::kInternal: return "internal";
  }
  return "unknown";
}

void result_access_failed(const char* condition, const std::string& message, const char* file, unsigned line,
                          const char* function) {
  check_failed(condition, message, file, line, function);
}

}  // namespace tessera
