// Typed reading of a request's JSON for the OpenAI endpoints: the body checks (UTF-8, depth,
// syntax, an object), optional fields by type and range, and the invalid-request errors that name
// the offending parameter. Used by protocol_parse.cpp.
#pragma once
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "server/protocol.h"

namespace tessera::server {

using json = nlohmann::json;

// An invalid_request_error about `param` ("" for the body as a whole).
ApiError bad(std::string param, std::string message);
// "integer", "string", ... as the error messages name a JSON value's type.
const char* type_word(const json& v);
// Body -> JSON object, or the error that says what is wrong with it.
std::optional<ApiError> parse_object(std::string_view body, json* out);
// The first key of obj not in `known`, as an error.
std::optional<ApiError> check_unknown_fields(const json& obj, const std::set<std::string>& known);
// A JSON array of token ids (non-negative 32-bit integers) into out.
std::optional<ApiError> parse_token_ids(const json& arr, const char* param, std::vector<int32_t>* out);

// Typed optional getters: absent or null -> nothing set, nullopt returned.
class Fields {
 public:
  explicit Fields(const json& obj) : obj_(obj) {}

  const json* get(const char* key) const {
    auto it = obj_.find(key);
    if (it == obj_.end() || it->is_null()) return nullptr;
    return &*it;
  }

  std::optional<ApiError> boolean(const char* key, bool* out) const {
    const json* v = get(key);
    if (v == nullptr) return std::nullopt;
    if (!v->is_boolean()) return type_error(key, "a boolean", *v);
    *out = v->get<bool>();
    return std::nullopt;
  }

  std::optional<ApiError> string(const char* key, std::string* out) const {
    const json* v = get(key);
    if (v == nullptr) return std::nullopt;
    if (!v->is_string()) return type_error(key, "a string", *v);
    *out = v->get<std::string>();
    return std::nullopt;
  }

  // Integer in [lo, hi]; floats are refused even when integral (as OpenAI does).
  std::optional<ApiError> integer(const char* key, int64_t lo, int64_t hi, int64_t* out,
                                  bool* given = nullptr) const {
    const json* v = get(key);
    if (v == nullptr) return std::nullopt;
    if (!v->is_number_integer()) return type_error(key, "an integer", *v);
    if (v->is_number_unsigned() && v->get<uint64_t>() > static_cast<uint64_t>(hi)) {
      return range_error(key, lo, hi);
    }
    const int64_t x = v->get<int64_t>();
    if (x < lo || x > hi) return range_error(key, lo, hi);
    *out = x;
    if (given != nullptr) *given = true;
    return std::nullopt;
  }

  std::optional<ApiError> number(const char* key, double lo, double hi, float* out) const {
    const json* v = get(key);
    if (v == nullptr) return std::nullopt;
    if (!v->is_number()) return type_error(key, "a number", *v);
    const double x = v->get<double>();
    if (!std::isfinite(x) || x < lo || x > hi) {
      return bad(key, fmt::format("'{}' must be between {} and {}, got {}", key, lo, hi, x));
    }
    *out = static_cast<float>(x);
    return std::nullopt;
  }

  static ApiError type_error(const char* key, const char* want, const json& v) {
    return bad(key, fmt::format("'{}' must be {}, got {}", key, want, type_word(v)));
  }
  static ApiError range_error(const char* key, int64_t lo, int64_t hi) {
    return bad(key, fmt::format("'{}' must be an integer between {} and {}", key, lo, hi));
  }

 private:
  const json& obj_;
};

// The text of a content value that may hold only text, as the agent APIs send it: a string, or a
// list of parts {"type": T, "text": "..."} with T one of `text_types`, joined with "\n" (as the chat
// render joins OpenAI's text parts); parts of a type in `skipped_types` are left out, any other
// type is a 400 saying `refused`. `items` / `item` name the list's elements in messages
// ("text blocks" / "a content block").
struct TextParts {
  std::initializer_list<std::string_view> text_types;
  std::initializer_list<std::string_view> skipped_types;
  const char* items;
  const char* item;
  const char* refused;
};
std::optional<ApiError> joined_text(const json& v, const std::string& param, const TextParts& parts, std::string* out);

#define TESSERA_API_TRY(expr)              \
  do {                                     \
    if (auto api_err_ = (expr)) return api_err_; \
  } while (0)

}  // namespace tessera::server
