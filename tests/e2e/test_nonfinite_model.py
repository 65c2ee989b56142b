"""Issue 30, finding 4 through the HTTP server: a model whose final norm weights are NaN (or +inf)
produces non-finite logits on every step. Each of 20 sampled requests (completions, chat, n=2,
streaming) gets a clean error naming the cause, /health stays 200 after every one, the server
keeps serving (tokenize, metrics count the 20 failures) and exits 0 on SIGTERM. Before the fix the
first sampled request aborted the process (`check failed ... std::isfinite(l_max)`)."""
import json
import os
import urllib.request

import pytest

from conftest import SERVED_NAME, SOURCE_DIR, http
from gguf_file import with_f32_tensor_filled
from test_load import settled_metrics

STORIES = os.path.join(SOURCE_DIR, "tests", "data", "models", "stories260K.gguf")


def stream_body(base, path, body):
    req = urllib.request.Request(base + path, data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as r:
        return r.status, r.read().decode("utf-8", "replace")


def requests_for(i):
    """The i-th of 20 sampled requests: (path, body, streamed)."""
    kinds = [
        ("/v1/completions", {"prompt": "Once upon a time", "max_tokens": 8}, False),
        ("/v1/chat/completions", {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 8}, False),
        ("/v1/completions", {"prompt": "The cat", "max_tokens": 4, "n": 2}, False),
        ("/v1/completions", {"prompt": "Lily", "max_tokens": 4, "stream": True}, True),
        ("/v1/completions", {"prompt": "A dog", "max_tokens": 4, "logprobs": 2, "top_p": 0.9}, False),
    ]
    path, body, streamed = kinds[i % len(kinds)]
    return path, {**body, "model": SERVED_NAME, "temperature": 0.8, "seed": 1000 + i}, streamed


@pytest.mark.parametrize("value", [float("nan"), float("inf")], ids=["nan", "inf"])
def test_nonfinite_model_fails_each_request_and_keeps_serving(start_server, tmp_path, value):
    if not os.path.exists(STORIES):
        pytest.skip("tests/data/models/stories260K.gguf is missing")
    model = str(tmp_path / "broken.gguf")
    with_f32_tensor_filled(STORIES, model, "output_norm.weight", value)
    s = start_server(model=model)
    for i in range(20):
        path, body, streamed = requests_for(i)
        if streamed:
            status, text = stream_body(s.base, path, body)
            assert status == 200
            events = [json.loads(line[6:]) for line in text.splitlines()
                      if line.startswith("data: ") and line != "data: [DONE]"]
            errors = [e["error"] for e in events if "error" in e]
            assert len(errors) == 1, text
            assert "non-finite logits" in errors[0]["message"], text
        else:
            status, reply = http(s.base, "POST", path, body, timeout=60)
            assert status == 500, reply
            assert reply["error"]["type"] == "server_error", reply
            assert "non-finite logits" in reply["error"]["message"], reply
        health, _ = http(s.base, "GET", "/health", timeout=10)
        assert health == 200, f"unhealthy after request {i}"
    status, reply = http(s.base, "POST", "/tokenize", {"model": SERVED_NAME, "prompt": "Once upon a time"})
    assert status == 200 and reply["count"] > 0
    m = settled_metrics(s.base)  # the engine publishes its counters after the step that answered
    assert m["tessera:request_nonfinite_logits_total"] == 20, m  # per request (n=2 counts once)
    assert m.get("tessera:num_requests_running", 0) == 0
    assert s.stop() == 0, s.read_log()
