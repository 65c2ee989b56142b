// The wire shape of streamed chat deltas with reasoning and tools (chat_output.h): reasoning first,
// then content, then per call one chunk with index, id, type and name (arguments ""), then the
// arguments as they grow; the message form of the same text agrees.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "server/chat_output.h"

namespace tessera::server {
namespace {

using json = nlohmann::json;

ChatShaping qwen_shaping() {
  ChatShaping s;
  s.split_reasoning = true;
  s.tools_active = true;
  s.format = ToolCallFormat::kHermes;
  s.tool_names = {"get_weather"};
  s.call_id_prefix = "call_abc";
  return s;
}

TEST(ChatOutput, StreamedDeltasInOrder) {
  const ChatShaping s = qwen_shaping();
  ChatStreamShaper shaper(s, /*choice=*/1);
  const std::vector<std::string> pieces = {"<think>", "Paris", " weather", "</think>", "\n\n", "Let me", " check", ".\n",
                                           "<tool_call>", "\n{\"name\": \"get_weather\", \"arguments\": {\"", "city",
                                           "\": \"Paris\"}}", "\n</tool_call>"};
  std::vector<json> deltas;
  for (const std::string& p : pieces) {
    for (json& d : shaper.push(p)) deltas.push_back(std::move(d));
  }
  for (json& d : shaper.finish()) deltas.push_back(std::move(d));
  const std::vector<json> want = {
      {{"reasoning_content", "Paris"}},
      {{"reasoning_content", " weather"}},
      {{"content", "Let me"}},
      {{"content", " check"}},
      {{"content", "."}},  // the "\n" after it is trimmed: a block follows
      {{"tool_calls", {{{"index", 0}, {"id", "call_abc_1_0"}, {"type", "function"},
                        {"function", {{"name", "get_weather"}, {"arguments", ""}}}}}}},
      {{"tool_calls", {{{"index", 0}, {"function", {{"arguments", "{\""}}}}}}},
      {{"tool_calls", {{{"index", 0}, {"function", {{"arguments", "city"}}}}}}},
      {{"tool_calls", {{{"index", 0}, {"function", {{"arguments", "\": \"Paris\"}"}}}}}}},
  };
  ASSERT_EQ(deltas.size(), want.size()) << json(deltas).dump();
  for (size_t k = 0; k < want.size(); ++k) EXPECT_EQ(deltas[k], want[k]) << k;
  EXPECT_TRUE(shaper.made_tool_calls());

  std::string text;
  for (const std::string& p : pieces) text += p;
  bool made = false;
  const json message = chat_message(text, s, 1, &made);
  EXPECT_TRUE(made);
  EXPECT_EQ(message["reasoning_content"], "Paris weather");
  EXPECT_EQ(message["content"], "Let me check.");
  EXPECT_EQ(message["tool_calls"][0]["function"]["arguments"], "{\"city\": \"Paris\"}");
  EXPECT_EQ(message["tool_calls"][0]["id"], "call_abc_1_0");
}

TEST(ChatOutput, CutCallFinishesWithoutToolCalls) {
  const ChatShaping s = qwen_shaping();
  ChatStreamShaper shaper(s, 0);
  shaper.push("<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Pa");
  shaper.finish();
  EXPECT_FALSE(shaper.made_tool_calls());  // max_tokens cut it: the finish reason stays the engine's
}

}  // namespace
}  // namespace tessera::server
