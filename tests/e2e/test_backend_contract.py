"""The backend contract a gateway reads (issue 28 part 1), against the real server: /health,
/v1/models, SGLang's /v1/loads and /loads, /server_info, /version, the vllm: series in /metrics,
and X-Request-ID echoed and used as the response id."""
import json
import time
import urllib.request

from conftest import SERVED_NAME, http, metrics


def test_models_card_has_router_fields(server):
    status, body = http(server.base, "GET", "/v1/models")
    assert status == 200
    card = body["data"][0]
    assert card["id"] == SERVED_NAME and card["object"] == "model" and card["owned_by"] == "tessera"
    assert card["root"] == "SmolLM2-135M-Instruct.Q4_1.gguf"
    assert card["max_model_len"] == 1024


def test_loads_report_engine_values(server):
    # A finished request leaves prefix-cache queries and generated tokens behind.
    body = {"model": SERVED_NAME, "prompt": "The capital of France is", "max_tokens": 4, "temperature": 0}
    assert http(server.base, "POST", "/v1/completions", body)[0] == 200
    # The answer can leave before the engine publishes the metrics of the step that finished it:
    # read once the engine is idle (bounded), then every figure below is stable.
    deadline = time.time() + 10
    while True:
        status, loads = http(server.base, "GET", "/v1/loads?include=core,disagg,queues,memory")
        assert status == 200
        if loads["loads"][0]["num_running_reqs"] == 0 or time.time() > deadline:
            break
        time.sleep(0.05)
    assert loads["dp_rank_count"] == 1 and loads["timestamp"].endswith("Z")
    (rank,) = loads["loads"]
    info = http(server.base, "GET", "/server_info")[1]
    assert rank["num_running_reqs"] == 0 and rank["num_waiting_reqs"] == 0
    assert rank["num_waiting_uncached_tokens"] == 0
    assert rank["max_running_requests"] == info["max_num_seqs"] > 0
    assert rank["max_total_num_tokens"] == info["num_kv_blocks"] * info["block_size"] > 0
    assert rank["memory"]["token_capacity"] == rank["max_total_num_tokens"]
    assert 0 < rank["memory"]["weight_gb"] < 1 and rank["memory"]["kv_cache_gb"] > 0
    assert rank["queues"]["waiting"] == 0
    m = metrics(server.base)
    assert m["vllm:prefix_cache_queries_total"] > 0
    assert rank["cache_hit_rate"] == m["vllm:prefix_cache_hits_total"] / m["vllm:prefix_cache_queries_total"]
    assert rank["token_usage"] == m["vllm:kv_cache_usage_perc"]
    # /loads (SMG asks it with ?model=) is the same document.
    status, legacy = http(server.base, "GET", f"/loads?model={SERVED_NAME}")
    assert status == 200 and legacy["loads"][0]["max_total_num_tokens"] == rank["max_total_num_tokens"]
    assert "memory" not in legacy["loads"][0]


def test_loads_count_running_and_waiting_while_busy(start_server):
    import threading
    s = start_server("--max-num-seqs", "1")
    body = {"model": SERVED_NAME, "prompt": "Tell me a story", "max_tokens": 100, "temperature": 0,
            "ignore_eos": True}
    threads = [threading.Thread(target=http, args=(s.base, "POST", "/v1/completions", body)) for _ in range(3)]
    for t in threads:
        t.start()
    # Polled until seen or the requests are done (a count of polls raced the threads' start on a
    # loaded host: 200 polls can pass before the third request arrives). The first request's 100
    # tokens keep the other two waiting for a while on any host.
    seen = None
    while seen is None and any(t.is_alive() for t in threads):
        rank = http(s.base, "GET", "/v1/loads")[1]["loads"][0]
        if rank["num_running_reqs"] == 1 and rank["num_waiting_reqs"] == 2:
            seen = rank
        time.sleep(0.005)
    for t in threads:
        t.join(timeout=300)
    assert seen is not None, "never saw 1 running + 2 waiting with --max-num-seqs 1"
    assert seen["max_running_requests"] == 1 and seen["utilization"] == 1.0
    assert seen["num_waiting_uncached_tokens"] >= 2 * 4  # two whole prompts of a few tokens each
    assert seen["num_used_tokens"] > 0 and seen["token_usage"] > 0


def test_server_info_and_version(server):
    status, info = http(server.base, "GET", "/server_info")
    assert status == 200
    assert info["served_model_name"] == SERVED_NAME and info["max_model_len"] == 1024
    assert info["kv_cache_dtype"] == "f16" and info["enable_prefix_caching"] is True
    assert info["uptime_seconds"] > 0
    status, version = http(server.base, "GET", "/version")
    assert status == 200 and version["version"] == "0.1.0"
    assert http(server.base, "POST", "/v1/loads")[0] == 405


def test_metrics_carry_vllm_names(server):
    _, text = http(server.base, "GET", "/metrics")
    for line in ["# TYPE vllm:num_requests_running gauge", "# TYPE vllm:num_requests_waiting gauge",
                 "# TYPE vllm:kv_cache_usage_perc gauge", "# TYPE vllm:prefix_cache_queries_total counter",
                 "# TYPE vllm:prefix_cache_hits_total counter", "# TYPE vllm:cache_config_info gauge"]:
        assert line in text.splitlines()
    info = http(server.base, "GET", "/server_info")[1]
    config = [ln for ln in text.splitlines() if ln.startswith("vllm:cache_config_info{")]
    assert config == [f'vllm:cache_config_info{{model_name="{SERVED_NAME}",block_size="{info["block_size"]}",'
                      f'num_gpu_blocks="{info["num_kv_blocks"]}",cache_dtype="f16",enable_prefix_caching="True"}} 1']
    m = metrics(server.base)
    assert m["vllm:num_requests_running"] == m["tessera:num_requests_running"]
    assert m["vllm:prefix_cache_hits_total"] == m["tessera:prefix_cache_hits_total"]


def test_request_id_echoed_and_names_the_response(server):
    body = json.dumps({"model": SERVED_NAME, "messages": [{"role": "user", "content": "Hi"}],
                       "max_tokens": 2}).encode()
    req = urllib.request.Request(server.base + "/v1/chat/completions", data=body, method="POST",
                                 headers={"Content-Type": "application/json", "X-Request-ID": "trace-42.a"})
    with urllib.request.urlopen(req, timeout=120) as r:
        assert r.headers["X-Request-ID"] == "trace-42.a"
        assert json.loads(r.read())["id"] == "chatcmpl-trace-42.a"
    # An unsafe value is neither echoed nor used.
    req = urllib.request.Request(server.base + "/v1/chat/completions", data=body, method="POST",
                                 headers={"Content-Type": "application/json", "X-Request-ID": "a b<c>"})
    with urllib.request.urlopen(req, timeout=120) as r:
        assert r.headers.get("X-Request-ID") is None
        rid = json.loads(r.read())["id"]
        assert rid.startswith("chatcmpl-") and len(rid) == len("chatcmpl-") + 16
    # Errors and small routes echo it too.
    req = urllib.request.Request(server.base + "/health", headers={"X-Request-ID": "h1"})
    with urllib.request.urlopen(req, timeout=30) as r:
        assert r.headers["X-Request-ID"] == "h1"


def _start_loading_server(tmp_path):
    """`tessera serve` held in its loading state: TESSERA_TEST_HOLD_LOAD makes it wait for a file
    before the load starts (src/cli/serve_command.cpp), so the test sees "loading" on any host,
    however fast the load would be. Returns (process, base URL, log path, release), where
    release() lets the load go on."""
    import os
    import subprocess
    import time

    from conftest import free_port, model_path, require_environment, tessera_bin
    require_environment()
    port = free_port()
    log_path = tmp_path / "serve.log"
    gate = tmp_path / "load-gate"
    proc = subprocess.Popen([tessera_bin(), "serve", "--model", model_path(), "--port", str(port),
                             "--kv-cache", "64MiB", "--max-model-len", "512"],
                            env={**os.environ, "TESSERA_TEST_HOLD_LOAD": str(gate)},
                            stdout=open(log_path, "w"), stderr=subprocess.STDOUT)
    deadline = time.time() + 30
    while "load held until" not in log_path.read_text():  # listening, and not loading yet
        assert proc.poll() is None and time.time() < deadline, log_path.read_text()
        time.sleep(0.01)
    return proc, f"http://127.0.0.1:{port}", log_path, gate.touch


def test_health_is_503_while_loading_then_200(tmp_path):
    import signal
    import time
    proc, base, log_path, release = _start_loading_server(tmp_path)
    try:
        req = urllib.request.Request(base + "/health")
        try:
            urllib.request.urlopen(req, timeout=5)
            raise AssertionError("/health answered 200 before the model could have loaded")
        except urllib.error.HTTPError as e:
            assert e.code == 503 and e.headers["Retry-After"] == "1"
            assert json.loads(e.read()) == {"status": "loading"}
        status, body = http(base, "POST", "/v1/completions", {"prompt": "hi", "max_tokens": 1})
        assert status == 503 and body["error"]["code"] == "service_unavailable", body
        assert "loading" in body["error"]["message"]
        release()
        deadline = time.time() + 180
        while http(base, "GET", "/health")[0] != 200:
            assert proc.poll() is None and time.time() < deadline, log_path.read_text()
            time.sleep(0.05)
        assert "ready" in log_path.read_text()  # 200 once the engine is attached, not before
        status, body = http(base, "POST", "/v1/completions", {"prompt": "Once upon a time", "max_tokens": 4,
                                                              "temperature": 0, "ignore_eos": True})
        assert status == 200 and body["usage"]["completion_tokens"] == 4, body
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0, log_path.read_text()


def test_sigterm_while_loading_exits_at_once(tmp_path):
    import signal
    import time

    from conftest import time_bound
    proc, base, log_path, _ = _start_loading_server(tmp_path)
    assert http(base, "GET", "/health")[0] == 503
    sent = time.time()
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=10) == 0, log_path.read_text()
    assert time.time() - sent < time_bound(2.0)  # at once: no drain, no load to finish
    assert "received while loading; exiting" in log_path.read_text()


def test_one_system_prompt_sent_twice_at_once_is_computed_once(start_server):
    # Small steps (32 tokens) make the first request's prefill span many steps; the second, sent at
    # the same moment with the same long prefix, waits for it instead of computing it again.
    import threading
    s = start_server("--max-num-batched-tokens", "32")
    shared = " ".join(f"rule {i}: answer briefly." for i in range(60))  # ~480 tokens
    bodies = [{"model": SERVED_NAME, "prompt": shared + tail, "max_tokens": 2, "temperature": 0}
              for tail in (" Question: what is 2+2?", " Question: name a colour.")]
    results = []
    threads = [threading.Thread(target=lambda b=b: results.append(http(s.base, "POST", "/v1/completions", b)))
               for b in bodies]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert [r[0] for r in results] == [200, 200]
    prompt_tokens = [r[1]["usage"]["prompt_tokens"] for r in results]
    m = metrics(s.base)
    assert m["tessera:prefix_cache_waits_total"] >= 1
    # The second prompt found the whole shared prefix but its last partial block (16-token blocks).
    assert m["tessera:prefix_cache_hits_total"] >= min(prompt_tokens) - 2 * 16
