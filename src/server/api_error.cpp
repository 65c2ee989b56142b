#include "server/api_error.h"

#include <nlohmann/json.hpp>

namespace tessera::server {
namespace {

struct ErrorRow {
  ErrorType type;
  int status;
  const char* type_name;  // OpenAI error "type"
  const char* code;       // OpenAI error "code" (nullptr = null)
  const char* anthropic;  // Anthropic error "type" (/v1/messages), same status
};

// NOTE(server): the one table. The openai Python client picks its exception class from the status
// (400 BadRequestError, 401 AuthenticationError, 404 NotFoundError, 429 RateLimitError, 5xx
// InternalServerError), so the status column is what clients see first.
constexpr ErrorRow kErrorTable[] = {
    {ErrorType::kInvalidRequest, 400, "invalid_request_error", nullptr, "invalid_request_error"},
    {ErrorType::kContextLength, 400, "invalid_request_error", "context_length_exceeded", "invalid_request_error"},
    {ErrorType::kAuthentication, 401, "authentication_error", "invalid_api_key", "authentication_error"},
    {ErrorType::kNotFound, 404, "not_found_error", nullptr, "not_found_error"},
    {ErrorType::kModelNotFound, 404, "invalid_request_error", "model_not_found", "not_found_error"},
    {ErrorType::kMethodNotAllowed, 405, "invalid_request_error", "method_not_allowed", "invalid_request_error"},
    {ErrorType::kRequestTimeout, 408, "invalid_request_error", "request_timeout", "invalid_request_error"},
    {ErrorType::kPayloadTooLarge, 413, "invalid_request_error", "payload_too_large", "request_too_large"},
    {ErrorType::kHeaderTooLarge, 431, "invalid_request_error", "request_header_fields_too_large", "request_too_large"},
    {ErrorType::kRateLimit, 429, "rate_limit_error", "too_many_requests", "rate_limit_error"},
    {ErrorType::kInternal, 500, "server_error", nullptr, "api_error"},
    // A known parameter this server cannot honor: the client's request is what must change, so it
    // is a 400 (vLLM's answer too); a 501 makes the openai client retry three times.
    {ErrorType::kNotImplemented, 400, "invalid_request_error", "unsupported_parameter", "invalid_request_error"},
    {ErrorType::kUnavailable, 503, "server_error", "service_unavailable", "overloaded_error"},
};

const ErrorRow& row(ErrorType type) {
  for (const ErrorRow& r : kErrorTable) {
    if (r.type == type) return r;
  }
  for (const ErrorRow& r : kErrorTable) {
    if (r.type == ErrorType::kInternal) return r;
  }
  return kErrorTable[0];
}

}  // namespace

int http_status(ErrorType type) { return row(type).status; }
const char* error_type_name(ErrorType type) { return row(type).type_name; }
const char* error_code_name(ErrorType type) { return row(type).code; }

std::string error_body(const ApiError& error) {
  nlohmann::json inner;
  inner["message"] = error.message;
  inner["type"] = error_type_name(error.type);
  inner["param"] = error.param.empty() ? nlohmann::json(nullptr) : nlohmann::json(error.param);
  const char* code = error_code_name(error.type);
  inner["code"] = code == nullptr ? nlohmann::json(nullptr) : nlohmann::json(code);
  nlohmann::json body;
  body["error"] = std::move(inner);
  // Messages may quote client bytes: replace invalid UTF-8 rather than throw.
  return body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string anthropic_error_body(const ApiError& error) {
  const nlohmann::ordered_json body = {{"type", "error"}, {"error", {{"type", row(error.type).anthropic}, {"message", error.message}}}};
  return body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

ApiError from_engine_error(const Error& error) {
  switch (error.code) {
    case ErrorCode::kInvalidArgument:
      return {ErrorType::kInvalidRequest, error.message, ""};
    case ErrorCode::kOutOfRange:
      return {ErrorType::kContextLength, error.message, ""};
    case ErrorCode::kResourceExhausted:
      return {ErrorType::kRateLimit, error.message, ""};
    case ErrorCode::kNotFound:
      return {ErrorType::kNotFound, error.message, ""};
    case ErrorCode::kUnsupported:
      return {ErrorType::kNotImplemented, error.message, ""};
    default:
      return {ErrorType::kInternal, error.message, ""};
  }
}

}  // namespace tessera::server
