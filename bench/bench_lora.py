#!/usr/bin/env python3
"""LoRA serving cost (issue 45), tessera against itself with the adapters off, interleaved round by
round on one server:

  mixed load: 16 concurrent greedy requests (64 tokens each past EOS) spread over 0 (all on the base
    model), 1, 2, 4 and 8 adapters, on `tessera serve --lora-modules l0=... l7=... --max-loras 8
    --max-num-seqs 16`: aggregate output tok/s and the ratio to the base model's (target: >= 0.8 at 4);
  batch-1 decode: `tessera run --json` decode tok/s with an adapter of rank 8 and 16 (q,v targets, and
    all seven) against the base model (target: <= ~10% slower at rank 8-16).
  --llama-server PATH: the same mixed load on llama.cpp's llama-server (-np 16, every adapter loaded
    with --lora-init-without-apply, chosen per request by its `lora` list), rounds after tessera's.
The adapters are seeded random ones (scripts/make_lora_gguf.py; the cost does not depend on the values).

    python3 bench/bench_lora.py --rounds 3 [--targets attn_q,attn_v | all] [--type f16 | f32] [--model M]
                                [--llama-server /work/llama/build/bin/llama-server] [--skip-mixed] [--skip-decode]
"""
import argparse
import concurrent.futures
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROMPTS = ["Write a short story about a lighthouse keeper.", "Explain how a bicycle works.",
           "List some facts about the moon.", "Describe a busy market in the morning."]


def make_adapter(model, out, rank, targets, seed, dtype):
    subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "make_lora_gguf.py"), "--base", model, "--out", out,
                    "--rank", str(rank), "--alpha", str(2 * rank), "--targets", targets, "--seed", str(seed),
                    "--type", dtype], check=True)


def post(base, path, body):
    req = urllib.request.Request(base + path, data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=600) as r:
        return json.loads(r.read())


def mixed_round(base, num_adapters, peer, n=16, max_tokens=64):
    """One round: n concurrent requests spread round-robin over num_adapters adapters (0: the base
    model). tessera picks the adapter by the request's model id; llama-server by its per-request
    `lora` list (adapter ids in --lora order, scale 1; an empty list is the base model)."""
    def one(i):
        body = {"prompt": PROMPTS[i % len(PROMPTS)], "max_tokens": max_tokens, "temperature": 0, "ignore_eos": True}
        if peer == "tessera":
            body["model"] = "smol" if num_adapters == 0 else f"l{i % num_adapters}"
        else:
            body["lora"] = [] if num_adapters == 0 else [{"id": i % num_adapters, "scale": 1.0}]
        return post(base, "/v1/completions", body)["usage"]["completion_tokens"]
    start = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(n) as pool:
        tokens = sum(pool.map(one, range(n)))
    return tokens / (time.perf_counter() - start)


def start_server(cmd, base):
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(600):
        try:
            with urllib.request.urlopen(base + "/health", timeout=2) as r:
                if r.status == 200:
                    return proc
        except Exception:  # noqa: BLE001
            if proc.poll() is not None:
                raise RuntimeError(f"{cmd[0]} exited with {proc.returncode}")
            time.sleep(0.2)
    proc.terminate()
    raise RuntimeError(f"{cmd[0]} did not become healthy")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_decode(tessera, model, threads, lora=None, n=128):
    args = [tessera, "run", "--model", model, "-t", str(threads), "-p", "Once upon a time", "-n", str(n),
            "--temperature", "0", "--ignore-eos", "--json"]
    if lora:
        args += ["--lora", lora]
    r = subprocess.run(args, capture_output=True, text=True, check=True)
    return json.loads(r.stdout)["timings"]["decode_tok_per_s"]


def fmt(values):
    return f"{statistics.median(values):.1f} ({min(values):.1f}-{max(values):.1f})"


def fmt_ratio(values):
    return f"{statistics.median(values):.2f}x ({min(values):.2f}-{max(values):.2f})"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tessera", default=os.path.join(ROOT, "build/release/src/cli/tessera"))
    ap.add_argument("--model", default=os.path.join(ROOT, "models/SmolLM2-135M-Instruct.Q4_1.gguf"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rank", type=int, default=16, help="rank of the mixed-load adapters")
    ap.add_argument("--targets", default="attn_q,attn_v", help="targets of the mixed-load adapters")
    ap.add_argument("--type", choices=["f16", "f32"], default="f16",
                    help="the adapters' tensor type (convert_lora_to_gguf.py --outtype); f16 pairs stay f16 in tessera")
    ap.add_argument("--llama-server", default="", help="llama.cpp's llama-server: also run the mixed load on it")
    ap.add_argument("--skip-mixed", action="store_true")
    ap.add_argument("--skip-decode", action="store_true")
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="bench_lora_")
    if not args.skip_mixed:
        paths = [os.path.join(tmp, f"l{i}.gguf") for i in range(8)]
        for i, p in enumerate(paths):
            make_adapter(args.model, p, args.rank, args.targets, 100 + i, args.type)
        peers = {"tessera": lambda port: [
            args.tessera, "serve", "--model", args.model, "--port", str(port), "-t", str(args.threads),
            "--served-model-name", "smol", "--max-num-seqs", "16", "--max-loras", "8", "--kv-cache", "256MiB",
            "--no-prefix-caching", "--lora-modules", *[f"l{i}={p}" for i, p in enumerate(paths)]]}
        if args.llama_server:
            # 16 slots of 2 x 64 tokens and more (-c is shared by the slots); adapters loaded, applied
            # per request only.
            peers["llama-server"] = lambda port: [
                args.llama_server, "-m", args.model, "--port", str(port), "-t", str(args.threads), "-np", "16",
                "-c", "8192", "--no-cache-prompt", "--lora-init-without-apply",
                *[a for p in paths for a in ("--lora", p)]]
        counts = (0, 1, 2, 4, 8)
        results = {peer: {k: [] for k in counts} for peer in peers}
        for peer, cmd in peers.items():
            port = free_port()
            base = f"http://127.0.0.1:{port}"
            server = start_server(cmd(port), base)
            try:
                mixed_round(base, 0, peer, max_tokens=8)  # warm-up
                for _ in range(args.rounds):
                    for k in counts:
                        results[peer][k].append(mixed_round(base, k, peer))
            finally:
                server.terminate()
                server.wait()
        print(f"mixed load: 16 concurrent x 64 tokens, adapters rank {args.rank} on {args.targets} ({args.type}), "
              f"{args.rounds} rounds, median (min-max); ratios per round")
        head = "| adapters | " + " | ".join(f"{p} tok/s | {p} vs its base" for p in peers)
        if "llama-server" in peers:
            head += " | tessera / llama-server"
        print(head + " |")
        print("|" + " --- |" * (1 + 2 * len(peers) + ("llama-server" in peers)))
        for k in counts:
            row = f"| {'base' if k == 0 else k} |"
            for p in peers:
                v = results[p][k]
                row += f" {fmt(v)} | {fmt_ratio([a / b for a, b in zip(v, results[p][0])])} |"
            if "llama-server" in peers:
                row += f" {fmt_ratio([a / b for a, b in zip(results['tessera'][k], results['llama-server'][k])])} |"
            print(row)
    if not args.skip_decode:
        configs = [(r, t) for t in ("attn_q,attn_v", "all") for r in (8, 16)]
        loras = {}
        for r, t in configs:
            loras[(r, t)] = os.path.join(tmp, f"d_{r}_{t.replace(',', '_')}.gguf")
            make_adapter(args.model, loras[(r, t)], r, t, 7, args.type)
        times = {"base": [], **{c: [] for c in configs}}
        for _ in range(args.rounds):
            times["base"].append(run_decode(args.tessera, args.model, args.threads))
            for c in configs:
                times[c].append(run_decode(args.tessera, args.model, args.threads, loras[c]))
        print(f"\nbatch-1 decode, {args.threads} threads, 128 tokens, {args.rounds} rounds, median (min-max)")
        print("| adapter | decode tok/s | overhead vs base |")
        print("| --- | --- | --- |")
        print(f"| base | {fmt(times['base'])} | - |")
        for c in configs:
            over = [b / a - 1 for a, b in zip(times[c], times["base"])]
            print(f"| rank {c[0]}, {c[1]} | {fmt(times[c])} | {100 * statistics.median(over):+.1f}% |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
