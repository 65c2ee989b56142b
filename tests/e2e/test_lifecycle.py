"""Process-level behavior: SIGINT/SIGTERM drain in-flight streams and exit 0; `tessera bench serve`
measures the real server and writes its JSON."""
import json
import signal
import subprocess
import threading
import time

from conftest import SERVED_NAME, http, tessera_bin
import http.client as httpclient


def read_stream(port, max_tokens, out):
    conn = httpclient.HTTPConnection("127.0.0.1", port, timeout=300)
    conn.request("POST", "/v1/completions", headers={"Content-Type": "application/json"},
                 body=json.dumps({"model": SERVED_NAME, "prompt": "Tell me a story", "max_tokens": max_tokens,
                                  "temperature": 0, "stream": True, "ignore_eos": True}))
    r = conn.getresponse()
    out["status"] = r.status
    out["events"] = [line.decode().strip()[6:] for line in r.fp if line.startswith(b"data: ")]


def test_sigint_drains_in_flight_stream_and_exits_zero(start_server):
    s = start_server()
    out = {}
    t = threading.Thread(target=read_stream, args=(s.port, 24, out))
    t.start()
    time.sleep(1.0)  # the request is in flight
    s.proc.send_signal(signal.SIGINT)
    t.join(timeout=120)
    assert out["status"] == 200
    assert out["events"][-1] == "[DONE]"
    usage_tokens = sum(len(json.loads(e)["choices"][0]["text"]) > 0 for e in out["events"][:-1])
    assert usage_tokens > 0
    assert s.proc.wait(timeout=60) == 0
    assert "stopped" in s.read_log()


def test_bench_serve_against_real_server(server, tmp_path):
    out_json = tmp_path / "serve.json"
    r = subprocess.run([tessera_bin(), "bench", "serve", "--base-url", server.base, "--num-prompts", "6",
                        "--input-len", "16", "--output-len", "8", "--request-rate", "inf", "--max-concurrency", "3",
                        "--seed", "1", "--goodput", "ttft_ms:600000", "--json-out", str(out_json)],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    data = json.loads(out_json.read_text())
    res = data["results"][0]
    assert data["config"]["model"] == SERVED_NAME
    assert res["completed"] == 6 and res["failed"] == 0
    assert res["total_output_tokens"] == 48
    assert res["goodput_requests"] == 6
    assert res["ttft_ms"]["median"] > 0 and res["tpot_ms"]["median"] > 0
    assert http(server.base, "GET", "/health")[0] == 200
