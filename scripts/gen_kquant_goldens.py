#!/usr/bin/env python3
"""Regenerates tests/data/gemma3_270m_greedy.json and tests/data/qwen25_coder_greedy.json: greedy
(argmax) continuations, 64 tokens each, of the two real K-quant GGUFs that scripts/fetch_models.sh
installs (Gemma-3-270M Q4_K_M, Qwen2.5-Coder-0.5B-Instruct Q4_K_M), produced by llama.cpp through
llama-cpp-python, an implementation independent of tessera. One Gemma prompt is longer than the
model's 512-token sliding window, so its continuation depends on the window being respected. The
test runs (tests/model/test_kquant_golden.cpp, tests/e2e/test_real_models.py) read the committed
JSON and need neither package.

Also tests/data/gemma3_270m_window_greedy.json: three Gemma prompts of about 600, 900 and 1500
tokens, all past the 512-token window, with 128 greedy tokens each, for the engine and server
tests with the hybrid KV cache freeing the local layers' blocks behind the window
(tests/engine/test_engine_gemma3_window.cpp, tests/e2e/test_gemma3_window.py).

    CMAKE_ARGS="-DGGML_NATIVE=ON" pip install llama-cpp-python==0.3.36
    scripts/fetch_models.sh && python3 scripts/gen_kquant_goldens.py [OUT_NAME ...]

With OUT_NAMEs (e.g. gemma3_270m_window_greedy.json), only those files are written.
"""
import json
import os
import sys

import numpy as np
import llama_cpp
import llama_cpp.llama

# llama.cpp's AMX weight repacking crashes on some virtual machines: plain CPU buffers (the same
# numerics) as in gen_smollm2_goldens.py.
_default_params = llama_cpp.llama_model_default_params
def _params_without_repack():
    params = _default_params()
    params.use_extra_bufts = False
    return params
llama_cpp.llama_model_default_params = _params_without_repack
llama_cpp.llama.llama_cpp.llama_model_default_params = _params_without_repack
from llama_cpp import Llama  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NEAR_TIE_GAP = 0.5  # the criterion: a divergence must sit on a top-2 gap below this
TOP_K = 5

# Longer than Gemma 3's 512-token window: a numbered list the model continues.
LONG_LIST = "".join(f"{i}. The number {i} is {'even' if i % 2 == 0 else 'odd'}.\n" for i in range(1, 61))

# The window file's prompts, built here so they are exact and free of outside text. A varied record
# list (what comes next follows the pattern but each record's fields cycle with different periods,
# so the model must read the records within the window), a Python module of small functions, and
# a chat turn whose user message is a long report followed by a question about it.
COLOURS = ["red", "green", "blue", "yellow", "white", "black", "orange"]
CITIES = ["Lisbon", "Oslo", "Turin", "Gdansk", "Porto", "Lyon", "Bergen", "Ghent", "Malmo", "Split", "Cork"]
RECORDS = "".join(f"Crate {i} is {COLOURS[i % 7]}, weighs {10 + (i * 7) % 23} kg and ships to {CITIES[i % 11]}.\n"
                  for i in range(1, 33))
FIELDS = ["name", "email", "city", "country", "phone", "street", "zip_code", "birthday", "company", "title",
          "department", "manager", "salary", "start_date", "status", "notes", "website", "language"]
MODULE = '"""Accessors for the fields of a customer record."""\n\n' + "".join(
    f'def get_{f}(record):\n    """Return the {f.replace("_", " ")} of the record, or None."""\n'
    f'    return record.get("{f}")\n\n\n' for f in FIELDS) + "".join(
    f'def set_{f}(record, value):\n    """Set the {f.replace("_", " ")} of the record."""\n'
    f'    record["{f}"] = value\n\n\n' for f in FIELDS[:12])
REPORT = " ".join(
    f"In week {w}, the {CITIES[w % 11]} office shipped {100 + (w * 37) % 250} crates, of which "
    f"{(w * 13) % 17} arrived late because of {['storms', 'strikes', 'a broken crane', 'customs checks'][w % 4]}."
    for w in range(1, 56))

def gemma_chat(user):
    return f"<start_of_turn>user\n{user}<end_of_turn>\n<start_of_turn>model\n"

def qwen_chat(user):
    return ("<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n"
            f"<|im_start|>user\n{user}<|im_end|>\n<|im_start|>assistant\n")

MODELS = [  # file, golden, add BOS, generated tokens per case, cases (name, text, parse special tokens)
    ("gemma-3-270m-q4_k_m.gguf", "gemma3_270m_greedy.json", True, 64, [
        ("plain_story", "Once upon a time, in a small village by the sea,", False),
        ("plain_facts", "The capital of France is Paris. The capital of Germany is", False),
        ("plain_code", "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n", False),
        ("plain_weekdays", "Monday, Tuesday, Wednesday,", False),
        ("long_list_past_window", LONG_LIST, False),
        ("chat_capital", gemma_chat("What is the capital of France?"), True),
        ("chat_haiku", gemma_chat("Write a haiku about the ocean."), True),
        ("chat_sky", gemma_chat("Explain in two sentences why the sky is blue."), True),
    ]),
    ("qwen2.5-coder-0.5b-instruct-q4_k_m.gguf", "qwen25_coder_greedy.json", False, 64, [
        ("plain_fib", "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n", False),
        ("plain_sort", "# Sort a list of integers with quicksort in Python\ndef quicksort(xs):\n", False),
        ("plain_cpp", "#include <vector>\n\n// Returns the sum of v.\nint sum(const std::vector<int>& v) {\n", False),
        ("plain_facts", "The capital of France is Paris. The capital of Germany is", False),
        ("plain_sql", "-- Names of the customers with more than 5 orders\nSELECT", False),
        ("chat_reverse", qwen_chat("Write a Python function that reverses a string."), True),
        ("chat_explain", qwen_chat("What does a hash map do? Answer in two sentences."), True),
        ("chat_js", qwen_chat("Write a JavaScript function that checks if a number is prime."), True),
    ]),
    ("gemma-3-270m-q4_k_m.gguf", "gemma3_270m_window_greedy.json", True, 128, [
        ("records_past_window", RECORDS, False),
        ("module_past_window", MODULE, False),
        ("chat_report_past_window",
         gemma_chat("Here is the shipping report.\n\n" + REPORT + "\n\nWhich office had the most late crates, "
                    "and what were the causes? Answer with a short summary."), True),
    ]),
]

def main():
    only = set(sys.argv[1:])
    for model_file, out_name, add_bos, num_tokens, cases_in in MODELS:
        if only and out_name not in only:
            continue
        path = os.path.join(ROOT, "models", model_file)
        llm = Llama(model_path=path, n_ctx=2048, n_threads=os.cpu_count(), n_batch=512,
                    logits_all=True, verbose=True)  # verbose=False crashes in 0.3.36
        cases = []
        for name, text, special in cases_in:
            ids = llm.tokenize(text.encode(), add_bos=add_bos, special=special)
            out, gaps, tops, top_logits = [], [], [], []
            llm.reset()
            llm.eval(ids)
            while len(out) < num_tokens:  # past EOS too: every case pins num_tokens tokens
                logits = np.array(llm.scores[llm.n_tokens - 1], dtype=np.float64)
                assert np.isfinite(logits).all(), f"{name}: non-finite logits"
                order = np.argsort(-logits, kind="stable")
                out.append(int(order[0]))
                gaps.append(float(logits[order[0]] - logits[order[1]]))
                tops.append([int(t) for t in order[:TOP_K]])
                top_logits.append([round(float(logits[t]), 4) for t in order[:TOP_K]])
                llm.eval([out[-1]])
            cases.append({"name": name, "text": text, "parse_special": special, "prompt_ids": ids,
                          "greedy_ids": out, "top2_gaps": [round(g, 4) for g in gaps], "top_ids": tops,
                          "top_logits": top_logits,
                          "logit_range": [round(float(logits.min()), 3), round(float(logits.max()), 3)],
                          "greedy_text": llm.detokenize(out).decode("utf-8", errors="replace")})
            print(model_file, name, len(ids), "prompt tokens;", cases[-1]["greedy_text"][:60].replace("\n", " "),
                  file=sys.stderr)
        with open(os.path.join(ROOT, "tests", "data", out_name), "w") as f:
            json.dump({"model": model_file + " (scripts/fetch_models.sh)",
                       "what": f"greedy continuations by llama.cpp (llama-cpp-python 0.3.36), {num_tokens} "
                               "tokens each, generation continues past EOS; top2_gaps: llama.cpp's logit gap "
                               "top1 - top2 per position; top_ids, top_logits: llama.cpp's 5 highest-logit ids "
                               "per position, best first, and their logits; logit_range: min/max of the last "
                               "logits row (sanity)",
                       "near_tie_gap": NEAR_TIE_GAP, "cases": cases}, f, indent=1)
        del llm

if __name__ == "__main__":
    main()
