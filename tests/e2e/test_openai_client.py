"""`tessera serve` through the official openai client: completions and chat, streaming and not,
n > 1, stop strings, seeds, usage, error types, and greedy equality with `tessera run`."""
import json
import subprocess

import pytest

from conftest import SERVED_NAME, http, model_path, tessera_bin

PROMPT = "Once upon a time"


def test_models_list(client):
    models = client.models.list()
    assert [m.id for m in models.data] == [SERVED_NAME]


def test_greedy_completion_equals_tessera_run(client):
    out = subprocess.run([tessera_bin(), "run", "--model", model_path(), "-p", PROMPT, "-n", "24",
                          "--temperature", "0", "--json", "-q", "--kv-cache", "64MiB"],
                         check=True, capture_output=True, text=True, timeout=300)
    expected = json.loads(out.stdout)
    r = client.completions.create(model=SERVED_NAME, prompt=PROMPT, max_tokens=24, temperature=0)
    assert r.choices[0].text == expected["text"]
    assert r.usage.prompt_tokens == len(expected["prompt_ids"])
    assert r.usage.completion_tokens == len(expected["ids"])
    assert r.choices[0].finish_reason == expected["finish_reason"]


def test_completion_usage_and_length(server, client):
    r = client.completions.create(model=SERVED_NAME, prompt=PROMPT, max_tokens=12, temperature=0,
                                  extra_body={"ignore_eos": True})
    _, tok = http(server.base, "POST", "/tokenize", {"prompt": PROMPT})
    assert r.usage.prompt_tokens == tok["count"]
    assert r.usage.completion_tokens == 12
    assert r.usage.total_tokens == tok["count"] + 12
    assert r.choices[0].finish_reason == "length"
    # The same prompt again: served (partly) from the prefix cache, same text.
    again = client.completions.create(model=SERVED_NAME, prompt=PROMPT, max_tokens=12, temperature=0,
                                      extra_body={"ignore_eos": True})
    assert again.choices[0].text == r.choices[0].text
    assert again.usage.prompt_tokens_details.cached_tokens >= 0


def test_completion_stream_equals_non_stream(client):
    whole = client.completions.create(model=SERVED_NAME, prompt=PROMPT, max_tokens=20, temperature=0)
    chunks = list(client.completions.create(model=SERVED_NAME, prompt=PROMPT, max_tokens=20, temperature=0,
                                            stream=True, stream_options={"include_usage": True}))
    text = "".join(c.choices[0].text for c in chunks if c.choices)
    assert text == whole.choices[0].text
    assert chunks[-1].usage.completion_tokens == whole.usage.completion_tokens
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    assert finishes == [whole.choices[0].finish_reason]


def test_chat_and_chat_stream(server, client):
    messages = [{"role": "user", "content": "What is the capital of France?"}]
    r = client.chat.completions.create(model=SERVED_NAME, messages=messages, max_tokens=24, temperature=0)
    assert r.choices[0].message.role == "assistant"
    assert len(r.choices[0].message.content) > 0
    assert r.choices[0].finish_reason in ("stop", "length")
    _, tok = http(server.base, "POST", "/tokenize", {"messages": messages})
    assert r.usage.prompt_tokens == tok["count"]
    stream = client.chat.completions.create(model=SERVED_NAME, messages=messages, max_tokens=24, temperature=0,
                                            stream=True, stream_options={"include_usage": True})
    chunks = list(stream)
    assert chunks[0].choices[0].delta.role == "assistant"
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == r.choices[0].message.content
    assert chunks[-1].usage.completion_tokens == r.usage.completion_tokens
    # max_completion_tokens is the newer spelling of max_tokens.
    short = client.chat.completions.create(model=SERVED_NAME, messages=messages, max_completion_tokens=3,
                                           temperature=0)
    assert short.usage.completion_tokens <= 3


def test_n_samples_and_seed_reproducibility(client):
    kw = dict(model=SERVED_NAME, prompt=PROMPT, max_tokens=12, temperature=1.0, n=3, seed=1234)
    a = client.completions.create(**kw)
    b = client.completions.create(**kw)
    assert [c.index for c in a.choices] == [0, 1, 2]
    assert [c.text for c in a.choices] == [c.text for c in b.choices]
    assert len({c.text for c in a.choices}) > 1  # samples differ from each other
    c = client.completions.create(**{**kw, "seed": 4321})
    assert [x.text for x in c.choices] != [x.text for x in a.choices]
    chat = client.chat.completions.create(model=SERVED_NAME, messages=[{"role": "user", "content": "Hi"}],
                                          max_tokens=8, n=2, seed=7, temperature=0.8)
    assert [ch.index for ch in chat.choices] == [0, 1]


def test_stop_strings(client):
    whole = client.completions.create(model=SERVED_NAME, prompt=PROMPT, max_tokens=24, temperature=0).choices[0].text
    words = whole.split()
    assert len(words) >= 4, whole
    stop = " " + words[3]
    cut = whole[:whole.index(stop)]
    r = client.completions.create(model=SERVED_NAME, prompt=PROMPT, max_tokens=24, temperature=0, stop=[stop])
    assert r.choices[0].text == cut
    assert r.choices[0].finish_reason == "stop"
    streamed = "".join(c.choices[0].text for c in client.completions.create(
        model=SERVED_NAME, prompt=PROMPT, max_tokens=24, temperature=0, stop=stop, stream=True))
    assert streamed == cut


def test_logprobs(client):
    r = client.completions.create(model=SERVED_NAME, prompt=PROMPT, max_tokens=4, temperature=0, logprobs=2)
    lp = r.choices[0].logprobs
    assert len(lp.tokens) == 4 and len(lp.token_logprobs) == 4
    assert all(x <= 0.0 for x in lp.token_logprobs)
    assert "".join(lp.tokens) == r.choices[0].text
    chat = client.chat.completions.create(model=SERVED_NAME, messages=[{"role": "user", "content": "Hi"}],
                                          max_tokens=3, temperature=0, logprobs=True, top_logprobs=2)
    content = chat.choices[0].logprobs.content
    assert len(content) == chat.usage.completion_tokens
    assert all(len(t.top_logprobs) == 2 for t in content)


def test_client_error_types(client):
    import openai
    with pytest.raises(openai.BadRequestError):
        client.completions.create(model=SERVED_NAME, prompt=PROMPT, max_tokens=-1)
    with pytest.raises(openai.BadRequestError):
        client.completions.create(model=SERVED_NAME, prompt=PROMPT, temperature=5)
    with pytest.raises(openai.BadRequestError) as e:
        client.completions.create(model=SERVED_NAME, prompt="word " * 2000, max_tokens=4)
    assert e.value.code == "context_length_exceeded"
    with pytest.raises(openai.NotFoundError) as e:
        client.completions.create(model="gpt-17", prompt=PROMPT, max_tokens=4)
    assert e.value.code == "model_not_found"
    with pytest.raises(openai.BadRequestError):
        client.chat.completions.create(model=SERVED_NAME, messages=[], max_tokens=4)
    # Still serving.
    assert client.completions.create(model=SERVED_NAME, prompt=PROMPT, max_tokens=2).usage.completion_tokens >= 1


def test_api_key(start_server):
    import openai
    s = start_server("--api-key", "e2e-secret")
    good = openai.OpenAI(base_url=s.base + "/v1", api_key="e2e-secret", max_retries=0)
    bad = openai.OpenAI(base_url=s.base + "/v1", api_key="wrong", max_retries=0)
    assert good.completions.create(model=SERVED_NAME, prompt=PROMPT, max_tokens=2).usage.completion_tokens >= 1
    with pytest.raises(openai.AuthenticationError):
        bad.completions.create(model=SERVED_NAME, prompt=PROMPT, max_tokens=2)
    status, body = http(s.base, "GET", "/v1/models")
    assert status == 401 and body["error"]["type"] == "authentication_error"
    assert http(s.base, "GET", "/health")[0] == 200
    assert s.stop() == 0
