// The JSON helpers of json_fields.h.
#include "server/json_fields.h"

#include <algorithm>
#include <limits>
#include <vector>

namespace tessera::server {
namespace {

// Deepest [ / { nesting outside strings; stops counting once past `limit`.
int json_depth(std::string_view body, int limit) {
  int depth = 0, max_depth = 0;
  bool in_string = false, escaped = false;
  for (char c : body) {
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') in_string = true;
    else if (c == '[' || c == '{') {
      max_depth = std::max(max_depth, ++depth);
      if (max_depth > limit) return max_depth;
    } else if (c == ']' || c == '}') depth = std::max(0, depth - 1);
  }
  return max_depth;
}

// Walks a body whose DOM parse failed, keeping the path to the value being read, so a number the
// parser refuses (1e400 overflows a double) is reported as the field that holds it:
// "temperature", "messages[0].content", "stream_options.include_usage".
class PathTracker : public nlohmann::json_sax<json> {
 public:
  bool null() override { return value_done(); }
  bool boolean(bool) override { return value_done(); }
  bool number_integer(number_integer_t) override { return value_done(); }
  bool number_unsigned(number_unsigned_t) override { return value_done(); }
  bool number_float(number_float_t, const string_t&) override { return value_done(); }
  bool string(string_t&) override { return value_done(); }
  bool binary(binary_t&) override { return value_done(); }
  bool start_object(std::size_t) override { return push(false); }
  bool key(string_t& k) override {
    frames_.back().key = k;
    return true;
  }
  bool end_object() override { return pop(); }
  bool start_array(std::size_t) override { return push(true); }
  bool end_array() override { return pop(); }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override {
    return false;
  }

  // "a.b[2].c"; "" at the top level.
  std::string path() const {
    std::string out;
    for (const Frame& f : frames_) {
      if (f.is_array) {
        out += fmt::format("[{}]", f.num_items);
      } else if (!f.key.empty()) {
        if (!out.empty()) out += '.';
        out += f.key;
      }
    }
    return out;
  }

 private:
  struct Frame {
    bool is_array = false;
    std::string key;        // objects: the key whose value is being read
    int64_t num_items = 0;  // arrays: items completed so far (= the index being read)
  };
  bool value_done() {
    if (!frames_.empty() && frames_.back().is_array) frames_.back().num_items += 1;
    return true;
  }
  bool push(bool is_array) {
    frames_.push_back(Frame{is_array, "", 0});
    return true;
  }
  bool pop() {
    frames_.pop_back();
    return value_done();
  }
  std::vector<Frame> frames_;
};

}  // namespace

ApiError bad(std::string param, std::string message) {
  return ApiError{ErrorType::kInvalidRequest, std::move(message), std::move(param)};
}

const char* type_word(const json& v) {
  switch (v.type()) {
    case json::value_t::null: return "null";
    case json::value_t::boolean: return "boolean";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned: return "integer";
    case json::value_t::number_float: return "number";
    case json::value_t::string: return "string";
    case json::value_t::array: return "array";
    case json::value_t::object: return "object";
    default: return "value";
  }
}

// Body -> JSON object, or the error that says what is wrong with it.
std::optional<ApiError> parse_object(std::string_view body, json* out) {
  if (body.empty()) return bad("", "Request body is empty; expected a JSON object");
  size_t bad_offset = 0;
  if (!is_valid_utf8(body, &bad_offset)) {
    return bad("", fmt::format("Request body is not valid UTF-8 (first bad byte at offset {})",
                               bad_offset));
  }
  if (json_depth(body, kMaxJsonDepth) > kMaxJsonDepth) {
    return bad("", fmt::format("Request body is nested deeper than {} levels", kMaxJsonDepth));
  }
  try {
    *out = json::parse(body);
  } catch (const json::parse_error& e) {
    std::string what = e.what();
    const size_t pos = what.find("] ");
    if (pos != std::string::npos) what = what.substr(pos + 2);
    return bad("", "Malformed JSON body: " + what);
  } catch (const json::out_of_range&) {
    // The syntax is fine but a number does not fit a double (1e400, -1e999): name its field.
    PathTracker tracker;
    json::sax_parse(body, &tracker);
    const std::string field = tracker.path();
    return bad(field, fmt::format("'{}' is out of range: the number does not fit a 64-bit float",
                                  field.empty() ? "body" : field));
  }
  if (!out->is_object()) {
    return bad("", fmt::format("Request body must be a JSON object, got {}", type_word(*out)));
  }
  return std::nullopt;
}

std::optional<ApiError> check_unknown_fields(const json& obj, const std::set<std::string>& known) {
  for (auto it = obj.begin(); it != obj.end(); ++it) {
    if (known.count(it.key()) == 0) {
      return bad(it.key(), fmt::format("Unrecognized request argument supplied: {}", it.key()));
    }
  }
  return std::nullopt;
}

std::optional<ApiError> parse_token_ids(const json& arr, const char* param, std::vector<int32_t>* out) {
  out->clear();
  for (const json& t : arr) {
    if (!t.is_number_integer()) {
      return bad(param, fmt::format("'{}' token ids must be integers, got {}", param, type_word(t)));
    }
    const int64_t id = t.get<int64_t>();
    if (id < 0 || id > std::numeric_limits<int32_t>::max() ||
        (t.is_number_unsigned() && t.get<uint64_t>() > static_cast<uint64_t>(INT32_MAX))) {
      return bad(param, fmt::format("'{}' token id {} is out of range", param, t.dump()));
    }
    out->push_back(static_cast<int32_t>(id));
  }
  return std::nullopt;
}

std::optional<ApiError> joined_text(const json& v, const std::string& param, const TextParts& parts, std::string* out) {
  if (v.is_string()) {
    *out = v.get<std::string>();
    return std::nullopt;
  }
  if (!v.is_array()) {
    return bad(param, fmt::format("'{}' must be a string or a list of {}, got {}", param, parts.items, type_word(v)));
  }
  auto among = [](std::initializer_list<std::string_view> list, const std::string& type) {
    return std::find(list.begin(), list.end(), type) != list.end();
  };
  for (size_t i = 0; i < v.size(); ++i) {
    const json& part = v[i];
    const std::string p = fmt::format("{}[{}]", param, i);
    if (!part.is_object() || !part.contains("type") || !part["type"].is_string()) {
      return bad(p, fmt::format("'{}' must be {} with a 'type'", p, parts.item));
    }
    const std::string type = part["type"];
    if (among(parts.skipped_types, type)) continue;
    if (!among(parts.text_types, type)) return bad(p, fmt::format("'{}' has type '{}'; {}", p, type, parts.refused));
    if (!part.contains("text") || !part["text"].is_string()) return bad(p, fmt::format("'{}' needs a string 'text'", p));
    if (!out->empty()) *out += "\n";
    *out += part["text"].get<std::string>();
  }
  return std::nullopt;
}

}  // namespace tessera::server
