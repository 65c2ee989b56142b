// Structured-output request fields: response_format json_object / json_schema (chat and
// completions), regex, grammar, choice; shape errors are 400s naming the parameter.
#include <gtest/gtest.h>

#include "server/protocol.h"

namespace tessera::server {
namespace {

using Kind = StructuredOutput::Kind;

GenerateSpec parse_ok(ApiKind kind, const std::string& body) {
  GenerateSpec spec;
  auto e = parse_generate_request(kind, body, ProtocolLimits{}, &spec);
  EXPECT_FALSE(e.has_value()) << body << " -> " << (e ? e->message : "");
  return spec;
}

ApiError parse_error(ApiKind kind, const std::string& body) {
  GenerateSpec spec;
  auto e = parse_generate_request(kind, body, ProtocolLimits{}, &spec);
  EXPECT_TRUE(e.has_value()) << body;
  return e.value_or(ApiError{});
}

const char* kChat = R"("messages": [{"role": "user", "content": "hi"}])";

TEST(StructuredOutputParse, ResponseFormats) {
  auto s = parse_ok(ApiKind::kChat, std::string("{") + kChat + R"(, "response_format": {"type": "text"}})");
  EXPECT_EQ(s.params.structured.kind, Kind::kNone);
  s = parse_ok(ApiKind::kChat, std::string("{") + kChat + R"(, "response_format": {"type": "json_object"}})");
  EXPECT_EQ(s.params.structured.kind, Kind::kJsonObject);
  // The schema keeps the client's key order (properties are generated in that order).
  s = parse_ok(ApiKind::kCompletion, R"({"prompt": "x", "response_format": {"type": "json_schema",
      "json_schema": {"name": "p", "strict": true, "schema": {"type": "object",
      "properties": {"zeta": {"type": "string"}, "alpha": {"type": "integer"}}}}}})");
  EXPECT_EQ(s.params.structured.kind, Kind::kJsonSchema);
  EXPECT_EQ(s.params.structured.text,
            R"({"type":"object","properties":{"zeta":{"type":"string"},"alpha":{"type":"integer"}}})");
}

TEST(StructuredOutputParse, TesseraFields) {
  auto s = parse_ok(ApiKind::kCompletion, R"({"prompt": "x", "regex": "[0-9]+"})");
  EXPECT_EQ(s.params.structured.kind, Kind::kRegex);
  EXPECT_EQ(s.params.structured.text, "[0-9]+");
  s = parse_ok(ApiKind::kCompletion, R"({"prompt": "x", "grammar": "root ::= \"a\""})");
  EXPECT_EQ(s.params.structured.kind, Kind::kGrammar);
  s = parse_ok(ApiKind::kChat, std::string("{") + kChat + R"(, "choice": ["yes", "no"]})");
  EXPECT_EQ(s.params.structured.kind, Kind::kChoice);
  EXPECT_EQ(s.params.structured.choices, (std::vector<std::string>{"yes", "no"}));
  s = parse_ok(ApiKind::kChat, std::string("{") + kChat +
                                   R"(, "response_format": {"type": "json_object"}, "json_whitespace": "any"})");
  EXPECT_TRUE(s.params.structured.any_whitespace);
}

TEST(StructuredOutputParse, ShapeErrorsName400Params) {
  const std::pair<std::string, std::string> cases[] = {
      {R"("response_format": {"type": "yaml"})", "response_format"},
      {R"("response_format": {"type": "json_schema"})", "response_format"},
      {R"("response_format": {"type": "json_schema", "json_schema": {"schema": 3}})", "response_format"},
      {R"("regex": 5)", "regex"},
      {R"("choice": [])", "choice"},
      {R"("choice": ["a", 1])", "choice"},
      {R"("regex": "a", "choice": ["a"])", "response_format"},
      {R"("json_whitespace": "lots")", "json_whitespace"},
  };
  for (const auto& [fields, param] : cases) {
    const ApiError e = parse_error(ApiKind::kChat, std::string("{") + kChat + ", " + fields + "}");
    EXPECT_EQ(e.param, param) << fields << " -> " << e.message;
    EXPECT_EQ(e.type, ErrorType::kInvalidRequest) << fields;
  }
}

}  // namespace
}  // namespace tessera::server
