"""LoRA adapters through `tessera serve --lora-modules` (issue 45), on SmolLM2-135M with seeded random
adapters written by scripts/make_lora_gguf.py (llama.cpp's adapter format):

- /v1/models lists each adapter with `parent` = the base model; `model` picks it in
  /v1/chat/completions, /v1/completions, /v1/messages and /v1/responses (the agent APIs answer an
  unknown id with the base model, but a loaded adapter's name selects the adapter);
- mixed-batch invariance: the same greedy requests alone, all together (adapters a and b and the
  base in one batch), under a KV cache small enough to preempt, and again from the prefix cache give
  identical tokens; a prompt cached under the base is not reused for an adapter (cached_tokens 0);
- n-gram speculation and structured outputs keep working with an adapter (same greedy tokens);
- POST /v1/load_lora_adapter / /v1/unload_lora_adapter: behind the API key; hostile files are
  refused with a 400 naming the problem and the server stays as it was; a request in flight keeps
  its adapter while it is unloaded;
- /metrics: vllm:lora_requests_info and tessera:lora_load_seconds.
"""
import concurrent.futures
import json
import os
import subprocess
import sys
import threading
import time

import pytest

from conftest import SOURCE_DIR, http, metrics, model_path

pytest.importorskip("gguf")

PROMPTS = ["The capital of France is", "Once upon a time, a small robot", "def fibonacci(n):",
           "The three primary colors are", "In 1969, astronauts", "My favourite recipe for soup"]


def make_adapter(tmp_path_factory, name, seed, **kw):
    out = str(tmp_path_factory.mktemp("lora") / f"{name}.gguf")
    args = [sys.executable, os.path.join(SOURCE_DIR, "scripts", "make_lora_gguf.py"), "--base", model_path(),
            "--out", out, "--seed", str(seed), "--rank", str(kw.get("rank", 8)), "--alpha", "16",
            "--targets", kw.get("targets", "all"), "--b-std", str(kw.get("b_std", 0.05))]
    subprocess.run(args, check=True)
    return out


@pytest.fixture(scope="module")
def adapters(tmp_path_factory):
    if model_path() is None:
        pytest.skip("no default model")
    return {"a": make_adapter(tmp_path_factory, "a", 1), "b": make_adapter(tmp_path_factory, "b", 2, targets="attn_q,attn_v"),
            "c": make_adapter(tmp_path_factory, "c", 3, rank=16)}


@pytest.fixture(scope="module")
def lora_server(adapters, request):
    from conftest import Server, require_environment
    require_environment()
    s = Server(("--lora-modules", f"a={adapters['a']}", f"b={adapters['b']}", "--max-num-seqs", "16"))
    yield s
    assert s.stop() == 0, s.read_log()


def complete(base, model, prompt, max_tokens=24, **extra):
    status, body = http(base, "POST", "/v1/completions",
                        {"model": model, "prompt": prompt, "max_tokens": max_tokens, "temperature": 0, **extra})
    assert status == 200, body
    return body


def tokens_of(base, model, prompt, **extra):
    return complete(base, model, prompt, **extra)["choices"][0]["text"]


def test_models_lists_adapters_with_parent(lora_server):
    status, body = http(lora_server.base, "GET", "/v1/models")
    assert status == 200
    ids = [m["id"] for m in body["data"]]
    assert ids == ["smol", "a", "b"]
    for card in body["data"][1:]:
        assert card["parent"] == "smol" and card["object"] == "model" and card["root"].endswith(".gguf")
    status, card = http(lora_server.base, "GET", "/v1/models/b")
    assert status == 200 and card["id"] == "b" and card["parent"] == "smol"
    status, _ = http(lora_server.base, "GET", "/v1/models/zzz")
    assert status == 404


def test_adapters_change_outputs_and_unknown_is_404(lora_server):
    base = lora_server.base
    outs = {m: tokens_of(base, m, PROMPTS[0]) for m in ("smol", "a", "b")}
    assert len(set(outs.values())) == 3, outs
    assert complete(base, "a", PROMPTS[0])["model"] == "a"
    status, body = http(base, "POST", "/v1/completions", {"model": "nope", "prompt": "x", "max_tokens": 2})
    assert status == 404 and body["error"]["param"] == "model"


def test_mixed_batch_invariance_and_prefix_cache(lora_server):
    base = lora_server.base
    jobs = [(m, p) for p in PROMPTS for m in ("smol", "a", "b")]
    alone = {job: tokens_of(base, *job) for job in jobs}
    with concurrent.futures.ThreadPoolExecutor(len(jobs)) as pool:
        together = dict(zip(jobs, pool.map(lambda job: tokens_of(base, *job), jobs)))
    assert together == alone
    # The prompts are now cached under each adapter: the same tokens again, from the cache.
    again = complete(base, "a", PROMPTS[1])
    assert again["choices"][0]["text"] == alone[("a", PROMPTS[1])]
    # A long prompt cached under the base model serves the base again, never an adapter.
    long_prompt = " ".join(["tessera serves many fine-tunes of one base model in one batch."] * 6)
    first = complete(base, "smol", long_prompt)
    assert complete(base, "smol", long_prompt)["usage"]["prompt_tokens_details"]["cached_tokens"] >= 48
    under_a = complete(base, "a", long_prompt)
    assert under_a["usage"]["prompt_tokens_details"]["cached_tokens"] == 0
    again_a = complete(base, "a", long_prompt)
    assert again_a["usage"]["prompt_tokens_details"]["cached_tokens"] >= 48
    assert again_a["choices"][0]["text"] == under_a["choices"][0]["text"]
    assert complete(base, "b", long_prompt)["usage"]["prompt_tokens_details"]["cached_tokens"] == 0
    assert first["choices"][0]["text"]


def chat(base, model, content, max_tokens=20, **extra):
    status, body = http(base, "POST", "/v1/chat/completions",
                        {"model": model, "messages": [{"role": "user", "content": content}], "max_tokens": max_tokens,
                         "temperature": 0, **extra})
    assert status == 200, body
    return body


def test_all_three_apis_select_the_adapter(lora_server):
    base = lora_server.base
    q = "Name a fruit."
    by_chat = {m: chat(base, m, q)["choices"][0]["message"]["content"] for m in ("smol", "a")}
    assert by_chat["smol"] != by_chat["a"]
    for model, expect in (("a", by_chat["a"]), ("claude-anything", by_chat["smol"])):
        status, msg = http(base, "POST", "/v1/messages",
                           {"model": model, "max_tokens": 20, "temperature": 0, "messages": [{"role": "user", "content": q}]})
        assert status == 200, msg
        assert msg["content"][0]["text"] == expect and msg["model"] == model
        status, resp = http(base, "POST", "/v1/responses",
                            {"model": model, "max_output_tokens": 20, "temperature": 0, "input": q})
        assert status == 200, resp
        text = "".join(c["text"] for item in resp["output"] if item["type"] == "message" for c in item["content"])
        assert text == expect


def test_real_clients_select_the_adapter(lora_server):
    # The openai and anthropic SDKs, as a user would call them: the adapter is a model id.
    import anthropic
    import openai
    base = lora_server.base
    q = "Name a fruit."
    oai = openai.OpenAI(base_url=base + "/v1", api_key="unused", max_retries=0, timeout=300)
    cards = {m.id: m for m in oai.models.list().data}
    assert set(cards) == {"smol", "a", "b"} and cards["a"].model_extra["parent"] == "smol"
    expect = chat(base, "a", q)["choices"][0]["message"]["content"]
    got = oai.chat.completions.create(model="a", messages=[{"role": "user", "content": q}], max_tokens=20, temperature=0)
    assert got.model == "a" and got.choices[0].message.content == expect
    got = oai.responses.create(model="a", input=q, max_output_tokens=20, temperature=0)
    assert got.output_text == expect
    ant = anthropic.Anthropic(base_url=base, api_key="unused", max_retries=0, timeout=300)
    msg = ant.messages.create(model="a", max_tokens=20, extra_body={"temperature": 0}, messages=[{"role": "user", "content": q}])
    assert msg.model == "a" and msg.content[0].text == expect


def test_structured_output_with_adapter(lora_server):
    schema = {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
              "required": ["name", "age"], "additionalProperties": False}
    body = chat(lora_server.base, "a", "Describe a person as JSON.", max_tokens=60,
                response_format={"type": "json_schema", "json_schema": {"name": "p", "schema": schema, "strict": True}})
    obj = json.loads(body["choices"][0]["message"]["content"])
    assert set(obj) == {"name", "age"} and isinstance(obj["age"], int)


def test_preemption_and_ngram_keep_the_tokens(lora_server, adapters, start_server):
    base = lora_server.base
    jobs = [(m, p) for p in PROMPTS[:4] for m in ("a", "b", "smol")]
    want = {job: tokens_of(base, *job, max_tokens=48) for job in jobs}
    # 8 blocks of 16 tokens (720 KiB each) for 12 requests of ~55 tokens (4 blocks) each: preemptions
    # are certain.
    small = start_server("--lora-modules", f"a={adapters['a']}", f"b={adapters['b']}", "--kv-cache", "5760KiB",
                         "--max-num-seqs", "12", "--speculative", "ngram", "--max-loras", "1")
    with concurrent.futures.ThreadPoolExecutor(len(jobs)) as pool:
        got = dict(zip(jobs, pool.map(lambda job: tokens_of(small.base, *job, max_tokens=48), jobs)))
    assert got == want
    m = metrics(small.base)
    assert m["tessera:num_preemptions_total"] > 0


def test_runtime_load_unload_and_hostile_files(lora_server, adapters, tmp_path):
    base = lora_server.base
    status, text = http(base, "POST", "/v1/load_lora_adapter", {"lora_name": "c", "lora_path": adapters["c"]})
    assert status == 200 and "added" in text
    status, body = http(base, "POST", "/v1/load_lora_adapter", {"lora_name": "c", "lora_path": adapters["c"]})
    assert status == 400 and "already loaded" in body["error"]["message"]
    c_text = tokens_of(base, "c", PROMPTS[2])
    assert c_text != tokens_of(base, "smol", PROMPTS[2])
    # Hostile files: a 400 (404 for a missing file) that names the problem; the set is unchanged.
    truncated = tmp_path / "trunc.gguf"
    truncated.write_bytes(open(adapters["a"], "rb").read()[:100000])
    for path, status_want, part in ((model_path(), 400, "expected 'adapter'"), (str(truncated), 400, "LoRA adapter"),
                                    ("/nonexistent.gguf", 404, "nonexistent")):
        status, body = http(base, "POST", "/v1/load_lora_adapter", {"lora_name": "bad", "lora_path": path})
        assert status == status_want and part in body["error"]["message"], body
    status, body = http(base, "POST", "/v1/load_lora_adapter", {"lora_name": "smol", "lora_path": adapters["a"]})
    assert status == 400
    status, body = http(base, "GET", "/v1/models")
    assert [m["id"] for m in body["data"]] == ["smol", "a", "b", "c"]
    m = metrics(base)
    assert "vllm:lora_requests_info" in m and "tessera:lora_load_seconds" in m
    # Unload while a request of c streams: it finishes with c's tokens; later requests get a 404.
    result = {}

    def long_request():
        result["text"] = tokens_of(base, "c", PROMPTS[2], max_tokens=200, ignore_eos=True)
    t = threading.Thread(target=long_request)
    t.start()
    time.sleep(0.3)
    status, text = http(base, "POST", "/v1/unload_lora_adapter", {"lora_name": "c"})
    assert status == 200, text
    t.join()
    assert result["text"].startswith(c_text)
    status, _ = http(base, "POST", "/v1/completions", {"model": "c", "prompt": "x", "max_tokens": 2})
    assert status == 404
    status, _ = http(base, "POST", "/v1/unload_lora_adapter", {"lora_name": "c"})
    assert status == 404


def test_load_endpoints_need_the_key(adapters, start_server):
    s = start_server("--api-key", "k3y")
    status, _ = http(s.base, "POST", "/v1/load_lora_adapter", {"lora_name": "a", "lora_path": adapters["a"]})
    assert status == 401
    status, _ = http(s.base, "POST", "/v1/load_lora_adapter", {"lora_name": "a", "lora_path": adapters["a"]},
                     headers={"Authorization": "Bearer k3y", "Content-Type": "application/json"})
    assert status == 200


def test_kv_events_carry_lora_name(adapters, start_server):
    msgpack = pytest.importorskip("msgpack")
    from test_kv_events import kv_event_subscriber
    with kv_event_subscriber() as (endpoint, collector):
        s = start_server("--kv-events", endpoint, "--lora-modules", f"a={adapters['a']}")
        ids = list(range(1000, 1000 + 3 * 16 + 5))  # 3 full blocks
        for model in ("smol", "a"):
            status, body = http(s.base, "POST", "/v1/completions", {"model": model, "prompt": ids, "max_tokens": 1})
            assert status == 200, body
        messages = collector.stop()
    stored = [e for msg in messages for e in msgpack.unpackb(msg[2])[1] if e[0] == "BlockStored"]
    names = [(e[7], e[5] is not None) for e in stored]
    assert names == [(None, False)] * 3 + [("a", True)] * 3, names
    assert {e[1][0] for e in stored[:3]}.isdisjoint({e[1][0] for e in stored[3:]})


def test_disk_tier_events_carry_lora_name(adapters, start_server, tmp_path):
    """--kv-events with --kv-cache-dir: each block written to disk is reported once more with
    medium DISK, under its pool hash, named by the adapter that computed it (None for the base),
    and without waiting for another request (the idle engine publishes the finished writes)."""
    msgpack = pytest.importorskip("msgpack")
    from test_kv_events import kv_event_subscriber

    def disk_stored(messages):
        return sum(1 for msg in list(messages) for e in msgpack.unpackb(msg[2])[1]
                   if e[0] == "BlockStored" and e[6] == "DISK")

    with kv_event_subscriber() as (endpoint, collector):
        s = start_server("--kv-events", endpoint, "--kv-cache-dir", str(tmp_path),
                         "--lora-modules", f"a={adapters['a']}")
        ids = list(range(3000, 3000 + 3 * 16 + 5))  # 3 full blocks
        for model in ("smol", "a"):
            status, body = http(s.base, "POST", "/v1/completions", {"model": model, "prompt": ids, "max_tokens": 1})
            assert status == 200, body
            # This request's writes are reported before the next request starts.
            want, deadline = (3 if model == "smol" else 6), time.time() + 30
            while time.time() < deadline and disk_stored(collector.messages) < want:
                time.sleep(0.1)
            assert disk_stored(collector.messages) == want, model
        messages = collector.stop()
    stored = [e for msg in messages for e in msgpack.unpackb(msg[2])[1] if e[0] == "BlockStored"]
    pool = [e for e in stored if e[6] == "CPU"]
    disk = [e for e in stored if e[6] == "DISK"]
    assert [(e[7], e[5] is not None) for e in pool] == [(None, False)] * 3 + [("a", True)] * 3
    assert [(e[7], e[5] is not None) for e in disk] == [(None, False)] * 3 + [("a", True)] * 3
    assert [e[1] for e in disk] == [e[1] for e in pool]  # the same blocks, by their pool hashes
    assert [e[5] for e in disk] == [e[5] for e in pool]


def test_disk_tier_keys_blocks_by_adapter(adapters, start_server, tmp_path):
    """--kv-cache-dir with adapters: a prompt's blocks written under adapter a come back from disk
    after a restart for a alone (same tokens); b and the base model find none of them."""
    from test_kv_disk_tier import wait_writes
    ids = list(range(2000, 2000 + 20 * 16 + 3))  # 20 full blocks
    args = ("--kv-cache-dir", str(tmp_path), "--lora-modules", f"a={adapters['a']}", f"b={adapters['b']}")
    first = start_server(*args)
    cold = complete(first.base, "a", ids, max_tokens=8)
    assert cold["usage"]["prompt_tokens_details"]["cached_tokens"] == 0
    wait_writes(first, 20)
    assert first.stop() == 0
    second = start_server(*args)
    for model in ("b", "smol"):
        body = complete(second.base, model, ids, max_tokens=8)
        assert body["usage"]["prompt_tokens_details"]["cached_tokens"] == 0, model
    assert metrics(second.base).get("tessera:kv_disk_hit_blocks_total", 0) == 0
    warm = complete(second.base, "a", ids, max_tokens=8)
    assert warm["usage"]["prompt_tokens_details"]["cached_tokens"] == 20 * 16
    assert warm["choices"][0]["text"] == cold["choices"][0]["text"]
    assert metrics(second.base)["tessera:kv_disk_hit_blocks_total"] == 20
