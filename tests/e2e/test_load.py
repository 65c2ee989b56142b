"""Load: 64 concurrent streaming clients, a quarter hanging up at random points. Every other
request completes with the greedy reference text, and afterwards no KV block is held (metrics)."""
import http.client as httpclient
import json
import random
import threading
import time

from conftest import SERVED_NAME, http, metrics

NUM_CLIENTS = 64
MAX_TOKENS = 16
PROMPTS = ["The cat sat on", "In the beginning", "My favourite food is", "The weather today"]


def stream_request(port, prompt, hang_up_after):
    """Returns (text, finish_reason, saw_done); hangs up after `hang_up_after` events when given."""
    conn = httpclient.HTTPConnection("127.0.0.1", port, timeout=600)
    body = json.dumps({"model": SERVED_NAME, "prompt": prompt, "max_tokens": MAX_TOKENS, "temperature": 0,
                       "stream": True})
    conn.request("POST", "/v1/completions", body=body, headers={"Content-Type": "application/json"})
    r = conn.getresponse()
    assert r.status == 200
    text, finish, done, events = "", None, False, 0
    while True:
        line = r.fp.readline()
        if not line:
            break
        line = line.decode().strip()
        if not line.startswith("data: "):
            continue
        payload = line[6:]
        if payload == "[DONE]":
            done = True
            break
        events += 1
        chunk = json.loads(payload)
        text += chunk["choices"][0]["text"]
        finish = chunk["choices"][0]["finish_reason"] or finish
        if hang_up_after is not None and events >= hang_up_after:
            conn.sock.shutdown(2)
            conn.close()
            return text, None, False
    conn.close()
    return text, finish, done


def settled_metrics(base, timeout_s=60):
    """Metrics once the server is idle and its request counters have stopped moving: a reply (or an
    earlier test's hang-up) reaches the client before the engine thread publishes the counters."""
    deadline = time.time() + timeout_s
    last = None
    while True:
        m = metrics(base)
        idle = (m["tessera:num_requests_running"] == 0 and m["tessera:num_requests_waiting"] == 0
                and m["tessera:requests_in_flight"] == 0)
        counters = (m["tessera:requests_finished_total"], m["tessera:request_aborted_total"])
        if (idle and counters == last) or time.time() > deadline:
            return m
        last = counters if idle else None
        time.sleep(0.3)


def test_concurrent_streams_with_disconnects(server):
    reference = {}
    for p in PROMPTS:
        _, body = http(server.base, "POST", "/v1/completions",
                       {"model": SERVED_NAME, "prompt": p, "max_tokens": MAX_TOKENS, "temperature": 0})
        reference[p] = (body["choices"][0]["text"], body["choices"][0]["finish_reason"])
    before = settled_metrics(server.base)
    rng = random.Random(2024)
    plan = [(PROMPTS[i % len(PROMPTS)], rng.randint(1, MAX_TOKENS // 2) if i % 4 == 0 else None)
            for i in range(NUM_CLIENTS)]
    results = [None] * NUM_CLIENTS

    def worker(i):
        try:
            results[i] = stream_request(server.port, *plan[i])
        except Exception as e:  # noqa: BLE001
            results[i] = e
    threads = [threading.Thread(target=worker, args=(i,)) for i in range(NUM_CLIENTS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=900)
    for i, (prompt, hang_up) in enumerate(plan):
        assert not isinstance(results[i], Exception), f"client {i}: {results[i]!r}"
        if hang_up is None:
            text, finish, done = results[i]
            assert (text, finish) == reference[prompt], f"client {i}"
            assert done, f"client {i}: no [DONE]"
    # Afterwards: nothing running or waiting, no block held, and the counters add up.
    deadline = time.time() + 60
    while True:
        m = metrics(server.base)
        # requests_in_flight counts HTTP handlers: one that is still noticing its client's hang-up
        # may outlive the engine's request by a moment.
        idle = (m["tessera:num_requests_running"] == 0 and m["tessera:num_requests_waiting"] == 0
                and m["tessera:kv_cache_usage_perc"] == 0 and m["tessera:requests_in_flight"] == 0)
        if idle or time.time() > deadline:
            break
        time.sleep(0.2)
    assert idle, m
    assert m["tessera:kv_cache_blocks_free"] + m["tessera:kv_cache_blocks_cached"] == m["tessera:kv_cache_blocks_total"]
    assert m["tessera:requests_in_flight"] == 0
    finished = m["tessera:requests_finished_total"] - before["tessera:requests_finished_total"]
    aborted = m["tessera:request_aborted_total"] - before["tessera:request_aborted_total"]
    # Every request finished; the hung-up ones were aborted unless they ended before the hang-up
    # was noticed (the server learns of it on its next write).
    assert finished == NUM_CLIENTS
    assert 0 < aborted <= NUM_CLIENTS // 4
    assert m["tessera:client_disconnects_total"] - before["tessera:client_disconnects_total"] >= aborted
    assert http(server.base, "GET", "/health")[0] == 200
