// Front ends: JSON Schema, json_object, regex and choice produce grammars that accept exactly
// what they should; what cannot be enforced is an error naming the feature.
#include <gtest/gtest.h>

#include <map>
#include <memory>

#include "grammar/json_schema.h"
#include "grammar/regex_to_grammar.h"
#include "grammar/stack_automaton.h"

namespace tessera::grammar {
namespace {

// Parses each grammar once (the integer-range test asks thousands of questions of one grammar).
bool accepts(const std::string& grammar_text, std::string_view input) {
  static std::map<std::string, std::unique_ptr<StackAutomaton>> automata;
  auto& a = automata[grammar_text];
  if (!a) {
    auto g = parse_grammar(grammar_text);
    EXPECT_TRUE(g.ok()) << (g.ok() ? "" : g.error().message) << "\n" << grammar_text;
    if (!g.ok()) return false;
    a = std::make_unique<StackAutomaton>(std::make_shared<const Grammar>(std::move(g).value()));
  }
  const int32_t s = a->step_bytes(a->start_state(), input);
  return !a->is_dead(s) && a->can_end(s);
}

std::string schema_grammar(const std::string& schema) {
  auto g = json_schema_to_grammar(schema);
  EXPECT_TRUE(g.ok()) << schema << " -> " << (g.ok() ? "" : g.error().message);
  return g.ok() ? g.value() : "root ::= \"\"";
}

TEST(JsonSchema, ObjectsWithRequiredAndOptionalProperties) {
  const std::string g = schema_grammar(R"({"type": "object", "properties": {
      "name": {"type": "string"}, "age": {"type": "integer"}, "tags": {"type": "array",
      "items": {"type": "string"}, "maxItems": 2}}, "required": ["name"]})");
  EXPECT_TRUE(accepts(g, R"({"name": "x"})"));
  EXPECT_TRUE(accepts(g, R"({"name":"x","age":-3})"));
  EXPECT_TRUE(accepts(g, R"({"name": "a\"b", "tags": ["p", "q"]})"));
  EXPECT_TRUE(accepts(g, R"({"name": "x", "age": 1, "tags": []})"));
  EXPECT_FALSE(accepts(g, R"({"age": 1})"));                       // name is required
  EXPECT_FALSE(accepts(g, R"({"name": "x", "tags": ["p","q","r"]})"));  // maxItems
  EXPECT_FALSE(accepts(g, R"({"name": "x", "other": 1})"));        // no extra keys
  EXPECT_FALSE(accepts(g, R"({"name": "x",})"));
  EXPECT_FALSE(accepts(g, R"({"name": 1})"));
  EXPECT_FALSE(accepts(g, "{\"name\": \"a\nb\"}"));  // raw control character in a string
}

TEST(JsonSchema, EnumsConstsAnyOfAndRecursiveRefs) {
  const std::string g = schema_grammar(R"({"$defs": {"node": {"type": "object", "properties": {
      "v": {"enum": ["a", 1, null]}, "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
      "required": ["v"]}}, "anyOf": [{"$ref": "#/$defs/node"}, {"const": {"k": [true]}}]})");
  EXPECT_TRUE(accepts(g, R"({"v": "a"})"));
  EXPECT_TRUE(accepts(g, R"({"v": 1, "kids": [{"v": null, "kids": [{"v": "a"}]}]})"));
  EXPECT_TRUE(accepts(g, R"({"k":[true]})"));
  EXPECT_FALSE(accepts(g, R"({"v": 2})"));
  EXPECT_FALSE(accepts(g, R"({"k": [true]})"));  // const is the compact serialization
  EXPECT_FALSE(accepts(g, R"({"v": 1, "kids": [{}]})"));
}

TEST(JsonSchema, IntegerBoundsExactly) {
  const std::pair<int, int> ranges[] = {{-120, 35}, {7, 7}, {0, 1000}, {-999, -10}, {95, 1205}};
  for (auto [lo, hi] : ranges) {
    const std::string g = schema_grammar(R"({"type": "integer", "minimum": )" + std::to_string(lo) +
                                         R"(, "maximum": )" + std::to_string(hi) + "}");
    for (int v = -1300; v <= 1300; ++v) {
      ASSERT_EQ(accepts(g, std::to_string(v)), v >= lo && v <= hi) << lo << ".." << hi << ": " << v;
    }
    EXPECT_FALSE(accepts(g, "007"));
    EXPECT_FALSE(accepts(g, "-0"));
  }
  const std::string half = schema_grammar(R"({"type": "integer", "exclusiveMinimum": 41})");
  EXPECT_FALSE(accepts(half, "41"));
  EXPECT_TRUE(accepts(half, "42"));
  EXPECT_TRUE(accepts(half, "123456789"));
  EXPECT_FALSE(accepts(half, "-50"));
}

TEST(JsonSchema, NumberBoundsAtIntegers) {
  const std::string g = schema_grammar(R"({"type": "number", "minimum": -2, "maximum": 10})");
  for (const char* ok : {"0", "10", "10.000", "9.99", "-2", "-1.5", "-0.0", "3"}) {
    EXPECT_TRUE(accepts(g, ok)) << ok;
  }
  for (const char* bad : {"10.5", "11", "-2.01", "-3", "1e3", "01"}) EXPECT_FALSE(accepts(g, bad)) << bad;
}

TEST(JsonSchema, StringsFormatsAndPatterns) {
  const std::string g = schema_grammar(R"({"type": "object", "properties": {
      "d": {"type": "string", "format": "date"}, "id": {"type": "string", "format": "uuid"},
      "code": {"type": "string", "pattern": "^[A-Z]{2}-\\d{3}$"},
      "s": {"type": "string", "minLength": 2, "maxLength": 3}}, "required": ["d", "id", "code", "s"]})");
  EXPECT_TRUE(accepts(g, R"({"d": "2024-02-28", "id": "123e4567-e89b-12d3-a456-426614174000", "code": "AB-123", "s": "xy"})"));
  EXPECT_FALSE(accepts(g, R"({"d": "2024-02-30", "id": "123e4567-e89b-12d3-a456-426614174000", "code": "AB-123", "s": "xy"})"));
  EXPECT_FALSE(accepts(g, R"({"d": "2024-02-28", "id": "123e4567-e89b-12d3-a456-426614174000", "code": "AB-12", "s": "xy"})"));
  EXPECT_FALSE(accepts(g, R"({"d": "2024-02-28", "id": "123e4567-e89b-12d3-a456-426614174000", "code": "AB-123", "s": "wxyz"})"));
}

TEST(JsonSchema, UnsupportedFeaturesAreNamed) {
  const std::pair<const char*, const char*> cases[] = {
      {R"({"type": "array", "uniqueItems": true})", "'uniqueItems' is not supported"},
      {R"({"not": {"type": "string"}})", "'not' is not supported"},
      {R"({"type": "string", "format": "ipv6"})", "format 'ipv6' is not supported"},
      {R"({"type": "number", "minimum": 0.5})", "non-integer bounds on type number"},
      {R"({"$ref": "#/$defs/missing"})", "not found"},
      {R"({"$ref": "http://example.com/s.json"})", "only local '$ref'"},
      {R"({"type": "strin"})", "unknown type 'strin'"},
      {R"({"type": "object", "bogus": 1})", "unknown keyword 'bogus'"},
      {R"({"type": "string", "pattern": "(a)\\1"})", "backreferences"},
      {R"({"type": "integer", "minimum": 5, "maximum": 4})", "no integer within the bounds"},
      {R"({"type": "object")", "not valid JSON"},
      {"false", "admits nothing"},
  };
  for (const auto& [schema, want] : cases) {
    auto g = json_schema_to_grammar(schema);
    ASSERT_FALSE(g.ok()) << schema;
    EXPECT_NE(g.error().message.find(want), std::string::npos) << schema << " -> " << g.error().message;
  }
}

TEST(JsonObject, AnyObjectBothWhitespacePolicies) {
  const std::string compact = json_object_grammar();
  EXPECT_TRUE(accepts(compact, R"({"a": [1, 2.5e-3, {"b": null}], "c": "\u00e9"})"));
  EXPECT_FALSE(accepts(compact, "{\n\"a\": 1}"));
  EXPECT_FALSE(accepts(compact, "[1]"));
  const std::string any = json_object_grammar({JsonWhitespace::kAny});
  EXPECT_TRUE(accepts(any, "{\n  \"a\" : 1 ,\t\"b\":[ ] }"));
}

TEST(Regex, AcceptsTheLanguage) {
  struct Case {
    const char* regex;
    const char* input;
    bool accept;
  };
  const Case cases[] = {
      {"a|bc", "bc", true},         {"a|bc", "abc", false},       {"^(ab)+$", "abab", true},
      {"[0-9]{2,3}", "123", true},  {"[0-9]{2,3}", "1", false},   {"\\d+\\.\\d*", "3.", true},
      {"[^a-z]+", "AZ!", true},     {"[^a-z]+", "Ab", false},     {"x.y", "x\xc3\xa9y", true},
      {"x.y", "x\ny", false},       {"(?:ab)?c", "c", true},      {"(?<n>a)b+?", "abb", true},
      {"\\w+@\\w+\\.com", "me@ex.com", true}, {"colou?r", "color", true}, {"[-.]", "-", true},
  };
  for (const Case& c : cases) {
    auto g = regex_to_grammar(c.regex);
    ASSERT_TRUE(g.ok()) << c.regex << ": " << g.error().message;
    EXPECT_EQ(accepts(g.value(), c.input), c.accept) << c.regex << " / " << c.input;
  }
  for (const char* bad : {"(?=a)", "a\\b", "(a)\\1", "(?i)a", "a$b", "*a", "[a", "(a", "a{3,1}"}) {
    EXPECT_FALSE(regex_to_grammar(bad).ok()) << bad;
  }
  EXPECT_EQ(regex_to_grammar("ab{3,1}").error().message, "regex: {m,n} with n < m at offset 2");
  EXPECT_TRUE(regex_to_grammar("a{3,3}b{2,}c{0,1}").ok());
}

TEST(Choice, ExactlyOneOfTheStrings) {
  auto g = choice_to_grammar({"yes", "no", "maybe \"so\""});
  ASSERT_TRUE(g.ok());
  EXPECT_TRUE(accepts(g.value(), "no"));
  EXPECT_TRUE(accepts(g.value(), "maybe \"so\""));
  EXPECT_FALSE(accepts(g.value(), "yesno"));
  EXPECT_FALSE(choice_to_grammar({}).ok());
}

}  // namespace
}  // namespace tessera::grammar
