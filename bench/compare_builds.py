"""B1/B4/B5/B9 of two tessera builds side by side: did a change (a refactor, say) move the speed?

Runs every case once on build A, then once on build B, round after round (so both see the same
host load), and prints each build's figure as median (min-max) over rounds and the ratio B / A per
round as median (min-max). Only tessera runs: the peer-relative tables are bench_llama_cpp.py and
bench_batched_decode.

  B1  single-stream decode, 128 tokens after a 16-token prompt  (tessera run --json: decode tok/s)
  B2  prefill of 512 and 2,048 tokens                             (tessera run --json: prefill tok/s)
  B4  batched decode, B = 1, 16 and 32, 128 in / 128 out        (bench_batched_decode --no-peer)
  B5  continuous / static output tok/s, 200 geometric requests   (tessera bench throughput)
  B9  n-gram speculation on / off at k = 4, grounded, batch 1    (bench_spec --ks 4)

Usage (each build dir from `cmake --preset release` with targets tessera bench_batched_decode bench_spec):
  python3 bench/compare_builds.py --a /path/old/build/release --b build/release --rounds 3
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys


def run(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit("failed: " + " ".join(cmd) + "\n" + p.stderr[-2000:])
    return p.stdout + p.stderr


def b1(build, model, threads):
    ids = ",".join(str(1000 + 37 * i % 30000) for i in range(16))
    out = run([f"{build}/src/cli/tessera", "run", "--model", model, "--threads", str(threads), "--json",
               "--ignore-eos", "-n", "129", "--max-model-len", "4096", "--temperature", "0", "--prompt-ids", ids])
    last_json = [line for line in out.splitlines() if line.startswith("{")][-1]
    return {"B1 decode tok/s": json.loads(last_json)["timings"]["decode_tok_per_s"]}


def b2(build, model, threads):
    got = {}
    for n in (512, 2048):
        ids = ",".join(str(1000 + 37 * i % 30000) for i in range(n))
        out = run([f"{build}/src/cli/tessera", "run", "--model", model, "--threads", str(threads), "--json",
                   "--ignore-eos", "-n", "1", "--max-model-len", "4096", "--temperature", "0", "--prompt-ids", ids])
        last_json = [line for line in out.splitlines() if line.startswith("{")][-1]
        got[f"B2 prefill {n} tok/s"] = json.loads(last_json)["timings"]["prompt_tok_per_s"]
    return got


def b4(build, model, threads):
    out = run([f"{build}/bench/bench_batched_decode", "--model", model, "--rounds", "1", "--threads",
               str(threads), "--batches", "1,16,32", "--no-peer"])
    got = {}
    for b, v in re.findall(r"round 0 B=(\d+): ours ([\d.]+) tok/s", out):
        got[f"B4 B={b} tok/s"] = float(v)
    return got


def b5(build, model, threads):
    out = run([f"{build}/src/cli/tessera", "bench", "throughput", "--model", model, "--compare-policy", "both",
               "--num-prompts", "200", "--input-len", "128", "--output-len", "128", "--output-dist", "geometric",
               "--max-num-seqs", "16", "--seed", "1", "--rounds", "1", "--threads", str(threads),
               "--kv-cache", "512MiB"])
    cont = float(re.search(r"^continuous\s+([\d.]+)", out, re.M).group(1))
    stat = float(re.search(r"^static\s+([\d.]+)", out, re.M).group(1))
    return {"B5 continuous out tok/s": cont, "B5 continuous/static": cont / stat}


def b9(build, model, threads):
    out = run([f"{build}/bench/bench_spec", "--model", model, "--ks", "4", "--only", "ngram", "--batch", "1", "--rounds", "1", "--max-tokens", "48",
               "--threads", str(threads)])
    got = {}
    for workload, batch, ratio in re.findall(r"^\| (ngram grounded|ngram open \(low alpha\))\s+\|\s+(\d+) \|"
                                             r"(?:[^|]*\|){8}\s+([\d.]+)x", out, re.M):
        if batch == "1":
            got[f"B9 {workload} b=1 on/off"] = float(ratio)
    return got


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--a", required=True, help="build dir A (the baseline)")
    ap.add_argument("--b", required=True, help="build dir B (the change)")
    ap.add_argument("--model", default="models/SmolLM2-135M-Instruct.Q4_1.gguf")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--cases", default="b1,b4,b5,b9")
    a = ap.parse_args()
    fns = {"b1": b1, "b2": b2, "b4": b4, "b5": b5, "b9": b9}
    vals = {}  # metric -> {"a": [...], "b": [...]}
    print(f"# load average at the start {' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
    for rnd in range(a.rounds):
        for case in a.cases.split(","):
            for side, build in (("a", a.a), ("b", a.b)):
                for metric, v in fns[case](build, a.model, a.threads).items():
                    vals.setdefault(metric, {"a": [], "b": []})[side].append(v)
                    print(f"# round {rnd + 1} {side} {metric}: {v:.2f}", flush=True)
    print(f"# load average at the end {' '.join(f'{x:.2f}' for x in os.getloadavg())}")

    def fmt(xs):
        return f"{statistics.median(xs):.2f} ({min(xs):.2f}-{max(xs):.2f})"
    print(f"\n| metric | A {a.a} | B {a.b} | B / A per round |\n|---|---|---|---|")
    for metric, v in vals.items():
        n = min(len(v["a"]), len(v["b"]))
        ratios = [v["b"][i] / v["a"][i] for i in range(n) if v["a"][i] > 0]
        print(f"| {metric} | {fmt(v['a'])} | {fmt(v['b'])} | {fmt(ratios)}x |")


if __name__ == "__main__":
    main()
