// The server's one error table: ErrorType -> HTTP status + OpenAI error JSON
//   {"error": {"message": "...", "type": "invalid_request_error", "param": "n", "code": null}}
// Every error the server sends goes through error_body(); nothing else formats errors.
// Engine errors (tessera::Error) are mapped here too (from_engine_error), so the boundary between
// ErrorCode and HTTP lives in one file.
#pragma once
#include <string>

#include "util/status.h"

namespace tessera::server {

enum class ErrorType {
  kInvalidRequest,    // 400: malformed JSON, wrong types, bad values, unknown fields
  kContextLength,     // 400: prompt (+ max_tokens) longer than the context
  kAuthentication,    // 401: missing or wrong bearer key
  kNotFound,          // 404: unknown route
  kModelNotFound,     // 404: request names a model this server does not serve
  kMethodNotAllowed,  // 405
  kRequestTimeout,    // 408: the body did not arrive within its deadline
  kPayloadTooLarge,   // 413: body over --max-body-bytes
  kHeaderTooLarge,    // 431: request headers over their size or count limit
  kRateLimit,         // 429: too many queued requests
  kInternal,          // 500: the engine failed this request
  kNotImplemented,    // 400 unsupported_parameter: a known field this server cannot honor
  kUnavailable,       // 503: shutting down
};

struct ApiError {
  ErrorType type = ErrorType::kInternal;
  std::string message;  // says what is wrong, for a human
  std::string param;    // the offending field ("" = none -> JSON null)
};

int http_status(ErrorType type);
const char* error_type_name(ErrorType type);  // OpenAI "type": "invalid_request_error", ...
const char* error_code_name(ErrorType type);  // OpenAI "code" or nullptr (-> JSON null)

// The JSON body for `error` (compact, one line).
std::string error_body(const ApiError& error);

// The same error in Anthropic's shape (/v1/messages), same status:
//   {"type": "error", "error": {"type": "invalid_request_error", "message": "..."}}
std::string anthropic_error_body(const ApiError& error);

// Maps an engine Error (from submit/chat_prompt) to the API error table.
ApiError from_engine_error(const Error& error);

}  // namespace tessera::server
