#!/usr/bin/env python3
"""How well does llama.cpp agree with itself? The issue-24 criterion for the real K-quant models
(tessera's greedy tokens equal llama.cpp's on >= 6 of 8 prompts x 64 tokens) compares against one
llama.cpp configuration, the one scripts/gen_kquant_goldens.py used (f16 KV cache, no flash
attention, n_batch 512, 2 threads). This script reruns the same 8 prompts per model with llama.cpp
in other legitimate configurations and counts, the same way, on how many prompts each one
reproduces the committed goldens; optionally it scores tessera's teacher-forced logits
(tests/model/dump_forced_logits) on the same footing.

Teacher-forced on the golden tokens: the free-running greedy continuation matches the golden for
its first k tokens exactly when the teacher-forced argmax equals the golden token at positions
0..k-1 (the contexts are the same up to there), so one forced pass per configuration gives both the
full-match count and the logit distance to the reference run.

    python3 scripts/llamacpp_self_agreement.py [--tessera-dump build/release/tests/model/dump_forced_logits]

Offline only (needs llama-cpp-python 0.3.36 and the files from scripts/fetch_models.sh); not CI.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen_kquant_goldens as goldens  # noqa: E402  (also installs its no-repack llama.cpp params)
from llama_cpp import Llama  # noqa: E402
import llama_cpp  # noqa: E402

ROOT = goldens.ROOT
# name -> Llama() keyword overrides of the golden run's settings. Each is a setting a user of
# llama.cpp legitimately picks; none changes the model.
CONFIGS = [
    ("reference (goldens' settings)", {}),
    ("KV cache f32", {"type_k": llama_cpp.GGML_TYPE_F32, "type_v": llama_cpp.GGML_TYPE_F32}),
    ("flash attention on", {"flash_attn": True}),
    ("n_batch 1 (prompt token by token)", {"n_batch": 1}),
    ("n_threads 1", {"n_threads": 1}),
]
GOLDEN_SETTINGS = dict(n_ctx=2048, n_threads=2, n_batch=512, logits_all=True, verbose=False)


def forced_logits(llm, prompt, forced):
    """[len(forced)][vocab] f32: the logits after the prompt, then after each forced token but the last."""
    llm.reset()
    llm.eval(prompt)
    rows = []
    for i, tok in enumerate(forced):
        rows.append(np.array(llm.scores[llm.n_tokens - 1], dtype=np.float32))
        if i + 1 < len(forced):
            llm.eval([tok])
    return np.stack(rows)


def score(cases, rows_of, ref_rows):
    """Per configuration: full matches, partings (case, token, golden gap), forced agreement, distances."""
    full, partings, agree, total, max_abs, sum_abs, n_abs, pos_max = 0, [], 0, 0, 0.0, 0.0, 0, []
    for c, rows, ref in zip(cases, rows_of, ref_rows):
        gold = c["greedy_ids"]
        arg = np.argmax(rows, axis=1)  # first maximum, like np.argsort(kind="stable") and tessera
        same = arg == np.array(gold)
        agree += int(same.sum())
        total += len(gold)
        if same.all():
            full += 1
        else:
            k = int(np.argmin(same))
            partings.append((c["name"], k, c["top2_gaps"][k]))
        d = np.abs(rows.astype(np.float64) - ref)
        max_abs = max(max_abs, float(d.max()))
        sum_abs += float(d.sum())
        n_abs += d.size
        pos_max.extend(d.max(axis=1).tolist())
    return dict(full=full, partings=partings, agree=agree, total=total, max_abs=max_abs,
                mean_abs=sum_abs / n_abs, median_pos_max=float(np.median(pos_max)))


def tessera_rows(dumper, model_path, cases, vocab, kv="f16", setting=None):
    with tempfile.TemporaryDirectory() as tmp:
        inp, out = os.path.join(tmp, "in.txt"), os.path.join(tmp, "out.bin")
        with open(inp, "w") as f:
            for c in cases:
                f.write(" ".join(map(str, c["prompt_ids"])) + " | " + " ".join(map(str, c["greedy_ids"])) + "\n")
        env = dict(os.environ)
        if setting:
            name, _, value = setting.partition("=")
            env[name] = value
        subprocess.run([dumper, model_path, kv, inp, out], check=True, env=env)
        flat = np.fromfile(out, dtype=np.float32)
    n = len(cases[0]["greedy_ids"])
    return list(flat.reshape(len(cases), n, vocab))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tessera-dump", help="path of the built tests/model/dump_forced_logits: adds tessera rows")
    ap.add_argument("--tessera-env", action="append", default=[], metavar="NAME=VALUE",
                    help="adds a tessera row run with this environment variable set (repeatable)")
    ap.add_argument("--configs", help="comma-separated indices into CONFIGS to run (default: all); the "
                    "logit distances are measured from the first one run")
    ap.add_argument("--tessera-kv", default="f16", help="comma-separated KV types of the tessera rows (f16, f32)")
    ap.add_argument("--model", help="only the model file whose name contains this")
    ap.add_argument("--json", help="write the table as JSON here too")
    args = ap.parse_args()
    report = {}
    for model_file, golden_name, _, _ in goldens.MODELS:
        if args.model and args.model not in model_file:
            continue
        path = os.path.join(ROOT, "models", model_file)
        with open(os.path.join(ROOT, "tests", "data", golden_name)) as f:
            cases = json.load(f)["cases"]
        results, ref_rows = [], None
        chosen = [CONFIGS[int(i)] for i in args.configs.split(",")] if args.configs else CONFIGS
        for name, overrides in chosen:
            llm = Llama(model_path=path, **{**GOLDEN_SETTINGS, **overrides})
            rows = [forced_logits(llm, c["prompt_ids"], c["greedy_ids"]) for c in cases]
            vocab = rows[0].shape[1]
            del llm
            if ref_rows is None:
                ref_rows = [r.astype(np.float64) for r in rows]
            results.append((name, score(cases, rows, ref_rows)))
            print(model_file, name, results[-1][1], file=sys.stderr, flush=True)
        if args.tessera_dump:
            for kv in args.tessera_kv.split(","):
                rows = tessera_rows(args.tessera_dump, path, cases, vocab, kv)
                results.append((f"tessera, KV cache {kv}", score(cases, rows, ref_rows)))
                for setting in args.tessera_env:
                    rows = tessera_rows(args.tessera_dump, path, cases, vocab, kv, setting)
                    results.append((f"tessera, KV {kv}, {setting}", score(cases, rows, ref_rows)))
        print(f"\n{model_file}: 8 prompts x 64 tokens, teacher-forced on the goldens' tokens; "
              f"full/forced count agreement with the goldens, |dl| is the logit distance from '{results[0][0]}'")
        print(f"{'configuration':36} {'full':>5} {'forced':>8} {'max|dl|':>8} {'mean|dl|':>9} {'med pos max':>11}"
              "  partings (case@token: golden top-2 gap)")
        for name, s in results:
            parts = ", ".join(f"{c}@{k}: {g:.3f}" for c, k, g in s["partings"])
            print(f"{name:36} {s['full']:>3}/8 {s['agree']:>4}/{s['total']} {s['max_abs']:8.3f} {s['mean_abs']:9.4f}"
                  f" {s['median_pos_max']:11.3f}  {parts}")
        report[model_file] = {name: s for name, s in results}
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)


if __name__ == "__main__":
    main()
