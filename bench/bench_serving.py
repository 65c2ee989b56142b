#!/usr/bin/env python3
"""B5 / B10: serving throughput through the OpenAI API, two servers side by side. Both servers run
at once (different ports); `tessera bench serve` drives them alternately, round by round, with the
same seeded workload (fresh prompts for every round and rate, the same for both servers: a
repeated prompt would be a prefix-cache hit), and the table shows ours, theirs and the ratio
ours / theirs (median, min-max over rounds; for latencies below 1 is better).

  --compare policy   continuous vs static batching (everything else equal)          [B5]
  --compare stacked  every technique on (continuous, chunked prefill, prefix cache,
                     n-gram speculation) vs every technique off (static, no chunking,
                     no prefix cache, no speculation)                                   [B10]
  --compare llamacpp tessera serve (defaults: continuous batching, chunked prefill, prefix
                     cache) vs llama.cpp's server (bench/llama_cpp_server.py: llama-cpp-python's
                     OpenAI server, same GGUF, threads and context; it serves one request at a
                     time)                                                              [B5 peer]

  --compare builds   the same defaults on two builds: --binary-a (before) vs --binary (after), a
                     no-regression check of a change                                 [B5 builds]

  python3 bench/bench_serving.py --compare policy --rounds 3
  python3 bench/bench_serving.py --compare builds --binary-a /tmp/old/build/release/src/cli/tessera
  python3 bench/bench_serving.py --compare llamacpp --rates inf,0.5 --rounds 2 \
      --plot-out bench/out/b5_llamacpp.png

Every request asks for exactly its max_tokens: `ignore_eos` for tessera and `min_tokens =
max_tokens` for llama-cpp-python (its server has no ignore_eos), both sent to both sides. The peer
sends no usage in its stream, so its output tokens are counted as text chunks and its prompt tokens
are unknown (compare output tok/s, not total tok/s); the table prints both sides' output token totals
so a difference in the work done shows.
"""
import argparse
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

CONFIGS = {
    "policy": {
        "continuous": ["--policy", "continuous"],
        "static": ["--policy", "static"],
    },
    "stacked": {
        "all-on": ["--policy", "continuous", "--chunked-prefill", "--prefix-caching",
                   "--speculative", "ngram"],
        "all-off": ["--policy", "static", "--no-chunked-prefill", "--no-prefix-caching"],
    },
    "builds": {
        "after": [],
        "before": [],  # --binary-a
    },
    "llamacpp": {
        "tessera": [],
        "llama.cpp": None,  # not tessera: bench/llama_cpp_server.py
    },
}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_ready(proc, port, what):
    deadline = time.time() + 180
    while time.time() < deadline:
        if proc.poll() is not None:
            sys.exit(f"server {what} exited with {proc.returncode} before it was ready")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=2) as r:
                if r.status == 200:
                    return proc
        except OSError:
            time.sleep(0.3)
    proc.kill()
    sys.exit(f"server {what} did not start")


def start_server(binary, port, extra, args):
    if extra is None:  # the llama.cpp peer
        cmd = [sys.executable, os.path.join(ROOT, "bench", "llama_cpp_server.py"), "--model", args.model,
               "--port", str(port), "--threads", str(args.threads), "--ctx", "2048"]
        log = open(os.path.join(tempfile.gettempdir(), f"llama_cpp_server_{port}.log"), "w")
        return wait_ready(subprocess.Popen(cmd, stdout=log, stderr=log), port, "llama.cpp")
    cmd = [binary, "serve", "--model", args.model, "--port", str(port), "--threads", str(args.threads),
           "--max-num-seqs", str(args.max_num_seqs), "--max-num-batched-tokens", "2048",
           "--max-model-len", "2048",  # unchunked prefill needs the budget to cover a whole prompt
           "--kv-cache", args.kv_cache] + extra
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return wait_ready(proc, port, " ".join(extra) or "tessera")


def run_load(binary, port, args, rate, out_json, label, seed):
    cmd = [binary, "bench", "serve", "--base-url", f"http://127.0.0.1:{port}", "--label", label,
           "--num-prompts", str(args.num_prompts), "--input-len", str(args.input_len),
           "--input-len-range", str(args.input_range), "--output-len", str(args.output_len),
           "--output-len-range", str(args.output_range), "--request-rate", rate,
           "--max-concurrency", "64", "--seed", str(seed),
           "--goodput", "ttft_ms:2000", "tpot_ms:100", "--json-out", out_json]
    if args.prefix_len:
        cmd += ["--prefix-len", str(args.prefix_len), "--num-prefix-groups", "4"]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    with open(out_json) as f:
        data = json.load(f)
    return data["config"], data["results"][0]


def metric(summary, key, sub=None):
    v = summary.get(key)
    if isinstance(v, dict) and sub:
        return v.get(sub)
    return v


TABLE = [("output tok/s", "output_throughput", None),
         ("request req/s", "request_throughput", None),
         ("TTFT p50 ms", "ttft_ms", "median"),
         ("TTFT p90 ms", "ttft_ms", "p90"),
         ("TPOT p50 ms", "tpot_ms", "median"),
         ("TPOT p90 ms", "tpot_ms", "p90"),
         ("E2E p90 ms", "e2el_ms", "p90"),
         ("goodput req/s", "goodput", None),
         ("output tokens", "total_output_tokens", None)]


def print_table(args, names, results):
    ours, theirs = names
    print(f"{args.compare}: {ours} vs {theirs}; {args.num_prompts} requests per rate, input {args.input_len} "
          f"+-{args.input_range:.0%} words, output {args.output_len} +-{args.output_range:.0%} tokens, "
          f"max_num_seqs {args.max_num_seqs}, {args.threads} threads, {args.rounds} rounds")
    print(f"{'rate':>6} {'metric':<16} {ours:>12} {theirs:>12} {'ratio':>8} {'min-max':>13}")
    for rate, by in results.items():
        for label, key, sub in TABLE:
            a = [metric(s, key, sub) for _, s in by[ours]]
            b = [metric(s, key, sub) for _, s in by[theirs]]
            if None in a or None in b:
                continue
            ratios = [x / y for x, y in zip(a, b) if y]
            if not ratios:
                continue
            digits = 1 if max(abs(statistics.median(a)), abs(statistics.median(b))) >= 10 else 3
            print(f"{rate:>6} {label:<16} {statistics.median(a):>12.{digits}f} {statistics.median(b):>12.{digits}f} "
                  f"{statistics.median(ratios):>7.2f}x {min(ratios):>6.2f}-{max(ratios):<6.2f}")


def plot(args, names, results):
    """One JSON per server (per rate, the round with the median output tok/s) and scripts/plot_serve.py."""
    paths = []
    for name in names:
        runs = []
        for by in results.values():
            ranked = sorted(by[name], key=lambda cs: cs[1]["output_throughput"])
            runs.append(ranked[(len(ranked) - 1) // 2])
        path = f"{args.plot_out}.{name}.json"
        with open(path, "w") as f:
            json.dump({"config": runs[0][0], "results": [s for _, s in runs]}, f, indent=1)
        paths.append(path)
    subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "plot_serve.py")] + paths + [args.plot_out],
                   check=False)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--compare", choices=sorted(CONFIGS), default="policy")
    ap.add_argument("--binary", default=os.path.join(ROOT, "build", "release", "src", "cli", "tessera"))
    ap.add_argument("--binary-a", help="--compare builds: the build to compare against (its server as 'before')")
    ap.add_argument("--model", default=os.path.join(ROOT, "models", "SmolLM2-135M-Instruct.Q4_1.gguf"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--rates", default="inf,2", help="request rates (req/s), comma-separated")
    ap.add_argument("--num-prompts", type=int, default=48)
    ap.add_argument("--input-len", type=int, default=128)
    ap.add_argument("--input-range", type=float, default=0.5)
    ap.add_argument("--output-len", type=int, default=64)
    ap.add_argument("--output-range", type=float, default=0.9)
    ap.add_argument("--prefix-len", type=int, default=0)
    ap.add_argument("--max-num-seqs", type=int, default=16)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--kv-cache", default="512MiB")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json-out")
    ap.add_argument("--plot-out", help="PNG of both servers across --rates (and PNG.NAME.json per server)")
    args = ap.parse_args()

    names = list(CONFIGS[args.compare])
    procs, ports = {}, {}
    print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
    try:
        for name in names:
            ports[name] = free_port()
            binary = args.binary_a if args.compare == "builds" and name == "before" else args.binary
            if binary is None:
                sys.exit("--compare builds needs --binary-a")
            procs[name] = start_server(binary, ports[name], CONFIGS[args.compare][name], args)
        results = {rate: {name: [] for name in names} for rate in args.rates.split(",")}
        with tempfile.TemporaryDirectory() as tmp:
            for r in range(args.rounds):
                for k, rate in enumerate(results):
                    order = names if r % 2 == 0 else names[::-1]  # alternate who goes first
                    # Both servers get the same prompts in a round and rate, and no run replays
                    # another's: a server's prefix cache would answer repeated prompts from cache.
                    seed = args.seed + 7919 * (r * len(results) + k)
                    for name in order:
                        out = os.path.join(tmp, f"{name}.json")
                        t0 = time.time()
                        results[rate][name].append(run_load(args.binary, ports[name], args, rate, out, name, seed))
                        s = results[rate][name][-1][1]
                        print(f"round {r + 1} rate {rate} {name}: {s['output_throughput']:.1f} out tok/s, "
                              f"{s['completed']}/{s['num_requests']} ok, {time.time() - t0:.0f} s", flush=True)
        print(f"load average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        print_table(args, names, results)
        if args.json_out:
            with open(args.json_out, "w") as f:
                json.dump({rate: {n: [s for _, s in runs] for n, runs in by.items()} for rate, by in results.items()},
                          f, indent=1)
        if args.plot_out:
            plot(args, names, results)
    finally:
        for name, p in procs.items():
            # SIGTERM for the Python peer: a Python started from a background shell ignores SIGINT.
            p.send_signal(signal.SIGINT if CONFIGS[args.compare][name] is not None else signal.SIGTERM)
        for p in procs.values():
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()


if __name__ == "__main__":
    main()
