"""POST /v1/messages and /v1/messages/count_tokens (Anthropic Messages) over raw HTTP against the real
`tessera serve` on SmolLM2 (no SDK: the SDK-driven tests are test_anthropic_sdk.py and the Claude
Code ones): create, the stream's event sequence and its text equal to the non-streamed answer at
temperature 0, count_tokens against the create's usage, tool_choice any through the grammar with a
tool_result round trip, stop sequences, errors in Anthropic's shape, the API key in x-api-key.
"""
import json

from conftest import http, named_sse_events

HEADERS = {"anthropic-version": "2023-06-01", "anthropic-beta": "claude-code-20250219", "x-api-key": "unused"}
BODY = {"model": "claude-sonnet-4-5-20250929", "max_tokens": 24, "temperature": 0,
        "system": [{"type": "text", "text": "You are terse.", "cache_control": {"type": "ephemeral"}}],
        "messages": [{"role": "user", "content": "Name a colour."}],
        # Fields Claude Code sends on every request: accepted and ignored.
        "metadata": {"user_id": "u"}, "thinking": {"type": "adaptive"}, "context_management": {"edits": []},
        "output_config": {"effort": "medium"}}
WEATHER = {"name": "get_weather", "description": "Weather for a city",
           "input_schema": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 12}},
                            "required": ["city"], "additionalProperties": False}}


def stream_events(base, path, body, headers=HEADERS):
    return named_sse_events(base, path, body, headers)


def test_create_stream_and_count_tokens_agree(server):
    status, msg = http(server.base, "POST", "/v1/messages?beta=true", BODY, HEADERS)
    assert status == 200, msg
    assert msg["id"].startswith("msg_") and msg["type"] == "message" and msg["role"] == "assistant"
    assert msg["model"] == BODY["model"]  # any model id: the served model answers, the id is echoed
    assert [b["type"] for b in msg["content"]] == ["text"]
    assert msg["stop_reason"] in ("end_turn", "max_tokens")
    usage = msg["usage"]
    assert usage["output_tokens"] <= 24 and usage["cache_creation_input_tokens"] == 0

    status, count = http(server.base, "POST", "/v1/messages/count_tokens?beta=true",
                         {k: v for k, v in BODY.items() if k != "max_tokens"}, HEADERS)
    assert status == 200, count
    # Anthropic's input_tokens leave out what the (prefix) cache served.
    assert count["input_tokens"] == usage["input_tokens"] + usage["cache_read_input_tokens"]

    events = stream_events(server.base, "/v1/messages?beta=true", {**BODY, "stream": True})
    names = [n for n, _ in events]
    assert names[:2] == ["message_start", "ping"]
    assert names[-2:] == ["message_delta", "message_stop"]
    assert names[2] == "content_block_start" and names[-3] == "content_block_stop"
    text = "".join(d["delta"]["text"] for n, d in events if n == "content_block_delta")
    assert text == msg["content"][0]["text"]
    final = events[-2][1]
    assert final["delta"]["stop_reason"] == msg["stop_reason"]
    assert final["usage"]["output_tokens"] == usage["output_tokens"]
    start = events[0][1]["message"]
    assert start["usage"]["input_tokens"] == count["input_tokens"]


def test_tool_choice_any_and_tool_result_round_trip(server):
    body = {**BODY, "max_tokens": 60, "messages": [{"role": "user", "content": "Weather in Paris?"}],
            "tools": [WEATHER], "tool_choice": {"type": "any"}}
    status, msg = http(server.base, "POST", "/v1/messages", body, HEADERS)
    assert status == 200, msg
    assert msg["stop_reason"] == "tool_use"
    (call,) = [b for b in msg["content"] if b["type"] == "tool_use"]
    assert call["id"].startswith("toolu_") and call["name"] == "get_weather"
    assert isinstance(call["input"]["city"], str) and len(call["input"]["city"]) <= 12

    events = stream_events(server.base, "/v1/messages", {**body, "stream": True})
    starts = [d["content_block"] for n, d in events if n == "content_block_start"]
    (streamed_call,) = [b for b in starts if b["type"] == "tool_use"]
    assert streamed_call["name"] == "get_weather"
    args = "".join(d["delta"]["partial_json"] for n, d in events
                   if n == "content_block_delta" and d["delta"]["type"] == "input_json_delta")
    assert json.loads(args) == call["input"]
    assert events[-2][1]["delta"]["stop_reason"] == "tool_use"

    follow = {**BODY, "tools": [WEATHER], "messages": [
        body["messages"][0],
        {"role": "assistant", "content": msg["content"]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call["id"],
                                      "content": [{"type": "text", "text": "sunny, 20C"}]}]}]}
    status, answer = http(server.base, "POST", "/v1/messages", follow, HEADERS)
    assert status == 200, answer
    assert answer["stop_reason"] in ("end_turn", "max_tokens", "tool_use")


def test_stop_sequence(server):
    status, free = http(server.base, "POST", "/v1/messages", BODY, HEADERS)
    assert status == 200
    text = free["content"][0]["text"]
    assert len(text) > 4
    stop = text[2:4]
    status, cut = http(server.base, "POST", "/v1/messages", {**BODY, "stop_sequences": [stop]}, HEADERS)
    assert status == 200, cut
    assert cut["stop_reason"] == "stop_sequence" and cut["stop_sequence"] == stop
    assert cut["content"][0]["text"] == text[:text.index(stop)]


def test_errors_in_anthropic_shape(server):
    def check(status, body, want_status, want_type):
        assert status == want_status, body
        assert body["type"] == "error" and body["error"]["type"] == want_type, body
        assert body["error"]["message"]

    no_max = {k: v for k, v in BODY.items() if k != "max_tokens"}
    check(*http(server.base, "POST", "/v1/messages", no_max, HEADERS), 400, "invalid_request_error")
    orphan = {**BODY, "messages": [{"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_nope", "content": "x"}]}]}
    check(*http(server.base, "POST", "/v1/messages", orphan, HEADERS), 400, "invalid_request_error")
    image = {**BODY, "messages": [{"role": "user", "content": [{"type": "image", "source": {}}]}]}
    check(*http(server.base, "POST", "/v1/messages", image, HEADERS), 400, "invalid_request_error")
    check(*http(server.base, "POST", "/v1/messages", b"{not json", HEADERS), 400, "invalid_request_error")
    check(*http(server.base, "GET", "/v1/messages", None, HEADERS), 405, "invalid_request_error")


def test_api_key_in_x_api_key(start_server):
    s = start_server("--api-key", "sekret")
    check_body = {**BODY, "max_tokens": 2}
    status, body = http(s.base, "POST", "/v1/messages", check_body, {"x-api-key": "wrong"})
    assert status == 401 and body["error"]["type"] == "authentication_error"
    assert http(s.base, "POST", "/v1/messages", check_body, {"x-api-key": "sekret"})[0] == 200
    assert http(s.base, "POST", "/v1/messages", check_body, {"Authorization": "Bearer sekret"})[0] == 200
