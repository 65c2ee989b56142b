#!/usr/bin/env python3
"""Token ids of SmolLM2-135M-Instruct's tokenizer for a dozen varied strings, from llama.cpp (the
PyPI package llama-cpp-python, vocab only), written to tests/data/smollm2_tokenize.json. The C++
test (tests/tokenizer/test_smollm2.cpp, LABEL model) compares tessera's ids with these.

Each case: text, parse_special, ids (no BOS: SmolLM2's add_bos_token is false).
Usage: python3 scripts/gen_tokenizer_goldens.py
"""
import json
import os

from llama_cpp import Llama, __version__ as llama_cpp_version

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODEL = os.path.join(ROOT, "models", "SmolLM2-135M-Instruct.Q4_1.gguf")
OUT = os.path.join(ROOT, "tests", "data", "smollm2_tokenize.json")

CHAT = "<|im_start|>system\nYou are a helpful AI assistant.<|im_end|>\n<|im_start|>user\nHi!<|im_end|>\n<|im_start|>assistant\n"

TEXTS = [
    ("Hello, world!", False),
    ("def fib(n):\n    return n if n < 2 else fib(n - 1) + fib(n - 2)\n", False),
    ("The year 2024 had 366 days; pi = 3.14159265, 1,000,000 and 0x1F.", False),
    ("Grüße aus München! Ça va? ñandú, naïve café", False),
    ("日本語のテキスト、中文文本，한국어 텍스트", False),
    ("emoji: 🦙🚀 😀👍🏽 ❤️ ✅", False),
    ("tabs\tand   spaces     and\n\n\nnewlines \r\n end   ", False),
    ("   leading spaces and trailing   ", False),
    ("I'm sure they'll say it's 'quoted' and we've DON'T", False),
    ("<html><body class=\"x\">&amp; {json: [1, 2]}</body></html>", False),
    (CHAT, True),
    (CHAT, False),
    ("<|endoftext|>text after<|im_end|>", True),
    ("x" * 100 + " " + "ab" * 30, False),
]


def main():
    m = Llama(model_path=MODEL, vocab_only=True, verbose=False)
    cases = []
    for text, special in TEXTS:
        ids = m.tokenize(text.encode("utf-8"), add_bos=False, special=special)
        cases.append({"text": text, "parse_special": special, "ids": list(ids)})
    header = {"generator": "scripts/gen_tokenizer_goldens.py", "llama_cpp_python": llama_cpp_version,
              "model": "SmolLM2-135M-Instruct.Q4_1.gguf", "add_bos": False}
    with open(OUT, "w", encoding="utf-8") as f:  # one case per line, for readable diffs
        f.write(json.dumps(header, ensure_ascii=False)[:-1] + ', "cases": [\n')
        f.write(",\n".join(json.dumps(c, ensure_ascii=False) for c in cases))
        f.write("\n]}\n")
    print(f"wrote {len(cases)} cases to {OUT}")


if __name__ == "__main__":
    main()
