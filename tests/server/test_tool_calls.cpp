// The readable tool-call parser per family format (tool_calls.h): calls, content around them,
// arguments as the model wrote them, malformed output kept as content.
#include <gtest/gtest.h>

#include "server/tool_calls.h"

namespace tessera::server {
namespace {

const std::set<std::string> kTools = {"get_weather", "get_time"};

TEST(ToolCalls, FormatFromTemplate) {
  EXPECT_EQ(tool_call_format_for_template("{{- '<tool_call>\\n' }}"), ToolCallFormat::kHermes);
  EXPECT_EQ(tool_call_format_for_template("[TOOL_CALLS]"), ToolCallFormat::kMistral);
  EXPECT_EQ(tool_call_format_for_template("<|start_header_id|>"), ToolCallFormat::kLlama3);
  EXPECT_EQ(tool_call_format_for_template("<start_of_turn>"), ToolCallFormat::kGenericJson);
}

TEST(ToolCalls, Hermes) {
  auto r = parse_tool_calls("<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>",
                            ToolCallFormat::kHermes, kTools);
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0].name, "get_weather");
  EXPECT_EQ(r.calls[0].arguments, "{\"city\": \"Paris\"}");  // the model's bytes
  EXPECT_EQ(r.content, "");
  r = parse_tool_calls("Let me check.\n<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}</tool_call>\n"
                       "<tool_call>{\"name\": \"get_time\", \"arguments\": \"{\\\"tz\\\": \\\"CET\\\"}\"}</tool_call>",
                       ToolCallFormat::kHermes, kTools);
  ASSERT_EQ(r.calls.size(), 2u);
  EXPECT_EQ(r.calls[1].name, "get_time");
  EXPECT_EQ(r.calls[1].arguments, "{\"tz\": \"CET\"}");  // a JSON string, decoded
  EXPECT_EQ(r.content, "Let me check.");
}

TEST(ToolCalls, Mistral) {
  auto r = parse_tool_calls("[TOOL_CALLS] [{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}, "
                            "{\"name\": \"get_time\", \"arguments\": {\"tz\": \"CET\"}}]",
                            ToolCallFormat::kMistral, kTools);
  ASSERT_EQ(r.calls.size(), 2u);
  EXPECT_EQ(r.calls[0].arguments, "{\"city\": \"Oslo\"}");
  EXPECT_EQ(r.calls[1].name, "get_time");
}

TEST(ToolCalls, Llama3) {
  auto r = parse_tool_calls("<|python_tag|>{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Rome\"}}",
                            ToolCallFormat::kLlama3, kTools);
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0].arguments, "{\"city\": \"Rome\"}");
  r = parse_tool_calls("{\"name\": \"get_weather\", \"parameters\": {\"city\": \"a;}\"}}; {\"name\": \"get_time\", \"parameters\": {}}",
                       ToolCallFormat::kLlama3, kTools);
  ASSERT_EQ(r.calls.size(), 2u);
  EXPECT_EQ(r.calls[0].arguments, "{\"city\": \"a;}\"}");
  EXPECT_EQ(r.calls[1].arguments, "{}");
}

TEST(ToolCalls, GenericJsonFallback) {
  auto r = parse_tool_calls("```json\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n```",
                            ToolCallFormat::kHermes, kTools);
  ASSERT_EQ(r.calls.size(), 1u);
  r = parse_tool_calls("{\"tool_calls\": [{\"type\": \"function\", \"function\": {\"name\": \"get_time\", \"arguments\": \"{}\"}}]}",
                       ToolCallFormat::kGenericJson, kTools);
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0].name, "get_time");
}

TEST(ToolCalls, MalformedStaysContent) {
  const char* cases[] = {
      "<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}",       // unterminated tag
      "<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\": </tool_call>",     // bad JSON
      "<tool_call>{\"name\": \"launch_rocket\", \"arguments\": {}}</tool_call>",          // unknown function
      "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Par",                      // unterminated JSON
      "{\"name\": \"get_weather\", \"arguments\": [1, 2]}",                               // arguments not an object
      "The weather is nice.",
  };
  for (const char* text : cases) {
    for (ToolCallFormat f : {ToolCallFormat::kHermes, ToolCallFormat::kMistral, ToolCallFormat::kLlama3, ToolCallFormat::kGenericJson}) {
      auto r = parse_tool_calls(text, f, kTools);
      EXPECT_TRUE(r.calls.empty()) << text << " / " << tool_call_format_name(f);
      EXPECT_EQ(r.content, text);
    }
  }
}

TEST(ToolCalls, ContentAroundHermesBlocks) {
  // Blanks next to a block are trimmed, the pieces joined by "\n"; the text's own ends are kept.
  auto r = parse_tool_calls("  Checking.  \n<tool_call>{\"name\": \"get_time\"}</tool_call>\n\n and \n"
                            "<tool_call>[{\"name\": \"get_weather\", \"parameters\": {}}]</tool_call> done. ",
                            ToolCallFormat::kHermes, kTools);
  ASSERT_EQ(r.calls.size(), 2u);
  EXPECT_EQ(r.calls[0].arguments, "{}");
  EXPECT_EQ(r.content, "  Checking.\nand\ndone. ");
  // The last block may end the output without </tool_call>; a cut one may not.
  EXPECT_EQ(parse_tool_calls("<tool_call>{\"name\": \"get_time\"}\n", ToolCallFormat::kHermes, kTools).calls.size(), 1u);
  EXPECT_TRUE(parse_tool_calls("<tool_call>{\"name\": \"get_time\"}</tool_", ToolCallFormat::kHermes, kTools).calls.empty());
}

TEST(ToolCalls, DecidingKeyAndRepeats) {
  // The first of name / function / tool_calls decides the shape.
  auto r = parse_tool_calls("{\"type\": \"function\", \"function\": {\"name\": \"get_time\", \"arguments\": {\"tz\": 1}}, "
                            "\"name\": \"ignored\"}", ToolCallFormat::kGenericJson, kTools);
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0].arguments, "{\"tz\": 1}");
  r = parse_tool_calls("{\"arguments\": {\"city\": \"Oslo\"}, \"name\": \"get_weather\"}", ToolCallFormat::kGenericJson, kTools);
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0].arguments, "{\"city\": \"Oslo\"}");
  for (const char* bad : {"{\"name\": \"get_time\", \"name\": \"get_time\"}",
                          "{\"name\": \"get_time\", \"arguments\": {}, \"parameters\": {}}",
                          "[]", "{\"tool_calls\": []}", "[[{\"name\": \"get_time\"}]]", "{\"answer\": 42}"}) {
    EXPECT_TRUE(parse_tool_calls(bad, ToolCallFormat::kGenericJson, kTools).calls.empty()) << bad;
  }
}

}  // namespace
}  // namespace tessera::server
