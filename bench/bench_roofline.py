#!/usr/bin/env python3
"""Issue 46's benchmark: tessera against llama.cpp's NATIVE tools (llama-bench, llama-batched-bench,
llama-server), 2 threads on both sides, rounds interleaved, markdown tables out.

    python3 bench/bench_roofline.py --rounds 3 --write-readme          # the full run (long: 1.5B rows)
    python3 bench/bench_roofline.py --quick                            # SmolLM2 only, 64 tokens, 1 round
    python3 bench/bench_roofline.py --rounds 1 --models models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf \
        --skip serving,spec                                            # one model's rows

Row groups (--skip any of prefill, decode, batched, serving, spec). Each group runs its rounds
interleaved (round r: every tessera case of the group, then every llama.cpp case, so a burst of load
from other processes hits both) and prints its table as soon as its last round is done:
  prefill  tok/s over a 512-token prompt. llama.cpp: `llama-bench -p 512 -r 1 -o json`'s pp avg_ts;
           tessera: `tessera run --prompt-ids` (512 seeded random ids, 1 token out): 512 / TTFT.
  decode   batch-1 decode tok/s over 128 tokens from an empty context. llama.cpp: llama-bench's tg128
           avg_ts; tessera: `tessera run --ignore-eos --json`'s decode_tok_per_s (1-token prompt,
           129 out). "% of bw" = tok/s x the bytes read per token (every GGUF tensor but the
           token-embedding table, which counts only where the output projection is tied to it) /
           probe_bandwidth's GB/s.
  batched  aggregate decode tok/s of 1 and 16 sequences of 128 prompt + 128 generated tokens.
           llama.cpp: `llama-batched-bench -npp 128 -ntg 128 -npl 1,16`'s S_TG t/s; tessera:
           `bench_batched_decode --no-peer --batches 1,16 --json-out`. S(16)/S(1) per side.
  serving  `tessera bench serve` (one load generator, 16 clients, every request asks for exactly
           max_tokens: ignore_eos, which llama-server honours too) against `tessera serve
           --max-num-seqs 16` and `llama-server -np 16 -c 16 x slot --cont-batching`, a fresh
           server per round and peer: random 512 words in / 128 out, and multi-tenant (16 sessions,
           8 shared system prompts of 1000 words, 3 turns of 128 words in / 128 out). Out tok/s and
           TTFT p90 per side; ratios tessera / llama.cpp for tok/s, llama.cpp / tessera for TTFT
           (both > 1 where tessera wins).
  spec     `bench_spec` (tessera alone: speculation on vs off), 1.5B target with the n-gram proposer
           and with the 0.5B draft, --batch 1 and --batch 8; its markdown tables verbatim.
Ratios are per round (tessera / llama.cpp); cells are "median (min-max)" over rounds.

Before timing, each model's greedy 16 tokens after the same prompt (a code snippet tokenized by
llama-server) are compared, tessera against llama-server: equal, or parting at a near-tie (the
gap between llama.cpp's top log-prob and tessera's token's at the first difference) - reported,
never an abort. The header has the CPU (lscpu model, ISA flags), probe_bandwidth GB/s and
probe_compute's int8 GOP/s at 2 threads, the load average at the start and the end, the git
commit and llama.cpp's build. llama.cpp's tools run with their defaults: OpenMP's own wait
policy (--llama-omp-passive sets OMP_WAIT_POLICY=PASSIVE, for a host shared with other load; an
OMP_WAIT_POLICY in the environment wins) and their weights repacked as by default (--llama-repack off turns that off, for hosts where its AMX paths fail).

--out FILE (default bench/out/roofline.md) gets the tables; --write-readme also puts them into
bench/README.md between `<!-- roofline:begin -->` and `<!-- roofline:end -->`, moving what was
there to the end of bench/LOG.md under a dated heading.
"""
import argparse
import datetime
import json
import os
import random
import re
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
QWEN05 = "models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"
QWEN15 = "models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
SMOL = "models/SmolLM2-135M-Instruct.Q4_1.gguf"
GROUPS = ("prefill", "decode", "batched", "serving", "spec")
BEGIN, END = "<!-- roofline:begin -->", "<!-- roofline:end -->"
CHECK_TEXT = "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n"
THREADS = 2


def run(cmd, what, **kw):
    """Runs cmd; a failure ends the benchmark with the command's stderr (a table built on a
    failed run would be wrong)."""
    p = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if p.returncode != 0:
        sys.exit(f"{what} failed ({p.returncode}): {' '.join(cmd)}\n{p.stderr[-3000:]}")
    return p.stdout


def cell(values, digits=1):
    if not values:
        return "-"
    return f"{statistics.median(values):.{digits}f} ({min(values):.{digits}f}-{max(values):.{digits}f})"


def ratio_cell(a, b):
    return cell([x / y for x, y in zip(a, b) if y > 0], 2).replace(" (", "x (")


def weight_bytes(model):
    """Bytes a decode step reads: every tensor but the token-embedding table (a row lookup), which
    counts where the output projection is tied to it (no output.weight) - matmul_params' rule, in
    bytes. None where the gguf package is missing."""
    try:
        from gguf import GGUFReader
    except ImportError:
        return None
    sizes = {t.name: int(t.n_bytes) for t in GGUFReader(model).tensors}
    n = sum(v for k, v in sizes.items() if k != "token_embd.weight")
    return n + (sizes.get("token_embd.weight", 0) if "output.weight" not in sizes else 0)


class Bench:
    def __init__(self, a):
        self.a = a
        self.tessera = os.path.join(a.tessera_build, "src/cli/tessera")
        self.tool = lambda name: os.path.join(a.tessera_build, "bench", name)
        self.llama = lambda name: os.path.join(a.llama_bin, name)
        # llama.cpp's weight repacking (its default, on): --llama-repack off where its repacked
        # (e.g. AMX) paths crash or compute wrong results on a host; llama-bench spells it apart.
        self.no_repack = [] if a.llama_repack == "on" else ["--no-repack"]
        self.bench_repack = ["--repack", "1" if a.llama_repack == "on" else "0"]
        self.sections = []  # markdown blocks, in order
        self.bw = None

    # ---- output -------------------------------------------------------------------------------
    def emit(self, block):
        print(block + "\n", flush=True)
        self.sections.append(block)
        os.makedirs(os.path.dirname(os.path.abspath(self.a.out)), exist_ok=True)
        with open(self.a.out, "w") as f:
            f.write("\n\n".join(self.sections) + "\n")

    def header(self):
        lscpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        model = re.search(r"Model name:\s*(.+)", lscpu)
        flags_m = re.search(r"Flags:\s*(.+)", lscpu)
        flags = set(flags_m.group(1).split()) if flags_m else set()
        isa = [f for f in ("avx2", "avx512f", "avx512_vnni", "avx512_bf16", "amx_tile", "amx_int8") if f in flags]
        bw_out = run([self.tool("probe_bandwidth"), "0", str(THREADS)], "probe_bandwidth")
        self.bw = float(re.search(r"([\d.]+) GB/s", bw_out).group(1))
        cp = run([self.tool("probe_compute"), str(THREADS)], "probe_compute")
        int8 = [float(g) for g, n in re.findall(r"int8 .+?\s+([\d.]+) GOP/s\s+\((\d+) threads\)", cp) if int(n) == THREADS]
        commit = subprocess.run(["git", "-C", ROOT, "describe", "--always", "--dirty"], capture_output=True,
                                text=True).stdout.strip()
        llama_v = subprocess.run([self.llama("llama-server"), "--version"], capture_output=True, text=True)
        llama_v = re.search(r"version: (.+)", llama_v.stdout + llama_v.stderr)
        load = os.getloadavg()
        self.emit("\n".join([
            f"Run {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC: "
            f"`{' '.join(['python3 bench/bench_roofline.py'] + sys.argv[1:])}`",
            "",
            f"- CPU: {model.group(1).strip() if model else '?'}, {os.cpu_count()} cores; ISA: {' '.join(isa) or '-'}",
            f"- probes ({THREADS} threads): {self.bw:.1f} GB/s read, int8 peak {max(int8) if int8 else 0:.1f} GOP/s",
            f"- load average at the start: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}",
            f"- tessera {commit}; llama.cpp {llama_v.group(1).strip() if llama_v else '?'} "
            f"(OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY', '')}, repack {self.a.llama_repack}); "
            f"{THREADS} threads both sides; "
            f"{self.a.rounds} round(s), cells median (min-max)"]))

    # ---- the output check ---------------------------------------------------------------------
    def check(self, model):
        """Greedy 16 tokens from tessera and llama-server after the same ids; where they part, how
        far tessera's token sits below llama.cpp's top log-prob (a near-tie is rounding)."""
        from bench_llama_cpp import NEAR_TIE_LOGITS, run_tessera
        from bench_lora import free_port, start_server
        port = free_port()
        base = f"http://127.0.0.1:{port}"
        srv = start_server([self.llama("llama-server"), "-m", model, "-t", str(THREADS), "-np", "1", "-c", "512",
                            "--host", "127.0.0.1", "--port", str(port)] + self.no_repack, base)
        try:
            ids = post(base, "/tokenize", {"content": CHECK_TEXT, "add_special": True})["tokens"]
            theirs = post(base, "/completion", {"prompt": ids, "n_predict": 16, "temperature": 0, "n_probs": 20,
                                                "return_tokens": True, "cache_prompt": False, "ignore_eos": True})
        finally:
            srv.terminate()
            srv.wait()
        ours = run_tessera(self.tessera, model, THREADS, ids, 16, [])["ids"]
        their_ids = theirs["tokens"]
        common = next((i for i, (x, y) in enumerate(zip(ours, their_ids)) if x != y), min(len(ours), len(their_ids)))
        line = f"- check {os.path.basename(model)}: 16 greedy tokens after {len(ids)} prompt ids agree on the first {common}"
        if common < min(len(ours), len(their_ids)):
            top = theirs["completion_probabilities"][common]["top_logprobs"]
            mine = [t["logprob"] for t in top if t["id"] == ours[common]]
            if mine:
                gap = top[0]["logprob"] - mine[0]
                verdict = "near-tie" if gap <= NEAR_TIE_LOGITS else "WARNING: beyond a near-tie, check llama.cpp"
                line += f"; at {common} tessera's token is {gap:.3f} below llama.cpp's top log-prob ({verdict})"
            else:
                line += f"; at {common} tessera's token is not in llama.cpp's top 20 (WARNING: check llama.cpp)"
            line += f"\n  - tessera {ours}\n  - llama.cpp {their_ids}"
        return line

    # ---- prefill and decode -------------------------------------------------------------------
    def single(self, models, groups):
        from bench_llama_cpp import run_tessera
        p, n = self.a.prefill_len, self.a.decode_len
        rng = random.Random(1)
        prompt = [rng.randrange(256, 32000) for _ in range(p)]  # every vocab here has >= 49k ids
        res = {(m, k): {"t": [], "l": []} for m in models for k in groups}
        for r in range(self.a.rounds):
            for m in models:
                if "prefill" in groups:
                    j = run_tessera(self.tessera, m, THREADS, prompt, 1, [])
                    res[(m, "prefill")]["t"].append(p / (j["timings"]["ttft_ms"] / 1000.0))
                if "decode" in groups:
                    j = run_tessera(self.tessera, m, THREADS, prompt[:1], n + 1, [])
                    res[(m, "decode")]["t"].append(j["timings"]["decode_tok_per_s"])
            for m in models:
                out = run([self.llama("llama-bench"), "-m", m, "-t", str(THREADS), "-r", "1", "-o", "json",
                           "-p", str(p if "prefill" in groups else 0), "-n", str(n if "decode" in groups else 0)]
                          + self.bench_repack, "llama-bench")
                for k, ts in parse_llama_bench(out).items():
                    res[(m, k)]["l"].append(ts)
            self.progress("prefill/decode", r, res)
        rows = []
        for m in models:
            wb = weight_bytes(m)
            for i, k in enumerate(groups):
                t, l = res[(m, k)]["t"], res[(m, k)]["l"]
                note = ""
                if k == "decode" and wb and self.bw:
                    pct = lambda v: 100 * statistics.median(v) * wb / 1e9 / self.bw  # noqa: E731
                    note = f"% of bw probe: tessera {pct(t):.0f}%, llama.cpp {pct(l):.0f}% ({wb / 1e6:.0f} MB/token)"
                case = f"prefill {p} (tok/s)" if k == "prefill" else f"decode {n}, batch 1 (tok/s)"
                rows.append(f"| {os.path.basename(m) if i == 0 else ''} | {case} | {cell(t)} | {cell(l)} | {ratio_cell(t, l)} | {note} |")
        self.emit("\n".join([f"### prefill and batch-1 decode (llama-bench -p {p} -n {n} -r 1)", "",
                             "| file | case | tessera | llama.cpp | ratio | note |", "| --- | --- | --- | --- | --- | --- |"]
                            + rows))

    # ---- batched decode -----------------------------------------------------------------------
    def batched(self, models):
        inp, out, pls = self.a.batched_len, self.a.batched_len, (1, 16)
        res = {m: {b: {"t": [], "l": []} for b in pls} for m in models}
        for r in range(self.a.rounds):
            for m in models:
                with tempfile.NamedTemporaryFile(suffix=".json") as f:
                    run([self.tool("bench_batched_decode"), "--no-peer", "--model", m, "--threads", str(THREADS),
                         "--batches", ",".join(map(str, pls)), "--input-len", str(inp), "--output-len", str(out),
                         "--rounds", "1", "--json-out", f.name], "bench_batched_decode")
                    j = json.load(f)
                for b in pls:
                    res[m][b]["t"].append(j["tok_per_s"][str(b)][0])
            for m in models:
                # Sequences do not share a prompt (no -pps): the KV holds 16 x (in + out), twice that for slack.
                txt = run([self.llama("llama-batched-bench"), "-m", m, "-t", str(THREADS),
                           "-c", str(2 * max(pls) * (inp + out)), "-npp", str(inp), "-ntg", str(out),
                           "-npl", ",".join(map(str, pls)), "--output-format", "jsonl"] + self.no_repack,
                          "llama-batched-bench")
                for pl, ts in parse_batched_bench(txt).items():
                    res[m][pl]["l"].append(ts)
            self.progress("batched", r, {(m, b): v for m in models for b, v in res[m].items()})
        rows = []
        for m in models:
            t1, t16, l1, l16 = res[m][1]["t"], res[m][16]["t"], res[m][1]["l"], res[m][16]["l"]
            rows.append(f"| {os.path.basename(m)} | 1 sequence (tok/s) | {cell(t1)} | {cell(l1)} | {ratio_cell(t1, l1)} |")
            rows.append(f"| | 16 sequences, aggregate (tok/s) | {cell(t16)} | {cell(l16)} | {ratio_cell(t16, l16)} |")
            s_t, s_l = [a / b for a, b in zip(t16, t1)], [a / b for a, b in zip(l16, l1)]
            rows.append(f"| | S(16)/S(1) | {cell(s_t, 2)} | {cell(s_l, 2)} | |")
        self.emit("\n".join([f"### batched decode ({inp} prompt + {out} generated tokens per sequence; "
                             "llama-batched-bench S_TG, bench_batched_decode)", "",
                             "| file | case | tessera | llama.cpp | ratio |", "| --- | --- | --- | --- | --- |"] + rows))

    # ---- serving ------------------------------------------------------------------------------
    def workloads(self):
        q = self.a.quick
        inp, out = (64, 64) if q else (512, 128)
        mt_in, sys_len, turns = (64, 64, 3) if q else (128, 1000, 3)
        random_args = ["--num-prompts", "16", "--input-len", str(inp), "--output-len", str(out)]
        mt_args = ["--workload", "multi-tenant", "--num-sessions", "16", "--num-turns", str(turns),
                   "--num-system-prompts", "8", "--system-prompt-len", str(sys_len), "--input-len", str(mt_in),
                   "--output-len", str(out)]
        # Words per request at most -> tokens per slot: x 1.5 (a word is 1-2 tokens) + the chat
        # template, rounded up to 256.
        words = max(inp + out, sys_len + turns * (mt_in + out))
        slot = -(-(int(1.5 * words) + 128) // 256) * 256
        return [(f"random {inp} in / {out} out", random_args),
                (f"multi-tenant ({sys_len}-word system prompts, {turns} turns)", mt_args)], slot

    def serving(self, models):
        from bench_lora import free_port, start_server
        loads, slot = self.workloads()
        peers = {
            "tessera": lambda m, port: [self.tessera, "serve", "--model", m, "--port", str(port), "-t", str(THREADS),
                                        "--max-num-seqs", "16", "--max-model-len", str(slot)],
            "llama": lambda m, port: [self.llama("llama-server"), "-m", m, "-t", str(THREADS), "-np", "16",
                                      "-c", str(16 * slot), "--cont-batching", "--host", "127.0.0.1",
                                      "--port", str(port)] + self.no_repack,
        }
        res = {(m, w, p): {"tok": [], "ttft": [], "short": 0} for m in models for w, _ in loads for p in peers}
        for r in range(self.a.rounds):
            for peer, cmd in peers.items():
                for m in models:
                    port = free_port()
                    base = f"http://127.0.0.1:{port}"
                    srv = start_server(cmd(m, port), base)  # fresh per round: no prefix cache carried over
                    try:
                        for name, args in loads:
                            with tempfile.NamedTemporaryFile(suffix=".json") as f:
                                run([self.tessera, "bench", "serve", "--base-url", base, "--max-concurrency", "16",
                                     "--request-rate", "inf", "--seed", str(r), "--label", peer, "--json-out", f.name,
                                     "--timeout", "3600"]  # llama-server's TTFT p90 reached 250 s at load 7
                                    + args, "tessera bench serve")
                                s = json.load(f)["results"][0]
                            cell_ = res[(m, name, peer)]
                            cell_["tok"].append(s["output_throughput"])
                            cell_["ttft"].append(s["ttft_ms"]["p90"])
                            out_len = int(args[args.index("--output-len") + 1])
                            if s["failed"] or s["total_output_tokens"] != s["num_requests"] * out_len:
                                cell_["short"] += 1  # errors, or a server that stopped before max_tokens
                    finally:
                        srv.terminate()
                        srv.wait()
            self.progress("serving", r, {k: {"t": v["tok"]} for k, v in res.items()})
        rows = []
        for m in models:
            for i, (name, _) in enumerate(loads):
                t, l = res[(m, name, "tessera")], res[(m, name, "llama")]
                warn = " (incomplete: errors or short outputs in some round)" if t["short"] or l["short"] else ""
                rows.append(f"| {os.path.basename(m) if i == 0 else ''} | {name}{warn} | {cell(t['tok'])} | {cell(l['tok'])} | "
                            f"{ratio_cell(t['tok'], l['tok'])} | {cell(t['ttft'], 0)} | {cell(l['ttft'], 0)} | "
                            f"{ratio_cell(l['ttft'], t['ttft'])} |")
        self.emit("\n".join(["### serving, 16 clients (`tessera bench serve`; tessera serve vs llama-server -np 16)", "",
                             "| file | workload | tessera out tok/s | llama-server out tok/s | ratio | tessera TTFT p90 ms "
                             "| llama-server TTFT p90 ms | TTFT ratio (llama / tessera) |",
                             "| --- | --- | --- | --- | --- | --- | --- | --- |"] + rows))

    # ---- speculation --------------------------------------------------------------------------
    def spec(self):
        a = self.a
        if a.quick:
            modes = [["--model", SMOL, "--only", "ngram", "--max-tokens", "64"]]
            batches = [1]
        else:
            modes = [["--model", a.spec_target, "--draft-target", a.spec_target, "--draft", a.spec_draft]]
            batches = [1, 8]
        for extra in modes:
            for b in batches:
                out = run([self.tool("bench_spec"), "--threads", str(THREADS), "--rounds", str(a.rounds),
                           "--batch", str(b)] + extra, "bench_spec")
                self.emit(f"### speculation, batch {b} (`bench_spec {' '.join(extra)} --batch {b}`, tessera only)\n\n"
                          + out.strip())

    def progress(self, what, r, res):
        """One line per round on stderr: each case's latest tessera / llama.cpp figure."""
        def name(k):
            return " ".join(os.path.basename(x) if isinstance(x, str) and x.endswith(".gguf") else str(x) for x in k)
        parts = [f"{name(k)}: " + "/".join(f"{v[s][-1]:.1f}" for s in ("t", "l") if s in v and v[s])
                 for k, v in res.items()]
        print(f"# {what} round {r + 1}: " + "; ".join(parts), file=sys.stderr, flush=True)


def parse_llama_bench(text):
    """`llama-bench -o json`'s array -> {"prefill": pp avg tok/s, "decode": tg avg tok/s} (the rows run)."""
    return {("prefill" if row["n_prompt"] > 0 else "decode"): float(row["avg_ts"]) for row in json.loads(text)}


def parse_batched_bench(text):
    """`llama-batched-bench --output-format jsonl`'s stdout -> {pl: S_TG tok/s}; lines not JSON are
    its log."""
    rows = [json.loads(line) for line in text.splitlines() if line.startswith("{") and '"speed_tg"' in line]
    if not rows:
        sys.exit("llama-batched-bench printed no result rows:\n" + text[-2000:])
    return {int(r["pl"]): float(r["speed_tg"]) for r in rows}


def post(base, path, body):
    req = urllib.request.Request(base + path, data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=600) as r:
        return json.loads(r.read())


def write_readme(tables, path=os.path.join(HERE, "README.md"), log=os.path.join(HERE, "LOG.md"), now=None):
    """Replaces the roofline section of path (bench/README.md) with tables; what it held (unless the
    placeholder "not yet run") goes to the end of log (bench/LOG.md) under a heading dated now."""
    with open(path) as f:
        text = f.read()
    if BEGIN not in text or END not in text:
        sys.exit(f"{path} has no {BEGIN} ... {END} section")
    head, rest = text.split(BEGIN, 1)
    old, tail = rest.split(END, 1)
    old = old.strip()
    if old and old != "not yet run":
        stamp = f"{now or datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC"
        with open(log, "a") as f:
            f.write(f"\n## {stamp[:10]} B-roofline (issue 46), displaced by the run of {stamp} (README)\n\n{old}\n")
    with open(path, "w") as f:
        f.write(f"{head}{BEGIN}\n{tables.strip()}\n{END}{tail}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default=f"{QWEN05},{QWEN15},{SMOL}", help="comma-separated GGUFs")
    ap.add_argument("--serving-models", default=QWEN05)
    ap.add_argument("--spec-target", default=QWEN15)
    ap.add_argument("--spec-draft", default=QWEN05)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--skip", default="", help="comma-separated: " + ",".join(GROUPS))
    ap.add_argument("--quick", action="store_true", help="SmolLM2 only, 64-token prompts and outputs, 1 round")
    ap.add_argument("--llama-bin", default=os.environ.get("LLAMA_BIN", "/work/llama/build/bin"))
    ap.add_argument("--tessera-build", default="build/release")
    ap.add_argument("--llama-omp-passive", action="store_true",
                    help="OMP_WAIT_POLICY=PASSIVE for llama.cpp's tools (a shared, loaded host); default: their defaults")
    ap.add_argument("--llama-repack", choices=["on", "off"], default="on",
                    help="llama.cpp's weight repacking (on: its default; off where its AMX paths fail)")
    ap.add_argument("--out", default=os.path.join(HERE, "out", "roofline.md"))
    ap.add_argument("--write-readme", action="store_true")
    a = ap.parse_args()
    skip = {s for s in a.skip.split(",") if s}
    if skip - set(GROUPS):
        sys.exit(f"--skip: unknown {sorted(skip - set(GROUPS))}; choose from {','.join(GROUPS)}")
    a.prefill_len, a.decode_len, a.batched_len = (512, 128, 128)
    if a.quick:
        a.models = a.serving_models = SMOL
        a.rounds, a.prefill_len, a.decode_len, a.batched_len = 1, 64, 64, 64
    a.out = os.path.abspath(a.out)
    os.chdir(ROOT)  # model and build paths are relative to the repository root
    # bench_llama_cpp (imported for run_tessera) loads llama-cpp-python, which finds libllama here.
    os.environ.setdefault("LLAMA_CPP_LIB_PATH", a.llama_bin)
    omp_before = os.environ.get("OMP_WAIT_POLICY")
    import bench_llama_cpp  # noqa: F401  (sets OMP_WAIT_POLICY=PASSIVE at import)
    # llama.cpp's tools run with their users' defaults (OpenMP's own wait policy) unless asked:
    # PASSIVE only helps them on a host shared with other load (--llama-omp-passive).
    if a.llama_omp_passive:
        os.environ["OMP_WAIT_POLICY"] = "PASSIVE"
    elif omp_before is None:
        os.environ.pop("OMP_WAIT_POLICY", None)
    for tool in ("llama-bench", "llama-batched-bench", "llama-server"):
        if not os.access(os.path.join(a.llama_bin, tool), os.X_OK):
            sys.exit(f"no {tool} in {a.llama_bin} (--llama-bin or LLAMA_BIN)")
    b = Bench(a)
    models = [m for m in a.models.split(",") if m]
    serving_models = [m for m in a.serving_models.split(",") if m]
    spec_models = [] if "spec" in skip or a.quick else [a.spec_target, a.spec_draft]
    for m in set(models + serving_models + spec_models):
        if not os.path.exists(m):
            sys.exit(f"no such model: {m}")
    b.header()
    # Before timing llama.cpp: its greedy output on every model a llama.cpp row runs.
    checked = (models if {"prefill", "decode", "batched"} - skip else []) + \
        (serving_models if "serving" not in skip else [])
    if checked:
        b.emit("\n".join(b.check(m) for m in dict.fromkeys(checked)))
    single = [g for g in ("prefill", "decode") if g not in skip]
    if single:
        b.single(models, single)
    if "batched" not in skip:
        b.batched(models)
    if "serving" not in skip:
        b.serving(serving_models)
    if "spec" not in skip:
        b.spec()
    load = os.getloadavg()
    b.emit(f"Load average at the end: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    if a.write_readme:
        write_readme("\n\n".join(b.sections))
        print("bench/README.md updated (previous tables moved to bench/LOG.md)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
