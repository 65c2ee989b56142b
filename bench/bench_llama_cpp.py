#!/usr/bin/env python3
"""B1/B2: single-stream decode and prefill speed, tessera vs llama.cpp, interleaved round by round.

Same GGUF, same thread count, same fixed-seed random prompt ids on both sides. Each round runs
every case once on tessera (`tessera run --prompt-ids ... --ignore-eos --json`, a subprocess) and
then once on llama.cpp (llama-cpp-python's low-level API, in this process, model loaded once), so
a burst of load from other processes hits both sides alike.

  B1 decode: a prompt of C tokens (C = 16 "short", and 2048), then N = 128 greedy tokens, EOS
     ignored. tok/s = decode steps / time from the first token to the last (tessera: its JSON
     timings; llama.cpp: N single-token llama_decode calls, each followed by a logits argmax).
  B2 prefill: a prompt of P = 128, 512, 2048 tokens, one token generated. tok/s = P / time to the
     first token (tessera: submit to first token; llama.cpp: llama_decode of the prompt with
     n_batch 2048, n_ubatch 512 (its defaults) plus the argmax).

Every figure is printed beside the machine's limits: probe_bandwidth's GB/s (decode streams every
weight once per token, so achieved GB/s = tok/s x weight bytes) and probe_compute's int8 GOP/s
(prefill: 2 x the weights multiplied per token, attention left out), as "% of limit". Any
GGUF that both sides load works (--model).
Ratios are tessera / llama.cpp per round: median and min-max over rounds.

  python3 bench/bench_llama_cpp.py --tessera build/src/cli/tessera \
      --model models/SmolLM2-135M-Instruct.Q4_1.gguf --threads 2 --rounds 5

Notes: llama.cpp runs with its defaults except on CPUs with AMX, where its AMX/extra-buffer weight
repacking crashes (use_extra_bufts = False there; --llama-extra-bufts overrides); its log goes to
stderr, which this script sends to /dev/null while llama.cpp runs.
"""
import argparse
import ctypes
import json
import os
import random
import re
import statistics
import subprocess
import sys
import time

import numpy as np

# llama.cpp's CPU backend is built with OpenMP, whose threads spin at every barrier by default. On
# a shared, oversubscribed machine a spinning thread steals the core its partner needs: decode ran
# at 0.2 tok/s against 6.5 with passive waits (Qwen2.5-0.5B, 2 threads, load 16). Set before the
# OpenMP runtime loads; an OMP_WAIT_POLICY already in the environment wins.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
import llama_cpp as L  # noqa: E402


def extra_bufts_default():
    """llama.cpp's default (its CPU weight repacking on) unless the CPU has AMX: there its AMX
    repacking buffers crash llama_decode on our VMs, so they are turned off (and the run says so)."""
    try:
        with open("/proc/cpuinfo") as f:
            return " amx_tile" not in f.read()
    except OSError:
        return True


# Where the greedy continuations part, a gap up to this many logits below llama.cpp's top is
# rounding (8-bit activations round differently on the two sides); beyond it the file is misread.
NEAR_TIE_LOGITS = 0.5


class Quiet:
    """Sends fd 2 (llama.cpp's log) to /dev/null inside the block."""

    def __enter__(self):
        sys.stderr.flush()
        self.saved = os.dup(2)
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 2)
        os.close(devnull)

    def __exit__(self, *exc):
        os.dup2(self.saved, 2)
        os.close(self.saved)


class LlamaSide:
    """One model and one context, reused for every case (the KV memory is cleared in between)."""

    def __init__(self, model_path, threads, n_ctx, extra_bufts):
        with Quiet():
            L.llama_backend_init()
            mp = L.llama_model_default_params()
            mp.use_extra_bufts = extra_bufts  # off only on AMX hosts (see extra_bufts_default)
            self.model = L.llama_model_load_from_file(model_path.encode(), mp)
            if not self.model:
                sys.exit("llama.cpp cannot load " + model_path)
            vocab = L.llama_model_get_vocab(self.model)
            self.vocab = L.llama_vocab_n_tokens(vocab)
            # The token a tokenized prompt starts with, where the model's tokenizer adds one.
            self.bos = int(L.llama_vocab_bos(vocab)) if L.llama_vocab_get_add_bos(vocab) else None
            self.n_params = int(L.llama_model_n_params(self.model))
            cp = L.llama_context_default_params()
            cp.n_ctx = n_ctx
            cp.n_batch = 2048
            cp.n_ubatch = 512
            cp.n_seq_max = 1
            cp.n_threads = threads
            cp.n_threads_batch = threads
            self.ctx = L.llama_init_from_model(self.model, cp)
            if not self.ctx:
                sys.exit("llama.cpp cannot create a context")
        self.batch = L.llama_batch_init(2048, 0, 1)

    def _decode(self, ids, pos0):
        b = self.batch
        b.n_tokens = len(ids)
        for i, tok in enumerate(ids):
            b.token[i] = tok
            b.pos[i] = pos0 + i
            b.n_seq_id[i] = 1
            b.seq_id[i][0] = 0
            b.logits[i] = 1 if i == len(ids) - 1 else 0
        if L.llama_decode(self.ctx, b) != 0:
            sys.exit("llama_decode failed")
        return int(self._last_logits().argmax())

    def _last_logits(self):
        """The logits row [vocab] of the last decoded token (a view into llama.cpp's buffer)."""
        return np.ctypeslib.as_array(L.llama_get_logits_ith(self.ctx, -1), shape=(self.vocab,))

    def logit_gap(self, prefix, token, threads):
        """How far token's logit after prefix sits below llama.cpp's top logit (0 where it is the top)."""
        with Quiet():
            L.llama_set_n_threads(self.ctx, threads, threads)
            L.llama_memory_clear(L.llama_get_memory(self.ctx), True)
            self._prefill(prefix)
            row = self._last_logits()
            return float(row.max() - row[token])

    def _prefill(self, ids):
        tok = None
        for s in range(0, len(ids), 2048):
            tok = self._decode(ids[s:s + 2048], s)
        return tok

    def greedy(self, prompt, n, threads):
        """The first n greedy tokens after prompt (for the agreement check before timing)."""
        with Quiet():
            L.llama_set_n_threads(self.ctx, threads, threads)
            L.llama_memory_clear(L.llama_get_memory(self.ctx), True)
            out = [self._prefill(prompt)]
            while len(out) < n:
                out.append(self._decode([out[-1]], len(prompt) + len(out) - 1))
        return out

    def run(self, prompt, n_decode, threads):
        """Returns (prefill seconds, decode seconds for n_decode tokens after the first)."""
        with Quiet():
            L.llama_set_n_threads(self.ctx, threads, threads)
            L.llama_memory_clear(L.llama_get_memory(self.ctx), True)
            t0 = time.perf_counter()
            tok = self._prefill(prompt)
            t1 = time.perf_counter()
            pos = len(prompt)
            for _ in range(n_decode):
                tok = self._decode([tok], pos)
                pos += 1
            t2 = time.perf_counter()
        return t1 - t0, t2 - t1


def run_tessera(binary, model, threads, prompt, n_out, extra):
    cmd = [binary, "run", "--model", model, "--threads", str(threads), "--json", "--ignore-eos",
           "-n", str(n_out), "--max-model-len", "4096", "--temperature", "0",  # greedy, as the peer
           "--prompt-ids", ",".join(map(str, prompt))]
    cmd += extra
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit("tessera failed: " + " ".join(cmd[:8]) + " ...\n" + p.stderr[-2000:])
    return json.loads(p.stdout.strip().splitlines()[-1])


def matmul_params(model_path, fallback):
    """Weights multiplied per token: every tensor of 2+ dimensions but the token embedding (a row
    lookup), which counts only where the output projection is tied to it (no output.weight).
    llama_model_n_params counts every tensor, so a file with both (Qwen2.5's) is 27% over."""
    try:
        from gguf import GGUFReader
    except ImportError:
        return fallback
    sizes = {t.name: int(t.n_elements) for t in GGUFReader(model_path).tensors if len(t.shape) >= 2}
    n = sum(v for k, v in sizes.items() if k != "token_embd.weight")
    if "output.weight" not in sizes:
        n += sizes.get("token_embd.weight", 0)
    return n


def probe(path, args):
    if not path or not os.path.exists(path):
        return None, "(not built)"
    out = subprocess.run([path] + args, capture_output=True, text=True).stdout
    return out, out.strip()


def summary(values):
    return statistics.median(values), min(values), max(values)


def fmt_range(values, digits=1):
    med, lo, hi = summary(values)
    return f"{med:.{digits}f} ({lo:.{digits}f}-{hi:.{digits}f})"


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(here)
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tessera", default=os.path.join(root, "build/src/cli/tessera"))
    ap.add_argument("--model", default=os.path.join(root, "models/SmolLM2-135M-Instruct.Q4_1.gguf"))
    ap.add_argument("--threads", default="2", help="thread counts, comma-separated (e.g. 1,2)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--decode-tokens", type=int, default=128)
    ap.add_argument("--contexts", default="16,2048", help="B1: prompt lengths before decoding")
    ap.add_argument("--prefills", default="128,512,2048", help="B2: prompt lengths")
    ap.add_argument("--only", choices=["b1", "b2"], help="run one of the two")
    ap.add_argument("--probe-dir", default=None, help="folder with probe_bandwidth, probe_compute")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json-out", default=None)
    ap.add_argument("--tessera-arg", action="append", default=[], help="extra flag for tessera run")
    ap.add_argument("--llama-extra-bufts", choices=["auto", "on", "off"], default="auto",
                    help="llama.cpp's weight repacking buffers (auto: its default, off on AMX hosts)")
    a = ap.parse_args()

    probe_dir = a.probe_dir or os.path.join(os.path.dirname(os.path.dirname(a.tessera)), "..", "bench")
    thread_counts = [int(t) for t in a.threads.split(",")]
    bw, int8 = {}, {}
    load = os.getloadavg()
    print(f"# model {a.model}")
    print(f"# threads {a.threads}, rounds {a.rounds}, load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    for t in thread_counts:
        bw_text, bw_line = probe(os.path.join(probe_dir, "probe_bandwidth"), ["0", str(t)])
        _, cp_line = probe(os.path.join(probe_dir, "probe_compute"), [str(t)])
        bw[t] = float(re.search(r"([\d.]+) GB/s", bw_text).group(1)) if bw_text else None
        # The int8 peak at t threads: the largest int8 line (AMX tiles, VNNI or AVX2 maddubs).
        peaks = re.findall(r"int8 (.+?)\s+([\d.]+) GOP/s\s+\((\d+) threads\)", cp_line or "")
        at_t = [float(g) for kind, g, n in peaks if int(n) == t]
        int8[t] = max(at_t) if at_t else None
        print(f"# {bw_line}")
        for line in cp_line.splitlines():
            print(f"# {line}")

    contexts = [int(x) for x in a.contexts.split(",")] if a.only != "b2" else []
    prefills = [int(x) for x in a.prefills.split(",")] if a.only != "b1" else []
    n_ctx = max(contexts + prefills + [16]) + a.decode_tokens + 16
    extra = extra_bufts_default() if a.llama_extra_bufts == "auto" else a.llama_extra_bufts == "on"
    print(f"# llama.cpp use_extra_bufts = {extra}" + ("" if extra else " (turned off: its AMX repacking crashes on AMX hosts)"))
    llama = LlamaSide(a.model, thread_counts[0], n_ctx, extra)
    rng = random.Random(a.seed)
    prompt_of = {}
    for n in set(contexts + prefills):
        # BOS first where the tokenizer adds one, as in any real prompt: Gemma 3 without it gives
        # near-flat logits on random ids, and the check below would compare near-ties.
        head = [llama.bos] if llama.bos is not None else []
        prompt_of[n] = head + [rng.randrange(256, llama.vocab) for _ in range(n - len(head))]

    # Before timing anything: both sides must read the file alike. Greedy continuations of the same
    # prompt agree token for token until a near-tie (the 8-bit activations round differently).
    check = prompt_of[min(prompt_of)]
    ours_ids = run_tessera(a.tessera, a.model, thread_counts[0], check, 16, a.tessera_arg)["ids"]
    theirs_ids = llama.greedy(check, 16, thread_counts[0])
    common = next((i for i, (x, y) in enumerate(zip(ours_ids, theirs_ids)) if x != y), min(len(ours_ids), len(theirs_ids)))
    print(f"# check: 16 greedy tokens after the same {len(check)}-token prompt agree on the first {common}")
    print(f"#   tessera   {ours_ids}\n#   llama.cpp {theirs_ids}")
    if common < len(ours_ids):
        # Where the two part, a near-tie is rounding; a wide gap in llama.cpp's own logits is a bug.
        gap = llama.logit_gap(check + ours_ids[:common], ours_ids[common], thread_counts[0])
        print(f"#   at token {common} tessera's choice is {gap:.3f} below llama.cpp's top logit")
        if gap > NEAR_TIE_LOGITS:
            print("# WARNING: tessera and llama.cpp disagree beyond a near-tie: check the file before trusting the timings")

    cases = [(t, "B1", n) for t in thread_counts for n in contexts] + \
            [(t, "B2", n) for t in thread_counts for n in prefills]
    res = {c: {"ours": [], "theirs": []} for c in cases}
    weight_bytes = None
    for rnd in range(a.rounds):
        for case in cases:
            t, kind, n = case
            prompt = prompt_of[n]
            if kind == "B1":
                j = run_tessera(a.tessera, a.model, t, prompt, a.decode_tokens + 1, a.tessera_arg)
                ours = j["timings"]["decode_tok_per_s"]
                if ours > 0:
                    weight_bytes = j["timings"]["decode_gb_per_s"] * 1e9 / ours
                _, dec_s = llama.run(prompt, a.decode_tokens, t)
                theirs = a.decode_tokens / dec_s
            else:
                j = run_tessera(a.tessera, a.model, t, prompt, 1, a.tessera_arg)
                ours = n / (j["timings"]["ttft_ms"] / 1000.0)
                pre_s, _ = llama.run(prompt, 0, t)
                theirs = n / pre_s
            res[case]["ours"].append(ours)
            res[case]["theirs"].append(theirs)
            print(f"# round {rnd + 1} {kind} {n:5d} x{t}: tessera {ours:9.1f} tok/s, llama.cpp {theirs:9.1f} tok/s, "
                  f"ratio {ours / theirs:.3f}", flush=True)

    load_end = os.getloadavg()
    print(f"# load average at the end {load_end[0]:.2f} {load_end[1]:.2f} {load_end[2]:.2f}")
    print()
    # Fraction of the machine's limit: B1 decode streams every weight once per token (GB/s against
    # probe_bandwidth); B2 prefill does 2 x (matmul weights) int8 operations per token (attention
    # left out; GOP/s against probe_compute's int8 peak at the same thread count).
    n_matmul = matmul_params(a.model, llama.n_params)
    ops_per_token = 2.0 * n_matmul
    print(f"| case | threads | tessera tok/s | llama.cpp tok/s | ratio median (min-max) | tessera ms/tok | tessera GB/s | llama.cpp GB/s | probe GB/s | tessera GOP/s | int8 peak GOP/s | tessera % of limit | llama.cpp % of limit |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    table = []
    for case in cases:
        t, kind, n = case
        ours, theirs = res[case]["ours"], res[case]["theirs"]
        ratios = [o / t for o, t in zip(ours, theirs)]
        rmed, rlo, rhi = summary(ratios)
        name = f"B1 decode {a.decode_tokens} after {n}" if kind == "B1" else f"B2 prefill {n}"
        gb_o = gb_t = "-"
        if kind == "B1" and weight_bytes:
            gb_o = f"{statistics.median(ours) * weight_bytes / 1e9:.2f}"
            gb_t = f"{statistics.median(theirs) * weight_bytes / 1e9:.2f}"
        ms = 1000.0 / statistics.median(ours)
        bw_s = f"{bw[t]:.1f}" if bw.get(t) else "-"
        gops = statistics.median(ours) * ops_per_token / 1e9
        peak_s = f"{int8[t]:.1f}" if int8.get(t) else "-"
        pct_o = pct_t = "-"
        if kind == "B1" and weight_bytes and bw.get(t):
            pct_o = f"{100 * statistics.median(ours) * weight_bytes / 1e9 / bw[t]:.0f}%"
            pct_t = f"{100 * statistics.median(theirs) * weight_bytes / 1e9 / bw[t]:.0f}%"
        elif kind == "B2" and int8.get(t):
            pct_o = f"{100 * gops / int8[t]:.0f}%"
            pct_t = f"{100 * statistics.median(theirs) * ops_per_token / 1e9 / int8[t]:.0f}%"
        print(f"| {name} | {t} | {fmt_range(ours)} | {fmt_range(theirs)} | {rmed:.3f} ({rlo:.3f}-{rhi:.3f}) | "
              f"{ms:.3f} | {gb_o} | {gb_t} | {bw_s} | {gops:.1f} | {peak_s} | {pct_o} | {pct_t} |")
        table.append({"case": name, "threads": t, "ours": ours, "theirs": theirs, "ratio_median": rmed, "ratio_min": rlo,
                      "ratio_max": rhi})
    if weight_bytes:
        print(f"\nweight bytes read per decoded token: {weight_bytes / 1e6:.1f} MB")
    print(f"parameters: {llama.n_params / 1e6:.1f} M, {n_matmul / 1e6:.1f} M multiplied per token "
          f"({ops_per_token / 1e9:.2f} GOP per token)")
    if a.json_out:
        with open(a.json_out, "w") as f:
            json.dump({"model": a.model, "threads": thread_counts, "load": load, "probe_gb_per_s": bw,
                       "weight_bytes": weight_bytes, "cases": table}, f, indent=1)


if __name__ == "__main__":
    main()
