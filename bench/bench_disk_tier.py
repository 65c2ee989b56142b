#!/usr/bin/env python3
"""B-disk: the KV disk tier (serve --kv-cache-dir), cold vs from disk, in one invocation.

Per model and prompt length, round by round: a fresh directory; server A (tier on) computes the
prompt cold; A stops; server B starts on the same directory and sends the same prompt. TTFT is the
latency of a max_tokens=1 request (prefill + one token), cold (A) vs from disk after the restart
(B). Also per round, from B's /metrics: the disk read time per block vs the compute time per block
(cold TTFT / blocks), and the bytes per block, so the disk bandwidth below which reading stops
being cheaper than computing is bytes per block / compute seconds per block.

--busy: an evicted prompt reloaded while the server is decoding other streams: the others' decode
tok/s in the window of the reload vs in a window of the same length just before it.
--agent: an agent-shaped run: a fixed prefix of --agent-prefix tokens, --agent-turns turns of a
short new message each, two restarts (at a third and two thirds); total prefill (sum of TTFTs)
with the tier vs without it (the pool's prefix cache alone, lost at each restart).

Ratios are median (min-max) over rounds; the machine is shared, so the load average is printed.
"""
import argparse
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, binary, model, cache_dir, ctx, extra=()):
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        args = [binary, "serve", "--model", model, "--port", str(self.port), "--host", "127.0.0.1",
                "--max-model-len", str(ctx), "--shutdown-grace", "2", *extra]
        if cache_dir:
            args += ["--kv-cache-dir", cache_dir]
        self.log = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT)
        for _ in range(600):
            try:
                with urllib.request.urlopen(self.base + "/health", timeout=2) as r:
                    if r.status == 200:
                        return
            except Exception:  # noqa: BLE001
                if self.proc.poll() is not None:
                    self.log.seek(0)
                    raise RuntimeError(self.log.read().decode()[-2000:])
                time.sleep(0.2)
        raise RuntimeError("server did not start")

    def post(self, body, path="/v1/completions"):
        req = urllib.request.Request(self.base + path, data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=3600) as r:
            return json.loads(r.read())

    def ttft(self, ids):
        t = time.perf_counter()
        body = self.post({"prompt": ids, "max_tokens": 1, "temperature": 0})
        return time.perf_counter() - t, body["usage"]["prompt_tokens_details"]["cached_tokens"]

    def metrics(self):
        with urllib.request.urlopen(self.base + "/metrics", timeout=30) as r:
            out = {}
            for line in r.read().decode().splitlines():
                if line and not line.startswith("#") and "le=" not in line:
                    name, value = line.rsplit(" ", 1)
                    out[name.split("{")[0]] = float(value)
            return out

    def wait_writes(self, n, timeout=600):
        """Until this process has written n blocks, or its count has not moved for 2 s (the rest was
        on disk already: a restarted server writes only what it computed)."""
        deadline = time.time() + timeout
        last, since = -1, time.time()
        while time.time() < deadline:
            w = self.metrics().get("tessera:kv_disk_writes_total", 0)
            if w >= n or (w == last and time.time() - since > 2.0):
                return
            if w != last:
                last, since = w, time.time()
            time.sleep(0.2)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(timeout=120)


def prompt_ids(n, seed):
    return [1000 + (seed * 7919 + i * 104729) % 30000 for i in range(n)]


def med(xs):
    return f"{statistics.median(xs):.3g} ({min(xs):.3g}-{max(xs):.3g})"


def restart_rows(args, model, n):
    cold, warm, ratio, read_blk, comp_blk, bytes_blk = [], [], [], [], [], []
    for r in range(args.rounds):
        d = tempfile.mkdtemp(prefix="bench_disk_")
        try:
            ids = prompt_ids(n, 1000 + r)
            a = Server(args.bin, model, d, n + 64, args.extra)
            t_cold, _ = a.ttft(ids)
            a.wait_writes(n // 16)
            a.stop()
            b = Server(args.bin, model, d, n + 64, args.extra)
            t_warm, cached = b.ttft(ids)
            m = b.metrics()
            b.stop()
            blocks = m["tessera:kv_disk_hit_blocks_total"]
            assert cached >= 0.9 * n, (cached, n)
            cold.append(t_cold)
            warm.append(t_warm)
            ratio.append(t_cold / t_warm)
            read_blk.append(m["tessera:kv_disk_read_seconds_sum"] / max(1, m["tessera:kv_disk_read_seconds_count"]))
            comp_blk.append(t_cold / (n / 16))
            bytes_blk.append(m["tessera:kv_disk_read_bytes_total"] / max(1, blocks))
            print(f"  round {r}: {n} tokens cold {t_cold:.2f} s, from disk {t_warm:.3f} s ({cached} cached), "
                  f"x{t_cold / t_warm:.1f}; load {os.getloadavg()[0]:.1f}", flush=True)
        finally:
            shutil.rmtree(d, ignore_errors=True)
    crossover = statistics.median(bytes_blk) / statistics.median(comp_blk) / 1e6
    return (f"| {os.path.basename(model)} | {n} | {med(cold)} s | {med(warm)} s | **{med(ratio)}x** | "
            f"{statistics.median(read_blk) * 1e3:.2f} ms / {statistics.median(comp_blk) * 1e3:.1f} ms | "
            f"{statistics.median(bytes_blk) / 1024:.0f} KiB | {crossover:.2g} MB/s |")


def stream_times(server, body, out):
    req = urllib.request.Request(server.base + "/v1/completions", data=json.dumps({**body, "stream": True}).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=3600) as r:
        for line in r:
            if line.startswith(b"data: {"):
                out.append(time.perf_counter())


def kv_bytes_per_token(args, model):
    """The model's KV bytes per token: a probe server with a 1 GiB pool, from /server_info's blocks."""
    s = Server(args.bin, model, None, 4096, args.extra + ["--kv-cache", str(1 << 30)])
    try:
        with urllib.request.urlopen(s.base + "/server_info", timeout=30) as r:
            info = json.loads(r.read())
    finally:
        s.stop()
    return (1 << 30) // (info["num_kv_blocks"] * info["block_size"])


def busy_row(args, model, n):
    """Others' decode tok/s while an evicted n-token prompt is reloaded from disk."""
    drops, whole, loads = [], [], []
    pool_bytes = args.busy_pool_tokens * kv_bytes_per_token(args, model)
    for r in range(args.rounds):
        d = tempfile.mkdtemp(prefix="bench_disk_")
        try:
            s = Server(args.bin, model, d, 2 * n + 64, args.extra + ["--kv-cache", str(pool_bytes)])
            ids = prompt_ids(n, 2000 + r)
            s.ttft(ids)
            for k in range(3):  # evict it from the pool
                s.ttft(prompt_ids(n, 3000 + 10 * r + k))
            s.wait_writes(4 * n // 16)
            r0 = s.metrics()["tessera:kv_disk_read_seconds_sum"]
            times = [[] for _ in range(2)]
            threads = [threading.Thread(target=stream_times, args=(s, {"prompt": prompt_ids(32, 4000 + k), "max_tokens": 400,
                                                                      "temperature": 0, "ignore_eos": True}, times[k]))
                       for k in range(2)]
            for t in threads:
                t.start()
            time.sleep(4.0)
            t0 = time.perf_counter()
            _, cached = s.ttft(ids)
            t1 = time.perf_counter()
            # The load window: from its arrival until its last block was read. Its reads start at
            # arrival (a running slot is free) and run back to back on the I/O thread, so that is the
            # sum of their latencies (the server's read histogram); the last <= 16 blocks are imported
            # on the next engine loop. The whole request adds its own first step (the last block's 16
            # tokens prefilled over the 4k context, ~5 decode steps here), which any prefix hit has.
            load = s.metrics()["tessera:kv_disk_read_seconds_sum"] - r0
            for t in threads:
                t.join()
            s.stop()

            def rate(a, b):
                return sum(1 for ts in times for x in ts if a <= x < b) / (b - a)
            win = max(load, 0.25)  # at least ~3 decode steps, or the count is all quantization
            before, during = rate(t0 - win, t0), rate(t0, t0 + win)
            drops.append(1 - during / before)
            loads.append(load)
            whole.append(1 - rate(t0, t1) / rate(t0 - (t1 - t0), t0))
            print(f"  busy round {r}: load {load:.3f} s, whole request {t1 - t0:.3f} s ({cached} cached); others "
                  f"{before:.1f} tok/s before, {during:.1f} while loading, {rate(t0, t1):.1f} over the request", flush=True)
        finally:
            shutil.rmtree(d, ignore_errors=True)
    return (f"| {os.path.basename(model)} | evicted {n}-token prompt reloaded, 2 streams decoding | load {med(loads)} s | "
            f"others' tok/s drop while its blocks load {med([100 * x for x in drops])} %, over the whole request "
            f"{med([100 * x for x in whole])} % |")


def agent_row(args, model):
    """Total prefill (sum of TTFTs) of an agent session across two restarts, tier on vs off."""
    totals = {}
    for tier in (True, False):
        d = tempfile.mkdtemp(prefix="bench_disk_") if tier else None
        try:
            prefix = prompt_ids(args.agent_prefix, 5000)
            history = list(prefix)
            total = 0.0
            restarts = {args.agent_turns // 3, 2 * args.agent_turns // 3}
            s = Server(args.bin, model, d, args.agent_prefix + 64 * args.agent_turns + 512, args.extra)
            for turn in range(args.agent_turns):
                if turn in restarts:
                    if tier:
                        s.wait_writes(len(history) // 16 - 2)
                    s.stop()
                    s = Server(args.bin, model, d, args.agent_prefix + 64 * args.agent_turns + 512, args.extra)
                history = history + prompt_ids(48, 6000 + turn)
                t = time.perf_counter()
                body = s.post({"prompt": history, "max_tokens": 16, "temperature": 0, "ignore_eos": True})
                total += time.perf_counter() - t
                history = history + prompt_ids(16, 7000 + turn)  # the answer, as the client sends it back
                del body
            s.stop()
            totals[tier] = total
        finally:
            if d:
                shutil.rmtree(d, ignore_errors=True)
    return (f"| {os.path.basename(model)} | agent: {args.agent_prefix}-token prefix, {args.agent_turns} turns, 2 restarts | "
            f"total request time tier off {totals[False]:.1f} s, on {totals[True]:.1f} s: **{totals[False] / totals[True]:.1f}x** |")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default=os.path.join(ROOT, "build/release/src/cli/tessera"))
    ap.add_argument("--models", nargs="+", default=[os.path.join(ROOT, "models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf")])
    ap.add_argument("--lengths", nargs="+", type=int, default=[4096, 16384])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--busy", action="store_true")
    ap.add_argument("--busy-length", type=int, default=4096, help="the evicted prompt's tokens for --busy")
    ap.add_argument("--busy-pool-tokens", type=int, default=10000, help="pool size in tokens for --busy (bytes per token probed per model)")
    ap.add_argument("--agent", action="store_true")
    ap.add_argument("--agent-prefix", type=int, default=13000)
    ap.add_argument("--agent-turns", type=int, default=20)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--skip-restart", action="store_true", help="only the --busy / --agent rows")
    args = ap.parse_args()
    args.extra = ["--threads", str(args.threads)] if args.threads else []
    print(f"load average {os.getloadavg()}, {os.cpu_count()} CPUs", flush=True)
    print("| model | prompt tokens | TTFT cold | TTFT from disk (after restart) | speed-up | read / compute per block | bytes per block | disk bandwidth where reading stops paying |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    rows = []
    for model in args.models:
        for n in [] if args.skip_restart else args.lengths:
            rows.append(restart_rows(args, model, n))
            print(rows[-1], flush=True)
        if args.busy:
            rows.append(busy_row(args, model, args.busy_length))
            print(rows[-1], flush=True)
        if args.agent:
            rows.append(agent_row(args, model))
            print(rows[-1], flush=True)
    print(f"load average after {os.getloadavg()}")


if __name__ == "__main__":
    sys.exit(main())
