"""`tessera serve`'s OpenAI Responses API (`/v1/responses`) through the official `openai` SDK's
`responses` resource, greedy.

One conversation model under both APIs: the same conversation through `/v1/responses` and
`/v1/chat/completions` gives the same greedy text and token counts, so the answers are pinned to the
chat answers. Also: the stream's event sequence (`sequence_number` 0, 1, 2, ...; created,
in_progress, item added/done, text deltas, completed) and its text equal to the non-streamed one,
`status` `incomplete` with `incomplete_details` at `max_output_tokens`; a forced function call
(Qwen2.5-Coder-0.5B, `tool_choice` naming the function), its streamed arguments, and a
`function_call_output` round trip fed back the way the SDK's users do (`model_dump` of the output
items, ids and statuses included); `text.format` `json_schema` output that validates; the prefix
cache in `usage.input_tokens_details.cached_tokens`; Codex-style stateless calls (`store: false`);
errors as the SDK's exception classes.
"""
import json

import pytest

from conftest import QWEN_TOOL_RESULT_ANSWER, SERVED_NAME, http, per_kernel_path

openai = pytest.importorskip("openai")

QUESTION = "What is the capital of France?"
TOOL = {"type": "function", "name": "get_weather", "description": "Get the current weather in a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string", "description": "The city, e.g. Paris"}},
                       "required": ["city"]}}
OPENAI_CHAT_TOOL = {"type": "function", "function": {k: v for k, v in TOOL.items() if k != "type"}}
WEATHER_QUESTION = "What is the weather like in Paris today?"
WEATHER_RESULT = json.dumps({"temperature_c": 21, "sky": "sunny"})
ANSWER_SYSTEM = "You are a weather assistant. When a tool result arrives, answer the user in one plain English sentence."


def chat(client, messages, max_tokens, **kw):
    return client.chat.completions.create(model=SERVED_NAME, messages=messages, max_tokens=max_tokens, temperature=0, **kw)


def create(client, **kw):
    return client.responses.create(model=SERVED_NAME, temperature=0, **kw)


def message_text(r):
    assert [o.type for o in r.output] == ["message"], r.output
    assert [p.type for p in r.output[0].content] == ["output_text"]
    return r.output_text


def test_create_equals_chat(client):
    r = create(client, input=QUESTION, max_output_tokens=24)
    c = chat(client, [{"role": "user", "content": QUESTION}], 24)
    assert r.id.startswith("resp_") and r.object == "response" and r.model == SERVED_NAME
    assert r.output[0].role == "assistant" and r.output[0].id.startswith("msg_")
    assert message_text(r) == c.choices[0].message.content
    assert r.usage.input_tokens == c.usage.prompt_tokens
    assert r.usage.output_tokens == c.usage.completion_tokens
    assert r.usage.total_tokens == r.usage.input_tokens + r.usage.output_tokens
    if c.choices[0].finish_reason == "length":
        assert r.status == "incomplete" and r.incomplete_details.reason == "max_output_tokens"
    else:
        assert r.status == "completed" and r.incomplete_details is None


def test_incomplete_at_max_output_tokens(client):
    r = create(client, input=QUESTION, max_output_tokens=3)
    assert r.status == "incomplete" and r.incomplete_details.reason == "max_output_tokens"
    assert r.usage.output_tokens == 3


def test_instructions_and_items_equal_chat(client):
    system = "You are a terse geography teacher."
    items = [{"role": "user", "content": [{"type": "input_text", "text": QUESTION}]},
             {"role": "assistant", "content": [{"type": "output_text", "text": "Paris."}]},
             {"type": "message", "role": "user", "content": "And of Italy?"}]
    r = create(client, instructions=system, input=items, max_output_tokens=16)
    c = chat(client, [{"role": "system", "content": system}, {"role": "user", "content": QUESTION},
                      {"role": "assistant", "content": "Paris."}, {"role": "user", "content": "And of Italy?"}], 16)
    assert message_text(r) == c.choices[0].message.content
    assert r.usage.input_tokens == c.usage.prompt_tokens
    assert r.instructions == system


def test_stream_equals_create(client):
    whole = create(client, input=QUESTION, max_output_tokens=24)
    events = list(create(client, input=QUESTION, max_output_tokens=24, stream=True))
    assert [e.sequence_number for e in events] == list(range(len(events)))
    kinds = [e.type for e in events]
    deltas = [e for e in events if e.type == "response.output_text.delta"]
    assert kinds == (["response.created", "response.in_progress", "response.output_item.added",
                      "response.content_part.added"] + ["response.output_text.delta"] * len(deltas) +
                     ["response.output_text.done", "response.content_part.done", "response.output_item.done",
                      "response.incomplete" if whole.status == "incomplete" else "response.completed"])
    text = "".join(d.delta for d in deltas)
    assert text == message_text(whole) == events[-4].text
    assert len({events[0].response.id, events[1].response.id, events[-1].response.id}) == 1
    final = events[-1].response
    assert final.output_text == text and final.status == whole.status
    assert final.usage.output_tokens == whole.usage.output_tokens
    assert final.usage.input_tokens == whole.usage.input_tokens
    # The SDK's accumulating helper checks the same invariants (ids, order) and must agree. Its
    # get_final_response() needs response.completed; a cut answer ends with response.incomplete.
    with client.responses.stream(model=SERVED_NAME, input=QUESTION, max_output_tokens=24, temperature=0) as s:
        last = list(s)[-1]
    assert last.type == events[-1].type and last.response.output_text == text
    finished = create(client, input="What is 2+2?", max_output_tokens=64)
    assert finished.status == "completed"
    with client.responses.stream(model=SERVED_NAME, input="What is 2+2?", max_output_tokens=64, temperature=0) as s:
        for _ in s:
            pass
        assert s.get_final_response().output_text == finished.output_text


def test_prefix_cached_tokens(client):
    long_text = " ".join(f"Row {i}: a slow green turtle crosses the wide river number {i}." for i in range(25))
    first = create(client, input=long_text + "\nHow many rows are there?", max_output_tokens=2)
    again = create(client, input=long_text + "\nHow many rows are there?", max_output_tokens=2)
    assert again.usage.input_tokens == first.usage.input_tokens > 300
    # Whole 16-token blocks of the prompt, the last prompt token always recomputed.
    assert again.usage.input_tokens_details.cached_tokens == (first.usage.input_tokens - 1) // 16 * 16


def test_stateless_codex_style(client):
    # Codex sends store: false and the whole conversation each turn.
    r = create(client, input=[{"type": "message", "role": "user", "content": [{"type": "input_text", "text": QUESTION}]}],
               store=False, max_output_tokens=8, parallel_tool_calls=False, tools=[], tool_choice="auto",
               include=[], reasoning=None)
    assert r.store is False
    assert message_text(r) == create(client, input=QUESTION, max_output_tokens=8).output_text


def test_json_schema_output_validates_and_equals_chat(client):
    jsonschema = pytest.importorskip("jsonschema")
    schema = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 12},
                                               "population_millions": {"type": "integer", "minimum": 0, "maximum": 99}},
              "required": ["city", "population_millions"], "additionalProperties": False}
    prompt = "Name a big city and its population in millions, as JSON."
    r = create(client, input=prompt, max_output_tokens=48,
               text={"format": {"type": "json_schema", "name": "city", "schema": schema, "strict": True}})
    assert r.status == "completed"
    jsonschema.validate(json.loads(message_text(r)), schema)
    c = chat(client, [{"role": "user", "content": prompt}], 48,
             response_format={"type": "json_schema", "json_schema": {"name": "city", "schema": schema, "strict": True}})
    assert r.output_text == c.choices[0].message.content


def test_json_object_equals_chat(client):
    # SmolLM2 writes a long object: cut at 48 tokens, the same text and status as chat's.
    r = create(client, input="Reply with a JSON object.", max_output_tokens=48, text={"format": {"type": "json_object"}})
    c = chat(client, [{"role": "user", "content": "Reply with a JSON object."}], 48, response_format={"type": "json_object"})
    assert r.output_text == c.choices[0].message.content and r.output_text.startswith("{")
    assert r.status == ("incomplete" if c.choices[0].finish_reason == "length" else "completed")


@pytest.mark.parametrize("name,body,param", [
    ("input missing", {"model": SERVED_NAME}, "input"),
    ("unknown item type", {"model": SERVED_NAME, "input": [{"type": "video", "url": "x"}]}, "input"),
    ("function_call_output without its call", {"model": SERVED_NAME, "input": [
        {"role": "user", "content": "hi"}, {"type": "function_call_output", "call_id": "call_missing", "output": "x"}]},
     "input"),
    ("max_output_tokens zero", {"model": SERVED_NAME, "input": "hi", "max_output_tokens": 0}, "max_output_tokens"),
    ("tool without a name", {"model": SERVED_NAME, "input": "hi", "tools": [{"type": "function", "parameters": {}}]},
     "tools"),
    ("bad text.format", {"model": SERVED_NAME, "input": "hi", "text": {"format": {"type": "yaml"}}}, "text"),
])
def test_bad_request(server, client, name, body, param):
    status, got = http(server.base, "POST", "/v1/responses", body)
    assert status == 400, (name, got)
    assert got["error"]["type"] == "invalid_request_error"
    assert (got["error"].get("param") or "").startswith(param), got
    with pytest.raises(openai.BadRequestError):
        client.post("/responses", body=body, cast_to=openai.types.responses.Response)


def test_api_key(start_server):
    s = start_server("--api-key", "sekret")
    wrong = openai.OpenAI(base_url=s.base + "/v1", api_key="wrong", max_retries=0)
    with pytest.raises(openai.AuthenticationError):
        wrong.responses.create(model=SERVED_NAME, input="hi", max_output_tokens=2)
    right = openai.OpenAI(base_url=s.base + "/v1", api_key="sekret", max_retries=0)
    assert right.responses.create(model=SERVED_NAME, input="hi", max_output_tokens=2).usage.output_tokens == 2


# ---- function tools, on Qwen2.5-Coder-0.5B-Instruct

def forced_call(qwen_client, **kw):
    return create(qwen_client, input=[{"role": "user", "content": WEATHER_QUESTION}], tools=[TOOL],
                  tool_choice={"type": "function", "name": "get_weather"}, max_output_tokens=48, **kw)


def test_forced_function_call(qwen_client):
    r = forced_call(qwen_client)
    calls = [o for o in r.output if o.type == "function_call"]
    assert r.status == "completed"
    assert len(calls) == 1 and calls[0].name == "get_weather"
    assert calls[0].call_id.startswith("call_") and calls[0].id.startswith("fc_")
    assert json.loads(calls[0].arguments) == {"city": "Paris"}


def test_function_call_stream_equals_create(qwen_client):
    whole = [o for o in forced_call(qwen_client).output if o.type == "function_call"][0]
    events = list(forced_call(qwen_client, stream=True))
    assert [e.sequence_number for e in events] == list(range(len(events)))
    added = [e.item for e in events if e.type == "response.output_item.added" and e.item.type == "function_call"]
    assert len(added) == 1 and added[0].name == "get_weather" and added[0].arguments == ""
    args = "".join(e.delta for e in events if e.type == "response.function_call_arguments.delta")
    done = [e for e in events if e.type == "response.function_call_arguments.done"]
    assert args == done[0].arguments == whole.arguments
    assert events[-1].type == "response.completed"
    final = [o for o in events[-1].response.output if o.type == "function_call"][0]
    assert (final.name, final.arguments, final.call_id) == (whole.name, whole.arguments, added[0].call_id)


def test_function_call_output_round_trip_equals_chat(qwen_client):
    r1 = forced_call(qwen_client)
    call = [o for o in r1.output if o.type == "function_call"][0]
    # Fed back as SDK users do: the output items as dicts (ids, status included), then the result.
    items = ([{"role": "user", "content": WEATHER_QUESTION}] + [o.model_dump(exclude_none=True) for o in r1.output] +
             [{"type": "function_call_output", "call_id": call.call_id, "output": WEATHER_RESULT}])
    r2 = create(qwen_client, instructions=ANSWER_SYSTEM, input=items, tools=[TOOL], tool_choice="none", max_output_tokens=64)
    c = chat(qwen_client, [{"role": "system", "content": ANSWER_SYSTEM}, {"role": "user", "content": WEATHER_QUESTION},
                           {"role": "assistant", "content": None, "tool_calls": [{
                               "id": call.call_id, "type": "function",
                               "function": {"name": call.name, "arguments": call.arguments}}]},
                           {"role": "tool", "tool_call_id": call.call_id, "content": WEATHER_RESULT}], 64,
             tools=[OPENAI_CHAT_TOOL], tool_choice="none")
    answer = per_kernel_path(**QWEN_TOOL_RESULT_ANSWER)
    assert c.choices[0].message.content == answer
    assert message_text(r2) == answer
    assert r2.usage.input_tokens == c.usage.prompt_tokens
    assert r2.status == "completed"
