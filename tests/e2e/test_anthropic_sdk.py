"""`tessera serve`'s Anthropic Messages API (`/v1/messages`, `/v1/messages/count_tokens`) through the
official `anthropic` Python SDK, greedy.

The adapter and `/v1/chat/completions` share one conversation model and one output side, so the same
conversation sent through both APIs renders the same prompt and greedy-decodes the same text with
the same token counts: the Anthropic answers are pinned to the chat answers (and `stop_reason` to
the mapped `finish_reason`). Also: the event sequence of `messages.stream` and its text equal to the
non-streamed one; a forced `tool_use` (Qwen2.5-Coder-0.5B, `tool_choice` `tool`) and its
`tool_result` round trip; count_tokens equal to a create's prompt (`input_tokens` + `cache_read_input_tokens`: as in
Anthropic's API, `input_tokens` is the part not read from the prefix cache); the prefix cache in
`cache_read_input_tokens`; the fields Claude Code sends on every request accepted (recorded from
`claude` 2.1.337, see README "Pointing agents at tessera"); errors in Anthropic's shape mapped to
the SDK's exception classes.

anthropic 2.17's `messages.create` has no `temperature` parameter: greedy goes in `extra_body`.
"""
import json

import pytest

from conftest import QWEN_TOOL_RESULT_ANSWER, SERVED_NAME, http, per_kernel_path, require_environment

anthropic = pytest.importorskip("anthropic", reason="pip install anthropic (scripts/setup.sh installs it)")

GREEDY = {"temperature": 0}
QUESTION = [{"role": "user", "content": "What is the capital of France?"}]
TOOL = {"name": "get_weather", "description": "Get the current weather in a city",
        "input_schema": {"type": "object", "properties": {"city": {"type": "string", "description": "The city, e.g. Paris"}},
                         "required": ["city"]}}
OPENAI_TOOL = {"type": "function", "function": {"name": TOOL["name"], "description": TOOL["description"],
                                                "parameters": TOOL["input_schema"]}}
WEATHER_QUESTION = "What is the weather like in Paris today?"
WEATHER_RESULT = json.dumps({"temperature_c": 21, "sky": "sunny"})
ANSWER_SYSTEM = "You are a weather assistant. When a tool result arrives, answer the user in one plain English sentence."
STOP_REASON = {"stop": "end_turn", "length": "max_tokens", "tool_calls": "tool_use"}


def make_client(server, **kw):
    return anthropic.Anthropic(base_url=server.base, api_key=kw.pop("api_key", "unused"), max_retries=0, timeout=600, **kw)


@pytest.fixture(scope="module")
def ac(server):
    return make_client(server)


@pytest.fixture(scope="module")
def qwen_ac(qwen_server):
    return make_client(qwen_server)


def chat(client, messages, max_tokens, **kw):
    return client.chat.completions.create(model=SERVED_NAME, messages=messages, max_tokens=max_tokens, temperature=0, **kw)


def prompt_tokens(usage):
    """The whole prompt: Anthropic's `input_tokens` counts only the part not read from the cache."""
    return usage.input_tokens + (usage.cache_read_input_tokens or 0) + (usage.cache_creation_input_tokens or 0)


def text_of(message):
    assert [b.type for b in message.content] == ["text"], message.content
    return message.content[0].text


def test_create_equals_chat(ac, client):
    m = ac.messages.create(model=SERVED_NAME, max_tokens=24, messages=QUESTION, extra_body=GREEDY)
    c = chat(client, QUESTION, 24)
    assert m.id.startswith("msg_") and m.type == "message" and m.role == "assistant" and m.model == SERVED_NAME
    assert text_of(m) == c.choices[0].message.content
    assert m.stop_reason == STOP_REASON[c.choices[0].finish_reason]
    assert m.stop_sequence is None
    assert prompt_tokens(m.usage) == c.usage.prompt_tokens
    assert m.usage.output_tokens == c.usage.completion_tokens


def test_max_tokens_stop_reason(ac):
    m = ac.messages.create(model=SERVED_NAME, max_tokens=3, messages=QUESTION, extra_body=GREEDY)
    assert m.stop_reason == "max_tokens"
    assert m.usage.output_tokens == 3


def test_system_string_equals_blocks_and_chat(ac, client):
    system = "You are a terse geography teacher."
    as_string = ac.messages.create(model=SERVED_NAME, max_tokens=20, system=system, messages=QUESTION, extra_body=GREEDY)
    as_blocks = ac.messages.create(model=SERVED_NAME, max_tokens=20, messages=QUESTION, extra_body=GREEDY,
                                   system=[{"type": "text", "text": system, "cache_control": {"type": "ephemeral"}}])
    c = chat(client, [{"role": "system", "content": system}] + QUESTION, 20)
    assert text_of(as_string) == text_of(as_blocks) == c.choices[0].message.content
    assert prompt_tokens(as_string.usage) == prompt_tokens(as_blocks.usage) == c.usage.prompt_tokens


def test_stream_equals_create(ac):
    whole = ac.messages.create(model=SERVED_NAME, max_tokens=24, messages=QUESTION, extra_body=GREEDY)
    with ac.messages.stream(model=SERVED_NAME, max_tokens=24, messages=QUESTION, extra_body=GREEDY) as stream:
        events = list(stream)
        final = stream.get_final_message()
    kinds = [e.type for e in events if e.type in ("message_start", "content_block_start", "content_block_delta",
                                                  "content_block_stop", "message_delta", "message_stop")]
    deltas = [e for e in events if e.type == "content_block_delta"]
    assert kinds == (["message_start", "content_block_start"] + ["content_block_delta"] * len(deltas) +
                     ["content_block_stop", "message_delta", "message_stop"])
    assert all(e.delta.type == "text_delta" and e.index == 0 for e in deltas)
    assert "".join(e.delta.text for e in deltas) == text_of(final) == text_of(whole)
    assert prompt_tokens(events[0].message.usage) == prompt_tokens(whole.usage)
    assert final.stop_reason == whole.stop_reason
    assert final.usage.output_tokens == whole.usage.output_tokens
    assert prompt_tokens(final.usage) == prompt_tokens(whole.usage)
    assert final.id.startswith("msg_")


def test_count_tokens_equals_create(ac):
    body = dict(model=SERVED_NAME, system="You are a terse geography teacher.",
                messages=[QUESTION[0], {"role": "assistant", "content": "Paris."},
                          {"role": "user", "content": [{"type": "text", "text": "And of Italy?"}]}])
    counted = ac.messages.count_tokens(**body)
    m = ac.messages.create(max_tokens=4, extra_body=GREEDY, **body)
    assert counted.input_tokens == prompt_tokens(m.usage) > 10


def test_models_list(ac):
    assert [m.id for m in ac.models.list()] == [SERVED_NAME]


def test_prefix_cache_read_tokens(ac):
    # ~400 tokens that no other test sends; the repeat reuses the first request's cached blocks.
    long_text = " ".join(f"Line {i}: the quick brown fox jumps over the lazy dog number {i}." for i in range(25))
    messages = [{"role": "user", "content": long_text + "\nHow many lines are there?"}]
    first = ac.messages.create(model=SERVED_NAME, max_tokens=2, messages=messages, extra_body=GREEDY)
    again = ac.messages.create(model=SERVED_NAME, max_tokens=2, messages=messages, extra_body=GREEDY)
    total = prompt_tokens(first.usage)
    assert prompt_tokens(again.usage) == total > 300
    # Whole 16-token blocks of the prompt, the last prompt token always recomputed; input_tokens is
    # the rest (Anthropic's meaning: what was not read from the cache).
    assert again.usage.cache_read_input_tokens == (total - 1) // 16 * 16
    assert again.usage.input_tokens == total - again.usage.cache_read_input_tokens
    assert first.usage.cache_read_input_tokens < again.usage.cache_read_input_tokens


# The fields and headers `claude` 2.1.337 sends on every request (recorded): accepted, ignored.
CLAUDE_CODE_HEADERS = {
    "anthropic-version": "2023-06-01",
    "anthropic-beta": "claude-code-20250219,interleaved-thinking-2025-05-14,context-management-2025-06-27,"
                      "effort-2025-11-24",
    "anthropic-dangerous-direct-browser-access": "true", "x-app": "cli", "x-api-key": "unused",
}


def claude_code_body(max_tokens):
    return {
        "model": SERVED_NAME, "max_tokens": max_tokens, "stream": False,
        "system": [{"type": "text", "text": "x-anthropic-billing-header: cc_version=2.1.337; cc_entrypoint=sdk-cli;"},
                   {"type": "text", "text": "You are a helpful agent.", "cache_control": {"type": "ephemeral"}}],
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "<system-reminder>\nBe brief.\n</system-reminder>\n"},
                                         {"type": "text", "text": "Say hello"}]},
            {"role": "system", "content": [{"type": "text", "text": "# Environment\n - Platform: linux",
                                            "cache_control": {"type": "ephemeral"}}]}],
        "tools": [{"name": "Write", "description": "Writes a file.",
                   "input_schema": {"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object",
                                    "properties": {"file_path": {"description": "The path", "type": "string"},
                                                   "replace_all": {"default": False, "type": "boolean"}},
                                    "required": ["file_path"], "additionalProperties": False}},
                  {"name": "DeferredToolPlaceholder", "description": "never call this tool.",
                   "input_schema": {"type": "object", "properties": {}}, "defer_loading": True}],
        "metadata": {"user_id": json.dumps({"device_id": "c63b", "account_uuid": "", "session_id": "10ba"})},
        "thinking": {"type": "adaptive", "display": "omitted"},
        "context_management": {"edits": [{"type": "clear_thinking_20251015", "keep": "all"}]},
        "output_config": {"effort": "medium"},
        "temperature": 0,
    }


@pytest.mark.parametrize("max_tokens", [8, 32000, 128000], ids=["small", "unknown-model-default", "opus-default"])
def test_claude_code_request_accepted(server, max_tokens):
    # Claude Code's max_tokens (32000 for a model it does not know, 128000 for its default) exceed
    # any local context: the answer is cut by the context, never a 400.
    status, body = http(server.base, "POST", "/v1/messages?beta=true", claude_code_body(max_tokens),
                        headers=CLAUDE_CODE_HEADERS)
    assert status == 200, body
    assert body["type"] == "message" and body["content"][0]["type"] == "text"
    assert body["stop_reason"] in ("end_turn", "max_tokens")
    _, counted = http(server.base, "POST", "/v1/messages/count_tokens?beta=true",
                      {k: v for k, v in claude_code_body(max_tokens).items() if k != "max_tokens"}, headers=CLAUDE_CODE_HEADERS)
    usage = body["usage"]
    assert counted["input_tokens"] == usage["input_tokens"] + usage["cache_read_input_tokens"] > 20


def test_claude_code_stream_event_order(server):
    body = dict(claude_code_body(16), stream=True)
    req_headers = dict(CLAUDE_CODE_HEADERS, Accept="application/json")
    status, text = http(server.base, "POST", "/v1/messages?beta=true", body, headers=req_headers)
    assert status == 200
    events = [line[len("event: "):] for line in text.splitlines() if line.startswith("event: ")]
    datas = [json.loads(line[len("data: "):]) for line in text.splitlines() if line.startswith("data: ")]
    assert [d["type"] for d in datas] == events  # every event's name is its data's type
    assert events[0] == "message_start" and events[-2:] == ["message_delta", "message_stop"]
    core = [e for e in events if e != "ping"]
    assert core[1] == "content_block_start" and core[-3] == "content_block_stop"


def raw_error(server, body, path="/v1/messages", headers=None):
    status, got = http(server.base, "POST", path, body, headers=headers)
    assert isinstance(got, dict) and got.get("type") == "error", got
    assert set(got["error"]) >= {"type", "message"}
    return status, got["error"]


@pytest.mark.parametrize("name,body,fragment", [
    ("missing max_tokens", {"model": SERVED_NAME, "messages": QUESTION}, "max_tokens"),
    ("messages not a list", {"model": SERVED_NAME, "max_tokens": 4, "messages": "hi"}, "messages"),
    ("unknown block type", {"model": SERVED_NAME, "max_tokens": 4,
                            "messages": [{"role": "user", "content": [{"type": "video", "url": "x"}]}]}, "video"),
    ("bad role", {"model": SERVED_NAME, "max_tokens": 4, "messages": [{"role": "robot", "content": "hi"}]},
     "messages[0].role"),
    ("tool_result without its tool_use", {"model": SERVED_NAME, "max_tokens": 4, "messages": [
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_missing", "content": "x"}]}]},
     "toolu_missing"),
    ("tool_choice names an unknown tool", {"model": SERVED_NAME, "max_tokens": 4, "messages": QUESTION, "tools": [TOOL],
                                           "tool_choice": {"type": "tool", "name": "nope"}}, "nope"),
    ("max_tokens zero", {"model": SERVED_NAME, "max_tokens": 0, "messages": QUESTION}, "max_tokens"),
    ("not JSON", b"{\"model\": ", ""),
])
def test_bad_request_is_anthropic_400(server, ac, name, body, fragment):
    status, err = raw_error(server, body)
    assert status == 400, (name, err)
    assert err["type"] == "invalid_request_error"
    assert fragment in err["message"]
    if isinstance(body, dict):  # the SDK maps it to its class (max_tokens is checked client-side first)
        with pytest.raises(anthropic.BadRequestError):
            ac.post("/v1/messages", body=body, cast_to=anthropic.types.Message)


def test_count_tokens_bad_request(server):
    status, err = raw_error(server, {"model": SERVED_NAME, "messages": "hi"}, path="/v1/messages/count_tokens")
    assert status == 400 and err["type"] == "invalid_request_error"


def test_api_key(start_server):
    require_environment()
    s = start_server("--api-key", "sekret")
    with pytest.raises(anthropic.AuthenticationError) as e:
        make_client(s, api_key="wrong").messages.create(model=SERVED_NAME, max_tokens=2, messages=QUESTION)
    assert e.value.status_code == 401
    assert e.value.body["error"]["type"] == "authentication_error"
    # The SDK sends `Authorization: Bearer`; Claude Code with ANTHROPIC_API_KEY sends `x-api-key`.
    ok = make_client(s, api_key="sekret").messages.create(model=SERVED_NAME, max_tokens=2, messages=QUESTION)
    assert ok.usage.output_tokens == 2
    status, body = http(s.base, "POST", "/v1/messages", {"model": SERVED_NAME, "max_tokens": 2, "messages": QUESTION},
                        headers={"x-api-key": "sekret", "anthropic-version": "2023-06-01"})
    assert status == 200, body
    status, body = http(s.base, "POST", "/v1/messages", {"model": SERVED_NAME, "max_tokens": 2, "messages": QUESTION},
                        headers={"x-api-key": "wrong"})
    assert status == 401 and body["error"]["type"] == "authentication_error"
    status, body = http(s.base, "POST", "/v1/messages/count_tokens", {"model": SERVED_NAME, "messages": QUESTION})
    assert status == 401


# ---- tools, on Qwen2.5-Coder-0.5B-Instruct (its own chat template)

def forced_call(qwen_ac, **kw):
    return qwen_ac.messages.create(model=SERVED_NAME, max_tokens=48, tools=[TOOL], extra_body=GREEDY,
                                   tool_choice={"type": "tool", "name": "get_weather"},
                                   messages=[{"role": "user", "content": WEATHER_QUESTION}], **kw)


def test_forced_tool_use(qwen_ac):
    m = forced_call(qwen_ac)
    uses = [b for b in m.content if b.type == "tool_use"]
    assert m.stop_reason == "tool_use"
    assert len(uses) == 1 and uses[0].name == "get_weather" and uses[0].id.startswith("toolu_")
    assert uses[0].input == {"city": "Paris"}


def test_tool_use_stream_equals_create(qwen_ac):
    whole = forced_call(qwen_ac)
    with qwen_ac.messages.stream(model=SERVED_NAME, max_tokens=48, tools=[TOOL], extra_body=GREEDY,
                                 tool_choice={"type": "tool", "name": "get_weather"},
                                 messages=[{"role": "user", "content": WEATHER_QUESTION}]) as stream:
        events = list(stream)
        final = stream.get_final_message()
    starts = [e.content_block for e in events if e.type == "content_block_start"]
    tool_start = [b for b in starts if b.type == "tool_use"]
    assert len(tool_start) == 1 and tool_start[0].name == "get_weather" and tool_start[0].input == {}
    partial = "".join(e.delta.partial_json for e in events
                      if e.type == "content_block_delta" and e.delta.type == "input_json_delta")
    assert json.loads(partial) == whole.content[-1].input
    assert final.stop_reason == "tool_use"
    assert [(b.type, getattr(b, "name", None), getattr(b, "input", None)) for b in final.content] == \
        [(b.type, getattr(b, "name", None), getattr(b, "input", None)) for b in whole.content]


def test_count_tokens_with_tools_equals_create(qwen_ac):
    counted = qwen_ac.messages.count_tokens(model=SERVED_NAME, tools=[TOOL],
                                            tool_choice={"type": "tool", "name": "get_weather"},
                                            messages=[{"role": "user", "content": WEATHER_QUESTION}])
    assert counted.input_tokens == prompt_tokens(forced_call(qwen_ac).usage)


# The conversation of test_tools_qwen.py's pinned follow-up (system prompt, the call, its result,
# tool_choice none): the 0.5B model then answers with the result in one sentence
# (conftest.QWEN_TOOL_RESULT_ANSWER).
@pytest.mark.parametrize("result_content", ["string", "blocks"])
def test_tool_result_round_trip_equals_chat(qwen_ac, qwen_client, result_content):
    call_id = "toolu_01A"
    content = WEATHER_RESULT if result_content == "string" else [{"type": "text", "text": WEATHER_RESULT}]
    m = qwen_ac.messages.create(model=SERVED_NAME, max_tokens=64, tools=[TOOL], system=ANSWER_SYSTEM, extra_body=GREEDY,
                                tool_choice={"type": "none"},
                                messages=[{"role": "user", "content": WEATHER_QUESTION},
                                          {"role": "assistant", "content": [{"type": "tool_use", "id": call_id,
                                                                             "name": "get_weather", "input": {"city": "Paris"}}]},
                                          {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call_id,
                                                                        "content": content}]}])
    c = chat(qwen_client, [{"role": "system", "content": ANSWER_SYSTEM}, {"role": "user", "content": WEATHER_QUESTION},
                           {"role": "assistant", "content": None, "tool_calls": [{
                               "id": call_id, "type": "function",
                               "function": {"name": "get_weather", "arguments": json.dumps({"city": "Paris"})}}]},
                           {"role": "tool", "tool_call_id": call_id, "content": WEATHER_RESULT}], 64,
             tools=[OPENAI_TOOL], tool_choice="none")
    answer = per_kernel_path(**QWEN_TOOL_RESULT_ANSWER)
    assert c.choices[0].message.content == answer
    assert text_of(m) == answer
    assert prompt_tokens(m.usage) == c.usage.prompt_tokens
    assert m.stop_reason == "end_turn"
