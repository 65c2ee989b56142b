#!/usr/bin/env python3
"""Scale-out behind SMG (issue 28): 2 replicas x 1 thread against 1 replica x 2 threads, on the
multi-tenant workload (`tessera bench serve --workload multi-tenant`: sessions of several turns over
a few long shared system prompts), for the gateway policies round_robin, cache_aware and
consistent_hashing (by the session header X-SMG-Routing-Key), in one invocation.

Each configuration starts fresh processes with scripts/cluster.sh (replicas + smg), runs the
workload through the gateway, reads every replica's vllm:prefix_cache_{hits,queries}_total (the
hit rate is the sum of hits over the sum of queries, in tokens) and stops the cluster. The KV cache
is the same in all: --kv-cache per replica for 2 x 1, twice that for 1 x 2 (one machine's memory).
Prints a markdown table and writes --json-out.

    python3 bench/bench_scaleout.py --tessera build/release/src/cli/tessera --json-out /tmp/scaleout.json
"""
import argparse
import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def scrape(port):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as r:
        text = r.read().decode()
    out = {}
    for name in ("vllm:prefix_cache_hits_total", "vllm:prefix_cache_queries_total", "tessera:num_preemptions_total"):
        m = re.search(r"^" + re.escape(name) + r"\{[^}]*\} (\S+)$", text, re.M)
        out[name] = float(m.group(1)) if m else 0.0
    return out


def run_config(args, replicas, threads, policy, kv_mib, port):
    log_dir = f"/tmp/tessera_scaleout_{port}"
    cmd = [os.path.join(ROOT, "scripts", "cluster.sh"), "-n", str(replicas), "-t", str(threads), "-p", policy,
           "--port", str(port), "--bin", args.tessera, "--", "--kv-cache", f"{kv_mib}MiB",
           "--max-model-len", str(args.max_model_len), "--served-model-name", "smol"]
    if args.model:
        cmd[cmd.index("--"):cmd.index("--")] = ["--model", args.model]
    env = dict(os.environ, CLUSTER_LOG_DIR=log_dir)
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
    try:
        line = proc.stdout.readline()
        if not line.startswith("cluster: ready"):
            raise RuntimeError(f"cluster did not start ({replicas}x{threads} {policy}); logs in {log_dir}")
        out_json = f"{log_dir}/bench.json"
        bench = [args.tessera, "bench", "serve", "--base-url", f"http://127.0.0.1:{port}", "--model", "smol",
                 "--workload", "multi-tenant", "--num-sessions", str(args.sessions), "--num-turns", str(args.turns),
                 "--num-system-prompts", str(args.system_prompts), "--system-prompt-len", str(args.system_len),
                 "--input-len", str(args.input_len), "--output-len", str(args.output_len),
                 "--max-concurrency", str(args.concurrency), "--seed", str(args.seed), "--json-out", out_json]
        subprocess.run(bench, check=True, stdout=subprocess.DEVNULL, timeout=args.timeout)
        result = json.load(open(out_json))["results"][0]
        counters = [scrape(port + i) for i in range(1, replicas + 1)]
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=120)
    hits = sum(c["vllm:prefix_cache_hits_total"] for c in counters)
    queries = sum(c["vllm:prefix_cache_queries_total"] for c in counters)
    return {
        "replicas": replicas, "threads_per_replica": threads // replicas, "policy": policy, "kv_mib_per_replica": kv_mib,
        "hit_rate": hits / queries if queries else 0.0, "hits": hits, "queries": queries,
        "per_replica_queries": [c["vllm:prefix_cache_queries_total"] for c in counters],
        "preemptions": sum(c["tessera:num_preemptions_total"] for c in counters),
        "completed": result["completed"], "failed": result["num_requests"] - result["completed"],
        "ttft_p50_ms": result["ttft_ms"]["median"], "ttft_p99_ms": result["ttft_ms"]["p99"],
        "request_throughput": result["request_throughput"], "output_throughput": result["output_throughput"],
        "total_token_throughput": result["total_token_throughput"], "duration_s": result.get("duration", None),
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tessera", default=os.path.join(ROOT, "build", "release", "src", "cli", "tessera"))
    ap.add_argument("--model", default="")
    ap.add_argument("--threads", type=int, default=2, help="compute threads in all")
    ap.add_argument("--kv-mib", type=int, default=128, help="KV cache per replica of 2 (the single replica gets 2x)")
    ap.add_argument("--max-model-len", type=int, default=2048)
    ap.add_argument("--sessions", type=int, default=24)
    ap.add_argument("--turns", type=int, default=4)
    ap.add_argument("--system-prompts", type=int, default=8)
    ap.add_argument("--system-len", type=int, default=1000, help="system prompt words (about tokens)")
    ap.add_argument("--input-len", type=int, default=32)
    ap.add_argument("--output-len", type=int, default=16)
    ap.add_argument("--concurrency", type=int, default=4, help="sessions in flight")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--port", type=int, default=9400)
    ap.add_argument("--timeout", type=int, default=1200, help="seconds per configuration")
    ap.add_argument("--json-out", default="")
    args = ap.parse_args()
    configs = [(1, "round_robin")] + [(2, p) for p in ("round_robin", "cache_aware", "consistent_hashing")]
    rows = []
    for n, (replicas, policy) in enumerate(configs):
        kv = args.kv_mib * (2 // replicas)
        t0 = time.time()
        row = run_config(args, replicas, args.threads, policy, kv, args.port + 10 * n)
        row["wall_s"] = time.time() - t0
        rows.append(row)
        print(f"{replicas} x {args.threads // replicas} {policy}: hit {row['hit_rate']:.3f} ttft p50 "
              f"{row['ttft_p50_ms']:.0f} ms p99 {row['ttft_p99_ms']:.0f} ms, {row['request_throughput']:.2f} req/s "
              f"({row['wall_s']:.0f} s)", file=sys.stderr, flush=True)
    base = rows[0]
    rr = next(r for r in rows if r["replicas"] == 2 and r["policy"] == "round_robin")
    print("| replicas x threads | policy | prefix-cache hit rate | vs 1 replica | vs round_robin | TTFT p50 ms | "
          "TTFT p99 ms | req/s | output tok/s | total tok/s | preemptions |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        policy = "(one replica)" if r["replicas"] == 1 else r["policy"]
        print(f"| {r['replicas']} x {r['threads_per_replica']} | {policy} | {r['hit_rate']:.3f} | "
              f"{r['hit_rate'] / base['hit_rate']:.2f} | {r['hit_rate'] / rr['hit_rate']:.2f} | {r['ttft_p50_ms']:.0f} | "
              f"{r['ttft_p99_ms']:.0f} | {r['request_throughput']:.2f} | {r['output_throughput']:.1f} | "
              f"{r['total_token_throughput']:.0f} | {r['preemptions']:.0f} |")
    if args.json_out:
        with open(args.json_out, "w") as f:
            json.dump({"args": vars(args), "rows": rows}, f, indent=2)


if __name__ == "__main__":
    main()
