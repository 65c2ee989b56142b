"""POST /v1/responses (OpenAI Responses) over raw HTTP against the real `tessera serve` on
SmolLM2 (no SDK: the SDK-driven tests are test_openai_responses.py / the Agents SDK ones): create,
the stream's events (sequence numbers, ids) and its text equal to the non-streamed answer at
temperature 0, a required function call through the grammar with a function_call_output round
trip, text.format json_schema, max_output_tokens -> incomplete, errors, store + previous_response_id
(equal to sending the whole conversation) and GET / DELETE /v1/responses/{id}.
"""
import json

from conftest import http, named_sse_events

BODY = {"model": "gpt-5-codex", "instructions": "You are terse.", "store": False, "temperature": 0,
        "max_output_tokens": 24, "input": [{"role": "user", "content": [{"type": "input_text", "text": "Name a colour."}]}],
        "include": [], "reasoning": {"effort": "low"}, "prompt_cache_key": "k"}
WEATHER = {"type": "function", "name": "get_weather", "description": "Weather for a city", "strict": True,
           "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 12}},
                          "required": ["city"], "additionalProperties": False}}


def stream_events(base, body):
    return named_sse_events(base, "/v1/responses", body)


def output_text(response):
    return "".join(p["text"] for item in response["output"] if item["type"] == "message" for p in item["content"])


def test_create_and_stream_agree(server):
    status, resp = http(server.base, "POST", "/v1/responses", BODY)
    assert status == 200, resp
    assert resp["id"].startswith("resp_") and resp["object"] == "response" and resp["model"] == "gpt-5-codex"
    assert resp["status"] in ("completed", "incomplete")
    assert resp["instructions"] == "You are terse." and resp["store"] is False
    usage = resp["usage"]
    assert usage["total_tokens"] == usage["input_tokens"] + usage["output_tokens"]
    assert 0 <= usage["input_tokens_details"]["cached_tokens"] <= usage["input_tokens"]
    text = output_text(resp)
    assert text

    events = stream_events(server.base, {**BODY, "stream": True})
    names = [n for n, _ in events]
    assert names[:3] == ["response.created", "response.in_progress", "response.output_item.added"]
    assert names[-1] == ("response.completed" if resp["status"] == "completed" else "response.incomplete")
    assert [d["sequence_number"] for _, d in events] == list(range(len(events)))
    assert all(d["type"] == n for n, d in events)
    ids = {d["response"]["id"] for n, d in events if "response" in d}
    assert len(ids) == 1
    assert "".join(d["delta"] for n, d in events if n == "response.output_text.delta") == text
    final = events[-1][1]["response"]
    assert output_text(final) == text
    assert final["usage"]["output_tokens"] == usage["output_tokens"]


def test_required_function_call_round_trip(server):
    body = {**BODY, "max_output_tokens": 60, "tools": [WEATHER], "tool_choice": "required",
            "parallel_tool_calls": False, "input": "Weather in Paris?"}
    status, resp = http(server.base, "POST", "/v1/responses", body)
    assert status == 200, resp
    (call,) = [i for i in resp["output"] if i["type"] == "function_call"]
    assert call["name"] == "get_weather" and call["call_id"] and call["id"].startswith("fc_")
    args = json.loads(call["arguments"])
    assert isinstance(args["city"], str) and len(args["city"]) <= 12

    events = stream_events(server.base, {**body, "stream": True})
    streamed = "".join(d["delta"] for n, d in events if n == "response.function_call_arguments.delta")
    assert json.loads(streamed) == args
    (done,) = [d for n, d in events if n == "response.function_call_arguments.done"]
    assert json.loads(done["arguments"]) == args

    follow = {**BODY, "tools": [WEATHER], "input": [
        {"role": "user", "content": "Weather in Paris?"}, call,
        {"type": "function_call_output", "call_id": call["call_id"], "output": "sunny, 20C"}]}
    status, answer = http(server.base, "POST", "/v1/responses", follow)
    assert status == 200, answer
    assert answer["status"] in ("completed", "incomplete")


def test_json_schema_and_incomplete(server):
    schema = {"type": "object", "properties": {"colour": {"type": "string", "maxLength": 10}},
              "required": ["colour"], "additionalProperties": False}
    body = {**BODY, "max_output_tokens": 40,
            "text": {"format": {"type": "json_schema", "name": "c", "schema": schema, "strict": True}}}
    status, resp = http(server.base, "POST", "/v1/responses", body)
    assert status == 200, resp
    assert resp["status"] == "completed"
    assert set(json.loads(output_text(resp))) == {"colour"}
    status, cut = http(server.base, "POST", "/v1/responses", {**BODY, "max_output_tokens": 1})
    assert status == 200
    assert cut["status"] == "incomplete" and cut["incomplete_details"] == {"reason": "max_output_tokens"}
    assert cut["usage"]["output_tokens"] == 1


def test_errors(server):
    for body in ({"model": "m"}, {"input": []}, {"input": "x", "previous_response_id": 7},
                 {"input": [{"type": "function_call_output", "call_id": "nope", "output": "x"}]},
                 {"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "x"}]}]}):
        status, err = http(server.base, "POST", "/v1/responses", body)
        assert status == 400, (body, err)
        assert err["error"]["type"] == "invalid_request_error" and err["error"]["message"]
    assert http(server.base, "GET", "/v1/responses")[0] == 405
    status, err = http(server.base, "POST", "/v1/responses", {"input": "x", "previous_response_id": "resp_nope"})
    assert status == 404 and "resp_nope" in err["error"]["message"]


def test_store_and_previous_response_id(server):
    status, first = http(server.base, "POST", "/v1/responses", {**BODY, "store": True, "input": "My name is Ada."})
    assert status == 200 and first["store"] is True
    status, got = http(server.base, "GET", f"/v1/responses/{first['id']}")
    assert status == 200 and got == first
    follow = {**BODY, "input": "What is my name?", "previous_response_id": first["id"]}
    status, second = http(server.base, "POST", "/v1/responses", follow)
    assert status == 200 and second["previous_response_id"] == first["id"]
    # The continuation is the whole conversation sent at once.
    whole = {**BODY, "input": [{"role": "user", "content": "My name is Ada."}, *first["output"],
                               {"role": "user", "content": "What is my name?"}]}
    status, stateless = http(server.base, "POST", "/v1/responses", whole)
    assert status == 200
    assert stateless["usage"]["input_tokens"] == second["usage"]["input_tokens"]
    assert output_text(stateless) == output_text(second)
    assert http(server.base, "DELETE", f"/v1/responses/{first['id']}")[0] == 200
    assert http(server.base, "GET", f"/v1/responses/{first['id']}")[0] == 404
