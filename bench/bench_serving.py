#!/usr/bin/env python3
"""B5 / B10: serving throughput through the OpenAI API, two `tessera serve` configurations side by
side. Both servers run at once (different ports); `tessera bench serve` drives them alternately,
round by round, with the same seeded workload, and the table shows ours, theirs and the ratio
(median, min-max over rounds).

  --compare policy   continuous vs static batching (everything else equal)          [B5]
  --compare stacked  every technique on (continuous, chunked prefill, prefix cache,
                     n-gram speculation) vs every technique off (static, no chunking,
                     no prefix cache, no speculation)                                   [B10]

  python3 bench/bench_serving.py --compare policy --rounds 3
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
}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(binary, port, extra, args):
    cmd = [binary, "serve", "--port", str(port), "--threads", str(args.threads),
           "--max-num-seqs", str(args.max_num_seqs), "--max-num-batched-tokens", "2048",
           "--max-model-len", "2048",  # unchunked prefill needs the budget to cover a whole prompt
           "--kv-cache", args.kv_cache] + extra
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 120
    while time.time() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as r:
                if r.status == 200:
                    return proc
        except OSError:
            time.sleep(0.3)
    proc.kill()
    sys.exit(f"server {' '.join(extra)} did not start")


def run_load(binary, port, args, rate, out_json):
    cmd = [binary, "bench", "serve", "--base-url", f"http://127.0.0.1:{port}",
           "--num-prompts", str(args.num_prompts), "--input-len", str(args.input_len),
           "--input-len-range", "0.5", "--output-len", str(args.output_len),
           "--output-len-range", str(args.output_range), "--request-rate", rate,
           "--max-concurrency", "64", "--seed", str(args.seed),
           "--goodput", "ttft_ms:2000", "tpot_ms:100", "--json-out", out_json]
    if args.prefix_len:
        cmd += ["--prefix-len", str(args.prefix_len), "--num-prefix-groups", "4"]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    with open(out_json) as f:
        data = json.load(f)
    runs = data["results"] if "results" in data else data
    return runs[0] if isinstance(runs, list) else runs


def metric(summary, key, sub=None):
    v = summary.get(key)
    if isinstance(v, dict) and sub:
        return v.get(sub)
    return v


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--compare", choices=sorted(CONFIGS), default="policy")
    ap.add_argument("--binary", default=os.path.join(ROOT, "build", "release", "tessera"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--rates", default="inf,2", help="request rates (req/s), comma-separated")
    ap.add_argument("--num-prompts", type=int, default=48)
    ap.add_argument("--input-len", type=int, default=128)
    ap.add_argument("--output-len", type=int, default=64)
    ap.add_argument("--output-range", type=float, default=0.9)
    ap.add_argument("--prefix-len", type=int, default=0)
    ap.add_argument("--max-num-seqs", type=int, default=16)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--kv-cache", default="512MiB")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json-out")
    args = ap.parse_args()

    names = list(CONFIGS[args.compare])
    procs, ports = {}, {}
    try:
        for name in names:
            ports[name] = free_port()
            procs[name] = start_server(args.binary, ports[name], CONFIGS[args.compare][name], args)
        results = {rate: {name: [] for name in names} for rate in args.rates.split(",")}
        with tempfile.TemporaryDirectory() as tmp:
            for r in range(args.rounds):
                for rate in results:
                    order = names if r % 2 == 0 else names[::-1]  # alternate who goes first
                    for name in order:
                        out = os.path.join(tmp, f"{name}.json")
                        results[rate][name].append(run_load(args.binary, ports[name], args, rate, out))
        ours, theirs = names
        print(f"{args.compare}: {ours} vs {theirs}; {args.num_prompts} requests, input {args.input_len} +-50%, "
              f"output {args.output_len} +-{args.output_range:.0%}, max_num_seqs {args.max_num_seqs}, "
              f"{args.rounds} rounds")
        print(f"{'rate':>6} {'metric':<22} {ours:>12} {theirs:>12} {'ratio':>8} {'min-max':>14}")
        for rate, by in results.items():
            for label, key, sub in [("output tok/s", "output_throughput", None),
                                    ("TTFT p50 ms", "ttft_ms", "median"),
                                    ("TPOT p50 ms", "tpot_ms", "median"),
                                    ("E2E p90 ms", "e2el_ms", "p90"),
                                    ("goodput req/s", "goodput", None)]:
                a = [metric(s, key, sub) for s in by[ours]]
                b = [metric(s, key, sub) for s in by[theirs]]
                if None in a or None in b:
                    continue
                ratios = [x / y for x, y in zip(a, b) if y]
                if not ratios:
                    continue
                print(f"{rate:>6} {label:<22} {statistics.median(a):>12.1f} {statistics.median(b):>12.1f} "
                      f"{statistics.median(ratios):>7.2f}x {min(ratios):>6.2f}-{max(ratios):<6.2f}")
        if args.json_out:
            with open(args.json_out, "w") as f:
                json.dump(results, f, indent=1)
    finally:
        for p in procs.values():
            p.send_signal(signal.SIGINT)
        for p in procs.values():
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()


if __name__ == "__main__":
    main()
