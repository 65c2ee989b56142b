#!/usr/bin/env python3
"""B4 peer: llama.cpp batched greedy decode through llama-cpp-python's low-level API.

B sequences (distinct seq ids in one llama_batch), each a fixed-seed random prompt of IN tokens,
prefilled in one llama_decode call, then OUT - 1 decode steps of B tokens each (greedy argmax of
every sequence's logits row). Prints one JSON line: {"B", "prefill_s", "decode_s", "decode_tok_s"}.
Run by bench_batched_decode (interleaved with tessera); usable alone:
  python3 bench/llama_batched_decode.py MODEL.gguf --batch 16 --input-len 128 --output-len 128 --threads 2
"""
import argparse
import ctypes
import json
import os
import random
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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--input-len", type=int, default=128)
    ap.add_argument("--output-len", type=int, default=128)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--extra-bufts", choices=["auto", "on", "off"], default="auto")
    a = ap.parse_args()
    B, IN, OUT = a.batch, a.input_len, a.output_len

    L.llama_backend_init()
    mp = L.llama_model_default_params()
    # llama.cpp's default, except on AMX hosts where its AMX repacking buffers crash llama_decode.
    mp.use_extra_bufts = extra_bufts_default() if a.extra_bufts == "auto" else a.extra_bufts == "on"
    model = L.llama_model_load_from_file(a.model.encode(), mp)
    if not model:
        sys.exit("cannot load " + a.model)
    vocab = L.llama_model_get_vocab(model)
    n_vocab = L.llama_vocab_n_tokens(vocab)
    cp = L.llama_context_default_params()
    cp.n_ctx = B * (IN + OUT) + 64
    cp.n_batch = max(B * IN, 512)
    cp.n_ubatch = max(B * IN, 512)
    cp.n_seq_max = B
    cp.n_threads = a.threads
    cp.n_threads_batch = a.threads
    ctx = L.llama_init_from_model(model, cp)
    if not ctx:
        sys.exit("cannot create a context")

    rng = random.Random(a.seed)
    prompts = [[rng.randrange(256, n_vocab) for _ in range(IN)] for _ in range(B)]
    batch = L.llama_batch_init(max(B * IN, B), 0, B)

    def fill(rows):  # rows: (token, pos, seq, want_logits)
        batch.n_tokens = len(rows)
        for i, (tok, pos, seq, logits) in enumerate(rows):
            batch.token[i] = tok
            batch.pos[i] = pos
            batch.n_seq_id[i] = 1
            batch.seq_id[i][0] = seq
            batch.logits[i] = 1 if logits else 0

    def argmax_rows(idx):
        out = []
        for i in idx:
            ptr = L.llama_get_logits_ith(ctx, i)
            out.append(int(np.ctypeslib.as_array(ptr, shape=(n_vocab,)).argmax()))
        return out

    t0 = time.perf_counter()
    rows = []
    for s, p in enumerate(prompts):
        for j, tok in enumerate(p):
            rows.append((tok, j, s, j == IN - 1))
    fill(rows)
    if L.llama_decode(ctx, batch) != 0:
        sys.exit("prefill llama_decode failed")
    last = argmax_rows([s * IN + IN - 1 for s in range(B)])
    t1 = time.perf_counter()
    for step in range(OUT - 1):
        fill([(last[s], IN + step, s, True) for s in range(B)])
        if L.llama_decode(ctx, batch) != 0:
            sys.exit("decode llama_decode failed")
        last = argmax_rows(range(B))
    t2 = time.perf_counter()
    print(json.dumps({"B": B, "extra_bufts": bool(mp.use_extra_bufts), "prefill_s": t1 - t0, "decode_s": t2 - t1,
                      "decode_tok_s": B * (OUT - 1) / (t2 - t1)}))
    L.llama_batch_free(batch)
    L.llama_free(ctx)
    L.llama_model_free(model)


if __name__ == "__main__":
    main()
