"""Abandoned non-streaming requests (issue 30, finding 6): under a 64-client load, a quarter of the
non-streaming clients give up (client timeout) while their long requests run. The server notices
each hang-up while it waits on the engine and aborts the request within 1 s; the others complete,
and no KV block is held afterwards."""
import http.client as httpclient
import json
import socket
import threading
import time

from conftest import SERVED_NAME, SLOWDOWN, host_load_factor, metrics, time_bound
from test_load import settled_metrics

NUM_CLIENTS = 64
CLIENT_TIMEOUT_S = 2.0
PROMPTS = ["The cat sat on", "In the beginning", "My favourite food is", "The weather today"]


def post(port, body, timeout):
    conn = httpclient.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request("POST", "/v1/completions", body=json.dumps(body), headers={"Content-Type": "application/json"})
        r = conn.getresponse()
        return r.status, json.loads(r.read())
    finally:
        conn.close()


def test_abandoned_non_streaming_requests_are_aborted_within_a_second(server):
    before = settled_metrics(server.base)
    results = [None] * NUM_CLIENTS
    hang_ups = []  # monotonic times at which an abandoning client closed its connection
    lock = threading.Lock()

    def client(i):
        prompt = PROMPTS[i % len(PROMPTS)]
        if i % 4 == 0:  # gives up after CLIENT_TIMEOUT_S on a request that would run far longer
            try:
                post(server.port, {"model": SERVED_NAME, "prompt": prompt, "max_tokens": 900, "ignore_eos": True,
                                   "temperature": 0}, timeout=CLIENT_TIMEOUT_S)
                results[i] = "finished before the timeout"
            except (socket.timeout, TimeoutError):
                with lock:
                    hang_ups.append(time.monotonic())  # the connection is closed by now
                results[i] = "abandoned"
        else:
            results[i] = post(server.port, {"model": SERVED_NAME, "prompt": prompt, "max_tokens": 8,
                                            "temperature": 0}, timeout=300)

    samples = []  # (monotonic time, request_aborted_total)
    done = threading.Event()

    def monitor():
        while not done.is_set():
            samples.append((time.monotonic(), metrics(server.base)["tessera:request_aborted_total"]))
            time.sleep(0.05)
    watcher = threading.Thread(target=monitor)
    watcher.start()
    threads = [threading.Thread(target=client, args=(i,)) for i in range(NUM_CLIENTS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=600)
    # Watch until every abandoned request is counted (or 5 s past the last hang-up).
    abandoned = NUM_CLIENTS // 4
    base = before["tessera:request_aborted_total"]
    deadline = time.monotonic() + 5 * SLOWDOWN
    while time.monotonic() < deadline and (not samples or samples[-1][1] - base < abandoned):
        time.sleep(0.05)
    done.set()
    watcher.join()

    assert results.count("abandoned") == abandoned, results
    for i, r in enumerate(results):
        if i % 4:
            assert r[0] == 200 and r[1]["usage"]["completion_tokens"] == 8, (i, r)
    # The k-th abort is counted within 1 s of the k-th hang-up (so each hang-up got its abort in time).
    hang_ups.sort()
    worst = 0.0
    for k, t_hang_up in enumerate(hang_ups, start=1):
        t_abort = next((t for t, v in samples if v - base >= k), None)
        assert t_abort is not None, f"abort {k} of {abandoned} never counted"
        worst = max(worst, t_abort - t_hang_up)
    print(f"{abandoned} abandoned requests: worst hang-up -> abort counted {worst * 1000:.0f} ms "
          f"(metrics polled every 50 ms)")
    # 1 s on a quiet host; a host whose run queue is longer than its cores stretches every step
    # and the metrics poll that observes the abort, so the bound scales with the load per core.
    limit = time_bound(1.0)
    print(f"bound {limit:.2f} s at load factor {host_load_factor():.1f}")
    assert worst < limit
    after = settled_metrics(server.base)
    assert after["tessera:request_aborted_total"] - base == abandoned
    assert after["tessera:client_disconnects_total"] - before["tessera:client_disconnects_total"] == abandoned
    assert after["tessera:kv_cache_usage_perc"] == 0 and after["tessera:requests_in_flight"] == 0
    assert after["tessera:kv_cache_blocks_free"] + after["tessera:kv_cache_blocks_cached"] == \
        after["tessera:kv_cache_blocks_total"]
