// The agent APIs' adapters without a server: golden pairs (wire JSON in -> Conversation and the
// OpenAI-shaped template input; AssistantOutput / deltas -> wire JSON out) for /v1/messages and
// /v1/responses, and malformed bodies -> the API's own 400.
#include <gtest/gtest.h>

#include "server/anthropic_api.h"
#include "server/responses_api.h"

namespace tessera::server {
namespace {

using json = nlohmann::json;
using ojson = nlohmann::ordered_json;

ChatApiRequest parse_anthropic_ok(const std::string& body, bool max_tokens_required = true) {
  ChatApiRequest r;
  auto e = parse_anthropic_request(body, ProtocolLimits{}, max_tokens_required, &r);
  EXPECT_FALSE(e.has_value()) << (e ? e->message : "");
  return r;
}

ApiError parse_anthropic_err(const std::string& body) {
  ChatApiRequest r;
  auto e = parse_anthropic_request(body, ProtocolLimits{}, true, &r);
  EXPECT_TRUE(e.has_value()) << body;
  return e.value_or(ApiError{});
}

TEST(AnthropicParse, GoldenToolRoundTrip) {
  // What Claude Code sends, trimmed: system blocks with cache_control, a per-turn system message,
  // a tool_use answered by a tool_result, thinking, and the fields a local server ignores.
  const std::string body = R"({
    "model": "claude-sonnet-4-5-20250929", "max_tokens": 64, "stream": true,
    "system": [{"type": "text", "text": "You are terse."},
               {"type": "text", "text": "Use tools.", "cache_control": {"type": "ephemeral"}}],
    "messages": [
      {"role": "user", "content": [{"type": "text", "text": "weather in Paris?"}]},
      {"role": "system", "content": [{"type": "text", "text": "# Env"}], "output_config": {"effort": "low"}},
      {"role": "assistant", "content": [
        {"type": "thinking", "thinking": "need the tool", "signature": "x"},
        {"type": "text", "text": "Checking."},
        {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris", "unit": "c"}}]},
      {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": "18C"}],
         "cache_control": {"type": "ephemeral"}},
        {"type": "text", "text": "thanks"}]}],
    "tools": [{"name": "get_weather", "description": "Weather now",
               "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}},
              {"type": "web_search_20250305", "name": "web_search"}],
    "tool_choice": {"type": "any", "disable_parallel_tool_use": true},
    "stop_sequences": ["END"], "temperature": 0, "top_k": 5,
    "metadata": {"user_id": "u"}, "thinking": {"type": "adaptive", "display": "omitted"},
    "context_management": {"edits": []}, "output_config": {"effort": "medium"}})";
  const ChatApiRequest r = parse_anthropic_ok(body);
  EXPECT_EQ(r.model, "claude-sonnet-4-5-20250929");
  const Conversation& c = r.conversation;
  EXPECT_EQ(c.system, "You are terse.\nUse tools.");
  ASSERT_EQ(c.turns.size(), 5u);
  EXPECT_EQ(c.turns[1].role, TurnRole::kSystem);
  EXPECT_EQ(c.turns[2].reasoning, "need the tool");
  ASSERT_EQ(c.tools.size(), 1u);  // the server tool is dropped
  EXPECT_EQ(c.choice, ToolChoice::kRequired);
  EXPECT_FALSE(c.parallel_tool_calls);
  EXPECT_EQ(r.spec.chat.messages_json,
            R"([{"role":"system","content":"You are terse.\nUse tools."},)"
            R"({"role":"user","content":"weather in Paris?"},)"
            R"({"role":"system","content":"# Env"},)"
            R"({"role":"assistant","content":"Checking.","reasoning_content":"need the tool","tool_calls":[)"
            R"({"id":"toolu_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\",\"unit\":\"c\"}"}}]},)"
            R"({"role":"tool","tool_call_id":"toolu_1","name":"get_weather","content":"18C"},)"
            R"({"role":"user","content":"thanks"}])");
  EXPECT_EQ(r.spec.chat.tools_json,
            R"([{"type":"function","function":{"name":"get_weather","description":"Weather now","parameters":)"
            R"({"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}}])");
  EXPECT_EQ(r.spec.chat.template_kwargs_json, R"({"enable_thinking":true})");
  EXPECT_EQ(r.spec.params.max_tokens, 64);
  EXPECT_TRUE(r.spec.max_tokens_given);
  EXPECT_TRUE(r.spec.stream);
  EXPECT_EQ(r.spec.params.temperature, 0.0f);
  EXPECT_EQ(r.spec.params.top_k, 5);
  EXPECT_EQ(r.spec.params.stop, std::vector<std::string>{"END"});
  EXPECT_TRUE(r.spec.params.include_stop_str_in_output);
  EXPECT_TRUE(r.report_stop_sequence);
  // tool_choice any -> the grammar forces one call (parallel calls disabled: not a list).
  EXPECT_EQ(r.spec.params.structured.kind, StructuredOutput::Kind::kJsonSchema);
  EXPECT_EQ(r.spec.params.structured.text,
            R"({"type":"object","properties":{"name":{"const":"get_weather"},"arguments":)"
            R"({"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}},)"
            R"("required":["name","arguments"],"additionalProperties":false})");
}

TEST(AnthropicParse, StringContentAndCountTokensBody) {
  const ChatApiRequest r = parse_anthropic_ok(R"({"model": "m", "system": "S", "messages": [{"role": "user", "content": "hi"}]})",
                                              /*max_tokens_required=*/false);
  EXPECT_EQ(r.spec.chat.messages_json, R"([{"role":"system","content":"S"},{"role":"user","content":"hi"}])");
  EXPECT_EQ(r.spec.chat.tools_json, "");
  EXPECT_FALSE(r.spec.max_tokens_given);
}

TEST(AnthropicParse, MalformedBodiesAreInvalidRequests) {
  struct Case {
    const char* body;
    const char* message_part;
  };
  const Case cases[] = {
      {R"({"model": "m", "messages": [{"role": "user", "content": "hi"}]})", "max_tokens: Field required"},
      {R"({"model": "m", "max_tokens": 0, "messages": []})", "'max_tokens' must be an integer between 1"},
      {R"({"max_tokens": 5})", "messages: Field required"},
      {R"({"max_tokens": 5, "messages": []})", "'messages' must not be empty"},
      {R"({"max_tokens": 5, "messages": [{"role": "tool", "content": "x"}]})", "must be 'user', 'assistant' or 'system'"},
      {R"({"max_tokens": 5, "messages": [{"role": "user", "content": [{"type": "image", "source": {}}]}]})",
       "has type 'image'"},
      {R"({"max_tokens": 5, "messages": [{"role": "user", "content": [{"text": "no type"}]}]})", "with a string 'type'"},
      {R"({"max_tokens": 5, "messages": [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_x", "content": "r"}]}]})",
       "tool_use_id 'toolu_x' answers no tool_use block"},
      {R"({"max_tokens": 5, "messages": [{"role": "assistant", "content": [{"type": "tool_use", "id": "a", "name": "f", "input": "str"}]}]})",
       "'messages[0].content[0].input' must be an object"},
      {R"({"max_tokens": 5, "messages": [{"role": "user", "content": 7}]})", "must be a string or a list of content blocks"},
      {R"({"max_tokens": 5, "messages": [{"role": "user", "content": "x"}], "tools": [{"name": "f"}]})", "needs an 'input_schema'"},
      {R"({"max_tokens": 5, "messages": [{"role": "user", "content": "x"}], "tool_choice": {"type": "any"}})", "requires 'tools'"},
      {R"({"max_tokens": 5, "messages": [{"role": "user", "content": "x"}], "tools": [{"name": "f", "input_schema": {}}],
          "tool_choice": {"type": "tool", "name": "g"}})", "names 'g', which is not in 'tools'"},
      {R"({"max_tokens": 5, "messages": [{"role": "user", "content": "x"}], "temperature": 1.5})", "'temperature' must be between 0 and 1"},
      {R"({"max_tokens": 5, "messages": [{"role": "user", "content": "x"}], "stop_sequences": [""]})", "non-empty strings"},
      {R"({"max_tokens": 5, "system": [{"type": "image"}], "messages": [{"role": "user", "content": "x"}]})", "only 'text' blocks"},
      {R"([1, 2])", "must be a JSON object"},
      {R"({"max_tokens": 5, "messages": [{"role": "user", "content": "x")", "Malformed JSON body"},
  };
  for (const Case& c : cases) {
    const ApiError e = parse_anthropic_err(c.body);
    EXPECT_EQ(http_status(e.type), 400) << c.body;
    EXPECT_NE(e.message.find(c.message_part), std::string::npos) << c.body << " -> " << e.message;
    const json shaped = json::parse(anthropic_error_body(e));
    EXPECT_EQ(shaped["type"], "error");
    EXPECT_EQ(shaped["error"]["type"], "invalid_request_error");
    EXPECT_EQ(shaped["error"]["message"], e.message);
  }
}

TEST(AnthropicErrors, StatusesAndTypes) {
  auto type_of = [](ErrorType t) { return json::parse(anthropic_error_body(ApiError{t, "m", ""}))["error"]["type"]; };
  EXPECT_EQ(type_of(ErrorType::kAuthentication), "authentication_error");
  EXPECT_EQ(type_of(ErrorType::kNotFound), "not_found_error");
  EXPECT_EQ(type_of(ErrorType::kPayloadTooLarge), "request_too_large");
  EXPECT_EQ(type_of(ErrorType::kRateLimit), "rate_limit_error");
  EXPECT_EQ(type_of(ErrorType::kInternal), "api_error");
  EXPECT_EQ(type_of(ErrorType::kUnavailable), "overloaded_error");
  AnthropicWriter w;
  const HttpResponse res = w.error(ApiError{ErrorType::kUnavailable, "draining", ""});
  EXPECT_EQ(res.status, 503);
  EXPECT_EQ(res.body, R"({"type":"error","error":{"type":"overloaded_error","message":"draining"}})");
}

AssistantOutput sample_output() {
  AssistantOutput out;
  out.reasoning = "hmm";
  out.text = "Let me check.";
  out.tool_calls.push_back(ToolCall{"toolu_ab_0_0", "get_weather", R"({"city":"Paris"})"});
  out.finish = FinishReason::kStop;
  out.usage = UsageCounts{20, 7, 16};
  return out;
}

TEST(AnthropicWrite, GoldenMessage) {
  AnthropicWriter w;
  w.begin("ab", 0, "claude-x", 20);
  EXPECT_EQ(w.body(sample_output()),
            R"({"id":"msg_ab","type":"message","role":"assistant","model":"claude-x","content":[)"
            R"({"type":"thinking","thinking":"hmm","signature":""},{"type":"text","text":"Let me check."},)"
            R"({"type":"tool_use","id":"toolu_ab_0_0","name":"get_weather","input":{"city":"Paris"}}],)"
            R"("stop_reason":"tool_use","stop_sequence":null,"usage":{"input_tokens":4,"cache_creation_input_tokens":0,)"
            R"("cache_read_input_tokens":16,"output_tokens":7}})");
  AssistantOutput plain;
  plain.text = "hi";
  plain.finish = FinishReason::kLength;
  EXPECT_EQ(w.message_json(plain)["stop_reason"], "max_tokens");
  plain.finish = FinishReason::kStop;
  EXPECT_EQ(w.message_json(plain)["stop_reason"], "end_turn");
  plain.stop_sequence = "END";
  EXPECT_EQ(w.message_json(plain)["stop_reason"], "stop_sequence");
  EXPECT_EQ(w.message_json(plain)["stop_sequence"], "END");
}

TEST(AnthropicWrite, GoldenStream) {
  AnthropicWriter w;
  w.begin("ab", 0, "m", 20);
  using K = OutputDelta::Kind;
  std::string s = w.stream_start();
  s += w.stream_deltas({{K::kReasoning, "hm", "", 0}, {K::kText, "Hi", "", 0}});
  s += w.stream_deltas({{K::kCallStart, "f", "toolu_ab_0_0", 0}, {K::kCallArguments, R"({"a":)", "", 0}});
  s += w.stream_deltas({{K::kCallArguments, "1}", "", 0}});
  AssistantOutput out;
  out.tool_calls.push_back(ToolCall{"toolu_ab_0_0", "f", R"({"a":1})"});
  out.usage = UsageCounts{20, 0, 3};
  s += w.stream_end(out);
  EXPECT_EQ(s,
            "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_ab\",\"type\":\"message\","
            "\"role\":\"assistant\",\"model\":\"m\",\"content\":[],\"stop_reason\":null,\"stop_sequence\":null,\"usage\":"
            "{\"input_tokens\":20,\"cache_creation_input_tokens\":0,\"cache_read_input_tokens\":0,\"output_tokens\":0}}}\n\n"
            "event: ping\ndata: {\"type\":\"ping\"}\n\n"
            "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":"
            "{\"type\":\"thinking\",\"thinking\":\"\",\"signature\":\"\"}}\n\n"
            "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":"
            "{\"type\":\"thinking_delta\",\"thinking\":\"hm\"}}\n\n"
            "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n"
            "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":"
            "{\"type\":\"text\",\"text\":\"\"}}\n\n"
            "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":"
            "{\"type\":\"text_delta\",\"text\":\"Hi\"}}\n\n"
            "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":1}\n\n"
            "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":2,\"content_block\":"
            "{\"type\":\"tool_use\",\"id\":\"toolu_ab_0_0\",\"name\":\"f\",\"input\":{}}}\n\n"
            "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":2,\"delta\":"
            "{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"a\\\":\"}}\n\n"
            "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":2,\"delta\":"
            "{\"type\":\"input_json_delta\",\"partial_json\":\"1}\"}}\n\n"
            "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":2}\n\n"
            "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\","
            "\"stop_sequence\":null},\"usage\":{\"input_tokens\":17,\"cache_creation_input_tokens\":0,"
            "\"cache_read_input_tokens\":3,\"output_tokens\":0}}\n\n"
            "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n");
}

ChatApiRequest parse_responses_ok(const std::string& body, ojson* echo) {
  ChatApiRequest r;
  auto e = parse_responses_request(body, ProtocolLimits{}, &r, echo);
  EXPECT_FALSE(e.has_value()) << (e ? e->message : "");
  return r;
}

TEST(ResponsesParse, GoldenFunctionCallRoundTrip) {
  const std::string body = R"({
    "model": "gpt-x", "instructions": "Be brief.", "store": false, "stream": false,
    "input": [
      {"role": "developer", "content": "dev note"},
      {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "weather?"}]},
      {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "use tool"}]},
      {"type": "function_call", "call_id": "call_9", "name": "get_weather", "arguments": "{\"city\":\"Oslo\"}"},
      {"type": "function_call_output", "call_id": "call_9", "output": "3C"}],
    "tools": [{"type": "function", "name": "get_weather", "description": "d",
               "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}, "strict": true},
              {"type": "web_search"}],
    "tool_choice": "auto", "parallel_tool_calls": false, "max_output_tokens": 50, "temperature": 0,
    "reasoning": {"effort": "low"}, "include": ["reasoning.encrypted_content"], "prompt_cache_key": "k",
    "text": {"format": {"type": "json_object"}, "verbosity": "low"}})";
  ojson echo;
  const ChatApiRequest r = parse_responses_ok(body, &echo);
  EXPECT_EQ(r.spec.chat.messages_json,
            R"([{"role":"system","content":"Be brief."},{"role":"system","content":"dev note"},)"
            R"({"role":"user","content":"weather?"},)"
            R"({"role":"assistant","content":"","reasoning_content":"use tool","tool_calls":[)"
            R"({"id":"call_9","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Oslo\"}"}}]},)"
            R"({"role":"tool","tool_call_id":"call_9","name":"get_weather","content":"3C"}])");
  EXPECT_EQ(r.spec.chat.tools_json,
            R"([{"type":"function","function":{"name":"get_weather","description":"d","parameters":)"
            R"({"type":"object","properties":{"city":{"type":"string"}}}}}])");
  EXPECT_FALSE(r.spec.chat.parallel_tool_calls);
  EXPECT_EQ(r.spec.params.max_tokens, 50);
  EXPECT_EQ(r.spec.params.structured.kind, StructuredOutput::Kind::kJsonObject);
  EXPECT_EQ(echo["instructions"], "Be brief.");
  EXPECT_EQ(echo["max_output_tokens"], 50);
  EXPECT_EQ(echo["tool_choice"], "auto");
  EXPECT_EQ(echo["store"], false);
}

TEST(ResponsesParse, StringInputAndJsonSchemaKeepsKeyOrder) {
  ojson echo;
  const ChatApiRequest r = parse_responses_ok(
      R"({"model": "m", "input": "hi", "text": {"format": {"type": "json_schema", "name": "x",
          "schema": {"type": "object", "properties": {"z": {"type": "integer"}, "a": {"type": "string"}}}}}})", &echo);
  EXPECT_EQ(r.spec.chat.messages_json, R"([{"role":"user","content":"hi"}])");
  EXPECT_EQ(r.spec.params.structured.kind, StructuredOutput::Kind::kJsonSchema);
  EXPECT_EQ(r.spec.params.structured.text, R"({"type":"object","properties":{"z":{"type":"integer"},"a":{"type":"string"}}})");
}

TEST(ResponsesParse, MalformedBodiesAreInvalidRequests) {
  struct Case {
    const char* body;
    const char* message_part;
  };
  const Case cases[] = {
      {R"({"model": "m"})", "'input' is required"},
      {R"({"input": []})", "'input' must not be empty"},
      {R"({"input": 5})", "'input' must be a string or a list of items"},
      {R"({"input": [{"type": "function_call_output", "call_id": "c1", "output": "x"}]})", "call_id 'c1' answers no earlier function_call"},
      {R"({"input": [{"type": "message", "role": "user", "content": [{"type": "input_image", "image_url": "u"}]}]})", "has type 'input_image'"},
      {R"({"input": [{"type": "computer_call"}]})", "has type 'computer_call'"},
      {R"({"input": [{"role": "robot", "content": "x"}]})", "must be user, assistant, system or developer"},
      {R"({"input": [{"type": "function_call", "call_id": "c", "name": "f"}]})", "needs a string 'arguments'"},
      {R"({"input": "x", "tool_choice": "required"})", "requires function 'tools'"},
      {R"({"input": "x", "text": {"format": {"type": "xml"}}})", "text.format type 'xml'"},
      {R"({"input": "x", "text": {"format": {"type": "json_schema"}}})", "'text.format.schema' must be a JSON Schema object"},
      {R"({"input": "x", "max_output_tokens": -1})", "'max_output_tokens' must be an integer between 1"},
      {R"({"input": "x", "temperature": 3})", "'temperature' must be between 0 and 2"},
      {R"({"input": "x", "previous_response_id": "resp_1"})", "'previous_response_id' is not supported"},
      {R"({"input": "x", "tools": [{"type": "function"}]})", "needs a string 'name'"},
  };
  for (const Case& c : cases) {
    ChatApiRequest r;
    ojson echo;
    const auto e = parse_responses_request(c.body, ProtocolLimits{}, &r, &echo);
    ASSERT_TRUE(e.has_value()) << c.body;
    EXPECT_EQ(http_status(e->type), 400) << c.body;
    EXPECT_NE(e->message.find(c.message_part), std::string::npos) << c.body << " -> " << e->message;
    EXPECT_EQ(json::parse(error_body(*e))["error"]["type"], "invalid_request_error");
  }
}

TEST(ResponsesWrite, GoldenResponseAndStream) {
  ResponsesWriter w(ojson{{"tools", ojson::array()}});
  w.begin("ab", 1700000000, "m", 20);
  AssistantOutput out = sample_output();
  out.tool_calls[0].id = "call_ab_0_0";
  EXPECT_EQ(w.body(out),
            R"({"id":"resp_ab","object":"response","created_at":1700000000,"status":"completed","background":false,)"
            R"("error":null,"incomplete_details":null,"model":"m","output":[)"
            R"({"id":"rs_ab","type":"reasoning","summary":[],"content":[{"type":"reasoning_text","text":"hmm"}]},)"
            R"({"id":"msg_ab","type":"message","status":"completed","role":"assistant","content":[)"
            R"({"type":"output_text","text":"Let me check.","annotations":[],"logprobs":[]}]},)"
            R"({"id":"fc_ab_0","type":"function_call","status":"completed","arguments":"{\"city\":\"Paris\"}",)"
            R"("call_id":"call_ab_0_0","name":"get_weather"}],"tools":[],)"
            R"("usage":{"input_tokens":20,"input_tokens_details":{"cached_tokens":16},"output_tokens":7,)"
            R"("output_tokens_details":{"reasoning_tokens":0},"total_tokens":27},"user":null})");
  AssistantOutput cut;
  cut.text = "abc";
  cut.finish = FinishReason::kLength;
  const ojson incomplete = w.response_json(&cut);
  EXPECT_EQ(incomplete["status"], "incomplete");
  EXPECT_EQ(incomplete["incomplete_details"]["reason"], "max_output_tokens");

  // The stream's event names and sequence numbers, and the text it carries.
  ResponsesWriter s(ojson::object());
  s.begin("cd", 1, "m", 5);
  using K = OutputDelta::Kind;
  std::string events = s.stream_start();
  events += s.stream_deltas({{K::kText, "He", "", 0}, {K::kText, "llo", "", 0}});
  events += s.stream_deltas({{K::kCallStart, "f", "call_cd_0_0", 0}, {K::kCallArguments, "{}", "", 0}});
  AssistantOutput end;
  end.text = "Hello";
  end.tool_calls.push_back(ToolCall{"call_cd_0_0", "f", "{}"});
  events += s.stream_end(end);
  std::vector<std::string> names;
  std::vector<json> data;
  size_t pos = 0;
  while ((pos = events.find("event: ", pos)) != std::string::npos) {
    const size_t nl = events.find('\n', pos);
    names.push_back(events.substr(pos + 7, nl - pos - 7));
    const size_t end_pos = events.find("\n\n", nl);
    data.push_back(json::parse(events.substr(nl + 7, end_pos - nl - 7)));
    pos = end_pos;
  }
  EXPECT_EQ(names, (std::vector<std::string>{
                       "response.created", "response.in_progress", "response.output_item.added",
                       "response.content_part.added", "response.output_text.delta", "response.output_text.delta",
                       "response.output_text.done", "response.content_part.done", "response.output_item.done",
                       "response.output_item.added", "response.function_call_arguments.delta",
                       "response.function_call_arguments.done", "response.output_item.done", "response.completed"}));
  for (size_t i = 0; i < data.size(); ++i) {
    EXPECT_EQ(data[i]["sequence_number"], i);
    EXPECT_EQ(data[i]["type"], names[i]);
  }
  EXPECT_EQ(data[6]["text"], "Hello");
  EXPECT_EQ(data[9]["item"]["call_id"], "call_cd_0_0");
  EXPECT_EQ(data[11]["arguments"], "{}");
  EXPECT_EQ(data[13]["response"]["output"][0]["content"][0]["text"], "Hello");
  EXPECT_EQ(data[13]["response"]["output"][1]["id"], data[9]["item"]["id"]);
}

TEST(ConversationModel, OutputFromChatShapes) {
  const AssistantOutput out = assistant_output(json::parse(
      R"({"role":"assistant","reasoning_content":"r","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]})"));
  EXPECT_EQ(out.reasoning, "r");
  EXPECT_EQ(out.text, "");
  ASSERT_EQ(out.tool_calls.size(), 1u);
  EXPECT_EQ(out.tool_calls[0].id, "c1");
  const auto deltas = output_deltas(json::parse(
      R"({"tool_calls":[{"index":1,"id":"c2","type":"function","function":{"name":"g","arguments":""}}]})"));
  ASSERT_EQ(deltas.size(), 1u);
  EXPECT_EQ(deltas[0].kind, OutputDelta::Kind::kCallStart);
  EXPECT_EQ(deltas[0].text, "g");
  EXPECT_EQ(deltas[0].id, "c2");
  EXPECT_EQ(deltas[0].index, 1);
}

}  // namespace
}  // namespace tessera::server
