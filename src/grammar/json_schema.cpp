#include "grammar/json_schema.h"

#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>

#include "grammar/grammar.h"
#include "grammar/number_range.h"
#include "grammar/regex_to_grammar.h"

namespace tessera::grammar {
namespace {

using Json = nlohmann::ordered_json;

// Shared value rules. `ws` sits inside brackets, `comma` and `colon` between members.
// Whitespace and separators are written inline at every use (not as shared rules): a rule with
// one call site lets the compiler know what follows it, so tokens like ` "name` after a COLON are
// decided at compile time instead of on every step (see KnownParents in compiled_grammar.cpp).
struct Separators {
  std::string ws, comma, colon;
};
Separators separators(const JsonSchemaOptions& options) {
  if (options.whitespace == JsonWhitespace::kAny) {
    return {"[ \\t\\n\\r]*", "( [ \\t\\n\\r]* \",\" [ \\t\\n\\r]* )", "( [ \\t\\n\\r]* \":\" [ \\t\\n\\r]* )"};
  }
  return {"\"\"", "( \",\" \" \"? )", "( \":\" \" \"? )"};
}

// The generated text marks separators with control bytes, which grammar_literal() never leaves
// raw in a literal (it escapes them), so user strings cannot collide with the markers.
constexpr char kWs = '\x01', kComma = '\x02', kColon = '\x03';
#define WS_ "\x01"
#define COMMA_ "\x02"
#define COLON_ "\x03"

std::string with_separators(const std::string& text, const Separators& sep) {
  std::string out;
  for (char c : text) {
    if (c == kWs) out += sep.ws;
    else if (c == kComma) out += sep.comma;
    else if (c == kColon) out += sep.colon;
    else out += c;
  }
  return out;
}

std::string base_rules(const JsonSchemaOptions& options) {
  std::string out;
  out += R"(json-value ::= json-object | json-array | json-string | json-number | "true" | "false" | "null"
json-object ::= "{" )" WS_ R"( ( json-string )" COLON_ R"( json-value ( )" COMMA_ R"( json-string )" COLON_ R"( json-value )* )? )" WS_ R"( "}"
json-array ::= "[" )" WS_ R"( ( json-value ( )" COMMA_ R"( json-value )* )? )" WS_ R"( "]"
json-string ::= "\"" json-char* "\""
json-char ::= [^"\\\x00-\x1F] | "\\" ( ["\\/bfnrt] | "u" [0-9a-fA-F]{4} )
json-int ::= "-"? ( "0" | [1-9] [0-9]* )
json-number ::= json-int ( "." [0-9]+ )? ( [eE] [-+]? [0-9]+ )?
json-date ::= [0-9]{4} "-" ( ( "01" | "03" | "05" | "07" | "08" | "10" | "12" ) "-" ( "0" [1-9] | [12] [0-9] | "3" [01] ) | ( "04" | "06" | "09" | "11" ) "-" ( "0" [1-9] | [12] [0-9] | "30" ) | "02-" ( "0" [1-9] | "1" [0-9] | "2" [0-8] ) )
json-time ::= ( [01] [0-9] | "2" [0-3] ) ":" [0-5] [0-9] ":" [0-5] [0-9] ( "." [0-9]{1,6} )? ( "Z" | [+-] ( [01] [0-9] | "2" [0-3] ) ":" [0-5] [0-9] )
json-uuid ::= [0-9a-f]{8} "-" [0-9a-f]{4} "-" [0-9a-f]{4} "-" [0-9a-f]{4} "-" [0-9a-f]{12}
json-email ::= [a-zA-Z0-9_+-]+ ( "." [a-zA-Z0-9_+-]+ )* "@" [a-zA-Z0-9]+ ( "-" [a-zA-Z0-9]+ )* ( "." [a-zA-Z0-9]+ ( "-" [a-zA-Z0-9]+ )* )+
json-octet ::= "25" [0-5] | "2" [0-4] [0-9] | "1" [0-9] [0-9] | [1-9] [0-9] | [0-9]
json-ipv4 ::= json-octet "." json-octet "." json-octet "." json-octet
json-hostname ::= [a-zA-Z0-9]{1,20} ( "-" [a-zA-Z0-9]{1,20} )* ( "." [a-zA-Z0-9]{1,20} ( "-" [a-zA-Z0-9]{1,20} )* )*
json-uri ::= [a-zA-Z] [a-zA-Z0-9+.-]* "://" [a-zA-Z0-9\-._~:/?#@!$&'()*+,;=%]+
)";
  return with_separators(out, separators(options));
}

const std::set<std::string>& annotation_keywords() {
  static const std::set<std::string> k = {
      "title", "description", "default", "examples", "$schema", "$id", "$comment", "deprecated",
      "readOnly", "writeOnly", "$anchor", "example", "x-order"};
  return k;
}

class SchemaConverter {
 public:
  SchemaConverter(const Json& root, const JsonSchemaOptions& options)
      : root_(root), options_(options) {}

  Result<std::string> run() {
    const std::string root_expr = visit(root_, "root-value", "#");
    if (error_) return *error_;
    std::string out = "root ::= " + root_expr + "\n";
    for (const auto& [name, body] : rules_) out += name + " ::= " + body + "\n";
    return with_separators(out, separators(options_)) + base_rules(options_);
  }

 private:
  void fail(const std::string& where, const std::string& what) {
    if (!error_) {
      error_ = Error{ErrorCode::kInvalidArgument, "json_schema: " + what + " (at " + where + ")"};
    }
  }

  std::string new_rule_name(const std::string& hint) {
    std::string base;
    for (char c : hint) {
      const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
      base += ok ? c : '-';
    }
    if (base.empty() || base.size() > 40) base = "s";
    std::string name = "s-" + base;
    for (int i = 2; used_names_.count(name); ++i) name = "s-" + base + "-" + std::to_string(i);
    used_names_.insert(name);
    return name;
  }
  std::string define(const std::string& hint, const std::string& body) {
    const std::string name = new_rule_name(hint);
    rules_.emplace_back(name, body);
    return name;
  }

  static std::string alternatives(const std::vector<std::string>& alts) {
    if (alts.size() == 1) return alts[0];
    std::string out = "(";
    for (size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : " ") + alts[i];
    return out + " )";
  }

  static std::string literal_of(const Json& value) { return grammar_literal(value.dump()); }

  std::string visit(const Json& schema, const std::string& hint, const std::string& where) {
    if (error_) return "\"\"";
    if (++depth_ > 64) {
      fail(where, "schema nested too deeply");
      return "\"\"";
    }
    std::string out = visit_inner(schema, hint, where);
    --depth_;
    return out;
  }

  std::string visit_inner(const Json& schema, const std::string& hint, const std::string& where) {
    if (schema.is_boolean()) {
      if (!schema.get<bool>()) fail(where, "schema `false` admits nothing");
      return "json-value";
    }
    if (!schema.is_object()) {
      fail(where, "a schema must be an object or a boolean");
      return "\"\"";
    }
    static const std::set<std::string> kUnsupported = {
        "not", "if", "then", "else", "uniqueItems", "patternProperties", "multipleOf", "contains",
        "minContains", "maxContains", "minProperties", "maxProperties", "propertyNames",
        "dependentRequired", "dependentSchemas", "dependencies", "unevaluatedProperties",
        "unevaluatedItems", "$dynamicRef", "additionalItems"};
    static const std::set<std::string> kKnown = {
        "type", "properties", "required", "additionalProperties", "enum", "const", "anyOf",
        "oneOf", "allOf", "$ref", "$defs", "definitions", "items", "prefixItems", "minItems",
        "maxItems", "minLength", "maxLength", "pattern", "format", "minimum", "maximum",
        "exclusiveMinimum", "exclusiveMaximum", "nullable", "strict"};
    for (const auto& [key, value] : schema.items()) {
      if (kUnsupported.count(key)) {
        // uniqueItems: false and friends say nothing.
        if (key == "uniqueItems" && value == false) continue;
        fail(where, "keyword '" + key + "' is not supported");
      } else if (!kKnown.count(key) && !annotation_keywords().count(key)) {
        fail(where, "unknown keyword '" + key + "'");
      }
    }
    if (error_) return "\"\"";
    auto has_constraints_besides = [&](std::initializer_list<const char*> allowed) {
      for (const auto& [key, value] : schema.items()) {
        if (annotation_keywords().count(key) || key == "$defs" || key == "definitions") continue;
        bool ok = false;
        for (const char* a : allowed) ok = ok || key == a;
        if (!ok) return true;
      }
      return false;
    };
    if (schema.contains("$ref")) {
      if (has_constraints_besides({"$ref"})) fail(where, "'$ref' beside other keywords is not supported");
      return visit_ref(schema["$ref"], where);
    }
    for (const char* key : {"anyOf", "oneOf"}) {
      if (!schema.contains(key)) continue;
      const Json& list = schema[key];
      if (!list.is_array() || list.empty()) {
        fail(where, std::string("'") + key + "' must be a non-empty array");
        return "\"\"";
      }
      if (has_constraints_besides({key, "nullable"})) {
        fail(where, std::string("'") + key + "' beside other constraints is not supported");
        return "\"\"";
      }
      std::vector<std::string> alts;
      for (size_t i = 0; i < list.size(); ++i) {
        alts.push_back(visit(list[i], hint + "-" + std::to_string(i), where + "/" + key + "/" + std::to_string(i)));
      }
      if (schema.value("nullable", false)) alts.push_back("\"null\"");
      return define(hint, alternatives(alts));
    }
    if (schema.contains("allOf")) {
      const Json& list = schema["allOf"];
      if (!list.is_array() || list.size() != 1 || has_constraints_besides({"allOf"})) {
        fail(where, "'allOf' is supported with exactly one schema and no siblings");
        return "\"\"";
      }
      return visit(list[0], hint, where + "/allOf/0");
    }
    if (schema.contains("const")) {
      return literal_of(schema["const"]);
    }
    if (schema.contains("enum")) {
      const Json& list = schema["enum"];
      if (!list.is_array() || list.empty()) {
        fail(where, "'enum' must be a non-empty array");
        return "\"\"";
      }
      std::vector<std::string> alts;
      for (const auto& v : list) alts.push_back(literal_of(v));
      return define(hint, alternatives(alts));
    }
    std::vector<std::string> types;
    if (schema.contains("type")) {
      const Json& t = schema["type"];
      if (t.is_string()) types.push_back(t.get<std::string>());
      else if (t.is_array()) for (const auto& x : t) types.push_back(x.is_string() ? x.get<std::string>() : "?");
      else fail(where, "'type' must be a string or an array");
    } else if (schema.contains("properties") || schema.contains("additionalProperties") ||
               schema.contains("required")) {
      types.push_back("object");
    } else if (schema.contains("items") || schema.contains("prefixItems")) {
      types.push_back("array");
    } else if (schema.contains("pattern") || schema.contains("format") ||
               schema.contains("minLength") || schema.contains("maxLength")) {
      types.push_back("string");
    } else if (schema.contains("minimum") || schema.contains("maximum")) {
      types.push_back("number");
    } else {
      return "json-value";
    }
    if (schema.value("nullable", false)) types.push_back("null");
    std::vector<std::string> alts;
    for (const std::string& t : types) {
      const std::string h = types.size() > 1 ? hint + "-" + t : hint;
      if (t == "string") alts.push_back(visit_string(schema, h, where));
      else if (t == "integer") alts.push_back(visit_number(schema, true, h, where));
      else if (t == "number") alts.push_back(visit_number(schema, false, h, where));
      else if (t == "boolean") alts.push_back("( \"true\" | \"false\" )");
      else if (t == "null") alts.push_back("\"null\"");
      else if (t == "object") alts.push_back(visit_object(schema, h, where));
      else if (t == "array") alts.push_back(visit_array(schema, h, where));
      else fail(where, "unknown type '" + t + "'");
    }
    return alternatives(alts);
  }

  std::string visit_ref(const Json& ref, const std::string& where) {
    if (!ref.is_string()) {
      fail(where, "'$ref' must be a string");
      return "\"\"";
    }
    const std::string target = ref.get<std::string>();
    if (auto it = refs_.find(target); it != refs_.end()) return it->second;
    if (target.empty() || target[0] != '#') {
      fail(where, "only local '$ref' (\"#...\") is supported, not '" + target + "'");
      return "\"\"";
    }
    const Json* node = &root_;
    std::string pointer = target.substr(1);
    if (!pointer.empty()) {
      try {
        node = &root_.at(Json::json_pointer(pointer));
      } catch (const std::exception&) {
        fail(where, "'$ref' target '" + target + "' not found");
        return "\"\"";
      }
    }
    const std::string name = new_rule_name("ref" + pointer);
    refs_[target] = name;
    const size_t slot = rules_.size();
    rules_.emplace_back(name, "");
    const std::string body = visit(*node, name + "-v", target);
    rules_[slot].second = body;
    return name;
  }

  std::optional<int64_t> get_count(const Json& schema, const char* key, const std::string& where) {
    if (!schema.contains(key)) return std::nullopt;
    const Json& v = schema[key];
    if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > kMaxRepeat) {
      fail(where, std::string("'") + key + "' must be an integer in [0, " + std::to_string(kMaxRepeat) + "]");
      return std::nullopt;
    }
    return v.get<int64_t>();
  }

  // x{lo,hi}; hi < 0: unbounded.
  static std::string repeat(const std::string& x, int64_t lo, int64_t hi) {
    if (hi == lo) return lo == 0 ? "\"\"" : "(" + x + "){" + std::to_string(lo) + "}";
    return "(" + x + "){" + std::to_string(lo) + "," + (hi >= 0 ? std::to_string(hi) : "") + "}";
  }

  std::string visit_string(const Json& schema, const std::string& hint, const std::string& where) {
    const auto min_len = get_count(schema, "minLength", where);
    const auto max_len = get_count(schema, "maxLength", where);
    const bool has_len = min_len || max_len;
    if (min_len && max_len && *max_len < *min_len) fail(where, "maxLength < minLength");
    if (schema.contains("pattern")) {
      if (has_len || schema.contains("format")) fail(where, "'pattern' beside length or format is not supported");
      if (!schema["pattern"].is_string()) return fail(where, "'pattern' must be a string"), "\"\"";
      auto expr = regex_to_grammar_expr(schema["pattern"].get<std::string>(), RegexTarget::kJsonString);
      if (!expr.ok()) return fail(where, "pattern: " + expr.error().message), "\"\"";
      return define(hint, "\"\\\"\" " + expr.value() + " \"\\\"\"");
    }
    if (schema.contains("format")) {
      if (has_len) fail(where, "'format' beside length limits is not supported");
      static const std::map<std::string, std::string> kFormats = {
          {"date", "json-date"}, {"time", "json-time"}, {"date-time", "json-date \"T\" json-time"},
          {"uuid", "json-uuid"}, {"email", "json-email"}, {"ipv4", "json-ipv4"},
          {"hostname", "json-hostname"}, {"uri", "json-uri"}};
      const std::string format = schema["format"].is_string() ? schema["format"].get<std::string>() : "?";
      auto it = kFormats.find(format);
      if (it == kFormats.end()) return fail(where, "format '" + format + "' is not supported"), "\"\"";
      return "( \"\\\"\" " + it->second + " \"\\\"\" )";
    }
    if (has_len) return "( \"\\\"\" " + repeat("json-char", min_len.value_or(0), max_len.value_or(-1)) + " \"\\\"\" )";
    return "json-string";
  }

  std::string visit_number(const Json& schema, bool integer, const std::string& hint,
                           const std::string& where) {
    // minimum/maximum are inclusive; exclusiveMinimum/Maximum are numbers (draft 6+) that win
    // when tighter, or booleans (draft 4) that make minimum/maximum exclusive.
    std::optional<double> lo, hi;
    bool lo_excl = false, hi_excl = false;
    auto number_at = [&](const char* key) -> std::optional<double> {
      if (!schema.contains(key) || schema[key].is_boolean()) return std::nullopt;
      if (!schema[key].is_number()) {
        fail(where, std::string("'") + key + "' must be a number");
        return std::nullopt;
      }
      return schema[key].get<double>();
    };
    lo = number_at("minimum");
    hi = number_at("maximum");
    if (schema.value("exclusiveMinimum", Json(false)) == true) lo_excl = true;
    if (schema.value("exclusiveMaximum", Json(false)) == true) hi_excl = true;
    if (auto x = number_at("exclusiveMinimum"); x && (!lo || *x >= *lo)) lo = x, lo_excl = true;
    if (auto x = number_at("exclusiveMaximum"); x && (!hi || *x <= *hi)) hi = x, hi_excl = true;
    if (!lo && !hi) return integer ? "json-int" : "json-number";
    constexpr double kLimit = 1e15;
    if ((lo && std::fabs(*lo) > kLimit) || (hi && std::fabs(*hi) > kLimit)) {
      fail(where, "numeric bounds beyond 1e15 are not supported");
      return "\"\"";
    }
    std::optional<int64_t> ilo, ihi;
    if (integer) {
      if (lo) ilo = static_cast<int64_t>(lo_excl ? std::floor(*lo) + 1 : std::ceil(*lo));
      if (hi) ihi = static_cast<int64_t>(hi_excl ? std::ceil(*hi) - 1 : std::floor(*hi));
      if (ilo && ihi && *ihi < *ilo) return fail(where, "no integer within the bounds"), "\"\"";
      return define(hint, integer_range_expr(ilo, ihi));
    }
    if (lo_excl || hi_excl) return fail(where, "exclusive bounds on type number are not supported"), "\"\"";
    if ((lo && *lo != std::floor(*lo)) || (hi && *hi != std::floor(*hi))) {
      return fail(where, "non-integer bounds on type number are not supported"), "\"\"";
    }
    if (lo) ilo = static_cast<int64_t>(*lo);
    if (hi) ihi = static_cast<int64_t>(*hi);
    if (ilo && ihi && *ihi < *ilo) return fail(where, "maximum < minimum"), "\"\"";
    return define(hint, decimal_range_expr(ilo, ihi));
  }

  std::string visit_object(const Json& schema, const std::string& hint, const std::string& where) {
    const Json empty = Json::object();
    const Json& props = schema.contains("properties") ? schema["properties"] : empty;
    if (!props.is_object()) return fail(where, "'properties' must be an object"), "\"\"";
    std::set<std::string> required;
    if (schema.contains("required")) {
      if (!schema["required"].is_array()) return fail(where, "'required' must be an array"), "\"\"";
      for (const auto& r : schema["required"]) {
        if (!r.is_string()) return fail(where, "'required' entries must be strings"), "\"\"";
        required.insert(r.get<std::string>());
      }
    }
    struct Member {
      std::string expr;  // key COLON value
      bool required;
    };
    std::vector<Member> members;
    std::set<std::string> declared;
    for (const auto& [key, sub] : props.items()) {
      declared.insert(key);
      const std::string value = visit(sub, hint + "-" + key, where + "/properties/" + key);
      members.push_back({grammar_literal(Json(key).dump()) + " " COLON_ " " + value, required.count(key) > 0});
    }
    for (const std::string& key : required) {
      if (!declared.count(key)) members.push_back({grammar_literal(Json(key).dump()) + " " COLON_ " json-value", true});
    }
    const bool has_additional = schema.contains("additionalProperties");
    const Json additional = has_additional ? schema["additionalProperties"] : Json(false);
    if (members.empty()) {
      // No declared keys: a map when additionalProperties allows it (absent: any object).
      if (!has_additional || additional == true) return "json-object";
      if (additional == false) return "( \"{\" " WS_ " \"}\" )";
      const std::string value = visit(additional, hint + "-value", where + "/additionalProperties");
      const std::string entry = "json-string " COLON_ " " + value;
      return define(hint, "\"{\" " WS_ " ( " + entry + " ( " COMMA_ " " + entry + " )* )? " WS_ " \"}\"");
    }
    // Declared keys in order, optional ones skippable. first[i]: nothing written before i;
    // rest[i]: something was, so a COMMA leads.
    const size_t n = members.size();
    std::vector<std::string> first(n + 1), rest(n + 1);
    const std::string base = new_rule_name(hint + "-m");
    first[n] = rest[n] = "\"\"";
    for (size_t k = n; k-- > 0;) {
      const std::string& m = members[k].expr;
      std::string rest_body = COMMA_ " " + m + " " + rest[k + 1];
      if (!members[k].required) rest_body = "( " + rest_body + " | " + rest[k + 1] + " )";
      rest[k] = base + "-r" + std::to_string(k);
      used_names_.insert(rest[k]);
      rules_.emplace_back(rest[k], rest_body);
      std::string first_body = m + " " + rest[k + 1];
      if (!members[k].required) first_body = "( " + first_body + " | " + first[k + 1] + " )";
      first[k] = base + "-f" + std::to_string(k);
      used_names_.insert(first[k]);
      rules_.emplace_back(first[k], first_body);
    }
    return define(hint, "\"{\" " WS_ " " + first[0] + " " WS_ " \"}\"");
  }

  std::string visit_array(const Json& schema, const std::string& hint, const std::string& where) {
    const auto min_items = get_count(schema, "minItems", where);
    const auto max_items = get_count(schema, "maxItems", where);
    if (min_items && max_items && *max_items < *min_items) fail(where, "maxItems < minItems");
    std::string item = "json-value";
    bool items_allowed = true;
    if (schema.contains("items")) {
      if (schema["items"] == false) items_allowed = false;
      else item = visit(schema["items"], hint + "-item", where + "/items");
    }
    if (schema.contains("prefixItems")) {
      const Json& prefix = schema["prefixItems"];
      if (!prefix.is_array() || min_items || max_items) {
        return fail(where, "'prefixItems' is supported as an array without minItems/maxItems"), "\"\"";
      }
      std::string body = "\"[\" " WS_ "";
      for (size_t i = 0; i < prefix.size(); ++i) {
        body += (i ? " " COMMA_ " " : " ") + visit(prefix[i], hint + "-" + std::to_string(i),
                                             where + "/prefixItems/" + std::to_string(i));
      }
      if (items_allowed && schema.contains("items")) {
        body += prefix.empty() ? " ( " + item + " ( " COMMA_ " " + item + " )* )?" : " ( " COMMA_ " " + item + " )*";
      }
      return define(hint, body + " " WS_ " \"]\"");
    }
    if (!items_allowed) {
      if (min_items.value_or(0) > 0) return fail(where, "'items': false with minItems > 0"), "\"\"";
      return "( \"[\" " WS_ " \"]\" )";
    }
    const int64_t lo = min_items.value_or(0);
    if (max_items && *max_items == 0) return "( \"[\" " WS_ " \"]\" )";
    const int64_t more_hi = max_items.value_or(0) - 1;  // -1 (unbounded) without maxItems
    const std::string tail = repeat(COMMA_ " " + item, lo > 0 ? lo - 1 : 0, more_hi);
    std::string inner = item + " " + tail;
    if (lo == 0) inner = "( " + inner + " )?";
    return define(hint, "\"[\" " WS_ " " + inner + " " WS_ " \"]\"");
  }

  const Json& root_;
  JsonSchemaOptions options_;
  std::vector<std::pair<std::string, std::string>> rules_;
  std::set<std::string> used_names_;
  std::map<std::string, std::string> refs_;
  std::optional<Error> error_;
  int depth_ = 0;
};

}  // namespace

Result<std::string> json_schema_to_grammar(std::string_view schema_json,
                                           const JsonSchemaOptions& options) {
  Json schema;
  try {
    schema = Json::parse(schema_json);
  } catch (const std::exception& e) {
    return Error{ErrorCode::kInvalidArgument, std::string("json_schema: not valid JSON: ") + e.what()};
  }
  return SchemaConverter(schema, options).run();
}

std::string json_object_grammar(const JsonSchemaOptions& options) {
  return "root ::= json-object\n" + base_rules(options);
}

Result<std::string> choice_to_grammar(const std::vector<std::string>& choices) {
  if (choices.empty()) return Error{ErrorCode::kInvalidArgument, "choice: the list is empty"};
  std::string out = "root ::=";
  for (size_t i = 0; i < choices.size(); ++i) {
    if (choices[i].empty()) return Error{ErrorCode::kInvalidArgument, "choice: an empty string"};
    out += (i ? " | " : " ") + grammar_literal(choices[i]);
  }
  return out + "\n";
}

}  // namespace tessera::grammar
