"""`tessera serve` through the official openai client: completions and chat, streaming and not,
n > 1, stop strings, seeds, usage, error types, and greedy equality with `tessera run`."""
import json
import os
import subprocess

import pytest

from conftest import SERVED_NAME, http, metrics, model_path, tessera_bin

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
    assert r.usage.prompt_tokens_details.cached_tokens == 0  # shorter than a block: nothing to reuse
    # The same prompt again: same text (PROMPT is shorter than a block, so nothing came from the cache).
    again = client.completions.create(model=SERVED_NAME, prompt=PROMPT, max_tokens=12, temperature=0,
                                      extra_body={"ignore_eos": True})
    assert again.choices[0].text == r.choices[0].text
    assert again.usage.prompt_tokens_details.cached_tokens == 0


def test_prefix_cache_hit_is_reported_in_usage(server, client):
    # A prompt no other test sends, several blocks long: the first request computes all of it, the
    # second reuses its longest whole-block prefix that leaves at least one token to compute, i.e.
    # (prompt_tokens - 1) // block_size * block_size tokens (KVCacheManager's longest hit).
    prompt = ("The lighthouse keeper wrote the names of forty-one ships in a blue notebook, one for every "
              "night of the storm, and at dawn he read them aloud to the gulls on the rocks below.")
    block = http(server.base, "GET", "/server_info")[1]["block_size"]
    first = client.completions.create(model=SERVED_NAME, prompt=prompt, max_tokens=4, temperature=0)
    n = first.usage.prompt_tokens
    assert n > 2 * block, f"{n} tokens: the prompt must span more than two blocks of {block}"
    assert first.usage.prompt_tokens_details.cached_tokens == 0
    again = client.completions.create(model=SERVED_NAME, prompt=prompt, max_tokens=4, temperature=0)
    assert again.usage.prompt_tokens_details.cached_tokens == (n - 1) // block * block
    assert again.choices[0].text == first.choices[0].text


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


def requests_seen(server):
    return metrics(server.base)["tessera:http_requests_total"]


def test_unsupported_parameters_are_400_and_not_retried(server):
    # Issue 30, finding 10: a 501 made the client retry (2 retries by default) and raise a server
    # error. A known parameter this server cannot honor is the client's to change: 400
    # invalid_request_error, code unsupported_parameter, naming it; sent once.
    import openai
    retrying = openai.OpenAI(base_url=server.base + "/v1", api_key="unused", timeout=60)  # default max_retries
    assert retrying.max_retries == 2
    cases = [
        ("logit_bias", lambda: retrying.completions.create(model=SERVED_NAME, prompt=PROMPT, max_tokens=2,
                                                           logit_bias={"5": 10})),
        ("logit_bias", lambda: retrying.chat.completions.create(
            model=SERVED_NAME, messages=[{"role": "user", "content": "Hi"}], max_tokens=2, logit_bias={"5": 10})),
        ("best_of", lambda: retrying.completions.create(model=SERVED_NAME, prompt=PROMPT, max_tokens=2, best_of=3)),
        ("suffix", lambda: retrying.completions.create(model=SERVED_NAME, prompt=PROMPT, max_tokens=2, suffix="end")),
        ("echo", lambda: retrying.completions.create(model=SERVED_NAME, prompt=PROMPT, max_tokens=2, echo=True,
                                                     logprobs=1)),
    ]
    for param, call in cases:
        before = requests_seen(server)
        with pytest.raises(openai.BadRequestError) as e:
            call()
        assert e.value.status_code == 400 and e.value.code == "unsupported_parameter", e.value
        assert e.value.param == param and e.value.type == "invalid_request_error", e.value
        assert f"'{param}'" in e.value.message and "not supported" in e.value.message
        # One request for the call and one for this metrics read: no retry.
        assert requests_seen(server) - before == 2, param


# Every route the server has: (method, path, body). Issue 30, finding 13: the key covers all but /health.
ROUTES = [
    ("POST", "/v1/completions", {"model": SERVED_NAME, "prompt": "Hi", "max_tokens": 1}),
    ("POST", "/v1/chat/completions", {"model": SERVED_NAME, "messages": [{"role": "user", "content": "Hi"}],
                                      "max_tokens": 1}),
    ("POST", "/tokenize", {"prompt": "Hi"}),
    ("POST", "/detokenize", {"tokens": [28]}),
    ("POST", "/apply-template", {"messages": [{"role": "user", "content": "Hi"}]}),
    ("GET", "/v1/models", None),
    ("GET", f"/v1/models/{SERVED_NAME}", None),
    ("GET", "/metrics", None),
    ("GET", "/v1/loads", None),
    ("GET", "/loads", None),
    ("GET", "/server_info", None),
    ("GET", "/version", None),
]


def test_api_key_from_a_file_or_the_environment_covers_every_route_but_health(start_server, tmp_path, monkeypatch):
    key = "e2e-file-secret-7f3a"
    key_file = tmp_path / "key"
    key_file.write_text(key + "\n")
    s = start_server("--api-key-file", str(key_file))
    with open(f"/proc/{s.proc.pid}/cmdline", "rb") as f:
        assert key.encode() not in f.read()  # not in the process list
    good = {"Authorization": f"Bearer {key}"}
    for method, path, body in ROUTES:
        status, got = http(s.base, method, path, body)
        assert status == 401 and got["error"]["type"] == "authentication_error", (path, got)
        status, _ = http(s.base, method, path, body, headers={"Authorization": "Bearer wrong"})
        assert status == 401, path
        status, got = http(s.base, method, path, body, headers={**good, "Content-Type": "application/json"})
        assert status == 200, (path, got)
    assert http(s.base, "GET", "/health")[0] == 200
    assert s.stop() == 0

    # The environment, and --public-metrics for a scraper: /metrics open, everything else still closed.
    monkeypatch.setenv("TESSERA_API_KEY", "e2e-env-secret")
    s = start_server("--public-metrics")
    with open(f"/proc/{s.proc.pid}/cmdline", "rb") as f:
        assert b"e2e-env-secret" not in f.read()
    status, text = http(s.base, "GET", "/metrics")
    assert status == 200 and "tessera:http_requests_total" in text
    for method, path, body in ROUTES:
        if path != "/metrics":
            assert http(s.base, method, path, body)[0] == 401, path
    assert http(s.base, "POST", "/tokenize", {"prompt": "Hi"},
                headers={"Authorization": "Bearer e2e-env-secret", "Content-Type": "application/json"})[0] == 200
    assert s.stop() == 0


def test_models_card_names_the_file_not_its_path(server):
    # Issue 30, finding 13: /v1/models showed the model's absolute path (so did /server_info).
    _, body = http(server.base, "GET", "/v1/models")
    assert body["data"][0]["root"] == os.path.basename(model_path())
    assert os.path.dirname(model_path()) not in json.dumps(body)
    _, info = http(server.base, "GET", "/server_info")
    assert info["model_path"] == os.path.basename(model_path())
    assert os.path.dirname(model_path()) not in json.dumps(info)
